"""The README documents `simulon report` with the commands that made its screenshot, and shows that screenshot."""

from __future__ import annotations

import struct

from helpers import ROOT

COMMANDS = ("simulon report examples/gpt3_175b_1024gpu.yaml -o report.html",
            "chromium --headless --screenshot=docs/report.png --window-size=1280,2000 file://$PWD/report.html")


def test_the_readme_shows_the_report_screenshot_its_commands_make():
    readme = (ROOT / "README.md").read_text()
    assert all(command in readme for command in COMMANDS)
    assert "![simulon report of the GPT-3 175B example](docs/report.png)" in readme
    png = (ROOT / "docs/report.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", png[16:24]) == (1280, 2000)  # the IHDR's width and height: the window size given
