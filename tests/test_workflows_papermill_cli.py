"""papermill's command line, spelled as papermill spells it, through ``agentstack-lab workflow run`` on real kernels.

Each test runs the command as a user does (a subprocess through the root command) and reads what it
wrote with nbformat: the positional IN OUT form, ``-`` for stdin and stdout, ``-y``/``-b``/``-f``/
``-p``/``-r`` merged in papermill's order, ``--prepare-only``, ``--report-mode``, ``--inject-paths``,
``--log-output`` and the stream files, ``--help-notebook``, ``--version``, a clean ``sys.exit()``,
and parameters rendered for an R kernel. Every notebook the command writes validates, byte for byte as
written (``valid_notebook``): from nbformat 4.2/4.4 inputs without cell ids, with parameters injected
or not, error markers, failed, timed-out, killed and never-started runs, report mode, ``--prepare-only``,
stdin to stdout, rich outputs, an nbformat 3 input and ``--batch``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.notebook_helpers import valid_notebook

pytestmark = pytest.mark.slow


def _nb(path: Path, sources: list[str], params: str | None = "x = 1\nname = 'a'") -> Path:
    nb = nbformat.v4.new_notebook()
    cells = []
    if params is not None:
        cells.append(nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}))
    nb.cells = cells + [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "workflow", "run", *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "NO_COLOR": "1"})


def _text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_in_out_positional_form_writes_out_and_typed_values_follow_papermill(workdir):
    _nb(workdir / "in.ipynb", ["print(repr(x), repr(name), repr(items), repr(flag))"],
        params="x = 1\nname = 'a'\nitems = []\nflag = False")
    b64 = base64.b64encode(b"{x: 5, name: from-b}").decode()
    (workdir / "p.yaml").write_text("name: from-f\n")
    proc = run("in.ipynb", "out.ipynb", "-b", b64, "-f", "p.yaml", "-y", "{items: [1, 2], flag: true}",
               "-p", "x", "[1, 2]", "-p", "name", "nan", "-r", "name", "raw", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = valid_notebook(workdir / "out.ipynb")
    # -p "[1, 2]" is a string, as papermill; -r wins last; -y keeps YAML's typing
    assert _text(out) == "'[1, 2]' 'raw' [1, 2] True\n"
    assert out.metadata.papermill["parameters"] == {"x": "[1, 2]", "name": "raw", "items": [1, 2], "flag": True}
    assert out.metadata.papermill["input_path"] == "in.ipynb" and out.metadata.papermill["output_path"] == "out.ipynb"
    assert not (workdir / "in.executed.ipynb").exists()  # OUT is the output, not a second input
    assert nbformat.read(workdir / "in.ipynb", 4).cells[1].outputs == []  # the input is untouched


def test_two_notebooks_with_batch_are_two_inputs(workdir):
    _nb(workdir / "a.ipynb", ["print('A')"], params=None)
    _nb(workdir / "b.ipynb", ["print('B')"], params=None)
    proc = run("a.ipynb", "b.ipynb", "--batch", "-o", "runs", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "2 runs" in proc.stderr and {p.name for p in (workdir / "runs").glob("*.ipynb")} == {"a.ipynb", "b.ipynb"}
    assert nbformat.read(workdir / "b.ipynb", 4).cells[0].outputs == []  # read, never overwritten


def test_dash_reads_stdin_and_writes_stdout_with_status_on_stderr(workdir):
    _nb(workdir / "in.ipynb", ["print(x * 2)"])
    proc = run("-", "-", "-p", "x", "21", cwd=workdir, stdin=(workdir / "in.ipynb").read_text())
    assert proc.returncode == 0, proc.stderr
    out = valid_notebook(proc.stdout)  # stdout holds the notebook and nothing else
    assert _text(out) == "42\n" and "PASS" in proc.stderr
    empty = run("-", "out.ipynb", cwd=workdir, stdin="")
    assert empty.returncode == 2 and "error: '-': nothing on stdin" in empty.stderr
    junk = run("-", "out.ipynb", cwd=workdir, stdin="{not json")
    assert junk.returncode == 2 and "error: '-': stdin is not a notebook" in junk.stderr
    assert not (workdir / "out.ipynb").exists()


def test_sys_exit_zero_stops_cleanly_and_sys_exit_one_is_an_error(workdir):
    for code, expected in (("sys.exit()", 0), ("sys.exit(0)", 0), ("raise SystemExit", 0), ("sys.exit(1)", 2)):
        _nb(workdir / "x.ipynb", ["import sys\nprint('before')", code, "print('after')"], params=None)
        proc = run("x.ipynb", "x.out.ipynb", cwd=workdir)
        assert proc.returncode == expected, (code, proc.stderr)
        out = valid_notebook(workdir / "x.out.ipynb")
        assert "after" not in _text(out) and "before" in _text(out)
        if expected == 0:
            assert "stopped cleanly by SystemExit in cell 2" in proc.stderr, proc.stderr


def test_prepare_only_report_mode_and_injected_paths(workdir):
    _nb(workdir / "in.ipynb", ["print(PAPERMILL_OUTPUT_PATH)"])
    proc = run("in.ipynb", "out.ipynb", "--prepare-only", "--inject-paths", "-p", "x", "2", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "prepared, not executed" in proc.stderr and "not declared" not in proc.stderr
    out = valid_notebook(workdir / "out.ipynb")
    assert out.cells[1].source == ('# Parameters\nPAPERMILL_INPUT_PATH = "in.ipynb"\n'
                                   'PAPERMILL_OUTPUT_PATH = "out.ipynb"\nx = 2\n')
    assert all(c.get("outputs") == [] for c in out.cells)  # nothing ran
    proc = run("in.ipynb", "rep.ipynb", "--report-mode", "--inject-output-path", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    rep = valid_notebook(workdir / "rep.ipynb")
    assert all(c.metadata["jupyter"]["source_hidden"] for c in rep.cells if c.cell_type == "code")
    assert _text(rep) == "rep.ipynb\n"


def test_log_output_and_stream_files_get_each_output_as_it_arrives(workdir):
    _nb(workdir / "in.ipynb", ["import sys\nprint('to out')\nprint('to err', file=sys.stderr)", "40 + 2"],
        params=None)
    proc = run("in.ipynb", "out.ipynb", "--log-output", "--stdout-file", "o.txt", "--stderr-file", "e.txt",
               cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "to out\n" in proc.stderr and "to err\n" in proc.stderr and "42\n" in proc.stderr
    assert (workdir / "o.txt").read_text() == "to out\n" and (workdir / "e.txt").read_text() == "to err\n"
    quiet = run("in.ipynb", "out.ipynb", cwd=workdir)
    assert "to out" not in quiet.stderr


def test_progress_bar_counts_the_cells(workdir):
    _nb(workdir / "in.ipynb", ["a = 1", "b = 2"])
    proc = run("in.ipynb", "out.ipynb", "--progress-bar", "-p", "x", "3", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "Executing" in proc.stderr and "4/4 cells" in proc.stderr  # parameters, injected, two cells
    assert "Executing" not in run("in.ipynb", "out.ipynb", "--no-progress-bar", cwd=workdir).stderr


def test_help_notebook_version_and_log_level(workdir):
    _nb(workdir / "in.ipynb", ["pass"], params="alpha = 0.5\nname: str = 'x'")
    proc = run("in.ipynb", "--help-notebook", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "Parameters inferred for notebook 'in.ipynb':" in proc.stdout
    assert "  alpha: (default 0.5)" in proc.stdout and "  name: (default 'x')" in proc.stdout
    _nb(workdir / "none.ipynb", ["pass"], params=None)
    none = run("none.ipynb", "--help-notebook", cwd=workdir)
    assert none.returncode == 1 and "No cell tagged 'parameters'" in none.stdout
    version = run("--version", cwd=workdir)
    assert version.returncode == 0 and version.stdout.startswith("agentstack-lab ")
    bad = run("in.ipynb", "--log-level", "LOUD", cwd=workdir)
    assert bad.returncode == 2 and "--log-level" in bad.stderr


def test_parameters_are_rendered_in_the_kernels_language(workdir):
    """An R notebook gets R source (papermill's translator); no R kernel is needed to prepare it."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x <- 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("print(x)")]
    nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    nbformat.write(nb, workdir / "r.ipynb")
    proc = run("r.ipynb", "r.out.ipynb", "--prepare-only", "-y", "{x: 2, ok: true, none: null, v: [1, a]}",
               cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = valid_notebook(workdir / "r.out.ipynb")
    assert out.cells[1].source == '# Parameters\nx = 2\nok = TRUE\nnone = NULL\nv = list(1, "a")\n'
    unknown = run("r.ipynb", "u.ipynb", "--prepare-only", "-l", "cobol", "-k", "cobol-kernel", "-p", "x", "1",
                  cwd=workdir)
    assert unknown.returncode == 2 and "no parameter translator for kernel 'cobol-kernel'" in unknown.stderr


def test_an_older_notebook_is_upgraded_to_validate(workdir):
    nb = nbformat.v4.new_notebook()
    nb.nbformat_minor = 4
    nb.cells = [nbformat.v4.new_code_cell("print(x)")]
    for c in nb.cells:
        del c["id"]
    (workdir / "old.ipynb").write_text(json.dumps(nb))
    proc = run("old.ipynb", "new.ipynb", "-p", "x", "1", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = valid_notebook(workdir / "new.ipynb")
    assert out.nbformat_minor == 5


def _old(path: Path, minor: int, sources: list[str], params: str | None = "x = 1") -> Path:
    """A notebook as an nbformat 4.``minor`` writer left it: no cell ids, sources as line lists, stale outputs."""
    cells: list[dict] = [{"cell_type": "markdown", "metadata": {}, "source": ["# An old notebook\n", "no cell ids"]}]
    if params is not None:
        cells.append({"cell_type": "code", "execution_count": 1, "metadata": {"tags": ["parameters"]},
                      "outputs": [], "source": params.splitlines(keepends=True)})
    for i, source in enumerate(sources, start=2):
        cells.append({"cell_type": "code", "execution_count": i, "metadata": {"collapsed": False},
                      "outputs": [{"name": "stdout", "output_type": "stream", "text": ["stale output\n"]}],
                      "source": source.splitlines(keepends=True)})
    cells.append({"cell_type": "raw", "metadata": {}, "source": "raw text"})
    nb = {"cells": cells, "nbformat": 4, "nbformat_minor": minor, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}}}
    valid_notebook(json.dumps(nb))  # a valid 4.minor notebook to start from
    path.write_text(json.dumps(nb, indent=1))
    return path


RICH = ("from IPython.display import HTML, clear_output, display\nh = display(HTML('<b>a</b>'), display_id=True)\n"
        "h.update(HTML('<i>b</i>'))\nimport sys\nprint('to err', file=sys.stderr)\nprint('gone')\n"
        "clear_output(wait=True)\nprint('kept')")
# case: (input minor, cells, command line after IN, exit code, what the written notebook shows)
WRITTEN = {
    "4.2, parameters injected": (2, ["print(x)"], ["out.ipynb", "-p", "x", "5"], 0, "5\n"),
    "4.4, nothing injected": (4, ["print(x)"], ["out.ipynb"], 0, "1\n"),
    "4.2, failed check (FAIL)": (2, ["assert x == 2, 'x is not 2'", "print('never')"], ["out.ipynb", "-p", "x", "3"],
                                 1, "markers"),
    "4.4, crash with error markers": (4, ["print('ran')", "undefined_name", "print('never')"], ["out.ipynb"], 2,
                                      "markers"),
    "4.2, cell timed out": (2, ["import time\ntime.sleep(60)"], ["out.ipynb", "--cell-timeout", "1"], 2,
                            "CellTimeoutError"),
    "4.2, run timed out": (2, ["import time\ntime.sleep(60)"], ["out.ipynb", "--timeout", "8"], 2, "CellTimeoutError"),
    "4.2, kernel killed": (2, ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"], ["out.ipynb"], 2,
                           "DeadKernelError"),
    "4.2, no such kernel": (2, ["print(x)"], ["out.ipynb", "-k", "no-such-kernel", "-p", "x", "2"], 2, ""),
    "4.2, report mode": (2, ["print(x)"], ["out.ipynb", "--report-mode", "-p", "x", "4"], 0, "4\n"),
    "4.2, --prepare-only": (2, ["print(x)"], ["out.ipynb", "--prepare-only", "-p", "x", "6"], 0, ""),
    "4.2, stdin to stdout": (2, ["print(x)"], ["-", "-p", "x", "7"], 0, "7\n"),
    "4.4, rich outputs": (4, [RICH, "40 + 2"], ["out.ipynb"], 0, "kept\n"),
    "4.4, not injected (no translator)": (4, ["print(x)"], ["out.ipynb", "--prepare-only", "-k", "cobol", "-l", "cobol",
                                                            "-p", "x", "1"], 2, ""),
}


@pytest.mark.parametrize("case", WRITTEN)
def test_every_notebook_written_validates(case, workdir):
    minor, sources, args, code, shows = WRITTEN[case]
    src = _old(workdir / "in.ipynb", minor, sources)
    stdin = src.read_text() if args[0] == "-" else None
    proc = run("-" if stdin else "in.ipynb", *args, cwd=workdir, stdin=stdin)
    assert proc.returncode == code, proc.stderr
    out = valid_notebook(proc.stdout if stdin else workdir / "out.ipynb")
    injected = [c for c in out.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == ("-p" in args and "cobol" not in args)
    # read for a run, an older notebook is upgraded to 4.5 (cell ids), as papermill's load does; one that
    # could not be parameterised is written back as it was read, with its own version
    assert out.nbformat_minor == (minor if "cobol" in args else 5)
    code_cells = [c for c in out.cells if c.cell_type == "code"]
    if shows == "markers":  # papermill's two marker cells: at the top, and before the failing cell
        marked = [i for i, c in enumerate(out.cells) if "papermill-error-cell-tag" in c.metadata.get("tags", [])]
        assert len(marked) == 2 and marked[0] == 0 and "stale output" not in str(out.cells[-2].outputs)
    elif shows.endswith("Error"):
        assert code_cells[-1].outputs[-1]["ename"] == shows
    elif shows:
        assert "".join(o.get("text", "") for c in code_cells for o in c.outputs) == shows
    if "--report-mode" in args:
        assert all(c.metadata["jupyter"]["source_hidden"] for c in code_cells)
    if "--prepare-only" in args:  # nothing ran: no cell has an output of this run
        assert {o.get("text") for c in code_cells for o in c.outputs} <= {"stale output\n"}


def test_nbformat_3_and_batch_outputs_validate(workdir):
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": "", "kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}, "worksheets": [{"metadata": {}, "cells": [
            {"cell_type": "code", "input": "x = 1", "language": "python", "metadata": {"tags": ["parameters"]},
             "outputs": [], "prompt_number": 1},
            {"cell_type": "code", "input": "print(x)", "language": "python", "metadata": {}, "outputs": [],
             "prompt_number": 2}]}]}
    (workdir / "v3.ipynb").write_text(json.dumps(v3))
    _old(workdir / "v42.ipynb", 2, ["print(x)"])
    proc = run("v3.ipynb", "out.ipynb", "-p", "x", "8", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = valid_notebook(workdir / "out.ipynb")
    assert (out.nbformat, out.nbformat_minor) == (4, 5) and out.cells[-1].outputs[0]["text"] == "8\n"
    proc = run("v3.ipynb", "v42.ipynb", "--batch", "-o", "runs", "-p", "x", "9", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    for name in ("v3.ipynb", "v42.ipynb"):
        out = valid_notebook(workdir / "runs" / name)
        assert "9\n" in [o.get("text") for c in out.cells if c.cell_type == "code" for o in c.outputs]


_LONG_CELL = ("import pathlib, time\npathlib.Path('started').touch()\nprint('first part', flush=True)\n"
              "while not pathlib.Path('go').exists():\n    print('.', end='', flush=True)\n    time.sleep(0.2)\n"
              "print('done')")


def _until(check, proc: subprocess.Popen, what: str):
    import time

    deadline = time.monotonic() + 120
    while not (got := check()):
        assert proc.poll() is None and time.monotonic() < deadline, f"{what}: {proc.communicate()}"
        time.sleep(0.05)
    return got


@contextlib.contextmanager
def _running(*args: str, cwd: Path):
    """``python -m ARGS`` in ``cwd``, killed at the end if the test left it running."""
    proc = subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _read(path: Path):
    try:
        return nbformat.read(path, as_version=4)
    except (OSError, ValueError):   # not written yet
        return None


@pytest.mark.parametrize("args", [(), ("--autosave-cell-every", "1"), ("--no-request-save-on-cell-execute",)])
def test_the_output_notebook_is_saved_while_it_runs(workdir, args):
    """papermill's --request-save-on-cell-execute (on by default) and --autosave-cell-every (30 s by default): a
    reader of OUT sees the cells that ran, the running one, and with autosave a long cell's outputs so far,
    before the run ends; with --no-request-save-on-cell-execute OUT is written at the end only."""
    _nb(workdir / "in.ipynb", ["a = 40 + 2\na", _LONG_CELL], params=None)
    with _running("agentstack_lab.cli", "workflow", "run", "in.ipynb", "out.ipynb", *args, cwd=workdir) as proc:
        _until(lambda: (workdir / "started").exists(), proc, "the long cell never started")
        saved = _read(workdir / "out.ipynb")
        if "--no-request-save-on-cell-execute" in args:
            assert saved is None
        else:   # saved as the long cell started: the first cell done, the long one running
            assert saved.cells[0].outputs[0]["data"]["text/plain"] == "42"
            assert [c.metadata["papermill"]["status"] for c in saved.cells] == ["completed", "running"]
        if "--autosave-cell-every" in args:   # an output a second after the last save saves it
            saved = _until(lambda: (nb := _read(workdir / "out.ipynb")) and nb.cells[1].outputs and nb, proc,
                           "no autosave during the long cell")
            assert saved.cells[1].outputs[0]["text"].startswith("first part\n")
            assert saved.cells[1].metadata["papermill"]["status"] == "running"
        (workdir / "go").touch()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    final = valid_notebook(workdir / "out.ipynb")
    assert "done" in "".join(o.get("text", "") for o in final.cells[1].outputs)
    assert not list(workdir.glob(".out.ipynb.*"))   # no temporary file left beside it


def test_save_options_are_checked_and_for_one_run(workdir):
    _nb(workdir / "in.ipynb", ["a = 1"], params=None)
    bad = run("in.ipynb", "out.ipynb", "--autosave-cell-every", "-1", cwd=workdir)
    assert bad.returncode == 2 and "--autosave-cell-every must be between 0" in bad.stderr
    several = run("in.ipynb", "in.ipynb", "--batch", "--autosave-cell-every", "5", cwd=workdir)
    assert several.returncode == 2 and "--autosave-cell-every is for one run" in several.stderr
    assert not (workdir / "out.ipynb").exists()
