"""Follow-ups (``run.ask``): the new root's model calls carry the thread; same session; the link is recorded."""

from __future__ import annotations

import asyncio

import pytest

from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.followup import MAX_ANSWER_CHARS, MAX_TURNS, RunStillGoingError, follow_options
from agentstack_lab.engine.log import read_events
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import AgentState
from agentstack_lab.providers.base import Message
from agentstack_lab.providers.testing import TestModel


def model(answers=None, subs=None):
    """A test model answering each prompt with ``answers[prompt]`` (or ``answer to PROMPT``)."""
    answers, subs = answers or {}, subs or {}
    return TestModel(main=lambda r: answers.get(r.metadata["prompt"]),
                     subquestions=lambda r: subs.get(r.metadata["prompt"], []),
                     summary=lambda r: "merged: " + r.messages[-1].text()[:40])


def turns(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text()) for m in messages]


def requests_of(provider: TestModel, run: AgentRun) -> list:
    return [r for r in provider.requests if r.metadata["agent_id"] == run.id]


async def test_follow_up_sees_previous_prompt_and_answer(ws):
    provider = model({"How big is the moon?": "About 3474 km across."})
    session = ws.sessions.start(name="moon").id  # a caller's session stays open and the follow-up keeps it
    first = AgentRun("How big is the moon?", workspace=ws, provider=provider, options={"subagents": False},
                     session_id=session)
    await first
    second = first.ask("And how far away is it?")
    assert second is not first and second.status in ("pending", "running")  # started on the running loop
    await second
    reqs = requests_of(provider, second)
    assert [r.metadata["step"] for r in reqs][:2] == ["clarify", "blocking"]
    assert turns(reqs[0].messages) == [("user", "How big is the moon?"), ("assistant", "About 3474 km across."),
                                       ("user", "And how far away is it?")]
    main = next(r for r in reqs if r.metadata["step"] == "main")
    assert turns(main.messages)[:2] == turns(reqs[0].messages)[:2]  # every root call starts with the thread
    assert second.result == "answer to And how far away is it?"
    # same session (memory namespace), the link recorded in the events and in the agents row
    assert second.session_id == first.session_id and second._core.namespace == first._core.namespace
    assert second.tree["metadata"]["continues"] == first.id and second.continues == first.id
    states = [e for _, e in read_events(ws.db, second.id) if isinstance(e, AgentState) and e.agent_id == second.id]
    assert states and all(e.state["metadata"]["continues"] == first.id for e in states)
    row = ws.db.query("SELECT metadata, session_id FROM agents WHERE id = ?", (second.id,))[0]
    assert '"continues": "' + first.id in row[0] and row[1] == first.session_id
    assert "continues" not in first.tree["metadata"]  # a run without a predecessor has no link


async def test_thread_of_three_and_only_the_roots_travel(ws):
    provider = model(subs={"q1": ["sub-question of q1"]})
    one = AgentRun("q1", workspace=ws, provider=provider)
    await one
    assert len(one.tree["children"]) == 1  # a tree with a subagent ...
    two = one.ask("q2b")
    await two
    three = two.ask("q3")
    await three
    first = requests_of(provider, three)[0]
    shown = turns(first.messages)
    assert [t for t in shown if t[0] == "user"] == [("user", "q1"), ("user", "q2b"), ("user", "q3")]
    assert shown[1] == ("assistant", one.result) and shown[3] == ("assistant", two.result)
    assert len(shown) == 5 and not any("sub-question of q1" in text for _, text in shown)  # ... is one turn


async def test_transcript_is_bounded(ws):
    long = "x" * (MAX_ANSWER_CHARS * 2)
    provider = model({"q0": long})
    run = AgentRun("q0", workspace=ws, provider=provider, options={"subagents": False})
    await run
    for i in range(1, MAX_TURNS + 2):
        run = run.ask(f"q{i}")
        await run
    first = requests_of(provider, run)[0]
    users = [m.text() for m in first.messages if m.role == "user"]
    assert len(users) == MAX_TURNS + 1 and users[0] == f"q{MAX_TURNS + 1 - MAX_TURNS}"  # the oldest turns dropped
    provider2 = model({"q0": long})
    a = AgentRun("q0", workspace=ws, provider=provider2, options={"subagents": False})
    await a
    b = a.ask("short?")
    await b
    answer = requests_of(provider2, b)[0].messages[1].text()
    assert len(answer) < MAX_ANSWER_CHARS + 60 and answer.endswith("[…answer shortened for this follow-up]")


async def test_a_run_still_going_is_refused_with_one_line(ws):
    gate, working = asyncio.Event(), asyncio.Event()

    async def slow(req):
        working.set()
        await gate.wait()
        return "done"

    run = AgentRun("slow one", workspace=ws, provider=TestModel(main=slow), options={"subagents": False})
    run.start()
    await working.wait()
    before = ws.db.query("SELECT count(*) FROM agents")[0][0]
    with pytest.raises(RunStillGoingError) as info:
        run.ask("and then?")
    assert isinstance(info.value, AgentstackError) and "\n" not in str(info.value)
    assert str(info.value).startswith(f"run {run.id[:8]} is still running: wait for it")
    assert ws.db.query("SELECT count(*) FROM agents")[0][0] == before  # nothing was created
    unstarted = AgentRun("never started", workspace=ws, provider=TestModel(main=slow))
    with pytest.raises(RunStillGoingError, match="is still pending"):
        unstarted.ask("x")
    gate.set()
    await run


async def test_failed_or_stopped_runs_can_be_followed_up(ws):
    def broken(req):
        raise RuntimeError("model exploded")

    bad = AgentRun("will fail", workspace=ws, provider=TestModel(main=broken), options={"subagents": False})
    await bad.wait(raise_on_error=False)
    assert bad.status == "failed"
    provider = model()
    again = bad.ask("try again?", provider=provider)
    await again
    answer = requests_of(provider, again)[0].messages[1].text()
    assert answer.startswith("(no answer: the run failed: ") and "model exploded" in answer


async def test_options_carry_over_but_permissions_do_not(ws):
    provider = model()
    opts = {"subagents": False, "max_depth": 1, "max_agents": 3, "auto_approve": True, "on_query": "auto",
            "answers": {"clarification": "2024"}, "interactive": False}
    first = AgentRun("q", workspace=ws, provider=provider, agent_type="analyst", options=opts, model="m-1")
    await first
    second = first.ask("q2", options={"max_agents": 5})
    await second
    o = second.options
    assert (o.subagents, o.max_depth, o.max_agents) == (False, 1, 5)
    assert (o.auto_approve, o.on_query, o.answers, o.interactive) == (False, None, {}, True)
    assert second.agent_type == "analyst" and second.model == "m-1" and second.provider is provider
    assert all(r.model == "m-1" for r in requests_of(provider, second))
    assert follow_options(RunOptions(max_depth=2), RunOptions(max_depth=0)).max_depth == 0


async def test_a_follow_up_of_a_run_with_its_own_session_gets_a_new_one(ws):
    first = AgentRun("q", workspace=ws, provider=model(), options={"subagents": False})
    await first
    assert first._core.owns_session and ws.sessions.status(first.session_id).status == "ended"
    second = first.ask("q2")
    await second
    assert second.result == "answer to q2" and second._core.owns_session and second.session_id != first.session_id
    assert ws.sessions.active() == []


async def test_a_follow_up_keeps_the_session_and_refuses_another(ws):
    first = AgentRun("q", workspace=ws, provider=model(), options={"subagents": False},
                     session_id=ws.sessions.start().id)
    await first
    with pytest.raises(AgentstackError, match="keeps run .* session"):
        AgentRun("q2", workspace=ws, provider=model(), session_id="other", follows=first)
    ws.sessions.end(first.session_id)
    with pytest.raises(AgentstackError, match="has ended; start a new run"):
        first.ask("q2")


def test_ask_without_a_loop_returns_an_unstarted_run(ws):
    first = AgentRun("q", workspace=ws, provider=model(), options={"subagents": False})
    asyncio.run(first.wait())
    second = first.ask("q2")
    assert second.status == "pending" and not second.done
    assert asyncio.run(second.wait()) == "answer to q2"


async def test_cassettes_are_not_carried_over(ws, tmp_path):
    provider = model()
    first = AgentRun("q", workspace=ws, provider=provider, options={"subagents": False,
                                                                     "record": str(tmp_path / "first.jsonl")})
    await first
    recorded = (tmp_path / "first.jsonl").read_text()
    second = first.ask("q2")
    await second
    assert second.options.record is None and second.provider is provider  # the real provider, unwrapped
    assert (tmp_path / "first.jsonl").read_text() == recorded  # the first run's cassette is untouched
    assert requests_of(provider, second)[0].messages[0].text() == "q"


async def test_the_tree_draws_a_follow_up_under_the_question_it_continues(ws):
    """The widget's fold reads ``continuesPrompt``; the root's title says what it follows (escaped)."""
    from agentstack_lab.notebook.render import node_title
    from agentstack_lab.notebook.tree import TreeState

    provider = model({"Is <b>x</b> > 3?": "Yes."})
    first = AgentRun("Is <b>x</b> > 3?", workspace=ws, provider=provider, options={"subagents": False})
    await first
    second = first.ask("And y?")
    await second
    state, before = TreeState(), TreeState()
    state.extend(second.events)
    before.extend(first.events)
    root = state.node(second.id)
    assert root.follows == "Is <b>x</b> > 3?" and before.node(first.id).follows is None
    title = node_title(root, collapsed_result=False)
    assert "↪ follow-up to “Is &lt;b&gt;x&lt;/b&gt; &gt; 3?”" in title and "And y?" in title
    assert "follow-up" not in node_title(before.node(first.id), collapsed_result=False)
