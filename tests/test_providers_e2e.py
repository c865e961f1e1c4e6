"""End to end: the engine runs an agent on the real Anthropic and OpenAI SDKs talking to the fake servers."""

from __future__ import annotations

import fakes_llm
import pytest
from fakes_llm import API_KEY, Reply, Status

from agentstack_lab.providers.registry import get_provider

pytestmark = pytest.mark.slow  # every test here starts a process

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm


def _forced(body) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return choice.get("name") or (choice.get("function") or {}).get("name")
    return None


def _schema_props(body) -> set[str]:
    tool = body["tools"][0]
    schema = tool.get("input_schema") or tool["function"]["parameters"]
    return set(schema.get("properties", {}))


def _has_tool_result(body) -> bool:
    for m in body["messages"]:
        if m.get("role") == "tool":
            return True
        if isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"]):
            return True
    return False


def model_behaviour(body):
    """A fake model that answers whatever step the engine is on, from the request alone."""
    if _forced(body) == "respond":
        props = _schema_props(body)
        if "needs_clarification" in props:
            return Reply(tool_calls=[("t_c", "respond", {"needs_clarification": False})])
        if "subquestions" in props:
            return Reply(tool_calls=[("t_s", "respond", {"subquestions": []})])
        return Reply(tool_calls=[("t_q", "respond", {"has_question": False})])
    names = {t.get("name") or t["function"]["name"] for t in body.get("tools", [])}
    if "python" in names and not _has_tool_result(body):
        return Reply(text="Let me compute. ", tool_calls=[("toolu_p1", "python", {"code": "print(6 * 7)"})])
    return Reply(text="The answer is 42.")


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_agent_run_on_a_real_sdk(fake_llm, tmp_path, kind):
    from agentstack_lab.engine import AgentRun, RunOptions
    from agentstack_lab.workspace import Workspace

    ws = Workspace.open(tmp_path / "proj")
    try:
        fake_llm.queue(Status(529 if kind == "anthropic" else 429, "busy", headers={"retry-after-ms": "1"}),
                       *[model_behaviour] * 30)
        base = fake_llm.url if kind == "anthropic" else f"{fake_llm.url}/v1"
        provider = get_provider(kind, api_key=API_KEY, base_url=base, timeout=5)
        run = AgentRun("What is six times seven?", workspace=ws, provider=provider,
                       options=RunOptions(subagents=False, interactive=False, auto_approve=True,
                                          executor="subprocess"))
        result = await run
        assert "The answer is 42." in result
        assert run.tree["status"] == "completed"
        assert run.tree["usage"]["inputTokens"] > 0
        tools = [ev for ev in run.events if type(ev).__name__ == "ToolCall"]
        assert tools and tools[0].tool == "python"
        assert fake_llm.requests[0].json == fake_llm.requests[1].json  # the overloaded call was retried as-is
        # the tool result went back to the model in the provider's own wire shape
        results = [r.json for r in fake_llm.requests if _has_tool_result(r.json)]
        assert results and "42" in str(results[0]["messages"])
    finally:
        ws.close()
