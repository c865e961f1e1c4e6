"""Nothing is left behind in the temporary folder (issue 26, item 13).

A run, a workflow batch (a kernel pool of two) and a bug's traceback file are the product's own uses of
the temporary folder: each process here gets an empty one of its own (``TMPDIR``), which must be empty
again when it ends. The whole test session checks the real one too (``tests/conftest.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

pytestmark = pytest.mark.slow  # every test here starts a process

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


def cli_in(temp: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(folder), *args], capture_output=True, text=True, timeout=300,
                          cwd=folder, env={**os.environ, "TMPDIR": str(temp)})


def left(temp: Path) -> list[str]:
    return sorted(str(p.relative_to(temp)) for p in temp.rglob("*"))


@pytest.mark.slow
def test_a_run_and_a_workflow_batch_leave_nothing_in_the_temporary_folder(tmp_path):
    temp, folder = tmp_path / "temp", tmp_path / "ws"
    temp.mkdir()
    folder.mkdir()
    done = cli_in(temp, folder, "agent", "run", "summarise 1, 2", "--no-subagents")
    assert done.returncode == 0, done.stderr
    assert left(temp) == []

    for name in ("a", "b", "c"):
        nb = new_notebook(cells=[new_code_cell("x = 6 * 7\nassert x == 42")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / f"{name}.ipynb")
    done = cli_in(temp, folder, "workflow", "run", "a.ipynb", "b.ipynb", "c.ipynb", "--cwd", str(folder))
    assert done.returncode == 0, done.stderr
    assert left(temp) == [], "a workflow batch left these behind"


def test_a_bug_saves_its_traceback_once_and_says_where(tmp_path):
    """The one deliberate leftover: a bug's traceback, named on the error line, so it can be reported."""
    temp = tmp_path / "temp"
    temp.mkdir()
    code = ("import sys; from agentstack_lab.cli.common import handled\n"
            "with handled(False):\n    raise RuntimeError('boom')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TMPDIR": str(temp)})
    saved = left(temp)
    assert len(saved) == 1 and saved[0] in done.stderr, (saved, done.stderr)
