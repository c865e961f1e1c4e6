"""papermill's own test notebooks, run by real papermill and by ``agentstack-lab workflow run``, compared.

The notebooks are papermill's (``tests/data/papermill``, copied at a fixed commit with their licence).
Each case runs the same command line through papermill's CLI and ours, on real kernels, and checks:
the same exit class (0, or an error), the same injected cell (so the same typed values), an output
that validates with ``nbformat.validate``, papermill's notebook and cell metadata present with the
same keys and cell statuses, and the same error-marker cells. ``test_parity_table`` prints the table
(case → papermill → ours) with ``-s``; ``test_papermill_engine`` runs ``papermill --engine agentstack``.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data" / "papermill"
MARKER = "papermill-error-cell-tag"

B64 = base64.b64encode(b"msg: from-base64\n").decode()
CASES: dict[str, tuple[str, list[str]]] = {
    "simple_execute": ("simple_execute", ["-p", "msg", "hello"]),
    "typed -p values": ("complex_parameters", ["-p", "msg", "[1, 2]", "-p", "a", "nan", "-p", "c", "true",
                                               "-p", "d", "-7"]),
    "-y and -r": ("complex_parameters", ["-y", "{b: [1, {x: null}], c: true}", "-r", "msg", "3"]),
    "-b base64": ("simple_execute", ["-b", B64]),
    "--inject-paths": ("simple_execute", ["--inject-paths"]),
    "no parameters cell": ("no_parameters", ["-p", "msg", "x"]),
    "nbformat 4.4 gets ids": ("nb_version_4.4", ["-p", "var", "5"]),
    "--prepare-only": ("result_no_exec", ["-p", "foo", "2", "--prepare-only"]),
    "--report-mode": ("report_mode_test", ["-p", "a", "3", "--report-mode"]),
    "R translator": ("notimplemented_translator", ["-p", "msg", "hi", "--prepare-only"]),
    "sys.exit()": ("sysexit", []),
    "sys.exit(0)": ("sysexit0", []),
    "raise SystemExit": ("systemexit", []),
    "sys.exit(1)": ("sysexit1", []),
    "stale error markers": ("broken1", []),
    "error after a good cell": ("broken2", []),
    "Python 2 syntax": ("broken", []),
    "unknown line magic": ("line_magic_error", []),
    "logging cells": ("test_logging", []),
    "no kernelspec, -k": ("blank-vscode", ["-k", "python3"]),
    "plain notebook": ("test_notebooknode_io", []),
}


def _papermill(args: list[str]) -> int:
    from papermill.cli import papermill

    return CliRunner().invoke(papermill, args).exit_code


def _ours(args: list[str]) -> int:
    from agentstack_lab.cli.workflow import run_command

    return CliRunner().invoke(run_command, args).exit_code


def _injected(nb) -> str | None:
    return next((c.source for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])), None)


def _markers(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if MARKER in c.metadata.get("tags", [])]


def _statuses(nb) -> list[str | None]:
    return [c.metadata.get("papermill", {}).get("status") for c in nb.cells]


_RESULTS: dict[str, tuple[int, int, str]] = {}


@pytest.mark.parametrize("case", CASES)
def test_parity_with_papermill(case, workdir, monkeypatch):
    name, args = CASES[case]
    codes = {}
    for who, run in (("theirs", _papermill), ("ours", _ours)):  # the same paths in two folders
        (workdir / who).mkdir(parents=True)
        shutil.copy(DATA / f"{name}.ipynb", workdir / who / "in.ipynb")
        monkeypatch.chdir(workdir / who)
        codes[who] = run(["in.ipynb", "out.ipynb", *args])
    theirs_code, ours_code = codes["theirs"], codes["ours"]
    theirs = nbformat.read(workdir / "theirs" / "out.ipynb", 4)
    ours = nbformat.read(workdir / "ours" / "out.ipynb", 4)
    _RESULTS[case] = (theirs_code, ours_code, _injected(ours) or "")
    assert (theirs_code == 0) == (ours_code == 0), (theirs_code, ours_code)
    nbformat.validate(ours)
    assert _injected(ours) == _injected(theirs)
    assert ours.metadata.papermill.keys() == theirs.metadata.papermill.keys()
    assert ours.metadata.papermill["parameters"] == theirs.metadata.papermill["parameters"]
    assert ours.metadata.papermill.get("default_parameters") == theirs.metadata.papermill.get("default_parameters")
    assert ours.metadata.papermill["version"].startswith("agentstack-lab ")  # what ran it
    assert bool(ours.metadata.papermill.get("exception")) == bool(theirs.metadata.papermill.get("exception"))
    assert _markers(ours) == _markers(theirs)
    if "--prepare-only" not in args:
        assert _statuses(ours) == _statuses(theirs)
        assert [c.get("outputs") == [] for c in ours.cells] == [c.get("outputs") == [] for c in theirs.cells]
    if "--report-mode" in args:
        hidden = [c.metadata.get("jupyter", {}).get("source_hidden") for c in ours.cells]
        assert hidden == [c.metadata.get("jupyter", {}).get("source_hidden") for c in theirs.cells]


def test_parity_table():
    """The table of the closing note (print with -s): case → papermill's exit code → ours."""
    if not _RESULTS:
        pytest.skip("the parity cases did not run in this session")
    print("\n| case | papermill | agentstack-lab |\n| --- | --- | --- |")
    for case, (theirs, ours, _) in _RESULTS.items():
        print(f"| {case} | {theirs} | {ours} |")
    assert all((t == 0) == (o == 0) for t, o, _ in _RESULTS.values())


def test_papermill_engine(workdir):
    """``papermill --engine agentstack``: papermill's CLI, our cell execution; papermill's exit codes."""
    shutil.copy(DATA / "simple_execute.ipynb", workdir / "in.ipynb")
    shutil.copy(DATA / "sysexit1.ipynb", workdir / "fails.ipynb")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell("print('before')"),
                nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")]
    nbformat.write(nb, workdir / "dies.ipynb")
    nb.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(30)")]
    nbformat.write(nb, workdir / "slow.ipynb")

    def papermill(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "papermill", "--engine", "agentstack", *args], cwd=workdir,
                              capture_output=True, text=True, timeout=120)

    ok = papermill("in.ipynb", "out.ipynb", "-p", "msg", "hello", "--log-output")
    assert ok.returncode == 0, ok.stderr
    assert "hello" in ok.stderr  # --log-output, through papermill's logger
    out = nbformat.read(workdir / "out.ipynb", 4)
    nbformat.validate(out)
    assert _injected(out) == '# Parameters\nmsg = "hello"\n'
    assert out.cells[2].outputs[0]["text"] == "hello\n" and out.metadata.papermill["exception"] is None
    assert "language_info" in out.metadata and out.cells[2].metadata.papermill["status"] == "completed"

    fails = papermill("fails.ipynb", "fails.out.ipynb")
    assert fails.returncode == 1 and "PapermillExecutionError" in fails.stderr
    assert _markers(nbformat.read(workdir / "fails.out.ipynb", 4)) == [0, 2]  # top, and before sys.exit(1)

    dies = papermill("dies.ipynb", "dies.out.ipynb")
    assert dies.returncode == 138, dies.stderr  # papermill's code for a dead kernel
    assert "kernel died while running cell 2" in dies.stderr

    slow = papermill("slow.ipynb", "slow.out.ipynb", "--execution-timeout", "1")
    assert slow.returncode == 1, slow.stderr
    timed_out = nbformat.read(workdir / "slow.out.ipynb", 4)  # saved, with why the cell stopped
    assert timed_out.cells[-1].outputs[-1]["ename"] == "CellTimeoutError"
    assert "exceeded the per-cell timeout of 1s" in timed_out.cells[-1].outputs[-1]["evalue"]
