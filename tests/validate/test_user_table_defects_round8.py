"""A user's own tables (a helper's bug-bash): rows whose hardware cell reads alike but whose notes name different
systems are each predicted on their own; a number of groups of 0 is refused as -1 is; a memory row on a system of
other than eight GPUs a node fills that system's nodes."""

from __future__ import annotations

from simulon.validate.collectives import validate_collectives
from simulon.validate.memory import validate_memory

ROW = {"hardware": "2 nodes of 8x H100", "collective": "allreduce", "msg_bytes": "1073741824", "group_size": "16",
       "busbw_GBps": "100", "time_us": "", "source": "mine"}
AWS, GCP = {**ROW, "notes": "AWS p5.48xlarge EFA"}, {**ROW, "notes": "GCP a3 mega TCPXO"}


def predicted(rows: list[dict[str, str]]) -> list[float]:
    return [r.predicted for r in sorted(validate_collectives(rows).rows, key=lambda r: r.index)]


def test_rows_of_one_hardware_text_on_different_systems_are_each_predicted_on_their_own_in_any_order():
    """The sweep's key was the hardware cell: both rows ran on the first row's system (443.2 or 171.4 GB/s for both,
    by row order)."""
    aws, gcp = predicted([AWS]), predicted([GCP])
    assert aws != gcp
    assert predicted([AWS, GCP]) == aws + gcp and predicted([GCP, AWS]) == gcp + aws


def test_no_group_is_refused_as_a_negative_count_is_and_a_blank_cell_is_one_group():
    row = {"hardware": "DGX H100", "collective": "allreduce", "msg_bytes": "1073741824", "group_size": "4",
           "busbw_GBps": "200", "time_us": ""}
    report = validate_collectives([{**row, "num_groups": "0"}, {**row, "num_groups": "-1"}, {**row, "num_groups": ""}])
    assert [r.index for r in report.rows] == [2]
    assert {s.index: s.reason for s in report.skipped} == {
        0: "0 group(s) of 4 GPUs: expected 1 to 1,000,000 GPUs in all",
        1: "-1 group(s) of 4 GPUs: expected 1 to 1,000,000 GPUs in all"}


def test_a_memory_row_on_a_system_of_other_than_eight_gpus_a_node_is_compared():
    """Eight GPUs a node were assumed: 16 GPUs of a GB200 NVL72 were 2 nodes of 4, and the row was skipped."""
    row = {"source": "my lab", "model": "llama-3-8b", "framework": "Megatron-LM", "tp": "2", "pp": "1", "cp": "1",
           "ep": "1", "vpp": "1", "sp": "true", "recompute": "none", "zero_or_fsdp": "", "mbs": "1", "gbs": "32",
           "seq_len": "4096", "dtype": "bf16", "mem_gib": "40", "mem_kind": "allocated", "notes": ""}
    rows = [{**row, "hardware": hardware, "num_gpus": gpus, "dp": str(int(gpus) // 2)}
            for hardware, gpus in (("DGX H100", "16"), ("GB200 NVL72", "16"), ("GB200 NVL72", "8"))]
    report = validate_memory(rows)
    assert not report.skipped and [r.index for r in report.rows] == [0, 1, 2]
