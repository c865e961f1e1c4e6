"""The engine's queries as decisions, in process: the widget path and another surface race for one answer,
the widget card says where the answer came from, policies, stop cancels, pause/resume."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentstack_lab.decisions import DecisionClosedError, Decisions, decisions_for
from agentstack_lab.engine import AgentRun, HeadlessQueryError
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import UserQuery
from agentstack_lab.notebook.widget import AgentTree
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from tests.test_engine import brain, last_tool_result


def code_brain(ran_note: str = "ran"):
    def main(req):
        if last_tool_result(req) is None:
            return [tool_call("python", {"code": f"ran.append({ran_note!r})"})]
        return "done: " + last_tool_result(req).content

    return brain(main=main)


async def test_answer_from_another_surface_wins_and_the_widget_card_names_it(ws):
    ran: list[str] = []
    run = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()),
                   options={"subagents": False}, executor=LiveKernelExecutor(namespace={"ran": ran}))
    tree = AgentTree(run)
    queries: list[UserQuery] = []
    run.subscribe(lambda ev: queries.append(ev) if isinstance(ev, UserQuery) else None)
    run.start()
    while not queries:
        await asyncio.sleep(0.01)
    q = queries[0]
    stored = Decisions(ws.db).get(q.query_id)  # the query is a persisted decision, id = queryId
    assert (stored.kind, stored.run_id, stored.agent_id, stored.code) == ("approval", run.id, run.id, "ran.append('ran')")
    # another process's surface (a fresh Decisions on another thread's connection) answers first
    t = threading.Thread(target=lambda: Decisions(ws.db).approve(q.query_id, by="alice", surface="cli"))
    t.start()
    t.join()
    with pytest.raises(DecisionClosedError, match=r"already answered \(by alice, from the terminal\)"):
        for _ in range(200):
            run.respond(q.query_id, False)  # the widget's answer, late: the clear message, no second answer
            await asyncio.sleep(0.01)
    await run
    assert ran == ["ran"] and run.status == "completed"
    tree.flush()
    note = tree.node_view(run.id).query.children
    assert len(note) == 1 and "approval answered from the terminal (by alice)" in note[0].value
    assert Decisions(ws.db).get(q.query_id).answer == {"approved": True}


async def test_widget_path_answer_is_a_decision_answered_from_the_notebook(ws):
    run = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()),
                   options={"subagents": False}, executor=LiveKernelExecutor(namespace={"ran": []}))
    run.subscribe(lambda ev: run.respond(ev.query_id, True) if isinstance(ev, UserQuery) else None)
    await run
    (d,) = Decisions(ws.db).list(run=run.id)
    assert (d.state, d.surface, d.answer) == ("answered", "widget", {"approved": True})
    assert run.tree["metadata"]["answers"][-1]["source"] == "widget"


async def test_stop_and_run_end_cancel_pending_decisions(ws):
    run = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()), options={"subagents": False},
                   executor=LiveKernelExecutor(namespace={"ran": []}))
    run.start()
    ds = decisions_for(ws)
    while not ds.list(run=run.id, state="pending"):
        await asyncio.sleep(0.01)
    run.stop(reason="enough")
    await run.wait(raise_on_error=False)
    (d,) = ds.list(run=run.id)
    assert d.state == "cancelled" and d.reason == "enough"


async def test_policies_fail_auto_and_wait_with_expiry(ws):
    failing = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()),
                       options={"subagents": False, "interactive": False})
    with pytest.raises(HeadlessQueryError, match="on_query=fail"):
        await failing
    ran: list[str] = []
    auto = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()),
                    options={"subagents": False, "interactive": False, "on_query": "auto"},
                    executor=LiveKernelExecutor(namespace={"ran": ran}))
    await auto
    assert ran == ["ran"]
    (d,) = Decisions(ws.db).list(run=auto.id)
    assert (d.state, d.surface, d.answered_by) == ("answered", "policy", "on_query=auto")
    waiting = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()),
                       options={"subagents": False, "interactive": False, "on_query": "wait",
                                "decision_timeout": "200ms"})
    with pytest.raises(HeadlessQueryError, match=r"nobody answered its approval query within 0.2 s"):
        await waiting
    (e,) = Decisions(ws.db).list(run=waiting.id)
    assert e.state == "expired"
    with pytest.raises(ValueError, match="RunOptions.on_query must be one of fail, wait, auto"):
        AgentRun("x", workspace=ws, options={"on_query": "ask"})


async def test_pause_holds_the_agent_between_steps_until_resume(ws):
    run = AgentRun("sales?", workspace=ws, provider=ScriptedProvider(code_brain()), options={"subagents": False},
                   executor=LiveKernelExecutor(namespace={"ran": []}))
    queries: list[UserQuery] = []
    run.subscribe(lambda ev: queries.append(ev) if isinstance(ev, UserQuery) else None)
    run.start()
    while not queries:
        await asyncio.sleep(0.01)
    run.intervene(run.id, status="paused")
    run.respond(queries[0].query_id, True)
    await asyncio.sleep(0.3)
    assert not run.done and run.tree["metadata"]["paused"] is True  # held before its next model call
    run.intervene(run.id, status="running")
    await run
    assert run.status == "completed" and "paused" not in run.tree["metadata"]


async def test_a_run_ends_only_after_its_interventions_read_in_flight_is_done(ws, monkeypatch):
    """The run's interventions loop reads in a worker thread; cancelling it must not leave that read running.

    Whoever awaited the run may close the workspace next, and a database closed under a read in another
    thread crashed the kernel (SIGSEGV). Here the first read takes 0.5 s, far longer than the run.
    """
    import time

    from agentstack_lab.decisions import Interventions

    reading, original = [], Interventions.pending

    def slow_pending(self, run_id):
        reading.append(run_id)
        try:
            time.sleep(0.5)
            return original(self, run_id)
        finally:
            reading.remove(run_id)

    monkeypatch.setattr(Interventions, "pending", slow_pending)
    run = AgentRun("what is a monad?", workspace=ws, provider=ScriptedProvider(brain(main=lambda req: "done")),
                   options={"subagents": False})
    started = time.monotonic()
    await run
    assert run.status == "completed"
    assert reading == [], "the run ended while its interventions loop was still reading"
    assert time.monotonic() - started >= 0.4   # it waited for the read under way
