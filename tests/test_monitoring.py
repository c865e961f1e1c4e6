"""The resource-exhaustion monitor (issue 11 item 5): an agent looping on tool calls is warned, paused with a
decision any surface answers (here: ``agent resume`` from the CLI, another process), then terminated;
file access is counted by audit hooks per agent thread (live) and in the child (subprocess)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import pytest

from agentstack_lab.decisions import Decisions
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor, SubprocessExecutor
from agentstack_lab.events import AgentState
from agentstack_lab.notebook.tree import badges
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.workspace import Workspace
from tests.test_engine import brain

SCRIPT = Path(sys.executable).parent / "agentstack-lab"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


def monitored_workspace(folder: Path, **monitoring) -> Workspace:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"max_api_calls": 10, "max_tokens_consumed": 10_000_000, "max_files_accessed": 1000,
           "warning_at": 0.5, "intervention_at": 1.0, "termination_at": 1.5, **monitoring}
    (folder / "agentstack.config.json").write_text(json.dumps({"monitoring": cfg}))
    return Workspace.open(folder, announce=False)


def looping_brain(scratch: Path):
    """A model that never stops calling the python tool; each call writes one file and reads it back."""
    turns = {"n": 0}

    def main(req):
        turns["n"] += 1
        path = scratch / f"note{turns['n']}.txt"
        return [tool_call("python", {"code": f"open({str(path)!r}, 'w').write('x'); open({str(path)!r}).read()"})]

    return brain(main=main)


def phases(events) -> list[str]:
    seen: list[str] = []
    for ev in events:
        if isinstance(ev, AgentState):
            phase = (ev.state.get("metadata") or {}).get("resources", {}).get("phase")
            if phase and (not seen or seen[-1] != phase):
                seen.append(phase)
    return seen


async def pending_interventions(ws: Workspace, timeout: float = 60) -> list:
    for _ in range(int(timeout / 0.05)):
        found = Decisions(ws.db).list(state="pending", kind="intervention")
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("no intervention decision was opened")


@pytest.mark.slow
async def test_looping_agent_warning_intervention_resume_from_cli_then_termination(tmp_path):
    scratch = Path.cwd() / "scratch"   # inside the working folder: writes outside it are denied by a built-in rule
    scratch.mkdir()
    ws = monitored_workspace(tmp_path / "ws")
    try:
        run = AgentRun("loop forever", workspace=ws, provider=ScriptedProvider(looping_brain(scratch)),
                       options={"subagents": False, "auto_approve": True, "max_turns": 1000},
                       executor=LiveKernelExecutor(namespace={}))
        run.start()
        [decision] = await pending_interventions(ws)
        node = run.agents[run.root_id]
        assert node.metadata.get("paused") is True and decision.agent_id == run.id
        assert decision.options["choices"] == ["resume", "stop"] and "API calls 10/10" in decision.prompt
        calls = node.metadata["resources"]["apiCalls"]
        await asyncio.sleep(0.5)  # paused: no further model calls
        assert node.metadata["resources"]["apiCalls"] == calls == 10
        assert phases(run.events) == ["normal", "warning", "intervention"]
        # files the python tool touched, counted on the agent's own thread: 1 written + 1 read per tool call
        tool_calls = len(list(scratch.iterdir()))
        assert tool_calls > 0
        assert node.metadata["resources"]["filesWritten"] == tool_calls
        assert node.metadata["resources"]["filesRead"] == tool_calls
        assert any(b.startswith("⏸ monitor paused: API calls 10/10") for b in badges(node.metadata))

        # resume from the terminal: another process writes an intervention the run applies
        proc = await asyncio.create_subprocess_exec(*CLI, "-w", str(ws.root), "agent", "resume", run.id[:8],
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        await asyncio.wait_for(run.wait(), 120)

        assert run.status == "stopped"
        assert node.error == "terminated by the resource monitor: API calls 15/10"
        assert node.metadata["resources"]["apiCalls"] == 15
        assert phases(run.events) == ["normal", "warning", "intervention", "termination"]
        assert any(b.startswith("■ monitor stopped") for b in badges(node.metadata))
        closed = Decisions(ws.db).get(decision.id)  # `agent resume` answered it (issue 25 item 6), not cancelled
        assert (closed.state, closed.answer, closed.surface) == ("answered", "resume", "cli") and closed.answered_by
        assert "(by " in closed.closed_message() and closed.closed_message().endswith("from the terminal)")
        rows = ws.db.query("SELECT phase, reason FROM monitor_phase_changes WHERE agent_id = ? ORDER BY id", (run.id,))
        assert [tuple(r) for r in rows] == [("warning", "API calls 5/10"), ("intervention", "API calls 10/10"),
                                            ("termination", "API calls 15/10")]
        # the event log (any process can read it) carries the phases too
        logged = [json.loads(r[0]) for r in ws.db.query(
            "SELECT payload FROM events WHERE run_id = ? AND type = 'agent-state' ORDER BY seq", (run.id,))]
        logged_phases = [(p.get("state", {}).get("metadata") or {}).get("resources", {}).get("phase") for p in logged]
        assert "termination" in logged_phases
    finally:
        ws.close()


async def test_intervention_answered_stop_from_any_surface_stops_the_agent(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ws = monitored_workspace(tmp_path / "ws", max_api_calls=6)
    try:
        run = AgentRun("loop forever", workspace=ws, provider=ScriptedProvider(looping_brain(scratch)),
                       options={"subagents": False, "auto_approve": True, "max_turns": 1000},
                       executor=LiveKernelExecutor(namespace={}))
        run.start()
        [decision] = await pending_interventions(ws)
        with pytest.raises(Exception, match="must be 'resume' or 'stop'"):
            Decisions(ws.db).answer(decision.id, "maybe", surface="cli")  # bad answer: nothing changes
        threading.Thread(target=lambda: Decisions(ws.db).answer(decision.id, "stop", by="bob", surface="mcp")).start()
        await asyncio.wait_for(run.wait(), 60)
        assert run.status == "stopped"
        assert run.agents[run.root_id].error == "stopped at the resource monitor's intervention (API calls 6/6)"
        assert Decisions(ws.db).get(decision.id).answer == "stop"
    finally:
        ws.close()


async def test_monitoring_disabled_changes_nothing(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ws = monitored_workspace(tmp_path / "ws", enabled=False, max_api_calls=2)
    try:
        run = AgentRun("loop", workspace=ws, provider=ScriptedProvider(looping_brain(scratch)),
                       options={"subagents": False, "auto_approve": True, "max_turns": 4},
                       executor=LiveKernelExecutor(namespace={}))
        await run
        assert run.status == "completed" and "resources" not in run.agents[run.root_id].metadata
    finally:
        ws.close()


async def test_live_executor_counts_only_the_agent_threads_files(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("hello")
    stop = threading.Event()
    other_opens = {"n": 0}

    def busy_user():  # the user's own thread opening files meanwhile: never attributed to the agent
        while not stop.is_set():
            with open(data) as fh:
                fh.read()
            other_opens["n"] += 1

    t = threading.Thread(target=busy_user)
    t.start()
    try:
        ex = LiveKernelExecutor(namespace={})
        code = (f"import json, pathlib\np = pathlib.Path({str(tmp_path)!r})\n"
                "open(p / 'a.txt', 'w').write('1')\nopen(p / 'a.txt', 'a').write('2')\n"
                "(p / 'data.txt').read_text()\nopen(p / 'b.txt', 'x').close()\n")
        res = await ex.run(code)
    finally:
        stop.set()
        t.join()
    assert res.ok, res.error
    assert other_opens["n"] > 0
    assert res.files == {"read": 1, "written": 2, "modified": 1}


@pytest.mark.slow
async def test_subprocess_executor_counts_in_the_child(tmp_path):
    code = (f"p = {str(tmp_path / 'c.txt')!r}\nopen(p, 'w').write('x')\nopen(p).read()\nopen(p, 'r+').close()\n"
            "import os\nos.remove(p)\n")
    res = await SubprocessExecutor(timeout=60).run(code)
    assert res.ok, res.error
    assert res.files == {"read": 1, "written": 1, "modified": 2}


async def test_paused_is_a_status_and_a_terminated_parents_children_say_why_they_stopped(tmp_path):
    """Issue 25 item 6: a monitor-paused agent is ``paused`` (tree, events, agents row) while its decision is open;
    the subagent stopped with its terminated parent gets its own reason, not the parent's numbers."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ws = monitored_workspace(tmp_path / "ws", max_api_calls=6)
    never = asyncio.Event()
    looping = looping_brain(scratch)

    async def script(req):
        if req.metadata["depth"] == 1 and req.metadata["step"] == "main":
            await never.wait()  # the child is still at work when its parent is terminated
        if req.metadata["step"] == "subquestions" and req.metadata["depth"] == 0:
            return {"subquestions": [{"question": "a side question", "agent_type": "researcher"}]}
        return await looping(req)

    try:
        run = AgentRun("loop forever", workspace=ws, provider=ScriptedProvider(script),
                       options={"auto_approve": True, "max_turns": 1000, "max_depth": 1},
                       executor=LiveKernelExecutor(namespace={}))
        run.start()
        [decision] = await pending_interventions(ws)
        root = run.agents[run.root_id]
        assert root.status == "paused" and run.tree["status"] == "paused"
        await run._core.flush_log()
        [row] = ws.db.query("SELECT status FROM agents WHERE id = ?", (run.id,))
        assert row[0] == "paused"
        assert any(isinstance(e, AgentState) and e.agent_id == run.id and e.state["status"] == "paused"
                   for e in run.events)
        Decisions(ws.db).answer(decision.id, "resume", by="alice", surface="cli")
        await asyncio.wait_for(run.wait(raise_on_error=False), 60)
        assert root.status == "stopped" and root.error == "terminated by the resource monitor: API calls 9/6"
        [child] = [run.agents[c] for c in root.subagents]
        assert child.status == "stopped" and child.error == f"stopped because its parent {root.name} was stopped"
        assert "API calls" not in child.error
        seen = [e.state["status"] for e in run.events if isinstance(e, AgentState) and e.agent_id == run.id]
        assert "running" in seen[seen.index("paused"):]  # resumed: shown running again before it was stopped
    finally:
        ws.close()
