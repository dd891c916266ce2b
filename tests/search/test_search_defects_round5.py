"""The search on scenarios that account for the embedding or the loss in the pipeline split (pp x vpp must divide the
layers plus those, as the workload's own split does), a workload refused in a worker (one bad-input message, exit
2, not a broken process pool), and the memory shortcut (a strategy is never ranked on another's memory check where
a stronger recomputation needs more)."""

from __future__ import annotations

import functools
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from helpers import cli, gpt_scenario
from simulon.config.common import FieldError
from simulon.config.pipeline_layout import virtual_stage_layers
from simulon.config.workload import ParallelismSpec
from simulon.executors import ProcessExecutor
from simulon.search.run import Search, apply
from simulon.search.space import Space


def accounted(layers: int, **flags: bool):
    return gpt_scenario(nodes=1, gpus_per_node=8, layers=layers, gbs=16, seq=1024, extra_parallelism=flags)


@pytest.mark.parametrize(("layers", "flags", "units"), [
    (7, {"account_for_embedding_in_pipeline_split": True}, 8),
    (6, {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}, 8),
    (8, {"account_for_loss_in_pipeline_split": True}, 9),
])
def test_with_the_embedding_or_loss_accounted_pp_x_vpp_divides_the_layers_plus_those_and_every_split_builds(
        layers, flags, units):
    sc = accounted(layers, **flags)
    strategies = list(Space(sc.workload, 8, 8, fp8=False).strategies())
    assert strategies
    assert all(units % (s.pp * s.vpp) == 0 and not s.first_layers for s in strategies)
    pipelines = {(s.pp, s.vpp) for s in strategies}
    assert pipelines == {(pp, vpp) for pp in (1, 2, 4) for vpp in range(1, 9)
                         if units % (pp * vpp) == 0 and (pp > 1 or vpp == 1)}
    for pp, vpp in pipelines:  # the split the memory model and the replay build is the workload's own
        s = next(s for s in strategies if (s.pp, s.vpp) == (pp, vpp))
        counts = virtual_stage_layers(apply(sc.workload, s).parallelism, layers)
        assert sum(counts) == layers and len(counts) == pp * vpp


def test_a_search_accounting_for_the_embedding_runs_through_the_worker_pool_instead_of_breaking_it(tmp_path):
    path = tmp_path / "accounted.yaml"
    sc = accounted(6, account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)
    data = sc.model_dump(mode="json", exclude_none=True)  # 6 layers + 2 over pp 2 x vpp 3 (6 does divide) refused
    path.write_text(yaml.safe_dump(data))
    done = cli("search", str(path), "--workers", "1", "--replay", "0", "--no-cache", "--no-fp8", "--top", "3")
    assert done.returncode == 0, done.stderr
    assert "Best strategies on 8 GPUs" in done.stdout


def test_a_field_error_survives_pickling_whole():
    error = pickle.loads(pickle.dumps(FieldError("workload.parallelism", "not divisible")))
    assert type(error) is FieldError
    assert (error.field, error.message, str(error)) == ("workload.parallelism", "not divisible",
                                                        "workload.parallelism: not divisible")


def test_a_field_error_raised_in_a_pool_worker_comes_back_as_itself_not_as_a_broken_pool():
    par = ParallelismSpec.model_validate({"pp": 2, "account_for_embedding_in_pipeline_split": True})
    with pytest.raises(FieldError, match="not divisible by pp\\*vpp = 2") as caught:
        list(ProcessExecutor(1).map_unordered(functools.partial(virtual_stage_layers, par), [30]))
    assert caught.value.field == "workload.parallelism.account_for_embedding_in_pipeline_split"


def test_a_workload_refused_during_the_search_ends_with_one_bad_input_line_and_exit_2(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(accounted(4).model_dump(mode="json", exclude_none=True)))
    code = ("import simulon.search.run as run\n"
            "from simulon.config.common import FieldError\n"
            "def refused(*args, **kwargs):\n"
            "    raise FieldError('workload.parallelism', 'num_layers 30 + 1 = 31 is not divisible by pp*vpp = 2')\n"
            "run.Search.run = refused\n"
            "from simulon.cli.app import main\n"
            "main()\n")
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", code, "search", str(path), "--no-cache", "--workers", "1"],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {path}: workload.parallelism: num_layers 30 + 1 = 31 is not divisible")


@dataclass
class FakePeak:
    fits: bool
    device: float = 1.0
    stage: int = 0

    def largest_terms(self, n: int) -> list[tuple[str, float]]:
        return [("layer transient", self.device)]


def test_a_strategy_whose_own_memory_check_fails_is_never_estimated_though_a_weaker_recomputation_fits(monkeypatch):
    """Full recomputation needing more than none or selective (a layer's transient rebuilt in its backward): the
    full-recompute strategies do not fit, and none is let through on a lighter one's check."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, gbs=8, seq=512)
    checked = []

    def memory(self, strategy, workload=None, num_gpus=None):
        checked.append(strategy)
        return FakePeak(fits=strategy.recompute != "full")

    monkeypatch.setattr(Search, "memory", memory)
    phase = Search(sc, 4, fp8=False).estimate_blocks()
    recomputes = {s.recompute for _, s in phase.candidates}
    assert recomputes == {"none", "selective"}
    assert all(memory(None, s).fits for _, s in phase.candidates)
    assert phase.infeasible["layer transient"] > 0


def test_megatron_arguments_for_an_accounted_split_name_the_flags_and_the_chunks_per_stage_not_a_layer_count():
    from simulon.search.export import megatron_arguments

    sc = accounted(6, account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)
    s = next(s for s in Space(sc.workload, 8, 8, fp8=False).strategies() if (s.pp, s.vpp) == (2, 2))
    args = megatron_arguments(s, sc)
    assert "--num-virtual-stages-per-pipeline-rank 2" in args
    assert not any(a.startswith("--num-layers-per-virtual-pipeline-stage") for a in args)  # 6 // 4 would be 1
    assert {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"} <= set(args)
