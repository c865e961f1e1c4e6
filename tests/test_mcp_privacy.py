"""Issue 26 item 5: a private session's runs, tasks, decisions and interventions, over two real MCP clients."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("mcp")

from tests.test_mcp import call, error, mcp_client  # noqa: E402

pytestmark = pytest.mark.slow


async def test_another_client_cannot_read_or_answer_a_private_sessions_run(workdir):
    async with mcp_client(workdir, log="a.stderr") as a, mcp_client(workdir, log="b.stderr") as b:
        started = await call(a, "session_start", name="private")
        sid, token = started["id"], started["sessionToken"]
        run = await call(a, "agent_run", prompt="how are sales trending in df?", subagents=False, on_query="wait",
                         decision_timeout=120, session_id=sid, session_token=token)
        rid = run["runId"]
        mine = {"session_id": sid, "session_token": token}
        for _ in range(600):
            pending = (await call(a, "decision_list", run_id=rid, **mine))["decisions"]
            if pending:
                break
            await asyncio.sleep(0.05)
        (d,) = pending
        # the owner sees everything with its token
        assert (await call(a, "agent_status", agent_id=rid, **mine))["prompt"] == "how are sales trending in df?"
        assert (await call(a, "agent_tree", run_id=rid[:6], **mine))["runId"] == rid
        assert rid in {r["runId"] for r in (await call(a, "agent_list", **mine))["agents"]}
        owned = [t for t in (await call(a, "task_list", **mine))["tasks"] if t["runId"] == rid]
        assert owned
        # another client, without the token: every read and write path refuses, listings hide the run
        for tool, args in (("agent_status", {"agent_id": rid}), ("agent_tree", {"run_id": rid}),
                           ("agent_tree", {"run_id": rid[:6]}), ("task_get", {"task_id": owned[0]["id"]}),
                           ("decision_get", {"decision_id": d["id"]}),
                           ("decision_answer", {"decision_id": d["id"], "action": "approve",
                                                "code": "print('pwned')"}),
                           ("agent_intervene", {"agent_id": rid, "action": "comment", "text": "hi"}),
                           ("agent_stop", {"agent_id": rid})):
            assert f"private session '{sid}'" in await error(b, tool, **args), tool
        assert rid not in {r["runId"] for r in (await call(b, "agent_list"))["agents"]}
        assert not [t for t in (await call(b, "task_list"))["tasks"] if t["runId"] == rid]
        assert not (await call(b, "decision_list"))["decisions"]
        assert "wrong session_token" in await error(b, "agent_status", agent_id=rid, session_id=sid,
                                                    session_token="x" * len(token))
        # the decision is still pending: B's approval did not run; the owner answers it
        done = await call(a, "decision_answer", decision_id=d["id"], action="approve", **mine)
        assert done["state"] == "answered" and done["answer"] == {"approved": True}
