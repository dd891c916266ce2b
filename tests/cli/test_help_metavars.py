"""Every command's --help shows what each option takes: nothing for a flag (Typer 0.29 printed `--json <bool>`, as if
the flag took a value, which `--json true` then refuses), and one element for an option given a value per use
(`--tp <str>`, not `<list[str]>`) (cli.app.plain_metavars)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from simulon.cli.app import app


def groups_and_commands(typer_app=app, prefix=()):
    """The words of every group and command, the root's included."""
    yield prefix
    for info in typer_app.registered_commands:
        yield (*prefix, info.name or info.callback.__name__.replace("_", "-"))
    for group in typer_app.registered_groups:
        yield from groups_and_commands(group.typer_instance, (*prefix, group.name))


def help_text(words: tuple[str, ...], monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "240")
    run = CliRunner().invoke(app, [*words, "--help"], prog_name="simulon")
    assert run.exit_code == 0, run.output
    return run.output


@pytest.mark.parametrize("words", list(groups_and_commands()), ids=lambda w: " ".join(w) or "simulon")
def test_help_shows_no_value_for_a_flag_and_one_element_for_a_list_option(words, monkeypatch):
    text = help_text(words, monkeypatch)
    assert "<bool>" not in text
    assert "<list[" not in text
    help_line = next(line for line in text.splitlines() if "--help" in line)
    assert re.search(r"--help\s+Show this message", help_line), help_line
