"""Tasks, relationships and drift detection: the store, and drift on scripted engine runs."""

from __future__ import annotations

import pytest

from agentstack_lab.config import Config, ConfigError
from agentstack_lab.engine import AgentRun
from agentstack_lab.events import AgentState
from agentstack_lab.notebook.tree import TreeState, tree_to_text
from agentstack_lab.providers.testing import TestModel
from agentstack_lab.tasks import (
    DriftPreventedError,
    TaskError,
    TaskNotFoundError,
    TaskService,
    TaskStore,
)
from agentstack_lab.workspace import Workspace


@pytest.fixture
def ws(tmp_path):
    with Workspace.open(tmp_path / "proj", announce=False) as w:
        yield w


def _count(db, table):
    return db.query(f"SELECT COUNT(*) FROM {table}")[0][0]


# --- the store ---------------------------------------------------------------------------------------
def test_create_assign_complete_and_list(ws):
    store = TaskStore(ws.db)
    root = store.create("researcher", "summarise the churn report")
    child = store.create("analyst", "compute churn by month", parent_id=root.id)
    assert (root.status, root.depth, child.depth, child.parent_id) == ("pending", 0, 1, root.id)
    assert store.assign(child.id, "agent-7").status == "running"
    done = store.complete(child.id, "12% in March")
    assert (done.status, done.output, done.agent_id) == ("completed", "12% in March", "agent-7")
    assert done.completed_at is not None
    assert [t.id for t in store.list(parent_id=root.id)] == [child.id]
    assert [t.id for t in store.list(status="completed")] == [child.id]
    rels = store.relationships(root.id)
    assert [(r.from_task_id, r.to_task_id, r.relationship_type) for r in rels] == [(root.id, child.id, "parent_of")]
    assert store.ancestors(child.id) == [(root.id, 1)]


def test_bad_input_is_one_clear_error_and_changes_nothing(ws):
    store = TaskStore(ws.db)
    a, b = store.create("researcher", "a"), store.create("researcher", "b")
    store.relate(a.id, b.id, "depends_on")
    before = [_count(ws.db, t) for t in ("tasks", "task_relationships")]
    cases = [
        (lambda: store.get("nope"), TaskNotFoundError, "no task with id 'nope'"),
        (lambda: store.complete("nope"), TaskNotFoundError, "no task"),
        (lambda: store.create("researcher", "x", parent_id="nope"), TaskNotFoundError, "the parent"),
        (lambda: store.relate(a.id, b.id, "depends_on"), TaskError, "already exists"),
        (lambda: store.relate(a.id, a.id, "supersedes"), TaskError, "itself"),
        (lambda: store.relate(a.id, b.id, "likes"), TaskError, "unknown relationship type"),
        (lambda: store.relate(a.id, "nope", "derived_from"), TaskNotFoundError, "no task"),
        (lambda: store.list(status="sleeping"), TaskError, "unknown task status"),
        (lambda: store.complete(a.id, status="stopped"), TaskError, "completed' or 'failed"),
    ]
    for fn, exc, text in cases:
        with pytest.raises(exc, match=text) as info:
            fn()
        assert "\n" not in str(info.value)
    store.complete(a.id, "done")
    with pytest.raises(TaskError, match="cannot go from 'completed' to 'running'"):
        store.assign(a.id, "agent-1")
    assert [_count(ws.db, t) for t in ("tasks", "task_relationships")] == before
    assert store.get(a.id).agent_id is None


def test_drift_config_is_validated():
    with pytest.raises(ConfigError, match="drift: warning_threshold must be below threshold"):
        Config.from_dict({"drift": {"threshold": 0.9, "warning_threshold": 0.95}})
    with pytest.raises(ConfigError, match="consensus.reviewer_strategy"):
        Config.from_dict({"consensus": {"reviewer_strategy": "coin-flip"}})


def test_direct_create_checks_drift_against_ancestors(tmp_path):
    cfg = Config.from_dict({"drift": {"enabled": True, "behavior": "prevent", "warning_threshold": 0.5}})
    with Workspace.open(tmp_path / "p", config=cfg, announce=False) as w:
        svc = TaskService(w.db, w.embedder, w.config)
        root = svc.create("researcher", "summarise the quarterly churn report for the board")["task"]
        mid = svc.create("analyst", "compute monthly churn rates from the billing table", parent_id=root["id"])
        assert mid["created"] and mid["drift"]["action"] == "allowed"
        with pytest.raises(DriftPreventedError, match="repeats ancestor task") as info:
            svc.create("researcher", "summarise the quarterly churn report for the board",
                       parent_id=mid["task"]["id"])  # two levels up: still an ancestor
        assert info.value.result.most_similar_task_id == root["id"]
        assert _count(w.db, "tasks") == 2
        near = svc.drift.check("summarise the quarterly churn report", "researcher", root["id"], record=False)[0]
        assert near.action == "warned" and 0.5 <= near.highest_similarity < 0.95
        m = svc.drift.metrics()
        assert (m["total_events"], m["prevented_count"], m["warned_count"]) == (1, 1, 0)


def test_a_warned_direct_create_names_its_task_in_the_drift_event(tmp_path):
    cfg = Config.from_dict({"drift": {"enabled": True, "behavior": "warn"}})
    with Workspace.open(tmp_path / "p", config=cfg, announce=False) as w:
        svc = TaskService(w.db, w.embedder, w.config)
        root = svc.create("researcher", "summarise the quarterly churn report for the board")["task"]
        again = svc.create("researcher", "summarise the quarterly churn report for the board", parent_id=root["id"])
        assert again["created"] and again["drift"]["action"] == "warned"
        ev = w.db.query("SELECT task_id, action_taken, ancestor_task_id FROM drift_detection_events")
        assert [tuple(r) for r in ev] == [(again["task"]["id"], "warned", root["id"])]
        assert [e["task_id"] for e in svc.drift.recent()] == [again["task"]["id"]]


# --- drift on engine runs ----------------------------------------------------------------------------
PROMPT = "Investigate why weekly active users dropped in the EU region last month"


def _script():
    """The root plans two subquestions: one repeats its own prompt word for word."""
    return TestModel(subquestions=[PROMPT, ("List marketing campaigns that ended in May", "analyst")],
                     main=lambda r: f"answer of {r.metadata['agent_type']} at depth {r.metadata['depth']}")


def _run(ws, **options):
    provider = _script()
    run = AgentRun(PROMPT, workspace=ws, provider=provider,
                   options={"interactive": False, "max_depth": 1, "final_question": False, **options})
    return run, provider


async def test_drift_warn_marks_the_repeating_subagent_and_counts(tmp_path):
    cfg = Config.from_dict({"drift": {"enabled": True, "behavior": "warn"}})
    with Workspace.open(tmp_path / "p", config=cfg, announce=False) as w:
        run, _ = _run(w)
        await run
        kids = run.tree["children"]
        assert len(kids) == 2 and run.status == "completed"
        repeat = next(k for k in kids if k["prompt"] == PROMPT)
        other = next(k for k in kids if k["prompt"] != PROMPT)
        assert repeat["metadata"]["drift"]["action"] == "warned"
        assert repeat["metadata"]["drift"]["similarity"] >= 0.95 and repeat["metadata"]["drift"]["ancestorId"] == run.id
        assert "drift" not in other["metadata"]
        # the badge: in the text tree and in the tree the widget folds from the events
        assert "[⚠ drift 1.00 (warned)]" in tree_to_text(run.tree)
        state = TreeState()
        state.extend(run.events)
        assert state.nodes[repeat["id"]].badges == ["⚠ drift 1.00 (warned)"] and state.nodes[other["id"]].badges == []
        assert any(isinstance(e, AgentState) and e.state.get("metadata", {}).get("drift") for e in run.events)
        # every agent is a task row, related to its parent; the event row names the warned task
        tasks = TaskStore(w.db)
        rows = {t.id: t for t in tasks.list(run_id=run.id)}
        assert set(rows) == {run.id, repeat["id"], other["id"]}
        assert rows[repeat["id"]].status == "completed" and rows[repeat["id"]].parent_id == run.id
        assert rows[run.id].output == run.result
        assert {r.to_task_id for r in tasks.relationships(run.id, "outgoing")} == {repeat["id"], other["id"]}
        ev = w.db.query("SELECT task_id, action_taken, ancestor_task_id FROM drift_detection_events")
        assert [tuple(r) for r in ev] == [(repeat["id"], "warned", run.id)]
        m = TaskService(w.db, w.embedder, w.config).drift.metrics()
        assert (m["total_events"], m["warned_count"], m["prevented_count"]) == (1, 1, 0)


async def test_drift_prevent_does_not_spawn_and_tells_the_parent(tmp_path):
    cfg = Config.from_dict({"drift": {"enabled": True, "behavior": "prevent"}})
    with Workspace.open(tmp_path / "p", config=cfg, announce=False) as w:
        run, provider = _run(w)
        await run
        kids = run.tree["children"]
        assert [k["prompt"] for k in kids] == ["List marketing campaigns that ended in May"]
        notes = run.tree["metadata"]["notes"]
        assert any("subagent not spawned: drift detection" in n for n in notes)
        # the parent's next model call (its main step) says why
        main = next(r for r in provider.requests if r.metadata["step"] == "main" and r.metadata["depth"] == 0)
        assert "subagent not spawned: drift detection" in str(main.messages[-1].content)
        assert _count(w.db, "tasks") == 2
        m = TaskService(w.db, w.embedder, w.config).drift.metrics()
        assert (m["total_events"], m["warned_count"], m["prevented_count"]) == (1, 0, 1)
        assert w.db.query("SELECT task_id FROM drift_detection_events")[0][0] is None


async def test_drift_disabled_by_default_writes_tasks_but_no_embeddings(ws):
    run, _ = _run(ws)
    await run
    assert len(run.tree["children"]) == 2
    assert _count(ws.db, "tasks") == 3 and _count(ws.db, "task_embeddings") == 0
    assert _count(ws.db, "drift_detection_events") == 0
