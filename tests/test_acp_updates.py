"""The pure fold of our events into ACP session updates (no process, no clock)."""

from __future__ import annotations

import pytest

pytest.importorskip("acp")

from acp import schema as s  # noqa: E402

from agentstack_lab.acp.updates import OUTPUT_LIMIT, RunUpdates, plan_status  # noqa: E402
from agentstack_lab.events import (  # noqa: E402
    AGENT_STATUSES,
    AgentCompleted,
    AgentState,
    ErrorEvent,
    TextDelta,
    ToolCall,
    ToolResult,
)


def test_root_text_subagents_as_a_plan_and_tool_calls():
    view = RunUpdates("root")
    assert view.feed(AgentState(agent_id="root", state={"status": "running"})) == []
    (chunk,) = view.feed(TextDelta(agent_id="root", delta="Hello"))
    assert isinstance(chunk, s.AgentMessageChunk) and chunk.content.text == "Hello" and view.root_text == 5
    assert view.feed(TextDelta(agent_id="a1", delta="a subagent's text stays in its call")) == []

    start, plan = view.feed(AgentState(agent_id="a1", state={"type": "analyst", "prompt": "Look at df", "status": "pending"}))
    assert isinstance(start, s.ToolCallStart) and start.kind == "think" and "analyst" in start.title
    assert [(e.content, e.status) for e in plan.entries] == [("analyst: Look at df", "pending")]
    _, plan2 = view.feed(AgentState(agent_id="a2", state={"type": "reviewer", "prompt": "Check", "status": "pending"}))
    assert len(plan2.entries) == 2
    going, plan3 = view.feed(AgentState(agent_id="a1", state={"status": "running"}))
    assert isinstance(going, s.ToolCallProgress) and going.status == "in_progress"
    assert [e.status for e in plan3.entries] == ["in_progress", "pending"]
    assert view.feed(AgentState(agent_id="a1", state={"status": "running"})) == []   # nothing changed, nothing sent

    (code,) = view.feed(ToolCall(agent_id="a1", tool="python", input={"code": "# look\nprint(df.shape)"}))
    assert code.kind == "execute" and code.title == "Python (analyst): print(df.shape)"
    assert view.call_for("a1") == code.tool_call_id and view.call_for("a2") is None
    (out,) = view.feed(ToolResult(agent_id="a1", tool="python", output={"stdout": "(3, 2)\n", "result": None}))
    assert out.tool_call_id == code.tool_call_id and out.status == "completed"
    assert out.content[0].content.text == "(3, 2)"
    assert view.call_for("a1") is None

    (bad,) = view.feed(ToolCall(agent_id="a1", tool="python", input={"code": "1/0"}))
    (failed,) = view.feed(ToolResult(agent_id="a1", tool="python", output={"stdout": "x" * (OUTPUT_LIMIT + 50)},
                                     error="ZeroDivisionError: division by zero"))
    assert failed.status == "failed" and failed.content[0].content.text.endswith("more characters)")

    (done,) = view.feed(AgentCompleted(agent_id="a1", result="Sales rose 12%."))
    assert done.tool_call_id == start.tool_call_id and done.status == "completed"
    assert done.content[0].content.text == "Sales rose 12%."
    (err,) = view.feed(ErrorEvent(agent_id="a2", error="the provider failed"))
    assert err.status == "failed" and err.raw_output == {"error": "the provider failed"}
    # a tool result nobody opened is dropped, not invented
    assert view.feed(ToolResult(agent_id="zz", tool="python", output="?")) == []


@pytest.mark.parametrize("status", AGENT_STATUSES)
def test_every_agent_status_has_a_plan_status(status):
    assert plan_status(status) in ("pending", "in_progress", "completed")
