"""``RunOptions(coordinate=True)``: the root's subquestions go through the durable queue, and the tree is
the same (live ``run.tree`` and ``rebuild_tree`` from the log) whether subagents ran in-process, in an
in-process worker, or in an ``agentstack-lab worker`` process."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys

import pytest

from agentstack_lab.coordination import TaskQueue
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.log import rebuild_tree
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.providers.testing import TestModel

CLI = [sys.executable, "-m", "agentstack_lab.cli"]


def _plan(request):
    depth, prompt = request.metadata["depth"], request.metadata["prompt"]
    if depth == 0:
        return [("part A of the plan", "coder"), ("part B of the plan", "researcher"), ("part C of the plan", "coder")]
    return [(f"a detail of {prompt}", "tester")] if depth == 1 else []


def brain(main=None):
    return TestModel(subquestions=_plan, main=main, summary=lambda r: f"summary of {r.metadata['prompt']}")


def shape(node: dict) -> dict:
    """What a person sees in the tree: type, prompt, status, result, text, and the children (by prompt)."""
    return {"type": node["type"], "prompt": node["prompt"], "status": node["status"], "result": node.get("result"),
            "content": node.get("content"), "depth": node["depth"],
            "children": sorted((shape(c) for c in node.get("children", [])), key=lambda n: n["prompt"])}


async def _run(ws, **options) -> AgentRun:
    run = AgentRun("make the plan", workspace=ws, provider=brain(),
                   options=RunOptions(max_depth=2, final_question=False, **options))
    await run
    await asyncio.sleep(0)
    return run


def test_coordinated_run_has_the_same_tree_as_an_in_process_run(ws):
    plain = asyncio.run(_run(ws))
    coordinated = asyncio.run(_run(ws, coordinate=True, max_workers=2))
    expected = shape(plain.tree)
    assert len(expected["children"]) == 3 and all(len(c["children"]) == 1 for c in expected["children"])
    assert shape(coordinated.tree) == expected
    assert shape(rebuild_tree(ws.db, coordinated.id)) == expected == shape(rebuild_tree(ws.db, plain.id))
    # the root's subquestions went through the queue (priority by the order the model listed them) and
    # were worked by at most two in-process workers; the grandchildren ran inside the workers' runs
    rows = TaskQueue(ws.db).list(group_id=coordinated.id)
    assert sorted((t.priority, t.input, t.state) for t in rows) == [
        (6, "part C of the plan", "completed"), (7, "part B of the plan", "completed"),
        (8, "part A of the plan", "completed")]
    assert len({t.worker_id for t in rows}) <= 2 and all(t.worker_id.startswith("coordinator-") for t in rows)
    child_ids = {c["id"] for c in coordinated.tree["children"]}
    assert child_ids == {t.id for t in rows}  # the queued task is the child agent (same id)
    # agents table: children and grandchildren belong to the coordinator's run and parent
    agents = {r[0]: (r[1], r[2], r[3]) for r in ws.db.query(
        "SELECT id, run_id, parent_id, status FROM agents WHERE run_id = ?", (coordinated.id,))}
    assert len(agents) == 7 and all(v[0] == coordinated.id and v[2] == "completed" for v in agents.values())
    assert {agents[c][1] for c in child_ids} == {coordinated.id}
    # usage rolls up the same way
    assert coordinated.tree["usage"] == plain.tree["usage"]
    # the run's end cleared its group and stopped its workers
    assert coordinated._core.coordination.coordinator.workers == []


def test_stopping_a_coordinated_run_cancels_its_queued_tasks(ws):
    async def main():
        run = AgentRun("make the plan", workspace=ws, provider=brain(),
                       options=RunOptions(max_depth=2, final_question=False, coordinate=True, max_workers=0))
        run.start()
        q = TaskQueue(ws.db)
        for _ in range(400):
            if q.depth(group_id=run.id) == 3:
                break
            await asyncio.sleep(0.01)
        assert q.depth(group_id=run.id) == 3  # nobody works them: max_workers=0 and no worker process
        run.stop()
        await run.wait(raise_on_error=False)
        return run

    run = asyncio.run(main())
    assert run.status == "stopped"
    assert [c["status"] for c in run.tree["children"]] == ["stopped"] * 3
    assert {t.state for t in TaskQueue(ws.db).list(group_id=run.id)} == {"cancelled"}


@pytest.mark.slow
def test_an_external_worker_process_runs_the_subagents_in_the_coordinators_tree(ws):
    proc = subprocess.Popen([*CLI, "-w", str(ws.root), "worker", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        async def main():
            # the demo scripted provider on both sides: the worker builds its own from the provider name
            plain = AgentRun("how are sales trending?", workspace=ws, provider=ScriptedProvider(),
                             options=RunOptions(final_question=False))
            await plain
            run = AgentRun("how are sales trending?", workspace=ws, provider=ScriptedProvider(),
                           options=RunOptions(final_question=False, coordinate=True, max_workers=0))
            await run
            return plain, run

        plain, run = asyncio.run(main())
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert '"completed": 2' in out
    assert len(run.tree["children"]) == 2
    assert shape(run.tree) == shape(plain.tree) == shape(rebuild_tree(ws.db, run.id))
    rows = TaskQueue(ws.db).list(group_id=run.id)
    assert {t.worker_id for t in rows} == {f for f in (rows[0].worker_id,)} and f"-{proc.pid}-" in rows[0].worker_id
    for child in run.tree["children"]:
        assert child["metadata"]["queue"]["worker"] == rows[0].worker_id


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_max_workers_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="RunOptions.max_workers must be a non-negative integer"):
        RunOptions(max_workers=bad)


@pytest.mark.slow
def test_magic_and_cli_take_coordinate(ws):
    from agentstack_lab.notebook.args import MagicUsageError, parse_agent_line

    args = parse_agent_line("--coordinate --max-workers 2 how are sales?")
    assert args.coordinate and args.max_workers == 2 and args.prompt == "how are sales?"
    assert not parse_agent_line("how are sales?").coordinate
    with pytest.raises(MagicUsageError, match="--max-workers"):
        parse_agent_line("--coordinate --max-workers many q")
    # agent run --coordinate, in-process workers only: the subagents went through the queue
    proc = subprocess.run([*CLI, "-w", str(ws.root), "agent", "run", "how are sales trending?", "--coordinate",
                           "--max-workers", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = ws.db.query("SELECT state, worker_id FROM task_queue")
    assert len(rows) == 2 and {r[0] for r in rows} == {"completed"}
    # one worker at a time: the researcher's worker was retired to make room for the reviewer's
    assert sorted(r[1].rsplit("-", 2)[1:] for r in rows) == [["researcher", "1"], ["reviewer", "2"]]
    bad = subprocess.run([*CLI, "-w", str(ws.root), "agent", "run", "q", "--coordinate", "--max-workers", "-1"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--max-workers" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def failing_brain():
    """``brain``, but the model call of part B's main step raises (a provider outage for that one subagent)."""
    def main(request):
        if request.metadata["prompt"] == "part B of the plan":
            raise RuntimeError("provider outage for part B")
    return brain(main)


def test_a_failed_queued_child_is_logged_once_and_the_run_derives_its_status(ws):
    async def one(**options):
        seen = []
        run = AgentRun("make the plan", workspace=ws, provider=failing_brain(),
                       options=RunOptions(max_depth=1, final_question=False, **options))
        run.subscribe(seen.append)
        await run.wait(raise_on_error=False)
        await asyncio.sleep(0)
        return run, seen

    plain, _ = asyncio.run(one())
    run, seen = asyncio.run(one(coordinate=True, max_workers=2))
    failed = [c for c in run.tree["children"] if c["status"] == "failed"]
    assert [c["prompt"] for c in failed] == ["part B of the plan"]
    child = failed[0]["id"]
    assert "provider outage for part B" in failed[0]["error"]
    # the root goes on without it, as in an in-process run: same status, same tree, same note in its answer
    assert run.status == plain.status == "completed"
    def same(tree):  # the root's answer names the failed child (researcher-<its id>): ids differ per run
        return json.loads(re.sub(r"researcher-[0-9a-f]{8}", "researcher-*", json.dumps(shape(tree))))

    assert same(run.tree) == same(plain.tree) == same(rebuild_tree(ws.db, run.id))
    assert "Subagents that did not complete: researcher-" in run.result
    assert "(failed: RuntimeError: provider outage for part B)" in run.result   # the child's own error
    # the worker's run logged the child's error; the coordinator announced it without logging it again
    terminal = ws.db.query("SELECT agent_id, type FROM events WHERE run_id = ? AND type IN ('error', 'agent-completed')",
                           (run.id,))
    assert sorted(t for a, t in terminal if a == child) == ["error"]
    others = [a for a, _ in terminal if a != child]
    assert len(others) == len(set(others)) == 3            # the other two children and the root: one each
    heard = [(ev.type, ev.agent_id) for ev in seen if ev.type in ("error", "agent-completed")]
    assert heard.count(("error", child)) == 1 and ("agent-completed", child) not in heard
    assert sorted(heard) == sorted((t, a) for a, t in terminal)
    rows = {t.id: t for t in TaskQueue(ws.db).list(group_id=run.id)}
    assert rows[child].state == "failed" and "provider outage for part B" in rows[child].error
    assert ws.db.query("SELECT status FROM agents WHERE id = ?", (child,))[0][0] == "failed"


def test_queued_children_snapshots_are_logged_once(ws):
    """The log holds each snapshot once: the coordinator's "queued" one, the worker's run's own, one merge."""
    plain = asyncio.run(_run(ws))
    seen = []

    async def coordinated() -> AgentRun:
        run = AgentRun("make the plan", workspace=ws, provider=brain(),
                       options=RunOptions(max_depth=2, final_question=False, coordinate=True, max_workers=2))
        run.subscribe(seen.append)
        await run
        await asyncio.sleep(0)
        return run

    run = asyncio.run(coordinated())

    def logged(run_id: str) -> dict[str, list[tuple[str, dict]]]:
        out: dict[str, list[tuple[str, dict]]] = {}
        for agent, etype, payload in ws.db.query(
                "SELECT agent_id, type, payload FROM events WHERE run_id = ? ORDER BY seq", (run_id,)):
            if etype in ("agent-state", "agent-completed"):
                out.setdefault(agent, []).append((etype, json.loads(payload).get("state", {})))
        return out

    def statuses(events: list[tuple[str, dict]]) -> list[str]:
        return [s["status"] if t == "agent-state" else t for t, s in events]

    ours, theirs = logged(run.id), logged(plain.id)
    plain_grandchild = statuses(theirs[plain.tree["children"][0]["children"][0]["id"]])
    for child in run.tree["children"]:
        events = ours[child["id"]]
        got = statuses(events)
        # queued: one "pending" snapshot, in the log before anything the worker's run logs for the child
        assert got[0] == "pending" and got.count("pending") == 1, got
        assert "running" in got and got[-1] == "completed", got
        assert "running" not in got[got.index("completed"):], got  # never back to running once completed
        # the coordinator's merge: one snapshot saying where it ran, the last one
        merged = [s for t, s in events if t == "agent-state" and "queue" in s["metadata"]]
        assert len(merged) == 1 and merged[0] is events[-1][1] and merged[0]["metadata"]["queue"]["attempts"] == 1
        for grandchild in child["children"]:  # logged by the worker's run only: as an in-process run logs it
            assert statuses(ours[grandchild["id"]]) == plain_grandchild
    # the coordinator's own subscribers still hear every queued agent's final snapshot, with its text
    heard = {ev.agent_id: ev.state for ev in seen if ev.type == "agent-state" and "content" in ev.state}
    assert all(heard[g["id"]]["content"] for c in run.tree["children"] for g in c["children"])
    assert shape(rebuild_tree(ws.db, run.id)) == shape(plain.tree)
