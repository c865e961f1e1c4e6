"""``provider: acp``: an ACP agent as the model of our agents (a fake one written with the SDK, and our own)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("acp")

from agentstack_lab.engine import AgentRun  # noqa: E402
from agentstack_lab.providers.acp import AcpProvider  # noqa: E402
from agentstack_lab.providers.base import ProviderError, ProviderUnavailable  # noqa: E402
from agentstack_lab.workspace import Workspace  # noqa: E402

pytestmark = pytest.mark.slow

FAKE = [sys.executable, str(Path(__file__).with_name("fake_acp_agent.py"))]
ONE_AGENT = {"subagents": False, "final_question": False, "executor": "subprocess"}


@pytest.fixture
def fake(monkeypatch, tmp_path):
    def mode(name: str) -> Path:
        monkeypatch.setenv("FAKE_ACP", name)
        mark = tmp_path / "mark"
        monkeypatch.setenv("FAKE_ACP_MARK", str(mark))
        return mark
    return mode


def _open(workdir: Path, **acp: object) -> Workspace:
    (workdir / "agentstack.config.json").write_text(json.dumps(
        {"providers": {"default": "acp", "acp": {"command": FAKE, **acp}}}))
    return Workspace.open(workdir, announce=False)


async def test_text_tool_calls_permission_as_a_decision_and_usage(workdir, fake):
    fake("answer")
    with _open(workdir) as ws:
        run = AgentRun("What is in data/?", workspace=ws, options={**ONE_AGENT, "auto_approve": True})
        result = await asyncio.wait_for(run, 60)
        events = [e for e in run.events]
    assert result.endswith("Looking at the data: sales.csv is there.")
    calls = [e for e in events if e.type == "tool-call"]
    results = [e for e in events if e.type == "tool-result"]
    assert [(c.tool, c.input["title"]) for c in calls] == [("acp:execute", "ls data/")]
    assert results[0].output == {"stdout": "sales.csv"} and results[0].error is None
    usage = run.tree["usage"]
    assert usage["inputTokens"] >= 120 and usage["outputTokens"] >= 30


async def test_its_permission_request_is_our_decision_answered_from_any_surface(workdir, fake):
    fake("answer")
    with _open(workdir) as ws:
        run = AgentRun("What is in data/?", workspace=ws, options={**ONE_AGENT, "on_query": "wait"}).start()
        for _ in range(600):
            if run.pending_queries:
                break
            await asyncio.sleep(0.05)
        (query,) = run.pending_queries
        assert query.kind == "approval" and query.prompt == "Allow fake_acp_agent.py: ls data/?"
        assert query.options["agentTool"] == "ls data/" and query.options["options"] == ["Allow", "Reject"]
        from agentstack_lab.decisions import decisions_for

        decisions_for(ws).answer(query.query_id, {"approved": False}, surface="cli", by="ana")  # another surface
        result = await asyncio.wait_for(run, 60)
    assert result.endswith("I was not allowed to look.")
    (failed,) = [e for e in run.events if e.type == "tool-result"]
    assert failed.error and failed.output == {"error": "not allowed"}


async def test_a_headless_run_fails_closed_on_its_permission_request(workdir, fake):
    fake("answer")
    with _open(workdir) as ws:
        run = AgentRun("What is in data/?", workspace=ws, options={**ONE_AGENT, "on_query": "fail"})
        await asyncio.wait_for(run.wait(raise_on_error=False), 60)
    assert run.status == "failed"
    assert "approval" in (run.tree.get("error") or "")


async def test_stop_cancels_the_session_and_ends_the_agent(workdir, fake):
    mark = fake("hang")
    with _open(workdir) as ws:
        run = AgentRun("Think forever", workspace=ws, options=ONE_AGENT).start()
        for _ in range(600):
            if "Looking" in (run.tree.get("content") or ""):
                break
            await asyncio.sleep(0.05)
        run.stop(reason="enough")
        await asyncio.wait_for(run.wait(raise_on_error=False), 30)
    assert run.status == "stopped"
    assert mark.read_text().startswith("cancelled fake-")


async def test_a_crash_and_a_missing_command_are_one_line(workdir, fake):
    fake("crash")
    with _open(workdir) as ws:
        run = AgentRun("Crash", workspace=ws, options=ONE_AGENT)
        await asyncio.wait_for(run.wait(raise_on_error=False), 60)
    error = run.tree.get("error") or ""
    assert run.status == "failed" and "fake_acp_agent.py ended before it answered" in error and "boom" in error
    assert "\n" not in error and "Traceback" not in error
    with pytest.raises(ProviderUnavailable, match="not found"):
        await anext(aiter(AcpProvider(["no-such-acp-agent"]).stream(__import__(
            "agentstack_lab.providers.base", fromlist=["ProviderRequest"]).ProviderRequest())))
    with pytest.raises(ProviderError, match="no agent command"):
        AcpProvider([])


async def test_a_tree_whose_model_is_another_agentstack_lab_over_acp(workdir, tmp_path):
    inner = tmp_path / "inner"   # the other process's workspace: the offline demo as its model
    inner.mkdir()
    with _open(workdir, cwd=str(inner)) as ws:
        ws_cfg = json.loads((workdir / "agentstack.config.json").read_text())
        ws_cfg["providers"]["acp"]["command"] = [sys.executable, "-m", "agentstack_lab.cli", "acp"]
        (workdir / "agentstack.config.json").write_text(json.dumps(ws_cfg))
    with Workspace.open(workdir, announce=False) as ws:
        run = AgentRun("How are sales trending?", workspace=ws, options={**ONE_AGENT, "auto_approve": True})
        result = await asyncio.wait_for(run, 120)
        calls = [e for e in run.events if e.type == "tool-call"]
    assert "offline" in result
    # the inner agent's subagents appear in our tree as its tool calls (kind think), each with its result
    assert len([c for c in calls if c.tool == "acp:think"]) >= 2
    assert (inner / ".agentstack" / "agentstack.db").is_file()   # the inner agent's own workspace
