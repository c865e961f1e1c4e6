"""papermill's own test notebooks, run by real papermill and by ``agentstack-lab workflow run``, compared.

The notebooks are papermill's (``tests/data/papermill``, copied at a fixed commit with their licence).
Each case runs the same command line through papermill's CLI and ours, on real kernels, and checks:
the same exit class (0, or an error), the same injected cell (so the same typed values), an output
that validates with ``nbformat.validate``, papermill's notebook and cell metadata present with the
same keys and cell statuses, and the same error-marker cells. ``test_parity_table`` prints the table
(case → papermill's exit code, injected cell, validity → ours) with ``-s``, and writes it to the file
named by ``PARITY_TABLE`` when set; ``test_papermill_engine`` runs ``papermill --engine agentstack``.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from tests.notebook_helpers import valid_notebook

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


PARAMETER_FLAGS = {"-p", "-y", "-b", "-r", "-f", "--inject-paths"}


@dataclass
class Side:
    """One side of a case: its exit code, its injected cell, and whether its output validates as written."""

    code: int
    injected: str | None
    valid: str  # "valid", or the first line of why not


_RESULTS: dict[str, tuple[Side, Side, bool]] = {}   # case → papermill, ours, parameters given


def _validity(path: Path) -> str:
    try:
        valid_notebook(path)
    except Exception as exc:  # the schema's or valid_notebook's own complaint, kept for the table
        return "invalid: " + (str(exc).splitlines() or [type(exc).__name__])[0]
    return "valid"


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
    _RESULTS[case] = (Side(theirs_code, _injected(theirs), _validity(workdir / "theirs" / "out.ipynb")),
                      Side(ours_code, _injected(ours), _validity(workdir / "ours" / "out.ipynb")),
                      bool(PARAMETER_FLAGS & set(args)))
    assert (theirs_code == 0) == (ours_code == 0), (theirs_code, ours_code)
    assert _RESULTS[case][1].valid == "valid"   # as written, against its own version's schema
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


def parity_table(results: dict[str, tuple[Side, Side, bool]]) -> str:
    """Markdown: case → papermill (exit code, injected cell, valid) → ours (the same, injected compared to papermill's).

    papermill's injected cell is ok when it is there exactly when the command line gives parameters;
    ours is ok when it is papermill's, character for character.
    """
    def cell(side: Side, ok: bool) -> str:
        injected = "none" if side.injected is None else "injected"
        return f"exit {side.code}, {injected} {'ok' if ok else 'WRONG'}, {side.valid}"

    lines = ["| case | papermill (exit, injected cell, valid) | agentstack-lab (exit, injected cell, valid) |",
             "| --- | --- | --- |"]
    for case, (theirs, ours, given) in results.items():
        lines.append(f"| {case} | {cell(theirs, (theirs.injected is not None) == given)} | "
                     f"{cell(ours, ours.injected == theirs.injected)} |")
    return "\n".join(lines) + "\n"


def test_parity_table():
    """The table of the closing note (printed with -s; written to the file $PARITY_TABLE names, if set)."""
    if not _RESULTS:
        pytest.skip("the parity cases did not run in this session")
    table = parity_table(_RESULTS)
    print("\n" + table)
    if os.environ.get("PARITY_TABLE"):
        Path(os.environ["PARITY_TABLE"]).write_text(table, encoding="utf-8")
    assert all((t.code == 0) == (o.code == 0) and o.injected == t.injected and o.valid == "valid"
               for t, o, _ in _RESULTS.values()), table


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
    out = valid_notebook(workdir / "out.ipynb")
    assert _injected(out) == '# Parameters\nmsg = "hello"\n'
    assert out.cells[2].outputs[0]["text"] == "hello\n" and out.metadata.papermill["exception"] is None
    assert "language_info" in out.metadata and out.cells[2].metadata.papermill["status"] == "completed"

    fails = papermill("fails.ipynb", "fails.out.ipynb")
    assert fails.returncode == 1 and "PapermillExecutionError" in fails.stderr
    assert _markers(valid_notebook(workdir / "fails.out.ipynb")) == [0, 2]  # top, and before sys.exit(1)

    dies = papermill("dies.ipynb", "dies.out.ipynb")
    assert dies.returncode == 138, dies.stderr  # papermill's code for a dead kernel
    assert "kernel died while running cell 2" in dies.stderr

    slow = papermill("slow.ipynb", "slow.out.ipynb", "--execution-timeout", "1")
    assert slow.returncode == 1, slow.stderr
    timed_out = valid_notebook(workdir / "slow.out.ipynb")  # saved, with why the cell stopped
    assert timed_out.cells[-1].outputs[-1]["ename"] == "CellTimeoutError"
    assert "exceeded the per-cell timeout of 1s" in timed_out.cells[-1].outputs[-1]["evalue"]


def test_papermill_engine_autosaves_a_long_cell(workdir):
    """papermill's ``--autosave-cell-every`` through our engine: a long cell's outputs so far reach OUT."""
    from tests.test_workflows_papermill_cli import _LONG_CELL, _read, _running, _until

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell(_LONG_CELL)]
    nbformat.write(nb, workdir / "long.ipynb")
    with _running("papermill", "--engine", "agentstack", "long.ipynb", "out.ipynb", "--autosave-cell-every", "1",
                  cwd=workdir) as proc:
        saved = _until(lambda: (got := _read(workdir / "out.ipynb")) and got.cells[0].outputs and got, proc,
                       "no autosave during the long cell")
        assert saved.cells[0].outputs[0]["text"].startswith("first part\n")
        (workdir / "go").touch()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "done" in "".join(o.get("text", "") for o in valid_notebook(workdir / "out.ipynb").cells[0].outputs)
