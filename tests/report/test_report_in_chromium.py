"""The report renders in a real headless Chromium (Debian's `chromium`): the page loads without console errors,
every plot is visible (decoded and laid out at a non-zero size), and the numbers on the rendered page are the ones
`simulon simulate --json` prints for the same scenario.

A harness page beside the report loads it in an iframe (same origin under `--allow-file-access-from-files`) and,
on load, writes what it measured into its own DOM as JSON, which `--dump-dom` prints; the harness logs one console
line itself, so the test also sees that console messages do reach the log it reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape

import pytest
from report_numbers import agrees

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None,
                                reason="needs Debian's chromium (apt-get install chromium) to render the report")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom")
SENTINEL = "harness measured the report"

HARNESS = """<!DOCTYPE html>
<html><body><pre id="measured">not measured</pre>
<iframe id="report" src="REPORT" style="width: 1280px; height: 2000px"></iframe>
<script>
window.addEventListener("load", function () {
  var doc = document.getElementById("report").contentDocument;
  function box(e) { var r = e.getBoundingClientRect(); return [r.width, r.height]; }
  var plots = Array.from(doc.querySelectorAll("img, svg")).map(function (e) {
    var style = doc.defaultView.getComputedStyle(e);
    return {alt: e.getAttribute("alt"), complete: e.complete !== false, natural: e.naturalWidth || 0,
            size: box(e), shown: style.display !== "none" && style.visibility === "visible"};
  });
  var numbers = Array.from(doc.querySelectorAll("[data-key]")).map(function (e) {
    return {key: e.dataset.key, value: e.dataset.value, unit: e.dataset.unit || "", text: e.textContent,
            size: box(e)};
  });
  document.getElementById("measured").textContent = JSON.stringify({plots: plots, numbers: numbers,
    width: doc.documentElement.scrollWidth});
  console.log("SENTINEL");
});
</script></body></html>
"""


@pytest.fixture(scope="module")
def rendered(made):
    """(what the harness measured, the CONSOLE lines Chromium logged)."""
    harness = made.report.parent / "harness.html"
    harness.write_text(HARNESS.replace("REPORT", made.report.name).replace("SENTINEL", SENTINEL))
    done = subprocess.run([CHROMIUM, *FLAGS, harness.as_uri()], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert measured is not None, done.stdout[:2000]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return json.loads(unescape(measured.group(1))), console


def test_the_page_loads_without_console_messages(rendered):
    _, console = rendered
    assert len(console) == 1 and SENTINEL in console[0], console


def test_every_plot_is_decoded_and_shown_at_a_visible_size(rendered):
    plots = rendered[0]["plots"]
    assert len(plots) == 4
    for plot in plots:
        assert plot["complete"] and plot["natural"] > 300 and plot["shown"], plot
        width, height = plot["size"]
        assert 300 < width <= 1180 and height > 100, plot  # fits the laptop-width layout


def test_the_page_fits_a_laptop_screen_without_scrolling_sideways(rendered):
    assert 0 < rendered[0]["width"] <= 1280


def test_the_numbers_on_the_rendered_page_are_the_simulate_json_values(made, rendered):
    numbers = rendered[0]["numbers"]
    assert {"iteration_time_ms", "tokens_per_s", "mfu", "memory.fits"} <= {n["key"] for n in numbers}
    for n in numbers:
        assert n["size"][0] > 0 and n["size"][1] > 0, n
        agrees(made.result, n["key"], n["value"], n["unit"], n["text"].strip())
