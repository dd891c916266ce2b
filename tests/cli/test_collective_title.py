"""`simulon collective`'s table title names the algorithm and protocol that ran (what NCCL's tuner chose where the
scenario says auto), as the rows below it do, never "auto"."""

from __future__ import annotations

import json

import pytest

from helpers import cli

SCENARIO = ("datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 1}\n"
            "collective: {library: nccl, algorithm: auto, protocol: auto}\n")


def title_and_rows(tmp_path, *args: str) -> tuple[str, list[dict]]:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    table, as_json = cli("collective", str(path), *args), cli("collective", str(path), *args, "--json")
    assert table.returncode == 0 and as_json.returncode == 0, table.stderr
    return table.stdout.splitlines()[0].strip(), json.loads(as_json.stdout)


def test_the_title_names_each_protocol_the_tuner_chose_in_the_order_of_the_sizes(tmp_path):
    title, rows = title_and_rows(tmp_path, "--sizes", "1KiB,1MiB,1GiB")
    protocols = list(dict.fromkeys(r["protocol"] for r in rows))
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    assert protocols == ["ll", "simple"]  # small messages on a latency-bound protocol, large ones on simple
    assert algorithms == ["ring", "nvls"]  # and large ones on NVLink SHARP
    assert title == "allreduce over 8 GPUs, algorithms ring and nvls by size, protocols ll and simple by size"


@pytest.mark.parametrize("args", [("--sizes", "1GiB"), ("--sizes", "1KiB,1GiB", "--protocol", "ll128")])
def test_a_single_protocol_that_ran_is_named_alone(tmp_path, args):
    title, rows = title_and_rows(tmp_path, *args)
    (protocol,) = {r["protocol"] for r in rows}
    assert title.endswith(f", protocol {protocol}") and "auto" not in title
