"""Workflow triggers never storm (issue 25 item 11): a workflow a trigger started fires no trigger itself;
a trigger whose notebook is missing fails ``config validate`` in one line, and one that fails as it
fires prints one line on the firing process's stderr while the run goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from agentstack_lab.engine import AgentRun
from agentstack_lab.hooks import TRIGGERED_ENV, WorkflowTrigger
from agentstack_lab.plugins import hookimpl
from agentstack_lab.workspace import Workspace

SCRIPT = Path(sys.executable).parent / "agentstack-lab"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
VERDICT = ("PASS ", "FAIL ", "ERROR ")

# The workflow a trigger starts: it notes its kernel's and its own process's pids, then runs an agent at
# depth 0 in the same workspace (as code_review's reviewer does), which is what matched the trigger. Only
# the first two runs start an agent, so the old code's storm stops after three workflows: bounded.
AGAIN = '''import os
from pathlib import Path
from agentstack_lab.engine import AgentRun
from agentstack_lab.workspace import Workspace

runs = Path("runs.txt")
with runs.open("a") as f:
    f.write(f"{os.getpid()} {os.getppid()}\\n")
if len(runs.read_text().splitlines()) < 3:
    with Workspace.open(announce=False) as ws:
        run = AgentRun("review the change", workspace=ws, provider="scripted", options={"subagents": False})
        await run
    print("agent", run.status)
'''


def write_notebook(path: Path, source: str) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('target = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(source)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def cli(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(folder), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=folder)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _finished(log: Path) -> bool:
    lines = log.read_text(errors="replace").splitlines()
    return any(line.startswith(VERDICT) for line in lines)


@pytest.mark.slow
def test_a_workflow_started_by_a_trigger_fires_no_trigger(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    write_notebook(folder / "again.ipynb", AGAIN)
    (folder / "agentstack.config.json").write_text(json.dumps({"hooks": {"triggers": [
        {"id": "storm", "on": "post_task", "when": {"depth": 0}, "workflow": "again.ipynb"}]}}))
    workflows, runs = folder / ".agentstack" / "workflows", folder / "runs.txt"
    pids: set[int] = set()
    try:
        first = cli(folder, "agent", "run", "plan the launch", "--provider", "scripted", "--no-subagents")
        assert first.returncode == 0, first.stderr
        # every workflow started so far has printed its verdict (a workflow that starts another one does so
        # from its agent's post_task, before its own verdict line): nothing more can start
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            logs = list(workflows.glob("storm-*.log"))
            if logs and all(_finished(log) for log in logs):
                break
            time.sleep(0.2)
        logs = sorted(workflows.glob("storm-*.log"))
        text = "\n---\n".join(log.read_text(errors="replace") for log in logs)
        assert logs and all(_finished(log) for log in logs), text
        pids = {int(p) for line in runs.read_text().splitlines() for p in line.split()}
        assert len(logs) == 1, f"{len(logs)} workflows started, one expected:\n{text}"
        assert len(runs.read_text().splitlines()) == 1
        assert text.startswith("PASS ") and "agent completed" in (workflows / logs[0].name).with_suffix(
            ".ipynb").read_text(), text
    finally:  # leave no process behind, whichever way the test went
        pids |= {int(p) for line in (runs.read_text().splitlines() if runs.exists() else ()) for p in line.split()}
        deadline = time.monotonic() + 60
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not any(_alive(p) for p in pids)


async def test_no_trigger_fires_where_the_marker_is_set(tmp_path, monkeypatch):
    """In-process: with ``AGENTSTACK_TRIGGERED_BY`` set no condition is even evaluated."""
    seen: list[str] = []

    class Triggers:
        @hookimpl
        def register_workflow_triggers(self, register):
            register(WorkflowTrigger(id="t", condition=lambda c: seen.append(c.event) or False, workflow_id="x"))

    folder = tmp_path / "ws"
    folder.mkdir()
    monkeypatch.setenv(TRIGGERED_ENV, "storm")
    with Workspace.open(folder, announce=False) as ws:
        ws.plugins.register(Triggers(), name="triggers")
        await AgentRun("hi", workspace=ws, provider="scripted", options={"subagents": False})
    assert seen == []
    monkeypatch.delenv(TRIGGERED_ENV)
    with Workspace.open(folder, announce=False) as ws:
        ws.plugins.register(Triggers(), name="triggers")
        await AgentRun("hi", workspace=ws, provider="scripted", options={"subagents": False})
    assert seen == ["post_task"]


def validate(folder: Path, triggers: list[dict]) -> subprocess.CompletedProcess:
    (folder / "agentstack.config.json").write_text(json.dumps({"hooks": {"triggers": triggers}}))
    return subprocess.run([*CLI, "config", "validate", str(folder / "agentstack.config.json")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_cwd(folder))


def tmp_cwd(folder: Path) -> Path:
    return folder.parent  # not the config's folder: paths are relative to the config file, not the cwd


@pytest.mark.slow
def test_validate_fails_on_a_trigger_whose_notebook_is_missing(tmp_path):
    folder = tmp_path / "ws"
    (folder / "flows").mkdir(parents=True)
    write_notebook(folder / "flows" / "ok.ipynb", "print('ok')")
    good = validate(folder, [{"id": "file", "workflow": "flows/ok.ipynb"}, {"id": "builtin", "workflow": "doc_sync"}])
    assert good.returncode == 0, good.stderr
    missing = validate(folder, [{"id": "file", "workflow": "flows/ok.ipynb"},
                                {"id": "after-run", "workflow": "flows/gone.ipynb"}])
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1, missing.stderr
    assert "hooks.triggers[1] (id 'after-run')" in missing.stderr
    assert str(folder.resolve() / "flows" / "gone.ipynb") in missing.stderr
    unknown = validate(folder, [{"id": "named", "workflow": "code_reveiw"}])
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "(id 'named')" in unknown.stderr and "code_reveiw" in unknown.stderr
    as_json = subprocess.run([*CLI, "config", "validate", "--json", str(folder / "agentstack.config.json")],
                             capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 1 and "code_reveiw" in json.loads(as_json.stdout)["error"]


@pytest.mark.slow
def test_a_trigger_failing_as_it_fires_prints_one_line(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "agentstack.config.json").write_text(json.dumps({"hooks": {"triggers": [
        {"id": "after-run", "on": "post_task", "when": {"depth": 0}, "workflow": "flows/gone.ipynb"}]}}))
    out = cli(folder, "agent", "run", "plan the launch", "--provider", "scripted", "--no-subagents")
    assert out.returncode == 0, out.stderr  # the run is not broken by its trigger
    lines = [line for line in out.stderr.splitlines() if "workflow trigger" in line]
    assert lines == [f"agentstack-lab: workflow trigger 'after-run' failed: could not start workflow "
                     f"'flows/gone.ipynb': notebook not found: {folder.resolve() / 'flows' / 'gone.ipynb'}"], out.stderr
    assert "Traceback" not in out.stderr
    assert not (folder / ".agentstack" / "workflows").exists()  # nothing was started


async def test_a_trigger_whose_condition_raises_prints_one_line(tmp_path, capsys):
    class Triggers:
        @hookimpl
        def register_workflow_triggers(self, register):
            register(WorkflowTrigger(id="picky", condition=lambda c: 1 / 0, workflow_id="x.ipynb"))

    folder = tmp_path / "ws"
    folder.mkdir()
    with Workspace.open(folder, announce=False) as ws:
        ws.plugins.register(Triggers(), name="triggers")
        run = AgentRun("hi", workspace=ws, provider="scripted", options={"subagents": False})
        await run
    assert run.status == "completed"
    err = capsys.readouterr().err
    assert err.splitlines() == ["agentstack-lab: workflow trigger 'picky' failed: its condition raised: "
                                "division by zero"], err
