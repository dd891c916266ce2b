"""Under sequence parallelism a narrow-format run's tensor-parallel all-gathers move what Transformer Engine gathers:
its linear modules quantize each rank's share of the GEMM input (and of a row-parallel GEMM's output gradient) first
and all-gather the quantized data (gather_along_first_dim with a quantizer: 1 byte an element in fp8, 1 + 1/32 in
MXFP8, 1/2 + 1/16 in NVFP4; both copies of a block-scaled output gradient, which the dgrad and wgrad both read).
The tracer gathered 2 bytes an element and quantized the gathered rows after the gather: Llama-2 7B shapes at tp 8
(one H100 node, fp8) took 334.1 ms where TE's gathers give 285.7."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.collective.types import CollType
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


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize(("dtype", "recipe", "reduced"), [("fp8", "current", True), ("nvfp4", None, True),
                                                          ("fp8", "delayed", False), ("mxfp8", None, False)])
def test_a_format_scaled_by_the_tensors_amax_all_reduces_the_shares_amaxes_between_the_cast_and_the_gather(
        dtype, recipe, reduced, overlap):
    """Current scaling and NVFP4 scale a tensor by its amax, so Transformer Engine's quantizer of a sequence-parallel
    column-parallel input and row-parallel output gradient all-reduces the ranks' amaxes (one fp32) over the
    tensor-parallel group before the cast (with_amax_reduction); delayed scaling takes last steps' amaxes and MXFP8
    scales each block by its own, so neither does. The wgrad's re-gather of the saved quantized input casts nothing
    and reduces nothing."""
    training = {"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0,
                **({"fp8_recipe": recipe} if recipe else {})}
    wl = gpt_workload(gpus=4, tp=4, seq=256, training=training,
                      extra_parallelism={"sequence_parallel": True, "tp_comm_overlap": overlap})
    ops = layer_ops(MegatronTracer(wl, 4).stage_program(0))
    amaxes = {(op.label, op.phase): op for op in ops if isinstance(op, CollectiveOp) and op.label.endswith("_amax")}
    expected = {("attn_gather_amax", Phase.fwd), ("mlp_gather_amax", Phase.fwd),
                ("attn_grad_gather_amax", Phase.bwd_ig), ("mlp_grad_gather_amax", Phase.bwd_ig)}
    assert set(amaxes) == (expected if reduced else set())
    for (label, phase), op in amaxes.items():
        assert (op.ctype, op.axis, op.nbytes) == (CollType.AllReduce, "tp", 4.0)
        at = ops.index(op)
        gather = next(i for i, o in enumerate(ops) if isinstance(o, CollectiveOp)
                      and o.label == label.removesuffix("_amax") and o.phase == phase)
        cast = max(i for i, o in enumerate(ops[:at]) if isinstance(o, ComputeOp) and o.kernel.phase == phase)
        assert ops[cast].kernel.name.endswith("_gather_cast") and at < gather
        assert op.stream == ops[gather].stream  # the gather waits for it
