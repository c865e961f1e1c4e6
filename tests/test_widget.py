"""AgentTree driven by plain event lists: structure, sanitising, answers, and update coalescing."""

from __future__ import annotations

import asyncio
import itertools

import comm
import pytest

from agentstack_lab.events import (
    AgentCompleted,
    AgentState,
    ErrorEvent,
    TextDelta,
    ToolCall,
    ToolResult,
    UserQuery,
)
from agentstack_lab.notebook.widget import DEFAULT_INTERVAL, AgentTree

_ids = itertools.count()


class CountingComm:
    """A stand-in front-end channel that counts what the widgets send."""

    sent: list[dict] = []

    def __init__(self, target_name=None, data=None, metadata=None, buffers=None, comm_id=None, **kw):
        self.comm_id = comm_id or f"comm-{next(_ids)}"
        self.kernel = object()
        self._cb = None

    def send(self, data=None, metadata=None, buffers=None):
        CountingComm.sent.append(data)

    def on_msg(self, cb):
        self._cb = cb

    def close(self, *a, **k):
        pass

    def handle(self, data):
        self._cb({"content": {"data": data}, "buffers": []})


@pytest.fixture
def sent(monkeypatch):
    CountingComm.sent = []
    monkeypatch.setattr(comm, "create_comm", CountingComm)
    return CountingComm.sent


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def state(agent_id, status, parent=None, **extra):
    return AgentState(agent_id=agent_id, state={"status": status, "parentId": parent, **extra})


def _updates(sent):
    return [m for m in sent if m and m.get("method") == "update"]


def test_tree_structure_status_and_content(sent):
    tree = AgentTree(responder=lambda *a: None).extend([
        state("root", "running", type="researcher", prompt="How are <b>sales</b> trending?"),
        state("a", "running", "root", type="analyst", prompt="trend"),
        state("b", "running", "root", type="coder", prompt="plot"),
        TextDelta(agent_id="a", delta="Sales **rose** <script>alert(1)</script>"),
        ToolCall(agent_id="b", tool="python", input={"code": "df.plot()"}),
        ToolResult(agent_id="b", tool="python", output=None, error="NameError: df"),
        ErrorEvent(agent_id="b", error="NameError: df"),
        AgentCompleted(agent_id="a", result="up 10%"),
        AgentCompleted(agent_id="root", result="Sales are up."),
    ])
    tree.flush()
    views = tree._views
    assert [v.box for v in views.values()][0] in tree.nodes_box.children
    assert len(tree.nodes_box.children) == 1
    assert [c for c in views["root"].children.children] == [views["a"].box, views["b"].box]
    assert "agentstack-status-completed" in views["root"].box._dom_classes
    assert "agentstack-status-failed" in views["b"].box._dom_classes
    assert "<strong>rose</strong>" in views["a"].content.value and "<script" not in views["a"].content.value
    assert "&lt;b&gt;sales" in views["root"].title.value  # prompts are escaped, not rendered
    assert views["b"].tools.titles == ("python ✗",)
    assert "Final answer" in views["root"].result.value and "Sales are up." in views["root"].result.value
    assert views["root"].stop.layout.display == "none"  # finished: nothing to stop
    assert views["root"].work.selected_index is None  # streamed text folded once the result is in
    text = tree.to_text()
    assert text.splitlines()[0].startswith("✓ researcher [completed]")
    assert "✗ coder [failed]" in text and "error: NameError: df" in text


def test_child_before_parent_is_rehomed(sent):
    tree = AgentTree()
    tree.apply(state("kid", "running", type="coder"))
    tree.apply(state("kid", "running", "root"))
    tree.apply(state("root", "running", type="researcher"))
    assert tree.nodes_box.children == (tree._views["root"].box,)
    assert tree._views["root"].children.children == (tree._views["kid"].box,)


def test_ten_thousand_deltas_bounded_updates(sent):
    """10,000 deltas over 10 s of (fake) time: at most 2 * (1 + T / interval) content messages."""
    clock = Clock()
    tree = AgentTree(clock=clock)
    tree.apply(state("root", "running", type="researcher", prompt="flood"))
    before = len(_updates(sent))
    for i in range(10_000):
        clock.t += 0.001
        tree.apply(TextDelta(agent_id="root", delta=f"w{i} "))
    tree.flush()
    flood = len(_updates(sent)) - before
    bound = 2 * (1 + 10.0 / DEFAULT_INTERVAL)
    assert flood <= bound, (flood, bound)
    assert tree.flushes <= 1 + 1 + 10.0 / DEFAULT_INTERVAL + 1
    assert flood >= 10  # the text did stream, just coalesced
    assert tree._views["root"].content.value.count("w") == 10_000


def test_instant_flood_is_one_redraw(sent):
    clock = Clock()
    tree = AgentTree(clock=clock)
    tree.apply(state("root", "running"))
    before = len(_updates(sent))
    for _i in range(10_000):
        tree.apply(TextDelta(agent_id="root", delta="x"))
    tree.flush()
    assert len(_updates(sent)) - before <= 2
    assert "x" * 10_000 in tree._views["root"].content.value


async def test_timer_flushes_pending_deltas_on_the_loop(sent):
    tree = AgentTree(interval=0.05)
    tree.apply(state("root", "running"))
    tree.apply(TextDelta(agent_id="root", delta="first"))  # drawn at once (interval elapsed)
    tree.apply(TextDelta(agent_id="root", delta=" second"))  # coalesced, timer armed
    assert "second" not in tree._views["root"].content.value
    await asyncio.sleep(0.15)
    assert "first second" in tree._views["root"].content.value


def test_answers_through_buttons_and_custom_messages(sent):
    answers, stops = [], []
    tree = AgentTree(responder=lambda *a: answers.append(a), stopper=stops.append)
    tree.extend([
        state("root", "waiting_user"),
        UserQuery(agent_id="root", query_id="q1", kind="clarification", prompt="Which **year**?"),
    ])
    view = tree._views["root"]
    heading, box, row = view.query.children
    assert "<strong>year</strong>" in heading.value
    box.value = "2024"
    row.children[0].click()
    assert answers == [("root", "q1", "2024")]
    assert view.query.children == ()  # answered: the box goes away

    tree.extend([state("root", "waiting_user"),
                 UserQuery(agent_id="root", query_id="q2", kind="approval", prompt="Run this?",
                           options={"code": "x = 1"})])
    heading, viewer, editor, row = view.query.children
    approve, reject, edit = row.children
    assert "<b>agent</b> wants to run this Python code:" in heading.value and "Run this?" in heading.value
    assert "<pre" in viewer.value and "x = 1" in viewer.value  # read-only code box, shown as is
    assert editor.value == "x = 1" and editor.layout.display == "none" and viewer.layout.display is None
    edit.click()
    assert editor.layout.display is None and viewer.layout.display == "none" and edit.disabled
    editor.value = "x = 2"
    approve.click()
    assert answers[-1] == ("root", "q2", {"approved": True, "code": "x = 2"})

    tree.extend([UserQuery(agent_id="root", query_id="q3", kind="approval", prompt="Run?", options={"code": "y"})])
    tree.comm.handle({"method": "custom", "content": {"action": "respond", "agentId": "root", "queryId": "q3",
                                                      "response": False}})
    assert answers[-1] == ("root", "q3", False)
    tree.comm.handle({"method": "custom", "content": {"action": "stop", "agentId": "root"}})
    assert stops == ["root"]
    tree.comm.handle({"method": "custom", "content": {"action": "respond", "agentId": "root", "queryId": "nope",
                                                      "response": 1}})
    assert "no pending question" in tree.notice.value and len(answers) == 3


def test_mimebundle_has_text_fallbacks(sent):
    tree = AgentTree().extend([state("root", "running", type="researcher", prompt="q"),
                               AgentCompleted(agent_id="root", result="A ```fenced``` answer <script>")])
    bundle = tree._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("✓ researcher [completed] q")
    assert "````text\nA ```fenced``` answer <script>\n````" in bundle["text/markdown"]


def test_header_usage_elapsed_toggle_and_stop(sent):
    clock = Clock()
    stops = []
    tree = AgentTree(clock=clock, stopper=stops.append)
    tree.apply(state("root", "running", type="researcher", prompt="q", usage={"input_tokens": 12, "output_tokens": 5}))
    view = tree._views["root"]
    clock.t += 2.5
    tree.apply(ToolCall(agent_id="root", tool="python", input={"code": "x = 1\nprint(x)"}))
    assert "in 12 · out 5 tok" in view.meta.value and "2.5 s" in view.meta.value
    assert view.stop.layout.display is None  # working: Stop is shown
    view.stop.click()
    assert stops == ["root"]
    view.toggle.click()
    assert view.body.layout.display == "none" and view.toggle.description == "▸"
    view.toggle.click()
    assert view.body.layout.display is None
    tree.apply(ToolResult(agent_id="root", tool="python", output={"stdout": "1\n", "text": "stdout:\n1", "error": None}))
    body = view.tools.children[0].value
    assert "x = 1\nprint(x)" in body and "stdout:\n1" in body  # code shown as code, output as the model saw it
    assert view.tools.titles == ("python ✓",)
    tree.apply(state("child", "running", "root"))
    clock.t += 0.032
    tree.apply(AgentCompleted(agent_id="child", result="ok"))
    assert "32 ms" in tree._views["child"].meta.value and "✓ agent [completed]   (32 ms)" in tree.to_text()


@pytest.mark.parametrize("kind, label", [("blocking", "Before it starts"), ("final", "One more question")])
def test_blocking_and_final_questions_get_an_answer_box(sent, kind, label):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "waiting_user"),
        UserQuery(agent_id="root", query_id="q", kind=kind, prompt="Which **region**?",
                  options={"choices": ["North", "South"]}),
    ])
    heading, box, row = tree._views["root"].query.children
    assert label in heading.value and "<strong>region</strong>" in heading.value
    send, north, south = row.children
    assert (north.description, south.description) == ("North", "South")
    south.click()
    assert answers == [("root", "q", "South")]


def test_reject_sends_false(sent):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "waiting_user"),
        UserQuery(agent_id="root", query_id="q", kind="approval", prompt="Run?", options={"code": "rm()"}),
    ])
    _heading, _viewer, _editor, row = tree._views["root"].query.children
    row.children[1].click()
    assert answers == [("root", "q", False)]


class FakeRun:
    def __init__(self, events):
        self.events = events

    def subscribe(self, callback, replay=True):
        for event in self.events:
            callback(event)
        return lambda: None


async def test_elapsed_time_ticks_while_agents_work(sent, monkeypatch):
    from agentstack_lab.notebook import widget

    monkeypatch.setattr(widget, "TICK", 0.05)
    clock = Clock()
    tree = AgentTree(FakeRun([state("root", "running", prompt="q"), state("done", "completed", "root")]), clock=clock)
    meta = tree._views["root"].meta
    assert "0 ms" in meta.value
    clock.t += 3.0
    await asyncio.sleep(0.2)
    assert "3.0 s" in meta.value  # redrawn without any new event
    tree.apply(AgentCompleted(agent_id="root", result="ok"))
    await asyncio.sleep(0.1)
    assert tree._ticker is None  # nothing works any more: the ticking stops


def test_approval_names_the_agent_and_escapes_the_code(sent):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "running", type="researcher", prompt="Best <year>?"),
        ToolCall(agent_id="root", tool="python", input={"code": "print('<b>hi</b>')"}),
        state("root", "waiting_user", type="researcher"),
        UserQuery(agent_id="root", query_id="q", kind="approval", prompt="Run this Python code?",
                  options={"code": "print('<b>hi</b>')"}),
    ])
    view = tree._views["root"]
    heading, viewer, _editor, row = view.query.children
    assert heading.value == "<b>researcher</b> wants to run this Python code:"  # the engine's generic line adds nothing
    assert "print(&#x27;&lt;b&gt;hi&lt;/b&gt;&#x27;)" in viewer.value and "monospace" in viewer.value
    assert 'title="Best &lt;year&gt;?"' in view.title.value and "white-space:nowrap" in view.meta.value
    assert "white-space:nowrap" in view.status.value and view.stop.layout.min_width == "4.5em"
    row.children[0].click()
    assert answers == [("root", "q", True)]  # unedited code: a plain yes
