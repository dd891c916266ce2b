"""The word embedding's weight gradient is a dense table: PyTorch's embedding_dense_backward zeroes the rank's whole
vocabulary shard and scatters the tokens' summed rows into it, and Megatron-Core's parameter hook adds that table to
the gradient buffer (workload/layer_kernels.py, LayerKernels.embedding_specs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import EMBEDDING_GRAD_ROW_BYTES, EMBEDDING_GRAD_TABLE_BYTES, LayerKernels


def embedding_grad_bytes(**knobs) -> float:
    return LayerKernels.of(gpt_workload(**knobs))["embedding"][Phase.bwd_wg].bytes


@settings(max_examples=20, deadline=None)
@given(vocab=st.integers(1, 64).map(lambda v: 1024 * v), more=st.integers(1, 64).map(lambda v: 1024 * v),
       hidden=st.sampled_from([512, 1024, 2048]), tp=st.sampled_from([1, 2, 4]),
       grads=st.sampled_from(["fp32", "bf16"]))
def test_the_embedding_gradient_moves_the_ranks_whole_vocabulary_shard_zeroed_and_added_to_the_gradient_buffer(
        vocab, more, hidden, tp, grads):
    knobs = {"gpus": 4, "tp": tp, "hidden": hidden, "training": {"grad_reduce_dtype": grads}}
    small, large = embedding_grad_bytes(vocab=vocab, **knobs), embedding_grad_bytes(vocab=vocab + more, **knobs)
    # bf16 activations: the zeroed table and its read are 2 bytes an element, the buffer's read and write 4 or 2
    per_element = 2 * 2 + 2 * (4 if grads == "fp32" else 2)
    assert large - small == pytest.approx(more // tp * hidden * per_element)


def test_megatron_cores_gpt_1_7b_embedding_gradient_moves_its_131072_by_2048_table_and_its_tokens_rows():
    # the weak-scaling row's shard: tp 1, four sequences of 4,096 a micro-batch, fp32 gradients under bf16
    tokens, hidden, vocab = 4 * 4096, 2048, 131072
    moved = embedding_grad_bytes(gpus=1, tp=1, hidden=hidden, heads=16, vocab=vocab, seq=4096, mbs=4, gbs=4)
    rows = tokens * hidden * (EMBEDDING_GRAD_ROW_BYTES[0] * 2 + EMBEDDING_GRAD_ROW_BYTES[1])
    table = vocab * hidden * (EMBEDDING_GRAD_TABLE_BYTES[0] * 2 + EMBEDDING_GRAD_TABLE_BYTES[1] * 4)
    assert moved == pytest.approx(rows + table)
    assert moved == pytest.approx(16384 * 2048 * 12 + 131072 * 2048 * 12)  # 3.62 GB, 3.22 GB of it the table
