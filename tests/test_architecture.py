"""The package's shape: no import cycles between modules or between packages, no private names across modules.

Imports are read from the source (ast), not executed. Between modules every import counts, TYPE_CHECKING ones
included: a module that needs another's types to be understood depends on it. Between packages (the pipeline
stages: config, workload, collective, dag, network, engine, ...) only imports that run count: a TYPE_CHECKING
import loads nothing, and the tuner in collective/ names network's Topology in its annotations while
network's link model reads NCCL's protocols from collective/nccl.py.
"""

from __future__ import annotations

import ast
from functools import cache
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / "simulon").rglob("*.py"))}


def type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def imports(name: str, runtime_only: bool) -> list[tuple[str, list[str]]]:
    """(imported simulon module, names imported from it) for every import statement of a module."""
    path = modules()[name]
    tree = ast.parse(path.read_text())
    skip = type_checking_nodes(tree) if runtime_only else set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            names = [alias.name for alias in node.names]
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules()]
            found += [(m, []) for m in submodules] + [(target, [n for n in names if f"{target}.{n}" not in modules()])]
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return [(m, names) for m, names in found if m in modules() and m != name]


def cycle(graph: dict[str, set[str]]) -> list[str]:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return exc.args[1]
    return []


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_module_imports_itself_through_others():
    graph = {m: {target for target, _ in imports(m, runtime_only=False)} for m in modules()}
    assert cycle(graph) == []


def test_no_pipeline_package_imports_itself_through_others():
    graph: dict[str, set[str]] = {}
    for m in modules():
        graph.setdefault(package_of(m), set()).update(
            package_of(t) for t, _ in imports(m, runtime_only=True) if package_of(t) != package_of(m))
    assert cycle(graph) == []


def test_no_module_imports_another_modules_private_names():
    private = [(m, target, n) for m in modules() for target, names in imports(m, runtime_only=False)
               for n in names if n.startswith("_") and not n.startswith("__")]
    assert private == []


def test_the_import_reader_sees_cycles_and_private_names():
    assert set(cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})) == {"a", "b", "c"}
    assert ("simulon.collective.types", ["CollType"]) in imports("simulon.workload.program", runtime_only=True)
