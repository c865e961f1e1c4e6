import dataclasses
import json

import pytest

from agentstack_lab import events as ev


def test_every_event_round_trips_through_json_wire_form():
    samples = [
        ev.AgentState(agent_id="a1", state={"status": "running"}),
        ev.TextDelta(agent_id="a1", delta="hé"),
        ev.ToolCall(agent_id="a1", tool="python", input={"code": "1+1"}),
        ev.ToolResult(agent_id="a1", tool="python", output="2"),
        ev.UserQuery(agent_id="a1", query_id="q1", kind="approval", prompt="Run?", options={"code": "x"}),
        ev.AgentCompleted(agent_id="a1", result="done"),
        ev.ErrorEvent(agent_id="a1", error="boom"),
        ev.StartAgent(prompt="hi", agent_type="coder"),
        ev.UserResponse(agent_id="a1", query_id="q1", response=True),
        ev.UserIntervention(agent_id="a1", user_comment="focus", status="stopped"),
        ev.GetAgentTree(),
    ]
    for event in samples:
        wire = json.loads(json.dumps(ev.to_wire(event)))
        assert ev.from_wire(wire) == event


def test_wire_keys_are_camel_case_and_match_the_design():
    assert ev.to_wire(ev.UserQuery(agent_id="a", query_id="q", kind="final", prompt="p")) == {
        "type": "user-query", "agentId": "a", "queryId": "q", "kind": "final", "prompt": "p", "options": {}}
    assert ev.to_wire(ev.StartAgent(prompt="p", agent_type="coder"))["agentType"] == "coder"
    assert "userComment" in ev.to_wire(ev.UserIntervention(agent_id="a", user_comment="c"))


def test_events_are_frozen_and_keyword_only():
    delta = ev.TextDelta(agent_id="a", delta="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.delta = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ev.TextDelta("a", "x")  # type: ignore[misc]


@pytest.mark.parametrize("message, needle", [
    ({"type": "nope"}, "unknown event type 'nope'"),
    ({"type": "user-response", "agentId": "a", "queryId": "q", "response": 1, "bogus": 2}, "unknown field 'bogus'"),
    ({"type": "user-response", "agentId": "a"}, "user-response"),
    (["not", "an", "object"], "JSON object"),
])
def test_bad_wire_messages_name_the_problem(message, needle):
    with pytest.raises(ev.EventDecodeError, match=needle):
        ev.from_wire(message)
