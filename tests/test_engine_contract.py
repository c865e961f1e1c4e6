"""The engine's contract with the front ends: a golden event stream, one tool-result per tool-call, logged bugs.

The golden file ``tests/golden/scripted_run.json`` is the normalised event stream of one scripted
run that uses every outbound event type (a clarification answered, two subagents of which one
fails, a python tool call approved by the person, a memory note, a summary). Agent ids, query
ids, tool-use ids, the session id and timestamps are replaced by stable labels, and events are
grouped per agent (children run concurrently; each agent's own order is deterministic).
When the stream changes on purpose, regenerate it and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_engine_contract.py -k golden
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentstack_lab.engine import AgentRun, HeadlessQueryError, RunOptions
from agentstack_lab.engine.context import AgentContext
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.engine.log import read_events
from agentstack_lab.events import EVENT_TYPES, ErrorEvent, ToolCall, ToolResult, UserQuery, to_wire
from agentstack_lab.providers.base import ProviderUnavailable, ToolResultBlock
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.providers.testing import TestModel
from agentstack_lab.workspace import Workspace

GOLDEN = Path(__file__).parent / "golden" / "scripted_run.json"
ENGINE = Path(__file__).resolve().parents[1] / "agentstack_lab" / "engine"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_KEYS = {"createdAt", "startedAt", "endedAt", "lastDeliverableAt", "pausedAt"}


def _tool_results(req) -> list[ToolResultBlock]:
    return [b for m in req.messages if not isinstance(m.content, str) for b in m.content
            if isinstance(b, ToolResultBlock)]


def _main(req):
    """The root computes and stores a note; one subagent's model is down; the other answers."""
    prompt, depth = req.metadata["prompt"], req.metadata["depth"]
    if prompt == "What could go wrong?":
        raise ProviderUnavailable("the scripted model is down for this subagent")
    if depth > 0:
        return f"Sales rose. ({prompt})"
    done = len(_tool_results(req))
    if done == 0:
        return ["Let me compute. ", tool_call("python", {"code": "x = 6 * 7\nprint(x)\nx"})]
    if done == 1:
        return [tool_call("memory_store", {"key": "answer", "content": "six times seven is 42"})]
    return "The answer is 42."


def script():
    """A deterministic model exercising every outbound event type."""
    return TestModel(clarify="Which year?", main=_main, summary="Summary: 42, and sales rose.",
                     subquestions=[("What drove sales?", "analyst"), ("What could go wrong?", "reviewer")])


async def scripted_run(ws) -> AgentRun:
    run = AgentRun("How are sales trending?", workspace=ws, provider=script(),
                   options=RunOptions(max_depth=1), executor=LiveKernelExecutor(namespace={}))

    def answer(ev):
        if isinstance(ev, UserQuery):
            run.respond(ev.query_id, "2024" if ev.kind == "clarification" else True)

    run.subscribe(answer)
    assert await run == "Summary: 42, and sales rose.\n\nSubagents that did not complete: " + \
        f"{run.tree['children'][1]['name']} (failed: ProviderUnavailable: the scripted model is down for this subagent)"
    return run


def normalise(run: AgentRun) -> dict[str, list[dict]]:
    """Wire events grouped per agent (labelled by tree position), ids and times replaced."""
    labels: dict[str, str] = {}

    def label(node: dict, name: str) -> None:
        labels[node["id"]] = name
        for i, child in enumerate(node["children"], 1):
            label(child, f"{name}.{i}")

    label(run.tree, "root")
    grouped: dict[str, list[dict]] = {name: [] for name in sorted(labels.values())}
    for ev in run.events:
        grouped[labels[ev.agent_id]].append(to_wire(ev))
    text = json.dumps(grouped, sort_keys=True)
    for agent_id, name in labels.items():
        text = text.replace(agent_id, f"<{name}>").replace(agent_id[:8], f"<{name}>")
    text = text.replace(run.session_id, "<session>")
    others: dict[str, str] = {}
    text = UUID.sub(lambda mt: others.setdefault(mt[0], f"<id-{len(others) + 1}>"), text)
    tool_ids: dict[str, str] = {}
    text = re.sub(r"toolu_scripted_\d+", lambda mt: tool_ids.setdefault(mt[0], f"<toolu-{len(tool_ids) + 1}>"), text)

    def times(value):
        if isinstance(value, dict):  # times, and who answered (this machine's login name), vary
            return {k: ("<time>" if k in TIME_KEYS and v is not None else "<user>" if k == "by" and v else times(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [times(v) for v in value]
        return value

    return times(json.loads(text))


async def test_golden_event_stream(ws):
    run = await scripted_run(ws)
    got = normalise(run)
    assert {e["type"] for evs in got.values() for e in evs} == {t for t in EVENT_TYPES if t in {
        "agent-state", "text-delta", "tool-call", "tool-result", "user-query", "agent-completed", "error"}}
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    expected = json.loads(GOLDEN.read_text())
    assert got.keys() == expected.keys()
    for agent in expected:  # per agent, so a failure names the agent and the first differing event
        for i, (g, e) in enumerate(zip(got[agent], expected[agent], strict=False)):
            assert g == e, f"{agent}: event {i} differs from {GOLDEN.name} (UPDATE_GOLDEN=1 to accept)"
        assert len(got[agent]) == len(expected[agent]), f"{agent}: event count differs from {GOLDEN.name}"
    # the events table holds the same stream
    assert [to_wire(e) for _, e in read_events(ws.db, run.id)] == [to_wire(e) for e in run.events]


async def test_golden_stream_is_reproducible(ws, tmp_path):
    """Two runs normalise to the same stream: the golden compares content, not scheduling luck."""
    first = normalise(await scripted_run(ws))
    with Workspace.open(tmp_path / "other", announce=False) as other:
        assert normalise(await scripted_run(other)) == first


# --- every tool-call gets exactly one tool-result ---------------------------------------------------

def _code_then_answer():   # not read-only, so the approval rules ask a person
    return TestModel(code="ran = 'should not run'", main=lambda r: "done" if _tool_results(r) else None)


async def test_fail_closed_approval_closes_its_tool_call(ws):
    ns: dict = {}
    run = AgentRun("q", workspace=ws, provider=_code_then_answer(),
                   options={"interactive": False, "subagents": False}, executor=LiveKernelExecutor(namespace=ns))
    with pytest.raises(HeadlessQueryError, match="approval"):
        await run
    (call,) = [e for e in run.events if isinstance(e, ToolCall)]
    (result,) = [e for e in run.events if isinstance(e, ToolResult)]
    assert run.events.index(call) < run.events.index(result)
    assert result.tool == "python" and result.output is None
    assert result.error.startswith("HeadlessQueryError: ") and "approval" in result.error
    assert run.status == "failed" and "__builtins__" not in ns  # the code never ran
    logged = [e for _, e in read_events(ws.db, run.id)]
    assert [e.type for e in logged].count("tool-result") == 1


@pytest.mark.slow
def test_agent_run_cli_fail_closed_closes_its_tool_call(workdir):
    """``agentstack-lab agent run`` (no --auto-approve): exit 1, and the log pairs the tool-call with a result."""
    script_path = Path(sys.executable).with_name("agentstack-lab")
    proc = subprocess.run([str(script_path), "agent", "run", "how are sales trending in df?", "--no-subagents"],
                          capture_output=True, text=True, timeout=120, cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    with Workspace.open(workdir, announce=False) as ws:
        types = [r[0] for r in ws.db.query("SELECT type FROM events ORDER BY seq")]
        results = [json.loads(r[0]) for r in ws.db.query(
            "SELECT payload FROM events WHERE type = 'tool-result' ORDER BY seq")]
    assert types.count("tool-call") == types.count("tool-result") == 1
    assert results[0]["error"].startswith("HeadlessQueryError: ")


# --- bugs keep their traceback ----------------------------------------------------------------------

async def test_a_bug_in_a_step_is_logged_with_its_traceback(ws, caplog):
    buggy = TestModel(main=lambda r: {}["missing"])  # a KeyError: a bug in the script, not a refusal
    caplog.set_level(logging.ERROR, logger="agentstack_lab")
    run = AgentRun("q", workspace=ws, provider=buggy, options={"interactive": False, "subagents": False})
    await run.wait(raise_on_error=False)
    (error,) = [e for e in run.events if isinstance(e, ErrorEvent)]
    assert error.error == "KeyError: 'missing'"  # the event stays one line
    (record,) = [r for r in caplog.records if r.name == "agentstack_lab.engine.core"]
    assert record.exc_info and record.exc_info[0] is KeyError
    assert "Traceback (most recent call last)" in caplog.text and "buggy" in caplog.text


async def test_a_refusal_is_not_logged_as_a_bug(ws, caplog):
    def down(req):
        raise ProviderUnavailable("the model is down")

    caplog.set_level(logging.ERROR, logger="agentstack_lab")
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(down), options={"interactive": False})
    await run.wait(raise_on_error=False)
    assert run.status == "failed" and "the model is down" in run.error
    assert not [r for r in caplog.records if r.name == "agentstack_lab.engine.core"]


# --- the narrow context ------------------------------------------------------------------------------

def _protocol_members() -> set[str]:
    members = {n for n in vars(AgentContext) if not n.startswith("_")}
    return members | set(AgentContext.__annotations__)


@pytest.mark.parametrize("module", ["steps.py", "tools.py"])
def test_steps_and_tools_use_only_the_context_protocol(module):
    tree = ast.parse((ENGINE / module).read_text())
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "ctx"}
    assert used and used <= _protocol_members(), used - _protocol_members()
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "agentstack_lab.engine.run" not in imported and "agentstack_lab.engine" not in imported


def test_the_run_core_implements_the_context():
    from agentstack_lab.engine.core import RunCore

    fields = {"options", "provider", "model", "executor", "registry", "default_type", "monitor", "owns_session"}
    missing = [name for name in _protocol_members() if not hasattr(RunCore, name) and name not in fields]
    assert not missing
    core_src = (ENGINE / "core.py").read_text()
    for name in fields:
        assert re.search(rf"self\.{name}(: [^=]+)? = ", core_src), name  # set in __init__


def test_no_private_attribute_reads_across_engine_modules():
    """``x._name`` only on ``self``/``cls`` (or a module's own private helpers), never on another object."""
    offenders = []
    for path in sorted(ENGINE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and not (path.name == "run.py" and node.attr == "_core")  # a handle's core, of its own class
                    # the standard library's own underscore names: a forked child ends with os._exit
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("os", "sys")
                             and node.attr in ("_exit", "_getframe"))):
                offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert not offenders, offenders


async def test_code_a_run_executes_is_journaled_under_the_run(ws):
    """The context hands the executor the run id and tool call id, so provenance can undo a run's changes."""
    ns: dict = {"x": 1}
    executor = LiveKernelExecutor(namespace=ns)
    run = AgentRun("How are sales trending?", workspace=ws, provider=script(),
                   options=RunOptions(max_depth=1, interactive=False, auto_approve=True,
                                      answers={"clarification": "2024"}), executor=executor)
    await run.wait(raise_on_error=False)
    assert ns["x"] == 42 and [c.name for c in executor.journal.changes(run.id)] == ["x"]
    executor.journal.undo(ns, run.id)
    assert ns["x"] == 1
