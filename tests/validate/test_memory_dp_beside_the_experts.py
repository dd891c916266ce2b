"""A memory row of an MoE model whose dp counts the data-parallel ranks beside the experts (dp / ep, as some sources
write it) is read as validate training reads it."""

from __future__ import annotations

from simulon.validate.memory import validate_memory

ROW = {"source": "our cluster", "locator": "", "model": "Qwen3-30B-A3B", "hardware": "8x H100 SXM",
       "framework": "Megatron-Core", "num_gpus": "64", "tp": "2", "pp": "2", "dp": "", "cp": "", "ep": "8", "vpp": "",
       "sp": "", "recompute": "", "zero_or_fsdp": "", "mbs": "1", "gbs": "64", "seq_len": "4096", "dtype": "bf16",
       "mem_gib": "40", "mem_kind": "allocated", "notes": ""}


def test_a_moe_rows_dp_counting_the_ranks_beside_the_experts_reads_as_validate_training_reads_it():
    """64 GPUs at tp 2 x pp 2 with ep 8 and dp 2 (16 / 8): validate training ran it, validate memory skipped it
    ('64 GPUs are not tp*pp*cp*dp = 8')."""
    stated, whole = validate_memory([{**ROW, "dp": "2"}]), validate_memory([{**ROW, "dp": "16"}])
    assert not stated.skipped and stated.rows[0].predicted == whole.rows[0].predicted
