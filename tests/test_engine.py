"""The recursive agent engine through its public surface, with the scripted provider."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from agentstack_lab.engine import AgentRun, BudgetExceededError, HeadlessQueryError, RunOptions, run_agent
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.engine.log import read_events, rebuild_tree
from agentstack_lab.engine.state import tree_from_events
from agentstack_lab.events import (
    AgentCompleted,
    AgentState,
    ErrorEvent,
    TextDelta,
    ToolCall,
    ToolResult,
    UserIntervention,
    UserQuery,
    UserResponse,
    from_wire,
    to_wire,
)
from agentstack_lab.providers.base import TextDeltaEvent, ToolResultBlock, UsageEvent
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.providers.testing import TestModel


def brain(subs=None, main=None, summary=None, asks=None):
    """A test model's steps: ``subs[prompt]`` lists subquestions, ``main(req)`` answers, ``asks[step]`` asks."""
    subs, asks = subs or {}, asks or {}
    return TestModel(subquestions=lambda r: list(subs.get(r.metadata["prompt"], [])), main=main, summary=summary,
                     **{step: asks.get(step) for step in ("clarify", "blocking", "final")}).reply


def last_tool_result(req):
    last = req.messages[-1]
    if last.role == "user" and not isinstance(last.content, str):
        return next((b for b in last.content if isinstance(b, ToolResultBlock)), None)
    return None


def check_event_order(events):
    """Per agent: pending, then running before any output, and completed/error last."""
    by_agent = {}
    for ev in events:
        by_agent.setdefault(ev.agent_id, []).append(ev)
    for agent_id, evs in by_agent.items():
        assert isinstance(evs[0], AgentState) and evs[0].state["status"] == "pending", agent_id
        first_running = next(i for i, e in enumerate(evs) if isinstance(e, AgentState) and e.state["status"] == "running")
        first_output = next((i for i, e in enumerate(evs) if isinstance(e, TextDelta | ToolCall | ToolResult)), None)
        assert first_output is None or first_running < first_output
        assert isinstance(evs[-1], AgentCompleted | ErrorEvent), (agent_id, evs[-1])
        assert sum(isinstance(e, AgentCompleted | ErrorEvent) for e in evs) == 1
        open_call = None  # every tool-call is closed by exactly one tool-result before the next call
        for e in evs:
            if isinstance(e, ToolCall):
                assert open_call is None, (agent_id, "tool-call without a tool-result", open_call)
                open_call = e
            elif isinstance(e, ToolResult):
                assert open_call is not None and open_call.tool == e.tool, (agent_id, "tool-result without a call")
                open_call = None
        assert open_call is None, (agent_id, "tool-call never closed", open_call)
    return by_agent


async def test_root_three_subagents_and_nested_fork_tree_and_log(ws):
    def main(req):
        prompt = req.metadata["prompt"]
        if prompt == "B" and last_tool_result(req) is None:
            return [TextDeltaEvent(text="forking. "),
                    tool_call("python", {"code": "h = fork('nested question', type='coder')\nnested = wait(h)\nnested"})]
        if prompt == "B":
            return f"B got: {last_tool_result(req).content}"
        return f"answer to {prompt}"

    p = ScriptedProvider(brain(subs={"root q": [("A", "analyst"), ("B", "researcher"), ("C", "reviewer")]}, main=main))
    ns = {}
    run = AgentRun("root q", workspace=ws, provider=p, options=RunOptions(auto_approve=True),
                   executor=LiveKernelExecutor(namespace=ns))
    result = await run
    tree = run.tree
    assert run.status == "completed" and tree["status"] == "completed"
    assert [c["prompt"] for c in tree["children"]] == ["A", "B", "C"]
    assert [c["type"] for c in tree["children"]] == ["analyst", "researcher", "reviewer"]
    b = tree["children"][1]
    assert len(b["children"]) == 1 and b["children"][0]["type"] == "coder" and b["children"][0]["depth"] == 2
    assert b["children"][0]["metadata"]["origin"] == "fork"
    assert ns["nested"] == "answer to nested question"
    assert "B got:" in b["result"] and "answer to nested question" in b["result"]
    assert "answer to A" in result and "answer to C" in result
    # usage rolls up
    own = sum(n.usage.total for n in run.agents.values())
    assert tree["usage"]["inputTokens"] + tree["usage"]["outputTokens"] == own > 0
    check_event_order(run.events)
    # the log has every event in order, and the tree rebuilt from it equals the live one
    logged = read_events(ws.db, run.id)
    assert [to_wire(e) for _, e in logged] == [json.loads(json.dumps(to_wire(e), default=str)) for e in run.events]
    assert [s for s, _ in logged] == sorted(s for s, _ in logged)
    assert rebuild_tree(ws.db, run.id) == json.loads(json.dumps(tree))
    assert tree_from_events([to_wire(e) for e in run.events]) == tree
    # agents persist with their final statuses
    rows = ws.db.query("SELECT status, COUNT(*) FROM agents WHERE run_id = ? GROUP BY status", (run.id,))
    assert {r[0]: r[1] for r in rows} == {"completed": 5}


async def test_timings_are_real_and_reach_the_tree_the_log_and_the_agents_table(ws):
    p = ScriptedProvider(brain(subs={"root": [("A", "analyst"), ("B", "coder")]}), latency=0.05)
    run = AgentRun("root", workspace=ws, provider=p)
    await run
    calls = {n.id: sum(r.metadata["agent_id"] == n.id for r in p.requests) for n in run.agents.values()}

    def check(node):
        took = node["endedAt"] - node["startedAt"]
        assert node["createdAt"] <= node["startedAt"] and took >= 0.05 * calls[node["id"]] * 0.9, node["prompt"]
        for c in node["children"]:
            assert node["startedAt"] <= c["startedAt"] and c["endedAt"] <= node["endedAt"]
            check(c)

    check(run.tree)
    assert rebuild_tree(ws.db, run.id) == json.loads(json.dumps(run.tree))
    rows = ws.db.query("SELECT started_at, ended_at FROM agents WHERE run_id = ?", (run.id,))
    assert len(rows) == 3 and all(r[0] and r[1] and r[0] < r[1] for r in rows)


async def test_clarification_and_approval_answered_programmatically_with_an_edit(ws):
    ran = []

    def main(req):
        if last_tool_result(req) is None:
            return [tool_call("python", {"code": "ran.append('original')"})]
        return "done: " + last_tool_result(req).content

    p = ScriptedProvider(brain(main=main, asks={"clarify": "Which year?"}))
    run = AgentRun("sales?", workspace=ws, provider=p, executor=LiveKernelExecutor(namespace={"ran": ran}))
    seen = []

    def on_event(ev):
        if isinstance(ev, UserQuery):
            seen.append(ev)
            if ev.kind == "clarification":
                run.send(UserResponse(agent_id=ev.agent_id, query_id=ev.query_id, response="2024"))
            elif ev.kind == "approval":
                assert ev.options["code"] == "ran.append('original')"
                with pytest.raises(ValueError, match="approval answer must be"):
                    run.respond(ev.query_id, "maybe")  # invalid: nothing changes, still pending
                assert run.pending_queries == [ev]
                run.respond(ev.query_id, {"approved": True, "code": "ran.append('edited')"})

    run.subscribe(on_event)
    result = await run
    assert [q.kind for q in seen] == ["clarification", "approval"]
    assert ran == ["edited"] and "edited the code" in result
    # the clarification answer reached the next model call
    blocking_req = next(r for r in p.requests if r.metadata["step"] == "blocking")
    assert "Which year?" in blocking_req.messages[0].text() and "2024" in blocking_req.messages[0].text()
    states = [e.state["status"] for e in run.events if isinstance(e, AgentState)]
    assert "waiting_user" in states


async def test_approval_rejected_tells_the_model_and_does_not_run(ws):
    ran = []

    def main(req):
        res = last_tool_result(req)
        if res is None:
            return [tool_call("python", {"code": "ran.append(1)"})]
        return f"model saw: {res.content} (error={res.is_error})"

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)),
                   executor=LiveKernelExecutor(namespace={"ran": ran}))
    run.subscribe(lambda ev: isinstance(ev, UserQuery) and run.respond(ev.query_id, "reject"))
    result = await run
    assert ran == [] and "rejected running this code" in result and "error=True" in result


async def test_headless_without_answers_fails_closed_and_answers_work(ws):
    ran = []
    main = lambda req: [tool_call("python", {"code": "ran.append(1)"})] if last_tool_result(req) is None else "ok"  # noqa: E731
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)),
                   options=RunOptions(interactive=False), executor=LiveKernelExecutor(namespace={"ran": ran}))
    with pytest.raises(HeadlessQueryError, match=r"needs an answer to an approval query .* headless .*auto_approve=True"):
        await run
    assert ran == [] and run.status == "failed" and "headless" in run.tree["error"]
    check_event_order(run.events)  # the approval that failed closed still closed its tool-call
    run2 = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)),
                    options=RunOptions(interactive=False, answers={"approval": True}),
                    executor=LiveKernelExecutor(namespace={"ran": ran}))
    assert await run2 == "ok" and ran == [1]


async def test_intervention_comment_reaches_the_next_model_call(ws):
    p_holder = {}

    def main(req):
        if last_tool_result(req) is None:
            return [tool_call("python", {"code": "x = 1 + 1"})]  # not read-only: asked
        return "final"

    p = ScriptedProvider(brain(main=main))
    p_holder["p"] = p
    run = AgentRun("q", workspace=ws, provider=p)

    def on_event(ev):
        if isinstance(ev, UserQuery) and ev.kind == "approval":
            run.send(UserIntervention(agent_id=ev.agent_id, user_comment="please use median"))
            run.respond(ev.query_id, True)

    run.subscribe(on_event)
    await run
    mains = [r for r in p.requests if r.metadata["step"] == "main"]
    assert "please use median" not in json.dumps([m.text() for m in mains[0].messages])
    assert any("User comment: please use median" in getattr(b, "text", "")
               for b in mains[1].messages[-1].content)
    assert run.tree["userComment"] == "please use median"


async def test_intervention_replaces_content_of_a_finished_child_and_a_working_agent(ws):
    gate = asyncio.Event()

    async def main(req):
        prompt = req.metadata["prompt"]
        if prompt == "root":
            if last_tool_result(req) is None:
                await gate.wait()  # the root works while the user edits the finished child
                return [tool_call("python", {"code": "1"})]
            return "root answer"
        return f"model answer to {prompt}"

    p = ScriptedProvider(brain(subs={"root": [("A", "analyst")]}, main=main))
    run = AgentRun("root", workspace=ws, provider=p, executor=LiveKernelExecutor(namespace={}))

    def on_event(ev):
        if isinstance(ev, AgentCompleted) and ev.agent_id != run.id:
            run.send(UserIntervention(agent_id=ev.agent_id, user_content="the user's corrected answer for A"))
            run.send(UserIntervention(agent_id=run.id, user_content="root draft, edited by the user"))
            gate.set()
        elif isinstance(ev, UserQuery):
            run.respond(ev.query_id, True)

    run.subscribe(on_event)
    result = await run
    a = run.tree["children"][0]
    assert a["result"] == a["content"] == "the user's corrected answer for A" and a["metadata"]["contentReplaced"]
    assert "the user's corrected answer for A" in result and "model answer to A" not in result  # merged the user's
    mains = [r for r in p.requests if r.metadata["step"] == "main" and r.metadata["prompt"] == "root"]
    assert "The user replaced your text so far with:\nroot draft, edited by the user" in [
        getattr(b, "text", "") for b in mains[1].messages[-1].content]
    assert rebuild_tree(ws.db, run.id) == json.loads(json.dumps(run.tree))
    with pytest.raises(TypeError, match="user_content must be a string"):
        run.intervene(run.id, user_content=42)


@pytest.mark.slow
async def test_stop_cancels_exactly_the_subtree(ws):
    started = asyncio.Event()

    async def main(req):
        if req.metadata["prompt"] in ("A", "A1"):
            if req.metadata["prompt"] == "A1":
                started.set()
            await asyncio.sleep(30)
        return f"answer to {req.metadata['prompt']}"

    p = ScriptedProvider(brain(subs={"root": [("A", "analyst"), ("B", "coder")], "A": [("A1", "tester")]}, main=main))
    run = AgentRun("root", workspace=ws, provider=p, options=RunOptions(auto_approve=True)).start()
    await asyncio.wait_for(started.wait(), 10)
    await run._core.flush_log()  # the agent rows are on disk: another process sees them live
    code = ("import sys, json; from agentstack_lab.store import SQLiteDatabase; from agentstack_lab.agents import Spawner;"
            "print(json.dumps({a.prompt: a.status for a in Spawner(SQLiteDatabase(sys.argv[1])).list(run_id=sys.argv[2])}))")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, str(ws.db.path), run.id,
                                                stdout=asyncio.subprocess.PIPE)
    seen = json.loads((await proc.communicate())[0])
    assert seen["A"] == seen["A1"] == "running" and seen["root"] == "running"
    a = next(n for n in run.agents.values() if n.prompt == "A")
    run.send(UserIntervention(agent_id=a.id, status="stopped"))
    await asyncio.wait_for(run.wait(), 10)
    status = {n.prompt: n.status for n in run.agents.values()}
    assert status == {"root": "completed", "A": "stopped", "A1": "stopped", "B": "completed"}
    assert run.agents[a.id].error == "stopped by the user"
    assert "A" in run.result and "stopped" in run.result and "answer to B" in run.result
    check_event_order(run.events)


async def test_child_failure_is_isolated_and_named_in_the_summary(ws):
    def main(req):
        if req.metadata["prompt"] == "bad":
            raise RuntimeError("model exploded")
        return f"answer to {req.metadata['prompt']}"

    p = ScriptedProvider(brain(subs={"root": [("good", "analyst"), ("bad", "coder"), ("fine", "tester")]}, main=main))
    run = AgentRun("root", workspace=ws, provider=p)
    result = await run
    status = {n.prompt: (n.status, n.error) for n in run.agents.values()}
    assert status["bad"] == ("failed", "RuntimeError: model exploded")
    assert status["good"][0] == status["fine"][0] == status["root"][0] == "completed"
    bad = next(n for n in run.agents.values() if n.prompt == "bad")
    assert bad.name in result and "failed" in result
    assert any(isinstance(e, ErrorEvent) and e.agent_id == bad.id for e in run.events)


async def test_depth_and_agent_budgets_are_enforced_with_reasons(ws):
    def main(req):
        if last_tool_result(req) is None and req.metadata["depth"] == 1:
            return [tool_call("python", {"code": "fork('too deep')"})]
        res = last_tool_result(req)
        return f"tool said: {res.content}" if res else "leaf"

    subs = {"root": [("one", "analyst"), ("two", "coder"), ("three", "tester")]}
    run = AgentRun("root", workspace=ws, provider=ScriptedProvider(brain(subs=subs, main=main)),
                   options=RunOptions(max_depth=1, max_agents=3, auto_approve=True),
                   executor=LiveKernelExecutor(namespace={}))
    await run
    assert len(run.agents) == 3  # root + two children: the third subquestion was over max_agents
    assert any("max_agents=3 reached" in n for n in run.tree["metadata"]["notes"])
    child = run.tree["children"][0]
    assert "BudgetExceededError: max_depth=1 reached" in child["result"]
    results = [e for e in run.events if isinstance(e, ToolResult)]
    assert all("max_depth=1" in (e.error or "") for e in results)


async def test_a_plan_that_never_fits_the_schema_is_skipped_not_fatal(ws):
    five = {"subquestions": [{"question": f"q{i}", "agent_type": "coder"} for i in range(5)]}  # max is 4
    fn = brain()

    def model(req):
        return five if req.metadata["step"] == "subquestions" else fn(req)

    run = AgentRun("root", workspace=ws, provider=ScriptedProvider(model))
    assert await run == "answer to root" and run.tree["children"] == []
    assert any("subquestions step skipped" in n and "after a retry" in n for n in run.tree["metadata"]["notes"])


async def test_token_budget_stops_the_tree_cleanly(ws):
    async def main(req):
        await asyncio.sleep(0.05 if req.metadata["depth"] else 0.5)
        return [TextDeltaEvent(text="word " * 50), UsageEvent(input_tokens=10, output_tokens=1000)]

    subs = {"root": [("A", "analyst"), ("B", "coder")]}
    run = AgentRun("root", workspace=ws, provider=ScriptedProvider(brain(subs=subs, main=main)),
                   options=RunOptions(max_tokens=2500))
    with pytest.raises(BudgetExceededError, match=r"max_tokens=2500 \(the tree used \d+ tokens\)"):
        await run
    stopped = {n.id for n in run.agents.values() if n.status == "stopped"}
    assert run.status == "stopped" and len(stopped) >= 2
    assert {n.status for n in run.agents.values()} <= {"completed", "stopped"}
    errors = {e.agent_id: e.error for e in run.events if isinstance(e, ErrorEvent)}
    assert set(errors) == stopped and all("max_tokens=2500" in e for e in errors.values())


async def test_wall_clock_budget(ws):
    async def main(req):
        await asyncio.sleep(30)

    run = AgentRun("root", workspace=ws, provider=ScriptedProvider(brain(main=main)), options=RunOptions(timeout_s=0.3))
    with pytest.raises(BudgetExceededError, match="timeout_s=0.3"):
        await asyncio.wait_for(run.wait(), 10)
    assert run.status == "stopped"


async def test_run_agent_generator_and_many_deltas_are_logged(ws):
    n = 10_000

    def main(req):
        return [TextDeltaEvent(text="x") for _ in range(n)]

    events = [ev async for ev in run_agent("q", workspace=ws, provider=ScriptedProvider(brain(main=main)))]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == n and isinstance(events[-1], AgentCompleted) and events[-1].result == "x" * n
    count = ws.db.query("SELECT COUNT(*) FROM events WHERE run_id = ?", (events[0].agent_id,))[0][0]
    assert count == len(events)


async def test_demo_behaviour_end_to_end_reads_df(ws):
    pd = pytest.importorskip("pandas")
    ns = {"df": pd.DataFrame({"month": ["2024-01", "2024-02", "2024-03"], "region": ["N", "S", "N"],
                              "sales": [10, 20, 30]})}
    run = AgentRun("how are sales trending in df?", workspace=ws, options={"auto_approve": True},
                   executor=LiveKernelExecutor(namespace=ns))
    result = await run
    assert "offline" in result and "df: DataFrame, 3 rows x 3 columns" in result and "columns: month, region, sales" in result
    assert "sales: mean 20, min 10, max 30" in result
    assert "**sales** rose from 10 (2024-01) to 30 (2024-03): +200.0%" in result  # computed by the python tool
    assert ns["df_summary"].loc["mean", "sales"] == 20 and len(run.tree["children"]) == 3
    # the numbers follow the data (nothing canned): other data, other answer; other kinds stay generic
    ns["df"] = pd.DataFrame({"date": pd.date_range("2024-01-01", periods=4).repeat(2), "amount": range(8)})
    other = await AgentRun("and now `df`?", workspace=ws, options={"auto_approve": True, "subagents": False},
                           executor=LiveKernelExecutor(namespace=ns))
    assert "**amount** rose from 1 (2024-01-01) to 13 (2024-01-04): +1200.0% (summed per date)" in other
    ns["levels"] = [4, 3, 2]
    listed = await AgentRun("look at `levels`", workspace=ws, options={"auto_approve": True, "subagents": False},
                            executor=LiveKernelExecutor(namespace=ns))
    assert "levels: list of 3 numbers" in listed and "**levels** fell from 4 (first) to 2 (last): -50.0%" in listed
    missing = await AgentRun("look at `nope_df`", workspace=ws, options={"auto_approve": True, "subagents": False},
                             executor=LiveKernelExecutor(namespace=ns))
    assert "it failed: NameError: name 'nope_df' is not defined" in missing


def test_bad_input_is_rejected_before_anything_runs(ws):
    with pytest.raises(ValueError, match="non-empty"):
        AgentRun("  ", workspace=ws)
    with pytest.raises(KeyError, match="unknown agent type 'wizard'"):
        AgentRun("q", workspace=ws, agent_type="wizard")
    with pytest.raises(ValueError, match="unknown run options \\['max_dept'\\]"):
        AgentRun("q", workspace=ws, options={"max_dept": 3})
    with pytest.raises(ValueError, match="max_depth must be a non-negative integer"):
        RunOptions(max_depth=-1)
    with pytest.raises(ValueError, match="unknown query kinds"):
        RunOptions(answers={"approve": True})
    assert ws.db.query("SELECT COUNT(*) FROM events")[0][0] == 0


async def test_inbound_wire_messages_and_get_tree(ws):
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain()))
    await run
    assert run.send({"type": "get-agent-tree"}) == run.tree
    with pytest.raises(KeyError, match="no pending query"):
        run.send(from_wire({"type": "user-response", "agentId": run.id, "queryId": "nope", "response": "x"}))
    with pytest.raises(ValueError, match="can set status 'stopped', 'paused' or 'running'"):
        run.send(UserIntervention(agent_id=run.id, status="completed"))


async def test_memory_tools_are_scoped_to_the_run_session(ws):
    other = ws.sessions.start("other")
    ws.memory.scoped(other.id).store("secret", "churn rose in march", namespace=f"session:{other.id}")

    def main(req):
        res = last_tool_result(req)
        if res is None:
            return [tool_call("memory_store", {"key": "finding", "content": "churn fell in april", "tags": ["churn"]})]
        if "stored" in res.content:
            return [tool_call("memory_search", {"query": "churn"})]
        return f"found: {res.content}"

    mine = ws.sessions.start("mine")
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)), session_id=mine.id)
    result = await run
    assert run.session_id == mine.id and "churn fell in april" in result and "march" not in result
    entry = ws.memory.scoped(run.session_id).get("finding", namespace=f"session:{run.session_id}")
    assert entry.content == "churn fell in april" and entry.agent_id == run.id  # the caller's session keeps it
    assert ws.sessions.status(mine.id).status == "active"


async def test_a_run_without_a_session_ends_its_own_with_its_notes(ws):
    def main(req):
        res = last_tool_result(req)
        if res is None:
            return [tool_call("memory_store", {"key": "finding", "content": "churn fell in april"})]
        return f"noted: {res.content}"

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)))
    result = await run
    assert run._core.owns_session and "deleted when the run ends" in result  # the model was told
    ended = ws.sessions.status(run.session_id)
    assert ended.status == "ended" and ended.entries == 0 and ws.sessions.active() == []


async def test_a_stopped_run_ends_only_after_its_memory_call_in_flight_is_done(ws, monkeypatch):
    """An agent's memory tools run in a worker thread (engine/threads.py thread_call). Stopping the run while
    one runs must not leave it running after the run ended: whoever awaited the run may close the workspace
    next (a database closed under a read in another thread crashed the kernel). Here the search takes 0.5 s."""
    import time

    from agentstack_lab.memory import Memory

    searching, original = [], Memory.search

    def slow_search(self, *args, **kwargs):
        searching.append(1)
        try:
            time.sleep(0.5)
            return original(self, *args, **kwargs)
        finally:
            searching.remove(1)

    monkeypatch.setattr(Memory, "search", slow_search)

    def main(req):
        return [tool_call("memory_search", {"query": "churn"})] if last_tool_result(req) is None else "done"

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main))).start()
    while not searching:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    run.stop()
    assert await run is None and run.status == "stopped"
    assert searching == [], "the run ended while its memory search was still running"
    assert time.monotonic() - started >= 0.3   # it waited for the search under way


@pytest.mark.slow
async def test_headless_subprocess_executor_run(ws):
    def main(req):
        res = last_tool_result(req)
        if res is None:
            return [tool_call("python", {"code": "import math\nprint('pi', round(math.pi, 3))\nh = fork('x')"})]
        return f"tool: {res.content}"

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)),
                   options=RunOptions(interactive=False, auto_approve=True, executor="subprocess"))
    result = await run
    assert "pi 3.142" in result and "fork()/wait() are not available in the subprocess executor" in result


async def test_start_writes_the_root_row_at_once_and_stop_before_it_begins(ws):
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain())).start()
    rows = ws.db.query("SELECT status, prompt FROM agents WHERE id = ?", (run.id,))
    assert [tuple(r) for r in rows] == [("pending", "q")] and run.tree["status"] == "pending"
    run.stop()
    assert await run is None and run.status == "stopped" and run.tree["error"] == "stopped by the user"
    assert [(type(e).__name__, getattr(e, "state", {}).get("status")) for e in run.events] == [
        ("AgentState", "pending"), ("AgentState", "stopped"), ("ErrorEvent", None)]  # it never ran
    assert rebuild_tree(ws.db, run.id) == json.loads(json.dumps(run.tree))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0, -1, True])
def test_run_options_refuse_a_timeout_that_is_not_a_finite_positive_number(bad):
    with pytest.raises(ValueError, match="timeout_s must be a finite number > 0"):
        RunOptions(timeout_s=bad)
    assert RunOptions(timeout_s=0.5).timeout_s == 0.5


async def test_a_cancelled_event_log_flush_ends_its_write_before_it_gives_way(ws, monkeypatch):
    """The event log writes in a worker thread (engine/log.py); a flusher cancelled mid-write (the kernel's
    loop torn down) waits for that write, so nothing of it runs after the cancellation, and nothing is lost."""
    import time

    from agentstack_lab.engine.log import EventLog, read_events
    from agentstack_lab.events import TextDelta

    elog = EventLog(ws.db, "run-cancelled", interval=0.01)
    writing, original = [], EventLog._write

    def slow_write(self, events, rows):
        writing.append(len(events))
        time.sleep(0.4)
        original(self, events, rows)
        writing.append("done")

    monkeypatch.setattr(EventLog, "_write", slow_write)
    elog.start()
    try:
        elog.append(TextDelta(agent_id="a1", delta="hello"))
        while not writing:
            await asyncio.sleep(0.005)
        elog._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await elog._task
        assert writing == [1, "done"]   # the write under way finished before the cancelled flusher ended
        assert [ev.delta for _, ev in read_events(ws.db, "run-cancelled")] == ["hello"]
    finally:
        if elog._heartbeat is not None:
            elog._heartbeat.stop()


async def test_done_callbacks_run_once_the_run_ended_whenever_they_were_added(ws):
    ended = []
    run = AgentRun("root", workspace=ws, provider=ScriptedProvider(brain()), options=RunOptions(auto_approve=True))
    run.add_done_callback(lambda r: ended.append(("before start", r.done, r.status)))
    run.start()
    run.add_done_callback(lambda r: ended.append(("while running", r.done, r.status)))
    assert ended == []
    await run.wait()
    await asyncio.sleep(0)  # callbacks are scheduled on the loop when the task ends
    run.add_done_callback(lambda r: ended.append(("after the end", r.done, r.status)))
    assert [e[0] for e in ended] == ["before start", "while running"]
    await asyncio.sleep(0)
    assert ended == [(when, True, "completed") for when in ("before start", "while running", "after the end")]
