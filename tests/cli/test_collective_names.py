"""`simulon collective --op` reads a collective as the validators' tables name it (collective.types.collective_named):
any case, with or without '_' or '-'; an unknown one exits 2 listing the names."""

from __future__ import annotations

import pytest

from helpers import cli
from simulon.collective.types import COLLECTIVE_NAMES

SCENARIO = "datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 1}\n"


@pytest.mark.parametrize(("spelt", "name"), [("All_Reduce", "allreduce"), ("reduce-scatter", "reducescatter"),
                                             ("AllToAll", "alltoall")])
def test_an_op_spelt_otherwise_runs_the_same_collective(tmp_path, spelt, name):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    runs = [cli("collective", str(path), "--op", op, "--sizes", "1MiB", "--json") for op in (spelt, name)]
    assert [run.returncode for run in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout == runs[1].stdout


def test_an_unknown_op_exits_2_listing_the_names(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    run = cli("collective", str(path), "--op", "broadcast")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"--op: expected one of {', '.join(COLLECTIVE_NAMES)}, got 'broadcast'" in run.stderr
