"""The layers of docs/architecture.md as an import-linter contract (pyproject ``[tool.importlinter]``).

Imports point down: surfaces > workflows > engine > workspace > services > plugins >
default_plugins > hookspecs > memory > providers/embeddings > store > config > events > errors. grimp builds the graph from every
``import`` statement, those inside functions included, so a lazy upward import is caught too.

Inside one layer the contract allows anything, so two modules could still import each other with one
side hidden inside a function (engine/run.py and engine/coordinate.py did): no module import graph
cycles, function-level and ``TYPE_CHECKING`` imports included (a type-only circle is still a circle:
the modules cannot be understood, or split, one without the other).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([LINT, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_the_package_keeps_its_layers():
    res = _lint(ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "1 kept, 0 broken" in res.stdout


@pytest.mark.slow
def test_a_new_upward_import_breaks_the_contract(tmp_path):
    """The contract can fail: a store module that imports a surface inside a function is caught."""
    shutil.copytree(ROOT / "agentstack_lab", tmp_path / "agentstack_lab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    store = tmp_path / "agentstack_lab" / "store" / "connection.py"
    store.write_text(store.read_text() + "\n\ndef _sneaky():\n    from agentstack_lab.notebook import magics\n"
                     "    return magics\n")
    res = _lint(tmp_path)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
    assert "agentstack_lab.store.connection -> agentstack_lab.notebook.magics" in res.stdout


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({**edges, "c": {"d"}}) == []


@pytest.mark.slow
def test_no_two_modules_import_each_other_even_inside_functions():
    import grimp  # import-linter's graph builder (a dev dependency)

    graph = grimp.build_graph("agentstack_lab", exclude_type_checking_imports=False, cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert len(edges) > 100  # the whole package was read
    assert _cycles(edges) == []
