"""In a narrow-format run (fp8, MXFP8, NVFP4) the kernels kept in 16 bits (the LM head and router, the layers the
recipe keeps in bf16, attention) run at the 16-bit peak: whether one is memory-bound is read against the 16-bit ridge
point, not the narrow format's, which is twice or more as high. Against the NVFP4 ridge of a GB300 (1,875 FLOPs a
byte) Qwen3-30B-A3B's bf16 LM head (1,353) and its bf16 layers' expert GEMMs were called memory-bound: its
memory-bound finding (tp1 pp2 ep4 cp4 on a GB300 NVL72 rack) 311.2 ms, 221.7 ms now."""

from __future__ import annotations

from pathlib import Path

from simulon.analysis.exposure import exposure, memory_bound
from simulon.cli.report import run_scenario
from simulon.config.common import DType
from simulon.config.loading import load_scenario

LM_HEAD_INTENSITY = 2 * 4096 * 32768 * 1024 / (2 * (4096 * 1024 + 1024 * 32768 + 4096 * 32768))
"""FLOPs a byte of the scenario's LM head: 4,096 tokens, 1,024 wide, a 32,768-word vocabulary, 16-bit (about 800)."""

SCENARIO = """\
datacenter: {cluster: {num_nodes: 1}, node: {gpus_per_node: 4, gpu: GB300}}
workload:
  model: {name: t, num_layers: 2, hidden_size: 1024, num_heads: 16, ffn_hidden_size: 4096, vocab_size: 32768}
  parallelism: {tp: 1, pp: 1}
  training: {global_batch_size: 4, micro_batch_size: 1, sequence_length: 4096, dtype: nvfp4}
"""


def test_a_bf16_lm_head_between_the_16_bit_and_the_nvfp4_ridge_is_compute_bound(tmp_path: Path):
    path = tmp_path / "nvfp4.yaml"
    path.write_text(SCENARIO)
    gpu = load_scenario(path).datacenter.node.gpu
    narrow, wide = (gpu.peak_flops(dtype) / gpu.memory_bandwidth for dtype in (DType.nvfp4, DType.bf16))
    assert wide < LM_HEAD_INTENSITY < narrow
    sim, analysis = run_scenario(path, quiet=True)
    specs = sim.dag.kernel_specs
    head = [i for i, s in enumerate(specs) if s.name == "lm_head"]
    assert head and all(dict(specs[i].shape).get("precision") == "bf16" for i in head)
    assert memory_bound(sim.dag, narrow)[head].all()  # what it was called
    assert not memory_bound(sim.dag, narrow, wide)[head].any()
    # the analysis the report and simulate --json show reads the 16-bit kernels against the 16-bit ridge
    by_wide, by_narrow = exposure(sim.dag, sim.timeline, narrow, wide), exposure(sim.dag, sim.timeline, narrow)
    assert [r.memory_bound_ms for r in analysis.per_gpu] == [r.memory_bound_ms for r in by_wide]
    assert all(w.memory_bound_ms < n.memory_bound_ms for w, n in zip(by_wide, by_narrow, strict=True))
