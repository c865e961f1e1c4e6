"""Lifecycle hooks (issue 11 item 6): they fire in order for a run's session and its agents, a raising
hook is logged and isolated, ``plugins.disabled`` and ``hooks.<event>`` take effect, and a workflow
trigger starts a workflow notebook (a real ``agentstack-lab workflow run`` on a real kernel)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import nbformat
import pytest

from agentstack_lab.engine import AgentRun
from agentstack_lab.hooks import HookContext, WorkflowTrigger
from agentstack_lab.plugins import hookimpl
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace
from tests.test_engine import brain


class Recorder:
    """A plugin recording every lifecycle hook it receives."""

    def __init__(self):
        self.calls: list[tuple[str, str | None, str | None]] = []

    def _rec(self, context: HookContext) -> None:
        self.calls.append((context.event, context.agent_type if context.event.endswith("task") else None,
                           context.status))

    @hookimpl
    def session_start(self, context):
        self._rec(context)

    @hookimpl
    def session_end(self, context):
        self._rec(context)

    @hookimpl
    def pre_task(self, context):
        self._rec(context)

    @hookimpl
    def post_task(self, context):
        self._rec(context)

    @hookimpl
    def workflow(self, context):
        self.calls.append(("workflow", context.metadata["trigger"]["trigger"], context.status))


class Broken:
    @hookimpl
    def pre_task(self, context):
        raise RuntimeError("this hook is broken")


def workspace(folder: Path, config: dict | None = None, plugins=()) -> Workspace:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agentstack.config.json").write_text(json.dumps(config or {}))
    ws = Workspace.open(folder, announce=False)
    for obj, name in plugins:
        ws.plugins.register(obj, name=name)  # the workspace's own plugin manager, like an entry point's
    return ws


def two_level_brain():
    return brain(subs={"plan the launch": [("check the budget", "analyst")]})


async def test_hooks_fire_in_order_for_a_session_and_a_run(tmp_path):
    rec = Recorder()
    with workspace(tmp_path / "ws", plugins=[(rec, "recorder")]) as ws:
        run = AgentRun("plan the launch", workspace=ws, provider=ScriptedProvider(two_level_brain()),
                       agent_type="coordinator")
        await run
    assert rec.calls == [
        ("session_start", None, "pending"),
        ("pre_task", "coordinator", "pending"),
        ("pre_task", "analyst", "pending"),
        ("post_task", "analyst", "completed"),
        ("post_task", "coordinator", "completed"),
        ("session_end", None, "completed"),
    ]


async def test_a_raising_hook_is_logged_and_isolated(tmp_path, caplog):
    rec = Recorder()
    with workspace(tmp_path / "ws", plugins=[(Broken(), "broken"), (rec, "recorder")]) as ws, caplog.at_level(logging.ERROR, logger="agentstack_lab.hooks"):
        run = AgentRun("plan the launch", workspace=ws, provider=ScriptedProvider(two_level_brain()))
        await run
    assert run.status == "completed"
    assert [c[0] for c in rec.calls].count("pre_task") == 2  # the other plugin still ran, every time
    failures = [r for r in caplog.records if "pre_task hook broken failed" in r.getMessage()]
    assert len(failures) == 2 and all(r.exc_info and "this hook is broken" in str(r.exc_info[1]) for r in failures)


async def test_plugins_disabled_and_hook_switches_take_effect(tmp_path):
    rec = Recorder()
    with workspace(tmp_path / "ws", {"plugins": {"disabled": ["recorder"]}}, [(rec, "recorder")]) as ws:
        await AgentRun("hi", workspace=ws, provider="scripted", options={"subagents": False})
    assert rec.calls == []
    with workspace(tmp_path / "ws2", {"hooks": {"pre_task": False, "post_task": False}}, [(rec, "recorder")]) as ws:
        await AgentRun("hi", workspace=ws, provider="scripted", options={"subagents": False})
    assert [c[0] for c in rec.calls] == ["session_start", "session_end"]


def write_workflow(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('message = "default"\nagent = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "from pathlib import Path\nPath('triggered.txt').write_text(f'{message} {agent}')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
async def test_a_workflow_trigger_starts_a_workflow(tmp_path):
    rec = Recorder()
    folder = tmp_path / "ws"
    folder.mkdir()
    write_workflow(folder / "after_run.ipynb")
    seen: list[str] = []

    class Triggers:  # a plugin-registered trigger whose condition is Python (it never matches here)
        @hookimpl
        def register_workflow_triggers(self, register):
            register(WorkflowTrigger(id="never", condition=lambda c: seen.append(c.event) or False,
                                     workflow_id="after_run.ipynb"))

    config = {"hooks": {"triggers": [{"id": "root-done", "on": "post_task", "when": {"depth": 0, "status": "completed"},
                                      "workflow": "after_run.ipynb", "parameters": {"message": "launched"}}]}}
    with workspace(folder, config, [(rec, "recorder"), (Triggers(), "triggers")]) as ws:
        run = AgentRun("plan the launch", workspace=ws, provider=ScriptedProvider(two_level_brain()))
        await run
    # only the root's post_task matched (depth 0); the plugin's condition saw both post_task events
    assert [c for c in rec.calls if c[0] == "workflow"] == [("workflow", "root-done", "completed")]
    assert seen == ["post_task", "post_task"]
    marker = folder / "triggered.txt"
    for _ in range(1200):
        if marker.exists():
            break
        await asyncio.sleep(0.1)
    outputs = list((folder / ".agentstack" / "workflows").glob("root-done-*.ipynb"))
    logs = "\n".join(p.read_text() for p in (folder / ".agentstack" / "workflows").glob("*.log"))
    assert marker.exists(), logs
    assert marker.read_text() == "launched "
    for _ in range(100):  # the executed notebook is saved when the child finishes
        if outputs and outputs[0].exists():
            break
        await asyncio.sleep(0.1)
        outputs = list((folder / ".agentstack" / "workflows").glob("root-done-*.ipynb"))
    assert len(outputs) == 1, logs
