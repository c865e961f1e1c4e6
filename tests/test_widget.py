"""AgentTree driven by plain event lists: structure, sanitising, answers, and update coalescing."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

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
from tests.waits import apoll

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


def _shown(html_text):
    """What a browser shows of ``html_text``: its text, tags dropped and entities decoded."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def _card(view):
    (box,) = view.query.children
    return box.children


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
    views = {agent_id: tree.node_view(agent_id) for agent_id in tree.node_ids()}
    assert [v.box for v in views.values()][0] in tree.nodes_box.children
    assert len(tree.nodes_box.children) == 1
    assert [c for c in views["root"].children.children] == [views["a"].box, views["b"].box]
    assert "agentstack-status-completed" in views["root"].classes
    assert "agentstack-status-failed" in views["b"].classes
    assert "<strong>rose</strong>" in views["a"].text_html and "<script" not in views["a"].text_html
    assert "&lt;b&gt;sales" in views["root"].title.value  # prompts are escaped, not rendered
    assert views["b"].tool_panels()[0].titles == ("python ✗",)
    assert "Final answer" in views["root"].result.value and "Sales are up." in views["root"].result.value
    assert views["root"].stop.layout.display == "none"  # finished: nothing to stop
    assert views["a"].body.layout.display == "none" and "→ up 10%" in views["a"].title.value  # folded, one line
    assert views["root"].work.selected_index is None  # streamed text folded once the result is in
    text = tree.to_text()
    assert text.splitlines()[0].startswith("✓ researcher [completed]")
    assert "✗ coder [failed]" in text and "error: NameError: df" in text


def test_child_before_parent_is_rehomed(sent):
    tree = AgentTree()
    tree.apply(state("kid", "running", type="coder"))
    tree.apply(state("kid", "running", "root"))
    tree.apply(state("root", "running", type="researcher"))
    assert tree.nodes_box.children == (tree.node_view("root").box,)
    assert tree.node_view("root").children.children == (tree.node_view("kid").box,)
    assert tree.node_ids() == ["kid", "root"]  # in the order the nodes were drawn


def test_node_view_of_an_undrawn_agent_names_it(sent):
    tree = AgentTree().extend([state("root", "running")])
    with pytest.raises(KeyError, match=r"no drawn node for agent 'ghost' \(drawn: root\)"):
        tree.node_view("ghost")


# the tree's private state, as a test would reach into it (the pattern itself does not match this line)
PRIVATE_READ = re.compile(r"\.(_views|_ticker)\b")


def test_tests_read_the_tree_through_its_public_api():
    """No test reaches into the tree's private node views; they read ``node_view``/``node_ids``/``ticking``."""
    assert PRIVATE_READ.search('view = tree.' + '_views["root"]')  # the guard sees a private read
    hits = [f"{path.name}:{number}: {line.strip()}"
            for path in sorted(Path(__file__).parent.glob("*.py"))
            for number, line in enumerate(path.read_text("utf-8").splitlines(), 1) if PRIVATE_READ.search(line)]
    assert not hits, "\n".join(hits)


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
    assert tree.node_view("root").text_html.count("w") == 10_000


def test_instant_flood_is_one_redraw(sent):
    clock = Clock()
    tree = AgentTree(clock=clock)
    tree.apply(state("root", "running"))
    before = len(_updates(sent))
    for _i in range(10_000):
        tree.apply(TextDelta(agent_id="root", delta="x"))
    tree.flush()
    assert len(_updates(sent)) - before <= 3  # the text (one message), its new transcript item and showing it
    assert "x" * 10_000 in tree.node_view("root").text_html


async def test_timer_flushes_pending_deltas_on_the_loop(sent):
    tree = AgentTree(interval=0.05)
    tree.apply(state("root", "running"))
    tree.apply(TextDelta(agent_id="root", delta="first"))  # drawn at once (interval elapsed)
    tree.apply(TextDelta(agent_id="root", delta=" second"))  # coalesced, timer armed
    assert "second" not in tree.node_view("root").text_html
    await apoll(lambda: "first second" in tree.node_view("root").text_html, "the timer's redraw")


def test_answers_through_buttons_and_custom_messages(sent):
    answers, stops = [], []
    tree = AgentTree(responder=lambda *a: answers.append(a), stopper=stops.append)
    tree.extend([
        state("root", "waiting_user"),
        UserQuery(agent_id="root", query_id="q1", kind="clarification", prompt="Which **year**?"),
    ])
    view = tree.node_view("root")
    heading, box, row, _note = _card(view)
    assert "<strong>year</strong>" in heading.value
    box.value = "2024"
    row.children[0].click()
    assert answers == [("root", "q1", "2024")]
    assert view.query.children == ()  # answered: the box goes away

    tree.extend([state("root", "waiting_user"),
                 UserQuery(agent_id="root", query_id="q2", kind="approval", prompt="Run this?",
                           options={"code": "x = 1"})])
    heading, viewer, _expand, editor, _diff, row, _dry, _always, _note = _card(view)
    approve, reject, edit, _reset, _cancel, _try, _always_button = row.children
    assert "<b>agent</b> wants to run 1 line of Python:" in heading.value and "Run this?" in heading.value
    assert "<pre" in viewer.value and _shown(viewer.value) == "x = 1"  # read-only code box, shown as is
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
    # the answer as Markdown whose HTML is text (its code span kept as written)
    assert "**Answer**\n\nA ```fenced``` answer &lt;script>" in bundle["text/markdown"]


class _Run:
    """The two things the tree's display reads of its run."""

    id = "run-1"

    def __init__(self, done):
        self.done = done


@pytest.mark.parametrize("done, views, widget", [(False, 0, True), (True, 1, True), (True, 0, False)])
def test_a_run_that_ended_unwatched_is_shown_as_its_snapshot_alone(sent, monkeypatch, done, views, widget):
    import ipywidgets

    monkeypatch.setattr(ipywidgets.Widget, "_control_comm", None)  # no widget manager ever connected
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)  # nor a Jupyter Server session started the kernel
    tree = AgentTree().extend([state("root", "running", type="researcher", prompt="q"),
                               AgentCompleted(agent_id="root", result="the answer")])
    tree.run, tree.views = _Run(done), views
    bundle = tree._repr_mimebundle_()
    assert ("application/vnd.jupyter.widget-view+json" in bundle) is widget
    assert ("text/html" in bundle) is widget  # nbconvert --to markdown would take HTML over the Markdown
    assert bundle["application/vnd.agentstack.tree+json"]["runId"] == "run-1"
    assert "the answer" in bundle["text/markdown"] and bundle["text/plain"].startswith("✓ researcher [completed]")
    monkeypatch.setenv("JPY_SESSION_NAME", "/work/analysis.ipynb")  # JupyterLab's kernel, before any view
    assert "application/vnd.jupyter.widget-view+json" in tree._repr_mimebundle_()
    monkeypatch.delenv("JPY_SESSION_NAME")
    monkeypatch.setattr(ipywidgets.Widget, "_control_comm", object())  # a front end's widget manager connected
    assert "application/vnd.jupyter.widget-view+json" in tree._repr_mimebundle_()


def test_header_usage_elapsed_toggle_and_stop(sent):
    clock = Clock()
    stops = []
    tree = AgentTree(clock=clock, stopper=stops.append)
    tree.apply(state("root", "running", type="researcher", prompt="q", usage={"inputTokens": 12, "outputTokens": 5}))
    view = tree.node_view("root")
    clock.t += 2.5
    tree.apply(ToolCall(agent_id="root", tool="python", input={"code": "x = 1\nprint(x)"}))
    assert "17 tokens (this agent)" in view.meta.value and "2.5 s" in view.meta.value
    assert view.stop.layout.display is None and view.stop.description == "Stop all"  # working: one Stop all
    view.stop.click()
    assert stops == [] and view.confirm.layout.display is None  # asks first
    view.confirm_no.click()
    assert stops == [] and view.confirm.layout.display == "none" and view.stop.layout.display is None
    view.stop.click()
    view.confirm_yes.click()
    assert stops == ["root"]
    view.toggle.click()
    assert view.body.layout.display == "none" and view.toggle.description == "▸"
    view.toggle.click()
    assert view.body.layout.display is None
    tree.apply(ToolResult(agent_id="root", tool="python", output={"stdout": "1\n", "text": "stdout:\n1", "error": None}))
    body = view.tool_panels()[0].children[0].children[0].value
    assert "x = 1\nprint(x)" in _shown(body) and "stdout:\n1" in body  # code shown as code, output as the model saw it
    assert view.tool_panels()[0].titles == ("python ✓",)
    tree.apply(state("child", "running", "root"))
    clock.t += 0.032
    tree.apply(AgentCompleted(agent_id="child", result="ok"))
    assert "32 ms" in tree.node_view("child").meta.value and "✓ agent [completed]   (32 ms)" in tree.to_text()


@pytest.mark.parametrize("kind, label", [("blocking", "Before it starts"), ("final", "One more question")])
def test_blocking_and_final_questions_get_an_answer_box(sent, kind, label):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "waiting_user"),
        UserQuery(agent_id="root", query_id="q", kind=kind, prompt="Which **region**?",
                  options={"choices": ["North", "South"]}),
    ])
    heading, box, row, _note = _card(tree.node_view("root"))
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
    row = _card(tree.node_view("root"))[5]
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
    meta = tree.node_view("root").meta
    assert "0 ms" in meta.value
    clock.t += 3.0
    await apoll(lambda: "3.0 s" in meta.value, "the tick's redraw")  # redrawn without any new event
    tree.apply(AgentCompleted(agent_id="root", result="ok"))
    # nothing works any more: the next tick finds no agent at work and the ticking stops
    await apoll(lambda: not tree.ticking, "the ticking to stop")


def test_approval_names_the_agent_and_escapes_the_code(sent):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "running", type="researcher", prompt="Best <year>?"),
        ToolCall(agent_id="root", tool="python", input={"code": "print('<b>hi</b>')"}),
        state("root", "waiting_user", type="researcher"),
        UserQuery(agent_id="root", query_id="q", kind="approval", prompt="Run this Python code?",
                  options={"code": "print('<b>hi</b>')"}),
    ])
    view = tree.node_view("root")
    heading, viewer, expand, _editor, _diff, row, _dry, _always, _note = _card(view)
    assert heading.value == "<b>researcher</b> wants to run 1 line of Python:"  # the generic line adds nothing
    assert "print('<b>hi</b>')" == _shown(viewer.value) and "agentstack-code-box" in viewer.value
    assert "<b>hi" not in viewer.value  # highlighted, and escaped
    assert expand.layout.display == "none"  # short code: nothing more to show
    assert 'title="Best &lt;year&gt;?"' in view.title.value and "agentstack-quiet" in view.meta.value
    assert "agentstack-pill" in view.status.value and view.stop.layout.min_width == "5.5em"
    row.children[0].click()
    assert answers == [("root", "q", True)]  # unedited code: a plain yes


# -- issue 13: what a person sees, as widget state (the browser test checks the rendering) ----------------
HEX_OR_NAMED = __import__("re").compile(r"#[0-9a-fA-F]{3,8}\b|:\s*(white|black)\b|rgb\(")


def _all_html(widget):
    out = [getattr(widget, "value", "") if isinstance(getattr(widget, "value", ""), str) else ""]
    for child in getattr(widget, "children", ()) or ():
        out.extend(_all_html(child))
    return out


def test_colours_are_theme_variables_only(sent):
    tree = AgentTree(responder=lambda *a: None).extend([
        state("root", "running", type="researcher", prompt="q"),
        state("k", "waiting_user", "root", type="analyst", prompt="sub"),
        UserQuery(agent_id="k", query_id="q", kind="clarification", prompt="which?"),
        state("f", "failed", "root", type="coder", prompt="p", error="boom"),
        AgentCompleted(agent_id="root", result="done"),
    ])
    html = "".join(_all_html(tree))
    assert "var(--jp-warn-color0)" in html and "var(--jp-ui-font-color0)" in html
    assert not HEX_OR_NAMED.search(html), HEX_OR_NAMED.search(html)  # nothing that breaks a theme


def test_transcript_keeps_text_and_tool_calls_in_order(sent):
    tree = AgentTree().extend([
        state("root", "running", type="researcher", prompt="q"),
        TextDelta(agent_id="root", delta="Let me look."),
        ToolCall(agent_id="root", tool="python", input={"code": "1 + 1"}),
        ToolResult(agent_id="root", tool="python", output={"text": "result:\n2"}),
        TextDelta(agent_id="root", delta="It is **two**."),
    ])
    tree.flush()
    kinds, kids = zip(*tree.node_view("root").transcript_items(), strict=True)
    assert kinds == ("text", "tool", "text")
    assert "Let me look." in kids[0].value and "<strong>two</strong>" in kids[2].value


def test_activity_says_what_the_agent_is_doing(sent):
    tree = AgentTree()
    tree.apply(state("root", "running", type="researcher", metadata={"step": "clarify"}))
    view = tree.node_view("root")
    assert "clarifying the question" in view.activity.value and "agentstack-spinner" in view.activity.value
    tree.apply(state("root", "running", metadata={"step": "subquestions"}))
    assert "planning subagents" in view.activity.value
    tree.apply(state("root", "running", metadata={"step": "main"}))
    assert "waiting for the model" in view.activity.value
    tree.apply(ToolCall(agent_id="root", tool="python", input={"code": "x"}))
    assert "running code" in view.activity.value
    tree.apply(ToolResult(agent_id="root", tool="python", output={"text": "ok"}))
    tree.apply(state("root", "running", metadata={"step": "summary"}))
    assert "summarising" in view.activity.value
    tree.apply(AgentCompleted(agent_id="root", result="r"))
    assert view.activity.value == "" and view.activity.layout.display == "none"


def test_background_hint_while_attached_runs_work(sent):
    run = FakeRun([state("root", "running", prompt="q")])
    tree = AgentTree(run)
    assert tree.hint.layout.display is None and "Idle" in tree.hint.value
    tree.apply(AgentCompleted(agent_id="root", result="ok"))
    assert tree.hint.layout.display == "none"


def test_long_approval_says_line_count_and_where_it_runs(sent):
    code = "\n".join(f"x{i} = {i}" for i in range(42))
    tree = AgentTree(responder=lambda *a: None).extend([
        state("root", "running", type="researcher", metadata={"executor": "live"}),
        state("kid", "waiting_user", "root", type="analyst"),
        ToolCall(agent_id="kid", tool="python", input={"code": code}),
        UserQuery(agent_id="kid", query_id="q", kind="approval", prompt="Run this Python code?", options={"code": code}),
    ])
    heading, viewer, expand, *_ = _card(tree.node_view("kid"))
    assert "wants to run 42 lines of Python in <b>your live kernel</b>" in heading.value  # inherited from the root
    assert "can read and change your variables" in heading.value
    assert "clamped" in viewer.value and expand.description == "Show all 42 lines" and expand.layout.display is None
    expand.click()
    assert "clamped" not in viewer.value and expand.description == "Show less"
    tree2 = AgentTree().extend([state("r", "waiting_user", metadata={"executor": "subprocess"}),
                                UserQuery(agent_id="r", query_id="q", kind="approval", prompt="", options={"code": "1"})])
    assert "an isolated subprocess" in _card(tree2.node_view("r"))[0].value


def test_after_edit_the_panel_shows_the_code_that_ran_and_its_traceback(sent):
    tb = 'Traceback (most recent call last):\n  File "<cell>", line 1\nKeyError: \'revenue\''
    tree = AgentTree().extend([
        state("root", "running", type="researcher"),
        ToolCall(agent_id="root", tool="python", input={"code": "df['sales']"}),
        ToolResult(agent_id="root", tool="python", error="KeyError: 'revenue'",
                   output={"code": "print('hi')\ndf['revenue']", "stdout": "hi\n", "error": "KeyError: 'revenue'",
                           "traceback": tb, "text": f"(The user edited the code before it ran.)\nstdout:\nhi\n\nerror:\n{tb}"}),
        state("root", "running", metadata={"answers": [
            {"kind": "approval", "question": "Run this Python code?", "answer": {"approved": True}, "source": "user"}]}),
    ])
    view = tree.node_view("root")
    (panel,) = view.tool_panels()
    body = panel.children[0].children[0].value
    assert "code that ran (edited)" in body and "df[&#x27;revenue&#x27;]" in body
    assert "the model's original" in body and "hi\n" in body and "Traceback (most recent call last)" in body
    assert panel.titles == ("python ✗ · edited by you",)
    assert "Code edited by you" in view.qa.value


def test_questions_and_answers_stay_folded_in_the_node(sent):
    tree = AgentTree().extend([state("root", "running", metadata={"answers": [
        {"kind": "clarification", "question": "Which measure?", "answer": "total revenue", "source": "user"},
        {"kind": "blocking", "question": "Region?", "answer": "North", "source": "cli"}]})])
    qa = tree.node_view("root").qa
    assert qa.layout.display is None and qa.value.count("<details") == 2
    assert "Which measure? → total revenue (by you)" in qa.value and "(from the terminal)" in qa.value


def test_enter_sends_and_an_empty_answer_is_refused(sent):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "waiting_user"), UserQuery(agent_id="root", query_id="q", kind="clarification", prompt="?")])
    view = tree.node_view("root")
    card = view.card
    card.answer.comm.handle({"method": "custom", "content": {"event": "submit"}})  # Enter on an empty box
    assert answers == [] and "type an answer first" in card.note.value
    card.answer.value = "  total revenue "
    card.answer.comm.handle({"method": "custom", "content": {"event": "submit"}})
    assert answers == [("root", "q", "  total revenue ")] and view.card is None


def test_stopped_root_keeps_its_partial_answer_in_neutral_words(sent):
    tree = AgentTree().extend([
        state("root", "running", type="researcher", prompt="q"),
        state("kid", "running", "root", type="analyst", prompt="p"),
        TextDelta(agent_id="root", delta="Sales rose in 2023."),
        state("kid", "stopped", "root", error="stopped by the user"),
        state("root", "stopped", error="stopped by the user"),
        ErrorEvent(agent_id="root", error="stopped by the user"),
    ])
    view = tree.node_view("root")
    assert "Partial answer" in view.result.value and "Sales rose in 2023." in view.result.value
    assert 'class="agentstack-problem stopped"' in view.error.value  # neutral, not error red
    assert tree.node_view("kid").stop.layout.display == "none"  # only the root has Stop all
    assert "kid" not in view.title.value and "root" not in view.title.value  # no internal ids as titles


def test_excerpt_drops_code_fences():
    from agentstack_lab.notebook.tree import excerpt

    assert excerpt("```python\nx = 1\n```\nDone.") == "x = 1 Done."
    assert "`" not in excerpt("```?\nresult\n```")
    assert excerpt("No gaps: **three** years") == "No gaps: three years"
