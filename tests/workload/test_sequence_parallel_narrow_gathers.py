"""Under sequence parallelism a narrow-format run's tensor-parallel all-gathers move what Transformer Engine gathers:
its linear modules quantize each rank's share of the GEMM input (and of a row-parallel GEMM's output gradient) first
and all-gather the quantized data (gather_along_first_dim with a quantizer: 1 byte an element in fp8, 1 + 1/32 in
MXFP8, 1/2 + 1/16 in NVFP4; both copies of a block-scaled output gradient, which the dgrad and wgrad both read).
The tracer gathered 2 bytes an element and quantized the gathered rows after the gather: Llama-2 7B shapes at tp 8
(one H100 node, fp8) took 334.1 ms where TE's gathers give 285.7."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.common import DType
from simulon.config.number_formats import number_format
from simulon.workload.kernels import Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp

LAYER = 1
GATHERS = {("attn_gather", Phase.fwd): False, ("attn_gather", Phase.bwd_wg): False,
           ("mlp_gather", Phase.fwd): False, ("mlp_gather", Phase.bwd_wg): False,
           ("attn_grad_gather", Phase.bwd_ig): True, ("mlp_grad_gather", Phase.bwd_ig): True}
"""(label, phase) of a layer's sequence-parallel gathers -> whether it is an output gradient (both usages)."""


def program(dtype: str, tp: int, **parallelism):
    wl = gpt_workload(gpus=4, tp=tp, seq=256, extra_parallelism={"sequence_parallel": True, **parallelism},
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0})
    return wl, MegatronTracer(wl, 4).stage_program(0)


def layer_ops(prog):
    return [op for op in prog.ops if op.layer == LAYER and op.microbatch == 0]


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_a_narrow_runs_sequence_parallel_gathers_move_the_quantized_bytes_te_gathers(dtype, overlap, tp):
    wl, prog = program(dtype, tp, tp_comm_overlap=overlap)
    tokens, hidden = wl.training.sequence_length, wl.model.hidden_size
    operand = number_format(DType(dtype)).operand_bytes()
    copies = 1 if dtype == "fp8" else 2  # per-tensor fp8 transposes the gathered gradient; block formats gather both
    sizes = {(op.label, op.phase): op.nbytes for op in layer_ops(prog) if isinstance(op, CollectiveOp)}
    for key, gradient in GATHERS.items():
        assert sizes[key] == pytest.approx(tokens * hidden * operand * (copies if gradient else 1)), key


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_the_gathered_operand_is_quantized_on_the_ranks_share_before_its_gather(dtype):
    wl, prog = program(dtype, 4)
    ops = layer_ops(prog)
    local = wl.training.sequence_length // 4 * wl.model.hidden_size
    for label, gemm, phase in (("attn_gather", "attn_qkv", Phase.fwd), ("mlp_gather", "mlp_linear1", Phase.fwd),
                               ("attn_grad_gather", "attn_proj", Phase.bwd_ig)):
        gather = next(i for i, op in enumerate(ops) if isinstance(op, CollectiveOp) and op.label == label
                      and op.phase == phase)
        casts = [op.kernel for op in ops if isinstance(op, ComputeOp) and op.kernel.phase == phase
                 and op.kernel.name.startswith(f"{gemm}_") and "cast" in op.kernel.name
                 and "weight" not in op.kernel.name]
        before = [op.kernel for op in ops[:gather] if isinstance(op, ComputeOp) and op.kernel in casts]
        assert [k.name for k in before] == [f"{gemm}_gather_cast"], label
        fmt = number_format(DType(dtype))
        assert before[0].bytes == pytest.approx(fmt.cast_bytes(local, 2.0, any_layout=True)), label
        after = [k for k in casts if k not in before]  # per-tensor fp8's transpose of the gathered tensor alone
        assert all(k.bytes == k.transpose_bytes for k in after) and (dtype == "fp8" or not after), label


def test_a_16_bit_run_still_gathers_its_16_bit_hidden_state():
    wl, prog = program("bf16", 4)
    tokens, hidden = wl.training.sequence_length, wl.model.hidden_size
    sizes = {(op.label, op.phase): op.nbytes for op in layer_ops(prog) if isinstance(op, CollectiveOp)}
    assert all(sizes[key] == 2 * tokens * hidden for key in GATHERS)
