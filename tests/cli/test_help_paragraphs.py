"""--help wraps a command's description at the terminal's width, not where its docstring's source lines end: in rich
markup mode Typer keeps a docstring's line breaks, so `simulon --help` listed `memory` as '... capacity (allocated as'
and the rest of the sentence on a line of its own (cli.app.joined_help)."""

from __future__ import annotations

import inspect

import pytest
import typer.main

from helpers import cli
from simulon.cli.app import app


def commands(typer_app=app, prefix=()):
    """(the group's words, the command's name, its docstring) of every command."""
    for info in typer_app.registered_commands:
        yield prefix, info.name or info.callback.__name__.replace("_", "-"), inspect.getdoc(info.callback)
    for group in typer_app.registered_groups:
        yield from commands(group.typer_instance, (*prefix, group.name))


def paragraphs(doc: str) -> list[str]:
    return [" ".join(part.split()) for part in doc.split("\n\n")]


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # rich's width for an output that is no terminal


def test_a_groups_listing_gives_each_command_the_first_paragraph_of_its_docstring_on_one_line(wide):
    listed = {}
    for prefix, name, doc in commands():
        listed.setdefault(prefix, []).append((name, paragraphs(doc)[0]))
    assert len(listed) == 4  # simulon, simulon validate, simulon profile, simulon templates
    for prefix, entries in listed.items():
        run = cli(*prefix, "--help")
        assert run.returncode == 0, run.stderr
        lines = [" ".join(line.strip("│ ").split()) for line in run.stdout.splitlines()]
        for name, first in entries:
            assert f"{name} {first}" in lines, (prefix, name)


def test_a_commands_own_help_gives_every_paragraph_on_one_line_on_a_wide_terminal(wide):
    for prefix, name, doc in commands():
        run = cli(*prefix, name, "--help")
        assert run.returncode == 0, run.stderr
        lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
        assert all(paragraph in lines for paragraph in paragraphs(doc)), (prefix, name)


def test_every_commands_arguments_are_named_by_a_word_not_a_letter(wide):
    """`simulon diff --help` showed its files as `{a} {b}`: each argument's name is what --help calls it."""
    def walk(command, words=()):
        yield words, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, (*words, name))

    for words, command in walk(typer.main.get_command(app)):
        for param in command.params:
            if param.param_type_name == "argument":
                assert len(param.metavar or param.name) > 1, (words, param.name)
    usage = cli("diff", "--help").stdout
    assert "simulon diff [OPTIONS] {before} {after}" in usage
