"""A coordinated subagent run by a worker files its decisions under the coordinator's run id, and an
intervention (``agent pause``) for it reaches the worker's run (issue 25, one name per concept): the
worker's attached run has the child's id as its root agent id and the coordinator's as its run id."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from agentstack_lab.decisions import Decisions, Interventions
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.coordinate import Worker
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.providers.scripted import tool_call
from agentstack_lab.providers.testing import TestModel
from tests.test_engine import last_tool_result


def brain():
    def main(request):  # the subagent runs code: an approval the worker's run asks
        if request.metadata["depth"] == 1 and last_tool_result(request) is None:
            return [tool_call("python", {"code": "x = 1"})]
    return TestModel(subquestions=[("part A", "coder")], main=main)


def until(what, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_worker_run_subagent_decisions_and_pause_use_the_coordinators_run_id(ws):
    stop = threading.Event()
    worker = Worker(ws, run_factory=AgentRun, provider=brain(), idle_poll=0.05)

    async def serve():
        task = asyncio.ensure_future(worker.run())
        while not stop.is_set():
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="test-worker")
    thread.start()
    try:
        async def main():
            run = AgentRun("make the plan", workspace=ws, provider=brain(),
                           options=RunOptions(final_question=False, coordinate=True, max_workers=0, on_query="wait"))
            run.start()
            decisions = Decisions(ws.db)
            pending = await asyncio.to_thread(until, lambda: decisions.list(run=run.id, state="pending"))
            (d,) = pending  # filed by the worker's run under the coordinator's run id
            child = run.tree["children"][0]["id"]
            assert d.agent_id == child and d.run_id == run.id
            item = Interventions(ws.db).request(child, "pause", surface="cli")
            assert item.run_id == run.id

            def applied():
                row = ws.db.query("SELECT applied_at, error FROM interventions WHERE id = ?", (item.id,))[0]
                return row if row[0] is not None else None

            row = await asyncio.to_thread(until, applied)
            assert row[1] is None   # applied by the worker's run, not refused as "no agent"
            def paused():  # the worker's run logged the child paused (its log flushes on its own loop)
                rows = ws.db.query("SELECT payload FROM events WHERE run_id = ? AND agent_id = ? AND type = "
                                   "'agent-state'", (run.id, child))
                return any((json.loads(p[0])["state"].get("metadata") or {}).get("paused") for p in rows)

            await asyncio.to_thread(until, paused)
            decisions.answer(d.id, True, surface="cli")
            Interventions(ws.db).request(child, "resume", surface="cli")
            await run
            return run

        run = asyncio.run(main())
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
    assert run.status == "completed" and run.tree["children"][0]["status"] == "completed"
    (d,) = Decisions(ws.db).list(run=run.id)
    assert d.state == "answered" and d.kind == "approval"
