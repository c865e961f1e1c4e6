"""The task_* and consensus_* MCP tools through the real ``mcp`` stdio client."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("mcp")

from test_mcp import call, error, mcp_client  # noqa: E402

pytestmark = pytest.mark.slow


async def _until(fn, what: str, timeout: float = 20.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await fn()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_task_tools_round_trip_and_drift(workdir):
    (workdir / "agentstack.config.json").write_text(json.dumps({"drift": {"enabled": True, "behavior": "warn"}}))
    async with mcp_client(workdir) as s:
        root = (await call(s, "task_create", agent_type="researcher", input="map the churn drivers"))["task"]
        child = await call(s, "task_create", agent_type="researcher", input="map the churn drivers",
                           parent_task_id=root["id"])
        assert child["created"] and child["drift"]["action"] == "warned"
        cid = child["task"]["id"]
        assert (await call(s, "task_assign", task_id=cid, agent_id="agent-1"))["status"] == "running"
        done = await call(s, "task_complete", task_id=cid, output="pricing and support")
        assert (done["status"], done["output"]) == ("completed", "pricing and support")
        assert (await call(s, "task_get", task_id=cid))["parentId"] == root["id"]
        rels = await call(s, "task_get_relationships", task_id=root["id"], direction="outgoing")
        assert [(r["relationshipType"], r["toTaskId"]) for r in rels["relationships"]] == [("parent_of", cid)]
        assert (await call(s, "task_list", status="completed"))["count"] == 1
        check = await call(s, "task_check_drift", task_input="map the churn drivers", task_type="researcher",
                           parent_task_id=cid)
        assert check["result"]["action"] == "warned" and check["result"]["checkedAncestors"] == 2
        metrics = await call(s, "task_drift_metrics")
        assert (metrics["metrics"]["totalEvents"], metrics["metrics"]["warnedCount"]) == (1, 1)  # the check records nothing
        assert "cannot go from 'completed'" in await error(s, "task_assign", task_id=cid, agent_id="agent-2")
        assert "no task with id 'nope'" in await error(s, "task_get", task_id="nope")
        # an unknown type, an empty input, an unknown risk: one line, nothing created (issue 26, item 11)
        count = len((await call(s, "task_list"))["tasks"])
        assert "unknown agent type 'nope'" in await error(s, "task_create", agent_type="nope", input="x")
        assert "the task input is empty" in await error(s, "task_create", agent_type="researcher", input=" ")
        assert "risk_level: Input should be" in await error(s, "task_create", agent_type="researcher", input="x",
                                                   risk_level="huge")
        assert len((await call(s, "task_list"))["tasks"]) == count


async def test_consensus_approve_with_a_partial_rejection_steers_a_waiting_run(workdir):
    (workdir / "agentstack.config.json").write_text(json.dumps(
        {"consensus": {"enabled": True, "reviewer_strategy": "human", "timeout_s": 120}}))
    async with mcp_client(workdir) as s:
        run = await call(s, "agent_run", prompt="should we deploy on fridays?", provider="scripted", on_query="wait")

        async def pending():
            return (await call(s, "consensus_list_pending"))["checkpoints"]

        [cp] = await _until(pending, "a pending checkpoint")
        assert cp["riskLevel"] == "high" and cp["taskId"] == run["runId"]  # "deploy" is a high-risk pattern
        subs = {s_["input"]: s_["id"] for s_ in cp["proposedSubtasks"]}
        caveats = next(i for text, i in subs.items() if text.startswith("What caveats"))
        assert "has no subtask 'bogus'" in await error(s, "consensus_approve", checkpoint_id=cp["id"],
                                                       rejected_subtask_ids=["bogus"])
        out = await call(s, "consensus_approve", checkpoint_id=cp["id"], rejected_subtask_ids=[caveats],
                         feedback="caveats later", reviewer="carol")
        assert out["checkpoint"]["status"] == "approved" and out["checkpoint"]["decision"]["rejectedSubtaskIds"] == [caveats]
        assert "already approved" in await error(s, "consensus_reject", checkpoint_id=cp["id"])

        async def finished():
            st = await call(s, "agent_status", agent_id=run["runId"])
            return st if st["status"] in ("completed", "failed") else None

        assert (await _until(finished, "the run to end"))["status"] == "completed"
        tree = (await call(s, "agent_tree", run_id=run["runId"]))["tree"]
        assert [c["prompt"] for c in tree["children"]] == [t for t in subs if t != "What caveats" and subs[t] != caveats]
        assert any("caveats later" in n for n in tree["metadata"]["notes"])

        async def closed():   # the run's log written to its end: the tree is now rebuilt from the log
            st = await call(s, "agent_status", agent_id=run["runId"])
            return st if not st["inThisProcess"] else None

        await _until(closed, "the run to close")
        assert (await call(s, "agent_tree", run_id=run["runId"]))["tree"] == tree   # live tree == rebuilt one
        got = await call(s, "consensus_get", checkpoint_id=cp["id"][:8])
        assert got["decision"]["reviewedBy"] == "carol" and got["approvedSubtaskIds"] != []
        tasks = await call(s, "task_list", run_id=run["runId"])
        assert tasks["count"] == 2 and caveats not in {t["id"] for t in tasks["tasks"]}
