"""Notebook workflows on real kernels: injection, papermill compatibility, exit codes, dead kernels,
timeouts, the kernel pool's isolation, the built-in workflows and the documented CLI example."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from agentstack_lab.workflows.execute import run_notebook
from agentstack_lab.workflows.schema import validate_report
from tests.notebook_helpers import valid_notebook

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
BUILTIN = REPO / "notebooks" / "workflows"


def _write(path: Path, sources: list[str], params: str | None = None) -> Path:
    nb = nbformat.v4.new_notebook()
    cells = []
    if params is not None:
        cell = nbformat.v4.new_code_cell(params)
        cell.metadata["tags"] = ["parameters"]
        cells.append(cell)
    cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def cli(*args: str, cwd: Path, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """``agentstack-lab workflow ARGS`` through the root command, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "workflow", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def _outputs(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_injected_values_arrive_typed_in_the_kernel(workdir):
    nb = _write(workdir / "typed.ipynb", [
        "assert (type(i), type(f), type(b), type(s), type(l), type(d)) == (int, float, bool, str, list, dict)\n"
        "assert n is None and l == [1, 'two', None] and d == {'k': [1.5, True]}\n"
        "print('ok', i, f, b, s)"],
        params="i = 0\nf = 0.0\nb = False\ns = ''\nl = []\nd = {}\nn = 1")
    (workdir / "p.yaml").write_text("d: {k: [1.5, true]}\nl: [1, two, null]\n")
    proc = cli("run", str(nb), "-p", "i", "42", "-p", "f", "2.5", "-p", "b", "True", "-r", "s", "007",
               "-p", "n", "None", "-f", "p.yaml", "-p", "extra", "1", "-o", "out.ipynb", "--report", "r.json",
               cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "warning: parameter 'extra' is not declared" in proc.stderr
    assert "[IPKernelApp]" not in proc.stderr  # the kernel process's own notices go to its log, not to us
    out = valid_notebook(workdir / "out.ipynb")
    assert "ok 42 2.5 True 007" in _outputs(out)
    assert out.cells[1].metadata.tags == ["injected-parameters"]
    assert out.metadata.papermill["parameters"]["s"] == "007"
    report = json.loads((workdir / "r.json").read_text())
    validate_report(report)
    assert report["verdict"] == "PASS" and report["execution"]["exitCode"] == 0


def test_papermill_notebook_runs_unchanged_and_matches_papermill(workdir):
    """A notebook written for papermill (parameters cell, plain code) gives the same result both ways."""
    import papermill

    nb = _write(workdir / "pm.ipynb", [
        "import math\nresult = {'area': round(math.pi * radius ** 2, 3), 'label': label.upper()}",
        "print(result)"], params="radius = 1.0\nlabel = 'unit'")
    papermill.execute_notebook(str(nb), str(workdir / "theirs.ipynb"), parameters={"radius": 2, "label": "two"},
                               progress_bar=False, kernel_name="python3")
    ours = asyncio.run(run_notebook(nb, parameters={"radius": 2, "label": "two"}, output=workdir / "ours.ipynb"))
    assert ours.exit_code == 0, ours.message
    theirs_nb = nbformat.read(workdir / "theirs.ipynb", 4)
    ours_nb = valid_notebook(workdir / "ours.ipynb")
    assert _outputs(ours_nb) == _outputs(theirs_nb) == "{'area': 12.566, 'label': 'TWO'}\n"
    tags = lambda nb: [c.metadata.get("tags", []) for c in nb.cells]  # noqa: E731
    assert tags(ours_nb) == tags(theirs_nb)
    assert ours_nb.metadata.papermill["parameters"] == theirs_nb.metadata.papermill["parameters"]


def _split_markers(nb):
    """papermill's error-marker cells, and the notebook's own cells."""
    marked = [c for c in nb.cells if "papermill-error-cell-tag" in c.metadata.get("tags", [])]
    return marked, [c for c in nb.cells if c not in marked]


def test_killed_kernel_is_an_error_naming_the_cell_with_partial_notebook(workdir):
    nb = _write(workdir / "die.ipynb", ["print('before')", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                                        "print('never')"])
    proc = cli("run", str(nb), "-o", "partial.ipynb", "--report", "r.json", "--timeout", "90", cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert "kernel died while running cell 2" in proc.stderr and "import os, signal" in proc.stderr
    partial = valid_notebook(workdir / "partial.ipynb")
    markers, cells = _split_markers(partial)
    assert [i for i, c in enumerate(partial.cells) if c in markers] == [0, 2]  # papermill's: top, before the cell
    assert cells[0].outputs[0]["text"] == "before\n" and cells[2].outputs == []
    assert cells[1].outputs[-1]["ename"] == "DeadKernelError"  # why it stopped, in the cell itself
    assert [c.metadata.papermill["status"] for c in cells] == ["completed", "failed", "pending"]
    report = json.loads((workdir / "r.json").read_text())
    assert report["execution"]["failingCell"]["index"] == 1 and report["verdict"] == "ERROR"  # not decided


@pytest.mark.parametrize(("flag", "expected"), [("--cell-timeout", "exceeded the per-cell timeout of 1s"),
                                                ("--timeout", "run exceeded its timeout of 6s")])
def test_timeouts_are_errors_naming_the_cell(workdir, flag, expected):
    # the whole-run timeout counts the kernel's start: leave room for a slow start on a busy machine
    nb = _write(workdir / "slow.ipynb", ["x = 1", "import time\ntime.sleep(60)"])
    proc = cli("run", str(nb), flag, "1" if flag == "--cell-timeout" else "6", cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "'import time'" in proc.stderr
    assert (workdir / "slow.executed.ipynb").exists()


def test_failed_assert_is_fail_a_crash_is_error_and_bad_input_errors(workdir):
    nb = _write(workdir / "bad.ipynb", ["assert 1 == 2, 'numbers disagree'"])
    proc = cli("run", str(nb), "--report", "assert.json", cwd=workdir)
    assert proc.returncode == 1 and "cell 1" in proc.stderr and "AssertionError: numbers disagree" in proc.stderr
    assert json.loads((workdir / "assert.json").read_text())["execution"]["status"] == "fail"
    crash = _write(workdir / "crash.ipynb", ["print('ran')", "result = undefined_name + 1", "print('never')"])
    proc = cli("run", str(crash), "-o", "crash-out.ipynb", "--report", "crash.json", cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert "cell 2" in proc.stderr and "NameError" in proc.stderr and "could not run" in proc.stderr
    partial = valid_notebook(workdir / "crash-out.ipynb")
    markers, cells = _split_markers(partial)
    assert len(markers) == 2 and cells[0].outputs[0]["text"] == "ran\n" and cells[2].outputs == []
    assert partial.metadata.papermill["exception"] is True
    report = validate_report(json.loads((workdir / "crash.json").read_text()))
    assert report["execution"]["status"] == "error" and report["execution"]["failingCell"]["number"] == 2
    missing = cli("run", "nowhere.ipynb", cwd=workdir)
    assert missing.returncode == 2 and "notebook not found: nowhere.ipynb" in missing.stderr
    badp = cli("run", str(nb), "-y", "{a: [1,", cwd=workdir)
    assert badp.returncode == 2 and "bad parameter: -y is not valid YAML" in badp.stderr
    badname = cli("run", str(nb), "-p", "not-valid", "1", cwd=workdir)
    assert badname.returncode == 2 and "not a valid Python identifier" in badname.stderr


def test_parallel_grid_uses_fresh_forked_kernels_that_share_nothing(workdir):
    nb = _write(workdir / "iso.ipynb", [
        "import os, sys\n"
        "assert 'leak' not in globals(), 'inherited a variable'\n"
        "assert 'wave' not in sys.modules, 'inherited an import'\n"
        "import wave\nleak = n\nprint('pid', os.getpid(), 'ppid', os.getppid())"], params="n = 0")
    (workdir / "grid.yaml").write_text("n: [1, 2, 3, 4, 5]\n")
    proc = cli("run", str(nb), "--grid", "grid.yaml", "--parallel", "2", "-o", "runs", "--report", "all.json",
               cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "5 runs (2 at a time): 5 PASS, 0 FAIL, 0 ERROR" in proc.stderr
    summary = json.loads((workdir / "all.json").read_text())["runs"]
    assert sorted(r["parameters"]["n"] for r in summary) == [1, 2, 3, 4, 5]
    pids, parents = set(), set()
    for run in summary:
        text = _outputs(nbformat.read(run["output"], 4))
        pid, ppid = map(int, re.search(r"pid (\d+) ppid (\d+)", text).groups())
        pids.add(pid)
        parents.add(ppid)
        validate_report(json.loads(Path(run["report"]).read_text()))
    assert len(pids) == 5  # a fresh process per run
    assert len(parents) == 1  # all forked from the one zygote, not started by us


def test_a_kernel_that_crashes_natively_is_reported_with_its_stack(workdir):
    """A segfault in a cell: the run's message quotes faulthandler's report of the crashing thread.

    ipykernel neither enables faulthandler nor keeps fd 2 on the kernel's log, so before this both a
    started and a forked kernel died with no last words at all.
    """
    nb = _write(workdir / "seg.ipynb", ["x = 1", "import ctypes\nctypes.string_at(0)"])
    (workdir / "two.yaml").write_text("n: [1, 2]\n")
    single = cli("run", str(nb), "--report", "one.json", cwd=workdir)        # a kernel started for the run
    forked = cli("run", str(nb), "--grid", "two.yaml", "--parallel", "2", "-o", "runs", "--report", "two.json",
                 cwd=workdir)                                                # kernels forked from the zygote
    assert single.returncode == forked.returncode == 2, single.stderr + forked.stderr
    messages = [json.loads((workdir / "one.json").read_text())["execution"]["message"]]
    messages += [r["message"] for r in json.loads((workdir / "two.json").read_text())["runs"]]
    for message in messages:
        assert "kernel died while running cell" in message and "import ctypes" in message
        assert "Fatal Python error: Segmentation fault" in message and "in string_at" in message, message


def _private_tmp(workdir: Path) -> dict[str, str]:
    """TMPDIR for a run: a fresh folder of this test, so what the run leaves there is its own."""
    tmp = workdir.parent / "tmpdir"
    tmp.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp)}


def test_doc_sync_finds_real_contradictions_and_passes_once_fixed(workdir):
    from agentstack_lab.workflows.demo import demo_docs_project

    # no target: the built-in sample, written to the workspace folder and re-used, nothing left in TMPDIR
    env = _private_tmp(workdir)
    for _ in range(2):
        sample = cli("run", str(BUILTIN / "doc_sync.ipynb"), "-p", "agent", "False", "--report", "sample.json",
                     cwd=workdir, env=env)
        assert sample.returncode == 1, sample.stderr
    assert json.loads((workdir / "sample.json").read_text())["parameters"]["target"] == str(
        workdir / ".agentstack" / "demo" / "doc-sync")
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    project = demo_docs_project(workdir / "proj")
    proc = cli("run", str(BUILTIN / "doc_sync.ipynb"), "-p", "target", str(project), "-p", "max_iterations", "2",
               "-o", "ds.ipynb", "--report", "ds.json", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    report = json.loads((workdir / "ds.json").read_text())
    validate_report(report)
    claims = {(f["file"], f["claim"]) for p in report["phases"] for f in p["findings"]}
    assert ("README.md", "refers to sample.wave") in claims
    assert ("guide.md", "links to setup.md") in claims
    assert report["iterations"] == 2 and report["summary"]["documentsScanned"] == 2
    agent = [p["artifacts"]["agent"] for p in report["phases"] if p["phase"] == "adversarial"]
    assert agent and agent[0]["offline"] and "sample.wave" in agent[0]["text"]
    # repair the docs; the same workflow now passes
    (project / "README.md").write_text("# Sample\n\nCall `sample.greet()`; see [guide](guide.md#install).\n")
    (project / "guide.md").write_text("# Guide\n\n## Install\n\nSee [the code](sample/__init__.py).\n")
    ok = cli("run", str(BUILTIN / "doc_sync.ipynb"), "-p", "target", str(project), "-o", "ds2.ipynb", cwd=workdir)
    assert ok.returncode == 0, ok.stderr


def test_code_review_loop_fixes_then_passes_or_fails_after_three(workdir):
    env = _private_tmp(workdir)
    proc = cli("run", str(BUILTIN / "code_review.ipynb"), "--report", "demo.json", cwd=workdir, env=env)
    assert proc.returncode == 0, proc.stderr
    demo = json.loads((workdir / "demo.json").read_text())
    assert demo["verdict"] == "PASS" and demo["iterations"] == 2
    # the built-in sample lives in the workspace folder, not in a new /tmp folder per run
    assert demo["parameters"]["target"] == str(workdir / ".agentstack" / "demo" / "code-review" / "loader.py")
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert "+    except Exception:" in demo["phases"][-1]["artifacts"]["diff"]
    (workdir / "risky.py").write_text("def run(code, seen=[]):\n    return eval(code)\n")
    bad = cli("run", str(BUILTIN / "code_review.ipynb"), "-p", "target", "risky.py", "-p", "agent", "False",
              "--report", "risky.json", cwd=workdir)
    assert bad.returncode == 1, bad.stderr
    risky = json.loads((workdir / "risky.json").read_text())
    assert risky["iterations"] == 3 and risky["verdict"] == "FAIL"
    assert [p["success"] for p in risky["phases"] if p["phase"] == "adversarial"] == [False, False, False]


def test_readme_example_runs_as_documented(workdir):
    """Every ``agentstack-lab workflow`` command in the workflows README runs and exits as it says."""
    text = (REPO / "agentstack_lab" / "workflows" / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    commands = [ln for b in blocks for ln in b.splitlines() if ln.startswith("agentstack-lab workflow")]
    assert commands
    (workdir / "notebooks").symlink_to(REPO / "notebooks")
    for command in commands:
        argv = shlex.split(command.split("  #")[0])
        expect = int(m.group(1)) if (m := re.search(r"# exit (\d)", command)) else 0
        proc = cli(*argv[2:], cwd=workdir)
        assert proc.returncode == expect, (command, proc.stderr)
    assert os.path.exists(workdir / "review.json")


def test_help_and_usage_errors_through_the_root_command(workdir):
    helped = cli("run", "--help", cwd=workdir)
    assert helped.returncode == 0 and "AssertionError" in helped.stdout and "--parallel N" in helped.stdout
    usage = cli("run", "x.ipynb", "-p", "only_a_name", cwd=workdir)
    assert usage.returncode == 2 and "requires 2 arguments" in usage.stderr
    assert cli("run", cwd=workdir).returncode == 2
    assert cli("run", "x.ipynb", "--parallel", "0", cwd=workdir).returncode == 2


def test_config_sets_cell_timeout_max_iterations_and_pool_size(workdir):
    (workdir / "agentstack.config.json").write_text(json.dumps(
        {"workflows": {"cell_timeout": 1, "max_iterations": 1, "pool_size": 1}}))
    slow = _write(workdir / "slow.ipynb", ["import time\ntime.sleep(30)"])
    proc = cli("run", str(slow), cwd=workdir)
    assert proc.returncode == 2 and "per-cell timeout of 1s" in proc.stderr, proc.stderr
    # the demo review passes on its second pass; the config allows one (a cell timeout a busy machine meets)
    (workdir / "agentstack.config.json").write_text(json.dumps(
        {"workflows": {"cell_timeout": 300, "max_iterations": 1, "pool_size": 1}}))
    proc = cli("run", str(BUILTIN / "code_review.ipynb"), "-p", "agent", "False", "--report", "cr.json", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    report = json.loads((workdir / "cr.json").read_text())
    assert report["maxIterations"] == 1 and report["iterations"] == 1 and report["verdict"] == "FAIL"
    fast = _write(workdir / "fast.ipynb", ["x = 1"])
    proc = cli("run", str(fast), str(fast), "-o", "runs", cwd=workdir)
    assert proc.returncode == 0 and "2 runs (1 at a time): 2 PASS" in proc.stderr, proc.stderr
    (workdir / "agentstack.config.json").write_text(json.dumps({"workflows": {"pool_size": 0}}))
    bad = cli("run", str(fast), cwd=workdir)
    assert bad.returncode == 2 and "workflows.pool_size" in bad.stderr, bad.stderr


def test_kernel_that_cannot_start_is_an_error_quoting_what_it_wrote(workdir):
    spec = workdir / "jp" / "kernels" / "broken"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", "import sys; sys.stderr.write('boom: no kernel here\\n'); sys.exit(3)",
                 "{connection_file}"], "display_name": "broken", "language": "python"}))
    nb = _write(workdir / "n.ipynb", ["x = 1"])
    proc = cli("run", str(nb), "--kernel", "broken", "-o", "n-out.ipynb", cwd=workdir,
               env={"JUPYTER_PATH": str(workdir / "jp")})
    assert proc.returncode == 2 and "kernel died before replying" in proc.stderr, proc.stderr
    assert "boom: no kernel here" in proc.stderr and (workdir / "n-out.ipynb").exists()


def test_readme_phase_api_example_runs_in_a_notebook(workdir):
    """The README's ``Workflow`` example, as one notebook cell: no CHANGELOG.md → a finding and FAIL (exit 1)."""
    text = (REPO / "agentstack_lab" / "workflows" / "README.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", text, re.S)
    nb = _write(workdir / "example.ipynb", [example])
    proc = cli("run", str(nb), "--report", "example.json", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    report = validate_report(json.loads((workdir / "example.json").read_text()))
    assert report["workflow"] == "my_check" and report["iterations"] == 3 and report["verdict"] == "FAIL"
    assert {f["claim"] for p in report["phases"] for f in p["findings"]} == {"a changelog exists"}
