"""Transformer Engine's tensor-parallel communication overlap (userbuffers, --tp-comm-overlap) runs the GEMMs it
pipelines with a collective in chunks: qkv and fc1 forward and proj and fc2 input gradients as a ring exchange (one
chunk per tensor-parallel rank), proj and fc2 forward as a pipeline of 4 (its initialize_ub defaults); the rest run
whole beside a bulk collective."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.workload.kernels import KernelClass, Phase, chunked, gemm
from simulon.workload.layer_kernels import UB_PIPELINE_SPLITS, LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import ComputeOp


def overlapped(tp: int = 4, overlap: bool = True, **knobs):
    return gpt_workload(gpus=8, tp=tp, extra_parallelism={"sequence_parallel": tp > 1,
                                                          "tp_comm_overlap": overlap and tp > 1}, **knobs)


@given(m=st.integers(1, 64).map(lambda x: 128 * x), n=st.sampled_from([256, 1024, 4608]),
       k=st.sampled_from([512, 4096, 12288]), chunks=st.sampled_from([2, 4, 8]))
def test_a_chunked_gemm_takes_its_chunks_one_after_the_other_and_keeps_its_flops(m, n, k, chunks):
    model = AnalyticalModel(GPUSpec.model_validate({"from": "h100-sxm"}), DType.bf16, sustained_load=True)
    whole = gemm("x", Phase.fwd, m * chunks, n, k, 2.0)
    split = chunked(whole, chunks)
    assert split.flops == whole.flops and split.bytes == whole.bytes
    one = gemm("x", Phase.fwd, m, n, k, 2.0)
    assert model.seconds([split])[0] == pytest.approx(chunks * model.seconds([one])[0], rel=1e-12)


def test_only_plain_gemms_are_chunked():
    grouped = gemm("experts", Phase.fwd, 4096, 1024, 1024, 2.0, groups=8)
    assert grouped.kclass == KernelClass.grouped_gemm and chunked(grouped, 4) == grouped
    assert chunked(gemm("x", Phase.fwd, 64, 64, 64, 2.0), 1) == gemm("x", Phase.fwd, 64, 64, 64, 2.0)


def test_transformer_engines_default_methods_split_each_gemm_as_userbuffers_does():
    kernels = LayerKernels.of(overlapped(tp=4))
    expected = {("attn_qkv", Phase.fwd): 4, ("mlp_linear1", Phase.fwd): 4,                # ring exchange, AG
                ("attn_proj", Phase.bwd_ig): 4, ("mlp_linear2", Phase.bwd_ig): 4,          # ring exchange, AG
                ("attn_proj", Phase.fwd): UB_PIPELINE_SPLITS, ("mlp_linear2", Phase.fwd): UB_PIPELINE_SPLITS}
    for name in ("attn_qkv", "attn_proj", "mlp_linear1", "mlp_linear2", "lm_head"):
        for phase in (Phase.fwd, Phase.bwd_ig, Phase.bwd_wg):
            assert kernels.ub_chunks(name, phase) == expected.get((name, phase), 1), (name, phase)  # bulk: whole
    assert LayerKernels.of(overlapped(tp=1)).ub_chunks("attn_qkv", Phase.fwd) == 1


@pytest.mark.parametrize("overlap", [True, False])
def test_the_tracer_runs_the_chunks_only_under_the_overlap(overlap):
    program = MegatronTracer(overlapped(tp=4, overlap=overlap), 8).stage_program(0)
    chunks = {(op.kernel.name, op.kernel.phase): dict(op.kernel.shape).get("chunks", 1)
              for op in program.ops if isinstance(op, ComputeOp) and op.layer >= 0}
    assert chunks[("attn_qkv", Phase.fwd)] == (4 if overlap else 1)
    assert chunks[("attn_proj", Phase.fwd)] == (UB_PIPELINE_SPLITS if overlap else 1)
    assert chunks[("attn_qkv", Phase.bwd_wg)] == 1


def test_chunks_make_the_overlapped_step_slower_than_whole_gemms_beside_the_same_collectives(monkeypatch):
    from helpers import gpt_scenario
    from simulon.pipeline import simulate
    from simulon.workload import layer_kernels

    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=4, layers=4, hidden=4096, heads=32, seq=4096, gbs=8,
                      extra_parallelism={"sequence_parallel": True, "tp_comm_overlap": True})
    chunked_ms = simulate(sc).result.iteration_time_ms
    monkeypatch.setattr(layer_kernels.LayerKernels, "ub_chunks", lambda self, name, phase: 1)
    whole_ms = simulate(sc).result.iteration_time_ms
    assert whole_ms < chunked_ms < 1.25 * whole_ms
