"""The layers of DESIGN.md as an import-linter contract (pyproject ``[tool.importlinter]``).

Imports point down: surfaces > workflows > engine > workspace > services > plugins >
default_plugins > hookspecs > memory > providers/embeddings > store > config > events > errors. grimp builds the graph from every
``import`` statement, those inside functions included, so a lazy upward import is caught too.
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
