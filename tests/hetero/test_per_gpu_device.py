"""On a cluster of several GPU types each GPU's breakdown says which GPU it is (in --json, the -v table and the
report), where a reader had to work it out from stage_groups and Megatron's rank order."""

from __future__ import annotations

import re

from helpers import ROOT, SEED_SCENARIO, cli
from simulon.config.loading import load_scenario
from simulon.pipeline import simulate

HETERO = ROOT / "examples" / "hetero_h100_a100.yaml"


def test_each_gpus_breakdown_names_its_gpu_as_the_placement_puts_it():
    sc = load_scenario(HETERO)
    placement = sc.placement()
    result = simulate(sc).result
    assert {b.device for b in result.per_gpu} == {"H100-SXM5-80GB", "A100-SXM4-80GB"}
    assert all(b.device == placement.gpu_of(b.gpu).name for b in result.per_gpu)


def test_the_verbose_table_has_a_type_column_only_where_the_types_differ():
    mixed, uniform = (cli("simulate", str(path), "-v").stdout for path in (HETERO, SEED_SCENARIO))
    column = re.compile(r"┃\s+type\s+┃")
    assert column.search(mixed.split("Per-GPU breakdown")[1]) and "A100-SXM4-80GB" in mixed
    assert not column.search(uniform.split("Per-GPU breakdown")[1])
