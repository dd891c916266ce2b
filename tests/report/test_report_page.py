"""`simulon report SCENARIO -o report.html` writes one self-contained HTML file whose numbers are the ones
`simulon simulate --json` prints for the same scenario, byte-identical on every run; bad input ends with exit
status 2 and one line naming the problem, and writes nothing."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from report_numbers import agrees, decimals

from helpers import cli, gpt_scenario
from simulon.report.markup import FORMATS, number

SECTIONS = ("summary", "breakdown", "critical-path", "findings", "plots", "links", "memory")


class Tagged(HTMLParser):
    """The page's tagged numbers (data-key, data-unit, data-value, shown text), its section ids and images."""

    def __init__(self) -> None:
        super().__init__()
        self.numbers: list[dict] = []
        self.ids: list[str] = []
        self.images: list[str] = []
        self.open: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "img":
            self.images.append(attrs["src"])
        if "data-key" in attrs:
            self.open = {**attrs, "text": ""}

    def handle_data(self, data):
        if self.open is not None:
            self.open["text"] += data

    def handle_endtag(self, tag):
        if self.open is not None:
            self.numbers.append(self.open)
            self.open = None


def parse(html: str) -> Tagged:
    page = Tagged()
    page.feed(html)
    return page


def test_the_page_is_one_file_needing_no_network(made):
    html = made.report.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert not re.search(r"https?://|<script|<link|@import|url\(", html)
    page = parse(html)
    assert page.images and all(src.startswith("data:image/png;base64,") for src in page.images)


def test_the_page_has_every_section_and_the_four_plots(made):
    page = parse(made.report.read_text())
    assert [i for i in page.ids if i in SECTIONS] == list(SECTIONS)
    assert len(page.images) == 4  # breakdown, gantt, memory, links


def test_every_number_shown_is_the_simulate_json_value_it_names(made):
    page = parse(made.report.read_text())
    assert len(page.numbers) > 50
    for tag in page.numbers:
        agrees(made.result, tag["data-key"], tag["data-value"], tag.get("data-unit", ""), tag["text"])


def test_the_summary_shows_step_time_throughput_mfu_and_the_memory_verdict(made):
    keys = {tag["data-key"] for tag in parse(made.report.read_text()).numbers}
    assert {"iteration_time_ms", "tokens_per_s", "mfu", "tflops_per_gpu", "memory.fits",
            "analysis.critical_path.length_ms"} <= keys
    assert {f"per_gpu.{i}.compute_ms" for i in range(len(made.result["per_gpu"]))} <= keys
    assert {f"analysis.findings.{i}.at_stake_ms" for i in range(len(made.result["analysis"]["findings"]))} <= keys
    assert {f"memory.stages.{i}.device_bytes" for i in range(len(made.result["memory"]["stages"]))} <= keys


def test_a_second_run_writes_the_same_bytes(made, tmp_path):
    again = tmp_path / "again.html"
    done = cli("report", str(made.scenario), "-o", str(again))
    assert done.returncode == 0, done.stderr
    assert again.read_bytes() == made.report.read_bytes()


@pytest.mark.parametrize(("args", "says"), [
    (["missing.yaml", "-o", "{tmp}/r.html"], "missing.yaml"),
    (["{scenario}", "-o", "{tmp}/r.txt"], "-o {tmp}/r.txt: expected a file name ending in .html"),
    (["{scenario}", "-o", "{tmp}/nowhere/r.html"], "-o {tmp}/nowhere/r.html: folder"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(made, tmp_path, args, says):
    fill = {"tmp": str(tmp_path), "scenario": str(made.scenario)}
    done = cli("report", *(a.format(**fill) for a in args), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert says.format(**fill) in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_scenario_without_a_workload_is_refused_naming_the_field(made, tmp_path):
    scenario = tmp_path / "dc.yaml"
    scenario.write_text(yaml.safe_dump({"datacenter": yaml.safe_load(made.scenario.read_text())["datacenter"]}))
    done = cli("report", str(scenario), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2 and f"{scenario}: workload: required" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_single_gpu_sends_nothing_and_its_report_says_so_instead_of_a_heat_map(tmp_path):
    scenario, report = tmp_path / "one.yaml", tmp_path / "one.html"
    scenario.write_text(yaml.safe_dump(gpt_scenario(gpus_per_node=1).model_dump(mode="json", exclude_none=True)))
    done = cli("report", str(scenario), "-o", str(report))
    assert done.returncode == 0, done.stderr
    html = report.read_text()
    assert "No link carried traffic in this step." in html and len(parse(html).images) == 3


def test_a_run_that_does_not_fit_lists_what_would_make_it_fit_with_the_simulate_json_s_figures(tmp_path):
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
            "workload": {"model": {"from": "llama-2-13b"}, "parallelism": {"tp": 2},
                         "training": {"global_batch_size": 64, "micro_batch_size": 1, "sequence_length": 4096}}}
    scenario, out = tmp_path / "s.yaml", tmp_path / "r.html"
    scenario.write_text(yaml.safe_dump(data))
    assert cli("report", str(scenario), "-o", str(out)).returncode == 0
    result = json.loads(cli("simulate", str(scenario), "--json").stdout)
    html = out.read_text()
    assert "To fit, one of (fastest first by the search&#x27;s estimate of a step, memory.remedies):" in html
    assert "<li>distributed_optimizer: true (" in html
    shown = [n for n in parse(html).numbers if n["data-key"].startswith("memory.to_fit.")]
    assert len(shown) == 3 * len(result["memory"]["to_fit"]) > 0  # memory, step, the run as written's step
    assert {n["data-key"].rsplit(".", 1)[1] for n in shown} == {"device_bytes", "estimated_step_s",
                                                                "as_written_estimated_step_s"}
    for n in shown:
        agrees(result, n["data-key"], n["data-value"], n["data-unit"], n["text"])


def test_a_run_no_change_fits_shows_the_closest_change_with_the_simulate_json_s_figures(tmp_path):
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 2}},
            "workload": {"model": {"from": "llama-3-70b"}, "parallelism": {"tp": 4, "pp": 2},
                         "training": {"global_batch_size": 64, "micro_batch_size": 1, "sequence_length": 4096}}}
    scenario, out = tmp_path / "s.yaml", tmp_path / "r.html"
    scenario.write_text(yaml.safe_dump(data))
    assert cli("report", str(scenario), "-o", str(out)).returncode == 0
    result = json.loads(cli("simulate", str(scenario), "--json").stdout)
    assert result["memory"]["to_fit"] == [] and result["memory"]["closest_to_fit"] is not None
    html = out.read_text()
    assert "No change of one or two of the settings tuning guides try first fits; the closest, " in html
    shown = [n for n in parse(html).numbers if n["data-key"].startswith("memory.closest_to_fit.")]
    assert [n["data-key"] for n in shown] == ["memory.closest_to_fit.device_bytes"]
    for n in shown:
        agrees(result, n["data-key"], n["data-value"], n["data-unit"], n["text"])


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-9, 1e6), st.sampled_from(["ms", "s", "%", "GiB", "tokens/s", "TFLOP/s"]))
def test_a_nonzero_number_is_never_shown_as_zero_and_reads_back_within_its_rounding(value, unit):
    """A finding's 0.00372 ms at stake read '0.00 ms at stake' beside its own text's 0.00372."""
    shown = re.search(r">([^<]*)</span>", number("k", value, unit)).group(1).removesuffix(FORMATS[unit][2])
    figure = float(shown.replace(",", ""))
    assert figure > 0 and re.fullmatch(r"[\d,]+(\.\d+)?", shown), shown
    factor = FORMATS[unit][1]
    assert figure / factor == pytest.approx(value, rel=0.01, abs=0.51 * 10 ** -decimals(unit) / factor)
