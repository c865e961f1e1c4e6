"""Consensus checkpoints: the seed's risk estimation, the service, and reviewer strategies on scripted runs."""

from __future__ import annotations

import asyncio

import pytest

from agentstack_lab.config import Config
from agentstack_lab.decisions import decisions_for
from agentstack_lab.engine import AgentRun, HeadlessQueryError
from agentstack_lab.notebook.tree import tree_to_text
from agentstack_lab.providers.testing import TestModel
from agentstack_lab.tasks import ConsensusError, TaskService, estimate_risk, requires_consensus
from agentstack_lab.workspace import Workspace

DEFAULTS = Config().consensus


@pytest.mark.parametrize(("agent_type", "text", "risk"), [
    ("coder", "read the docs", "high"),                       # 1. high-risk agent type wins over everything
    ("architect", "delete the production database", "medium"),  # 2. medium agent type before any pattern
    ("researcher", "Drop the old table", "high"),             # 3. high pattern, case-insensitive
    ("researcher", "update the API KEY rotation", "high"),    # high pattern found before the medium one
    ("researcher", "install the new package", "medium"),      # 4. medium pattern
    ("researcher", "summarise the report", "low"),            # 5. default
    ("researcher", None, "low"),
])
def test_estimate_risk_is_the_seeds_algorithm(agent_type, text, risk):
    assert estimate_risk(agent_type, text, DEFAULTS) == risk


def test_risk_lists_are_configurable_and_requires_consensus_follows_the_seed():
    cfg = Config.from_dict({"consensus": {"enabled": True, "high_risk_agent_types": ["researcher"],
                                          "medium_risk_patterns": ["tweak"], "max_depth": 2}}).consensus
    assert estimate_risk("researcher", "anything", cfg) == "high"
    assert estimate_risk("coder", "tweak it", cfg) == "medium"  # coder is no longer on the high list
    assert requires_consensus("low", 1, "p", cfg) == (False, "risk level 'low' does not require consensus")
    assert requires_consensus("high", 1, None, cfg)[0] is False  # root tasks never
    assert requires_consensus("high", 1, "p", cfg)[0] is True
    assert "exceeds the maximum depth 2" in requires_consensus("medium", 3, "p", cfg)[1]
    assert requires_consensus("high", 1, "p", DEFAULTS)[0] is False  # disabled by default


def _ws(tmp_path, **consensus):
    cfg = Config.from_dict({"consensus": {"enabled": True, **consensus}})
    return Workspace.open(tmp_path / "p", config=cfg, announce=False)


def test_task_create_makes_a_checkpoint_and_a_partial_approval_creates_the_task(tmp_path):
    with _ws(tmp_path, reviewer_strategy="human") as w:
        svc = TaskService.of(w)
        root = svc.create("researcher", "clean up the staging cluster")["task"]  # root: never needs consensus
        out = svc.create("devops", "delete the unused volumes", parent_id=root["id"])
        assert out["consensus_required"] and not out["created"]
        cp = out["checkpoint"]
        assert cp["status"] == "pending" and cp["risk_level"] == "high"
        assert [d.kind for d in decisions_for(w).list(state="pending")] == ["consensus"]
        [pending] = svc.consensus.list_pending()
        sub = pending.proposed_subtasks[0].id
        with pytest.raises(ConsensusError, match="has no subtask 'nope'"):
            svc.decide(cp["id"], approve=True, subtask_ids=["nope"])
        assert svc.consensus.get(cp["id"]).status == "pending"  # nothing changed
        done = svc.decide(cp["id"], approve=True, feedback="fine", by="alice", surface="cli")
        assert done["checkpoint"]["status"] == "approved" and done["created_task_ids"] == [sub]
        assert svc.store.get(sub).parent_id == root["id"]
        with pytest.raises(ConsensusError, match="already approved"):
            svc.decide(cp["id"], approve=False)
        assert decisions_for(w).get(pending.decision_id).answered_by == "alice"


# --- reviewer strategies on engine runs --------------------------------------------------------------
ROOT = "Tidy up the analytics warehouse"
RISKY = "Delete the stale production tables"
SAFE = "Summarise which tables were read last week"


def _script(verdict=None):
    return TestModel(subquestions=[RISKY, SAFE],
                     consensus_review=verdict and (lambda r: verdict(r.metadata["subtasks"])),
                     main=lambda r: f"answer of {r.metadata['agent_type']} at depth {r.metadata['depth']}")


def _run(w, verdict=None, on_query=None):
    provider = _script(verdict)
    run = AgentRun(ROOT, workspace=w, provider=provider,
                   options={"interactive": False, "max_depth": 1, "final_question": False, "on_query": on_query})
    return run, provider


async def test_adversarial_reviewer_rejects_the_risky_subtask(tmp_path):
    def verdict(subtasks):
        risky = [s["id"] for s in subtasks if "Delete" in s["input"]]
        return {"approved": True, "rejected_subtask_ids": risky,
                "feedback": "Deleting production tables is out of scope for tidying up."}

    with _ws(tmp_path) as w:  # reviewer_strategy defaults to adversarial (as the seed)
        run, provider = _run(w, verdict)
        await run
        kids = run.tree["children"]
        reviewer = next(k for k in kids if k["metadata"].get("origin") == "consensus-review")
        workers = [k for k in kids if k is not reviewer]
        assert [k["prompt"] for k in workers] == [SAFE]  # the risky one never started
        assert reviewer["type"] == "adversarial" and reviewer["status"] == "completed"
        assert "rejected 1 of 2" in reviewer["result"] and "out of scope" in reviewer["content"]
        info = run.tree["metadata"]["consensus"]
        assert info["status"] == "approved" and len(info["rejected"]) == 1 and info["riskLevel"] == "high"
        cp = TaskService.of(w).consensus.get(info["checkpointId"])
        assert cp.status == "approved" and cp.decision["reviewed_by"] == reviewer["id"]
        assert [s.input for s in cp.approved_subtasks] == [SAFE]
        d = decisions_for(w).get(cp.decision_id)
        assert (d.kind, d.state, d.surface) == ("consensus", "answered", "adversarial")
        # the parent sees the feedback in its next model call; the tree shows the checkpoint
        main = next(r for r in provider.requests if r.metadata["step"] == "main" and r.metadata["depth"] == 0)
        assert "out of scope" in str(main.messages[-1].content) and RISKY in str(main.messages[-1].content)
        assert "[consensus approved, 1 rejected]" in tree_to_text(run.tree)


async def test_adversarial_reject_all_and_auto(tmp_path):
    with _ws(tmp_path) as w:
        run, _ = _run(w, lambda subs: {"approved": False, "feedback": "no"})
        await run
        assert [k["type"] for k in run.tree["children"]] == ["adversarial"]
        assert run.tree["metadata"]["consensus"]["status"] == "rejected"
    with _ws(tmp_path / "auto", reviewer_strategy="auto") as w:
        run, _ = _run(w)
        await run
        assert sorted(k["prompt"] for k in run.tree["children"]) == sorted([RISKY, SAFE])
        assert run.tree["metadata"]["consensus"]["status"] == "approved"


async def test_low_risk_plans_need_no_checkpoint(tmp_path):
    with _ws(tmp_path, require_for_risk_levels=["high"], high_risk_patterns=["launch"]) as w:
        run, _ = _run(w)
        await run
        assert len(run.tree["children"]) == 2 and "consensus" not in run.tree["metadata"]
        assert decisions_for(w).list() == []


async def test_human_reviewer_answers_from_another_surface_while_the_parent_waits(tmp_path):
    with _ws(tmp_path, reviewer_strategy="human") as w:
        run, _ = _run(w, on_query="wait")
        run.start()
        svc = TaskService.of(w)
        for _ in range(200):
            pending = svc.consensus.list_pending()
            if pending:
                break
            await asyncio.sleep(0.02)
        [cp] = pending
        assert run.agents[run.root_id].status == "waiting_user"
        risky = next(s.id for s in cp.proposed_subtasks if s.input == RISKY)
        # another process's view of the workspace answers (a second Workspace on the same file)
        with Workspace.open(w.db_path, config=w.config, announce=False) as other:
            TaskService.of(other).decide(cp.id, approve=False, subtask_ids=[risky], feedback="not that one",
                                         by="bob", surface="cli")
        await asyncio.wait_for(run.wait(), 10)
        assert [k["prompt"] for k in run.tree["children"]] == [SAFE]
        assert "not that one" in " ".join(run.tree["metadata"]["notes"])
        # the wait was announced like any other decision: a user-query naming the checkpoint's decision
        [query] = [e for e in run.events if e.type == "user-query"]
        assert (query.kind, query.query_id, query.options["checkpointId"]) == ("consensus", cp.decision_id, cp.id)


async def test_human_checkpoint_follows_on_query_fail_and_auto(tmp_path):
    """Issue 25 item 4: a headless run (on_query=fail) fails closed at a human checkpoint instead of waiting."""
    with _ws(tmp_path / "fail", reviewer_strategy="human") as w:
        run, _ = _run(w)  # interactive=False: on_query defaults to fail
        await asyncio.wait_for(run.wait(raise_on_error=False), 30)
        assert run.status == "failed" and run.tree["children"] == []
        assert isinstance(run.failure, HeadlessQueryError) and run.failure.kind == "consensus"
        assert "needs an answer to a consensus decision" in run.error
        [d] = decisions_for(w).list(kind="consensus")
        assert d.state == "cancelled"  # nothing stays pending for a run that is over
    with _ws(tmp_path / "auto", reviewer_strategy="human") as w:
        run, _ = _run(w, on_query="auto")
        await asyncio.wait_for(run.wait(), 30)
        assert sorted(k["prompt"] for k in run.tree["children"]) == sorted([RISKY, SAFE])
        [d] = decisions_for(w).list(kind="consensus")
        assert (d.state, d.surface, d.answered_by) == ("answered", "policy", "on_query=auto")


async def test_human_checkpoint_expires_after_the_runs_decision_timeout(tmp_path):
    with _ws(tmp_path, reviewer_strategy="human") as w:
        run, _ = _run(w, on_query="wait")
        run.options.decision_timeout = 0.3  # sooner than the checkpoint's own timeout_s (300 s)
        await asyncio.wait_for(run.wait(raise_on_error=False), 30)
        assert run.status == "failed" and "nobody answered its consensus query within 0.3 s" in run.error


async def test_expiry_with_and_without_auto_reject(tmp_path):
    for auto_reject, expected in ((True, []), (False, sorted([RISKY, SAFE]))):
        with _ws(tmp_path / str(auto_reject), reviewer_strategy="human", timeout_s=0.3,
                 auto_reject=auto_reject) as w:
            run, _ = _run(w, on_query="wait")
            await asyncio.wait_for(run.wait(), 10)
            assert sorted(k["prompt"] for k in run.tree["children"]) == expected
            assert run.tree["metadata"]["consensus"]["status"] == "expired"
            assert [d.state for d in decisions_for(w).list(kind="consensus")] == ["expired"]
