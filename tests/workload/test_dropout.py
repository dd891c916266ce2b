"""What dropout costs a training step: Megatron's fused bias-dropout-add writes its one-byte mask forward and reads
it backward (workload/layer_kernels.py, ElementwisePasses.residual_mask), so a model that drops out moves more
bytes, and takes longer, than the same model without."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config.common import MAX_DROPOUT
from simulon.pipeline import simulate
from simulon.workload.kernels import MASK_BYTES, Phase
from simulon.workload.layer_kernels import LayerKernels

SEQ, HIDDEN = 1024, 1024


def with_dropout(sc, dropout: float):
    model = sc.workload.model.model_copy(update={"dropout": dropout})
    return sc.model_copy(update={"workload": sc.workload.model_copy(update={"model": model})})


def one_gpu(dropout: float):
    return with_dropout(gpt_scenario(gpus_per_node=1, gbs=2, mbs=1, seq=SEQ, hidden=HIDDEN), dropout)


def residual_seconds(sim) -> float:
    """Seconds the step's residual blocks (dropout and residual add) take on its one GPU."""
    dag = sim.dag
    nodes = np.flatnonzero(dag.kernel >= 0)
    return float(sum(dag.duration[n] for n in nodes if dag.kernel_specs[dag.kernel[n]].name.endswith("_residual")))


@settings(max_examples=10, deadline=None)
@given(st.floats(min_value=0.01, max_value=MAX_DROPOUT))
def test_a_dropout_residual_block_moves_its_one_byte_mask_forward_and_backward(p):
    plain, dropped = LayerKernels.of(one_gpu(0.0).workload), LayerKernels.of(one_gpu(p).workload)
    for name in ("attn_residual", "mlp_residual"):
        for phase in (Phase.fwd, Phase.bwd_ig):
            extra = dropped[name][phase].bytes - plain[name][phase].bytes
            assert extra == pytest.approx(SEQ * HIDDEN * MASK_BYTES)
    assert {n: {ph: s.bytes for ph, s in v.items()} for n, v in plain.table.items() if not n.endswith("_residual")} \
        == {n: {ph: s.bytes for ph, s in v.items()} for n, v in dropped.table.items() if not n.endswith("_residual")}


def test_a_run_with_dropout_is_slower_than_without_by_its_masks_time():
    plain, dropped = simulate(one_gpu(0.0)), simulate(one_gpu(0.1))
    masks = residual_seconds(dropped) - residual_seconds(plain)
    assert masks > 0
    slower = (dropped.result.iteration_time_ms - plain.result.iteration_time_ms) / 1e3
    assert slower == pytest.approx(masks, rel=1e-6)
