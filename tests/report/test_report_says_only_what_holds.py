"""The report's sentences hold for the step they describe: the GPUs a simulated GPU stands for are named only
where some were not simulated, and the per-class link table lists only the classes that carried traffic."""

from __future__ import annotations

import copy
import json

from helpers import SEED_SCENARIO, cli
from simulon.plots.links import links as plot_links
from simulon.plots.result import gantt
from simulon.report.page import breakdown, critical_path, links, summary


def test_the_stands_for_sentence_appears_only_where_fewer_gpus_were_simulated_than_run(made):
    data = copy.deepcopy(made.result)
    data["simulated_gpus"] = data["num_gpus"]
    every = summary(data)
    assert "stands for" not in every and "GPUs simulated." in every and "All " in every
    data["simulated_gpus"] = data["num_gpus"] // 2
    folded = summary(data)
    assert "GPUs simulated; each stands for its identical data/tensor-parallel peers." in folded


def test_a_link_class_none_of_whose_links_carried_traffic_is_left_out_of_the_table(made):
    data = copy.deepcopy(made.result)
    by_class = data["analysis"]["links"]["by_class"]
    assert any(c["used"] for c in by_class.values())
    by_class["leaf-spine"] = {"links": 16, "used": 0, "bytes": 0.0, "mean_utilisation": 0.0, "max_utilisation": 0.0}
    html = links(data)
    assert "analysis.links.by_class.leaf-spine" not in html
    assert all(f"analysis.links.by_class.{name}.used" in html for name, c in by_class.items() if c["used"])
    assert "Per link class that carried traffic" in html


def test_the_top_collectives_table_lists_every_collective_the_path_crosses_up_to_ten_titled_with_their_count(made):
    """The JSON cut the path's collectives at 5 under a table titled top 10; then this step's 9 stood under "top
    10 collectives"."""
    on_path = made.result["analysis"]["critical_path"]["by_collective_ms"]
    assert len(on_path) == 9
    html = made.report.read_text()
    assert all(name in html for name in on_path) and "top 9 collectives" in html and "top 10" not in html
    data = copy.deepcopy(made.result)
    data["analysis"]["critical_path"]["by_collective_ms"] = {f"TP c{i} (AllReduce)": 1.0 for i in range(10)}
    assert "<th>top 10 collectives</th>" in critical_path(data)


def test_a_share_of_the_path_is_written_to_three_figures_where_one_decimal_would_read_zero(made):
    """link_contention's 0.00372 ms of a 494.9 ms path read "0.0%" in the terms table, beside "0.000753%" for the
    same share in the findings."""
    data = copy.deepcopy(made.result)
    path = data["analysis"]["critical_path"]
    path["length_ms"] = 494.85284117683125
    path["by_term_ms"] = {"compute": 494.8491165234475, "link_contention": 0.0037246533837035625,
                          "compute_slowdown": 0.0}
    html = critical_path(data)
    assert "0.00372</span></td><td>0.000753%</td>" in html and "0.00</span></td><td>0.0%</td>" in html


def test_a_sampled_steps_report_and_plots_say_they_show_the_larger_replay(tmp_path):
    """A step extrapolated from replays of 2 and 3 of its 4 micro-batches: its critical path (429 ms) and timeline
    are the 3-micro-batch replay's beside a 529 ms step, which the report and the gantt and links plots showed
    without a word."""
    run = cli("simulate", str(SEED_SCENARIO), "--micro-batches", "2,3", "--json")
    assert run.returncode == 0, run.stderr
    sampled = json.loads(run.stdout)
    assert sampled["analysis"]["critical_path"]["length_ms"] < sampled["iteration_time_ms"]
    said = "the critical path, findings, links and timeline are the 3-micro-batch replay's"
    assert said in summary(sampled) and "fewer micro-batches than its 4" in summary(sampled)
    for draw in (gantt, plot_links):
        title = draw(sampled, "sampled.json").axes[0].get_title()
        assert title.endswith("the 3-micro-batch replay of a step of 4 (the step's time is extrapolated from two "
                              "replays)")
    whole = json.loads(cli("simulate", str(SEED_SCENARIO), "--json").stdout)
    assert "replay" not in summary(whole)
    assert all("replay" not in draw(whole, "whole.json").axes[0].get_title() for draw in (gantt, plot_links))


def test_a_sampled_steps_split_by_kind_is_captioned_as_the_replays_it_adds_up_to():
    """The per-GPU split by kind (analysis.per_gpu) is the larger replay's: on the seed sampled at 2 and 3 of its 4
    micro-batches its rows add up to the 3-micro-batch replay's step, yet it sat under the extrapolated step's
    tables in the Breakdown section, which the summary says is the extrapolated step's, captioned as theirs."""
    run = cli("simulate", str(SEED_SCENARIO), "--micro-batches", "2,3", "--json")
    assert run.returncode == 0, run.stderr
    sampled = json.loads(run.stdout)
    row = sampled["analysis"]["per_gpu"][0]
    split = row["compute_bound_ms"] + row["memory_bound_ms"] + sum(row["exposed_ms"].values()) + row["bubble_ms"]
    assert split < 0.9 * sampled["iteration_time_ms"]
    caption = "idle (ms), of the 3-micro-batch replay (not the extrapolated step)</caption>"
    assert caption in breakdown(sampled)
    whole = json.loads(cli("simulate", str(SEED_SCENARIO), "--json").stdout)
    assert "idle (ms)</caption>" in breakdown(whole) and "replay" not in breakdown(whole)


def test_a_sampled_steps_critical_path_and_links_are_said_to_be_the_replays_not_the_extrapolated_steps():
    """A step extrapolated from replays of fewer micro-batches: its critical path and link loads are the larger
    replay's, yet the Critical path section said the path "sets the step time" (DeepSeek-V3 on 2,048 H800: 12,895.66 ms
    under a 36,555 ms step) and the link tables were captioned as the step's."""
    run = cli("simulate", str(SEED_SCENARIO), "--micro-batches", "2,3", "--json")
    assert run.returncode == 0, run.stderr
    sampled = json.loads(run.stdout)
    assert sampled["analysis"]["critical_path"]["length_ms"] < sampled["iteration_time_ms"]
    said = "sets the step time of the 3-micro-batch replay (not the extrapolated step): "
    assert said in critical_path(sampled)
    assert "Busiest links, over the 3-micro-batch replay (not the extrapolated step)</caption>" in links(sampled)
    whole = json.loads(cli("simulate", str(SEED_SCENARIO), "--json").stdout)
    assert "sets the step time: " in critical_path(whole) and "replay" not in critical_path(whole)
    assert "Busiest links</caption>" in links(whole) and "replay" not in links(whole)
