"""papermill's command line, spelled as papermill spells it, through ``agentstack-lab workflow run`` on real kernels.

Each test runs the command as a user does (a subprocess through the root command) and reads what it
wrote with nbformat: the positional IN OUT form, ``-`` for stdin and stdout, ``-y``/``-b``/``-f``/
``-p``/``-r`` merged in papermill's order, ``--prepare-only``, ``--report-mode``, ``--inject-paths``,
``--log-output`` and the stream files, ``--help-notebook``, ``--version``, a clean ``sys.exit()``,
and parameters rendered for an R kernel.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

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
    out = nbformat.read(workdir / "out.ipynb", 4)
    nbformat.validate(out)
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
    out = nbformat.reads(proc.stdout, 4)  # stdout holds the notebook and nothing else
    nbformat.validate(out)
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
        out = nbformat.read(workdir / "x.out.ipynb", 4)
        nbformat.validate(out)
        assert "after" not in _text(out) and "before" in _text(out)
        if expected == 0:
            assert "stopped cleanly by SystemExit in cell 2" in proc.stderr, proc.stderr


def test_prepare_only_report_mode_and_injected_paths(workdir):
    _nb(workdir / "in.ipynb", ["print(PAPERMILL_OUTPUT_PATH)"])
    proc = run("in.ipynb", "out.ipynb", "--prepare-only", "--inject-paths", "-p", "x", "2", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "prepared, not executed" in proc.stderr and "not declared" not in proc.stderr
    out = nbformat.read(workdir / "out.ipynb", 4)
    nbformat.validate(out)
    assert out.cells[1].source == ('# Parameters\nPAPERMILL_INPUT_PATH = "in.ipynb"\n'
                                   'PAPERMILL_OUTPUT_PATH = "out.ipynb"\nx = 2\n')
    assert all(c.get("outputs") == [] for c in out.cells)  # nothing ran
    proc = run("in.ipynb", "rep.ipynb", "--report-mode", "--inject-output-path", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    rep = nbformat.read(workdir / "rep.ipynb", 4)
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
    out = nbformat.read(workdir / "r.out.ipynb", 4)
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
    out = nbformat.read(workdir / "new.ipynb", 4)
    nbformat.validate(out)
    assert out.nbformat_minor >= 5 and all("id" in c for c in out.cells)
