"""The approval card's "Always allow code like this" and "Try it first", driven through its buttons in-process:
with a stand-in answer sink, and against a real run (a live-kernel executor, a real fork for the dry run)."""

from __future__ import annotations

import asyncio

import pytest

from agentstack_lab.approval import SavedRules
from agentstack_lab.decisions import Decisions
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import UserQuery
from agentstack_lab.notebook.cards import QueryCard
from agentstack_lab.notebook.widget import AgentTree
from tests.test_approval_saved import calls


def approval(code: str, **options) -> UserQuery:
    return UserQuery(agent_id="a1", query_id="q1", kind="approval", prompt="Run this Python code?",
                     options={"code": code, **options})


def test_always_shows_the_rule_and_the_scope_before_it_answers():
    answers: list = []
    card = QueryCard(approval("df2 = df.head()", classes=["read_only", "rebinds"]), answers.append)
    assert card.always.layout.display is None and card.always_box.layout.display == "none"
    card.always.click()
    assert card.always_box.layout.display is None and answers == []   # nothing answered before confirming
    assert "allow cells that only do: read_only, rebinds" in card.always_text.value
    card.always_cancel.click()
    assert card.always_box.layout.display == "none" and answers == []
    card.always.click()
    card.scope.value = "workspace"
    card.always_confirm.click()
    assert answers == [{"approved": True, "always": "workspace"}]


def test_always_is_not_offered_where_a_builtin_deny_covers_the_code_nor_for_edited_code():
    card = QueryCard(approval("requests.get(u)", classes=["network"]), lambda _r: None)
    assert card.always.layout.display == "none"
    answers: list = []
    card = QueryCard(approval("x = 1", classes=["rebinds"]), answers.append)
    card.edit.click()
    card.editor.value = "x = 2"
    card.always.click()
    assert "applies to the code as asked" in card.note.value and card.always_box.layout.display == "none"
    assert answers == []


def test_a_dry_run_in_the_options_is_shown_at_once_with_its_protections():
    report = {"clean": False, "ended": "finished", "changes": [{"name": "df", "action": "changed",
                                                                "before": "DataFrame (3, 1)", "after": "DataFrame (3, 2)"},
                                                               {"name": "<b>", "action": "created", "before": None,
                                                                "after": "int"}],
              "stdout": "hello\n", "error": "ZeroDivisionError: division by zero", "traceback": None,
              "refused": [{"call": "socket.connect", "target": "127.0.0.1:80", "error": "refused"}],
              "opened": [{"path": "data.csv", "access": "r"}],
              "protections": {"network": "active: no network namespace", "landlock": "unavailable: kernel too old"}}
    card = QueryCard(approval("df['b'] = 1", dryRun=report), lambda _r: None, try_first=lambda: asyncio.sleep(0))
    html = card.dry.value
    assert card.dry.layout.display is None and card.try_button.layout.display == "none"
    assert card.approve.description == "Run it for real"
    for shown in ("DataFrame (3, 1) → DataFrame (3, 2)", "&lt;b&gt;", "hello", "ZeroDivisionError",
                  "socket.connect", "data.csv", "✓ network: active", "⚠ landlock: unavailable: kernel too old",
                  "not clean", "Nothing has changed in your kernel yet"):
        assert shown in html, shown


def test_without_a_run_there_is_no_try_button():
    card = QueryCard(approval("x = 1"), lambda _r: None)
    assert card.try_button.layout.display == "none"


async def test_try_it_first_then_run_it_for_real_in_a_real_run(ws):
    ns = {"data": [1, 2, 3]}
    run = AgentRun("q", workspace=ws, provider=calls("data.append(4)\ntotal = sum(data)"),
                   options={"subagents": False}, executor=LiveKernelExecutor(namespace=ns))
    tree = AgentTree(run)
    shown = asyncio.Event()
    run.subscribe(lambda ev: isinstance(ev, UserQuery) and asyncio.get_running_loop().call_soon(shown.set))
    task = asyncio.ensure_future(run.wait())
    await shown.wait()
    tree.flush()
    card = tree.node_view(run.root_id).card
    assert card is not None and card.try_button.layout.display is None
    card.try_button.click()
    await card.trying
    assert ns == {"data": [1, 2, 3]}                         # the dry run touched nothing real
    html = card.dry.value
    assert "changed <code>data</code>" in html and "created <code>total</code>" in html and "clean" in html
    assert "protections" in html and card.approve.description == "Run it for real"
    assert ws.decisions.get(card.query.query_id).metadata["dryRun"]["clean"] is True
    card.approve.click()
    await task
    assert ns["data"] == [1, 2, 3, 4] and ns["total"] == 10


async def test_always_from_the_widget_saves_the_rule_and_the_next_call_has_no_card(ws):
    ns = {"data": []}
    run = AgentRun("q", workspace=ws, provider=calls("data.append(1)", "data.append(2)"),
                   options={"subagents": False}, executor=LiveKernelExecutor(namespace=ns))
    tree = AgentTree(run)
    cards: list[UserQuery] = []

    def on_query(ev):
        if isinstance(ev, UserQuery):
            cards.append(ev)
            asyncio.get_running_loop().call_soon(answer)

    def answer():
        tree.flush()
        card = tree.node_view(run.root_id).card
        card.always.click()
        card.scope.value = "session"
        card.always_confirm.click()

    run.subscribe(on_query)
    await run
    assert ns["data"] == [1, 2] and len(cards) == 1
    (saved,) = SavedRules(ws.db).list()
    assert saved.scope == "session" and saved.session_id == run.session_id
    decided = {d.decided_by for d in Decisions(ws.db).list(run=run.id)}
    assert f"rule {saved.id}" in decided


pytestmark = pytest.mark.slow   # real forks of the test process for the dry run
