"""AgentTree: the live ipywidgets view of a run (standard widgets only).

One collapsible node per agent, nested under its parent: status badge, title (type and prompt
excerpt), what it is doing (clarifying, planning subagents, waiting for the model, running code,
summarising) with a spinner, usage and elapsed time; then its transcript (text and tool calls in
the order they happened, each call folded with the code that actually ran and its output), the
questions it asked with their answers (folded), the card for a pending question or approval
(:mod:`.cards`), and the answer. Finished subagents fold to one line with an excerpt of their
result; the root header has the one "Stop all" (with a confirmation). Colours are the front end's
theme variables only (:mod:`.render`). The header reads on one row from ~480 px up: only the
title shrinks (and wraps to two lines at most); badge, usage and Stop never wrap or clip.

Updates are coalesced: text deltas only mark a node dirty, and dirty nodes are redrawn at most
once per ``interval`` (0.25 s, so at most 4 redraws a second for the whole tree; a redraw sends
at most two comm messages per dirty node, its content and its meta line). Other events (status
changes, questions, tool calls, results) redraw at once. 10,000 deltas arriving over T seconds
therefore cost at most ``2 * (1 + T / interval)`` content messages, whatever their count. While a
tree follows a run, each working agent's elapsed time is also redrawn once a second (one message).

Answers and code blocks (the code each tool call ran, fenced blocks of a result) carry "Copy" and
"Insert as a new cell" (:mod:`.controls`). An invisible :class:`~.controls.Presence` child reports when
the tree's output is cleared or its cell deleted; ``on_gone(how)`` (set by the magics) then stops the
run or keeps it, by ``notebook.rerun``. ``earlier`` lists the cell's earlier runs still going.

A front end answers by clicking the buttons or by a custom message to the tree widget:
``{"action": "respond", "agentId": ..., "queryId": ..., "response": ...}`` or
``{"action": "stop", "agentId": ...}``.

What is drawn can be read back without a front end: ``tree.node_ids()`` lists the agents with a node,
``tree.node_view(agent_id)`` gives that node's :class:`NodeView` (its widgets: ``title``, ``status``,
``meta``, ``transcript``, ``result``, ``query``/``card``, ``children``...), as tests and tools read them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import ipywidgets as W

from agentstack_lab.engine.state import token_text
from agentstack_lab.notebook.cards import QueryCard
from agentstack_lab.notebook.codeview import CODEVIEW_CSS
from agentstack_lab.notebook.controls import CSS as CONTROLS_CSS
from agentstack_lab.notebook.controls import ActionBar, Presence, answer_bars
from agentstack_lab.notebook.render import (
    THEME_CSS,
    markdown,
    node_title,
    pill,
    qa_html,
    source_label,
    tool_body,
    tool_title,
)
from agentstack_lab.notebook.sanitize import escape
from agentstack_lab.notebook.tree import (
    TERMINAL,
    NodeState,
    TreeState,
    activity,
    format_elapsed,
    tree_to_text,
)

__all__ = ["AgentTree", "NodeView", "DEFAULT_INTERVAL"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 0.25
TICK = 1.0
GONE_GRACE = 1.0  # seconds a cleared tree waits for a view to come back before its run is told

Responder = Callable[[str, str, Any], None]
Stopper = Callable[[str], None]


def _hidden(widget: W.DOMWidget, hidden: bool) -> None:
    value = "none" if hidden else None
    if widget.layout.display != value:
        widget.layout.display = value


def _set(widget: W.Widget, name: str, value: Any) -> None:
    if getattr(widget, name) != value:  # traitlets skips equal values too; this keeps intent visible
        setattr(widget, name, value)


class NodeView:
    """The widgets of one agent node; :meth:`AgentTree.node_view` gives it.

    Read-only outside this module: ``box`` (the node, with an ``agentstack-status-<status>`` class),
    ``title``, ``status`` (the badge), ``activity``, ``meta`` (usage and elapsed time), ``stop``, ``body``,
    ``work`` (the folding transcript), ``transcript``, ``qa``, ``query`` and ``card`` (the pending question,
    or None), ``result``, ``result_actions``, ``error``, ``children`` (the subagents' boxes).
    """

    def __init__(self, tree: AgentTree, node_id: str):
        self.tree = tree
        self.id = node_id
        # Header: toggle, badge, activity, usage/elapsed and Stop keep their size (flex 0 0 auto, one line
        # each); the title takes what is left (at least ~9em, two lines at most). When a row is too narrow,
        # the side group moves to a second row, pushed right by its auto left margin.
        fixed = "0 0 auto"
        self.toggle = W.Button(description="▾", tooltip="collapse / expand",
                               layout=W.Layout(width="2.4em", flex=fixed))
        self.status = W.HTML(layout=W.Layout(flex=fixed))
        self.status.add_class("agentstack-badge")
        self.title = W.HTML(layout=W.Layout(flex="1 1 9em", min_width="0", overflow="hidden", margin="2px 6px"))
        self.title.add_class("agentstack-title")
        self.activity = W.HTML(layout=W.Layout(flex=fixed, margin="2px 4px"))
        self.activity.add_class("agentstack-activity")
        self.meta = W.HTML(layout=W.Layout(flex=fixed, margin="2px 4px"))
        self.stop = W.Button(description="Stop all", tooltip="stop this run: every agent in it",
                             layout=W.Layout(width="auto", min_width="5.5em", flex=fixed, display="none"))
        self.stop.add_class("agentstack-stop")
        self.confirm_yes = W.Button(description="Yes, stop all", button_style="warning",
                                    layout=W.Layout(width="auto", flex=fixed))
        self.confirm_yes.add_class("agentstack-stop-confirm")
        self.confirm_no = W.Button(description="Cancel", layout=W.Layout(width="auto", flex=fixed))
        self.confirm = W.HBox([W.HTML('<span class="agentstack-quiet">Stop every agent?</span>'),
                               self.confirm_yes, self.confirm_no],
                              layout=W.Layout(flex=fixed, align_items="center", display="none"))
        self.transcript = W.VBox()
        self.transcript.add_class("agentstack-transcript")
        # The transcript is open while the agent works and folded once its result is shown.
        self.work = W.Accordion(children=(self.transcript,), titles=("transcript",), selected_index=0)
        self.work.add_class("agentstack-work")
        self.qa = W.HTML()
        self.qa.add_class("agentstack-qa")
        self.query = W.VBox()
        self.query.add_class("agentstack-query")
        self.result = W.HTML()
        self.result.add_class("agentstack-result")
        self.result_actions = W.VBox()  # Copy / Insert for the answer and each of its code blocks
        self.result_actions.add_class("agentstack-result-actions")
        self._result_text: str | None = None
        self.error = W.HTML()
        self.error.add_class("agentstack-error")
        self.children = W.VBox(layout=W.Layout(margin="0 0 0 1.4em"))
        self.body = W.VBox([self.work, self.qa, self.query, self.result, self.result_actions, self.error,
                              self.children])
        side = W.HBox([self.activity, self.meta, self.stop, self.confirm],
                      layout=W.Layout(flex="0 1 auto", margin="0 0 0 auto", align_items="center", max_width="100%",
                                      flex_flow="row wrap", justify_content="flex-end"))
        header = W.HBox([self.toggle, self.status, self.title, side],
                        layout=W.Layout(align_items="center", flex_flow="row wrap"))
        header.add_class("agentstack-header")
        self.box = W.VBox([header, self.body], layout=W.Layout(margin="2px 0"))
        self.box.add_class("agentstack-node")
        for w in (self.qa, self.query, self.result, self.result_actions, self.error, self.work):
            _hidden(w, True)
        self.toggle.add_class("agentstack-toggle")
        self.meta.add_class("agentstack-meta")
        self.toggle.on_click(self._on_toggle)
        self.stop.on_click(self._on_stop)
        self.confirm_yes.on_click(self._on_confirm)
        self.confirm_no.on_click(lambda _b: self._confirming(False))
        self.card: QueryCard | None = None
        # (what was drawn, its widget: an HTML for text, a box for a tool call), per transcript item
        self._segments: list[tuple[Any, Any]] = []
        self._answered_from: str | None = None  # the note shown when another surface answered
        self._status = ""
        self._folded = False
        self._touched = False  # the person toggled this node: automatic folding leaves it alone
        self._asking = False

    @property
    def text_html(self) -> str:
        """The drawn transcript text (all text segments), for tests and the benchmark."""
        return "".join(w.value for (kind, _src), w in self._segments if kind == "text")

    @property
    def classes(self) -> tuple[str, ...]:
        """The CSS classes of the node's box (``agentstack-node``, ``agentstack-status-<status>``, ...)."""
        return tuple(self.box._dom_classes)

    def transcript_items(self) -> list[tuple[str, W.Widget]]:
        """The drawn transcript in order: ``("text", html)`` or ``("tool", panel)`` per item."""
        return [("tool" if "agentstack-tool" in w._dom_classes else "text", w)
                for w in self.transcript.children]

    def tool_panels(self) -> list[W.Widget]:
        """The transcript's tool-call panels, in the order the calls happened."""
        return [w for kind, w in self.transcript_items() if kind == "tool"]

    def _on_toggle(self, _button: W.Button | None, *, auto: bool = False) -> None:
        if not auto:
            self._touched = True
        collapsed = self.body.layout.display == "none"
        _hidden(self.body, not collapsed)
        self.toggle.description = "▾" if collapsed else "▸"

    def _on_stop(self, _b: W.Button) -> None:
        self._confirming(True)

    def _confirming(self, on: bool) -> None:
        self._asking = on
        _hidden(self.confirm, not on)
        _hidden(self.stop, on or self._status in TERMINAL)

    def _on_confirm(self, _b: W.Button) -> None:
        self._confirming(False)
        self.tree.stop(self.id)

    def update(self, node: NodeState, now: float) -> None:
        if node.status != self._status:
            self._status = node.status
            self.status.value = pill(node.status)
            for cls in list(self.box._dom_classes):
                if cls.startswith("agentstack-status-") or cls.startswith("s-"):
                    self.box.remove_class(cls)
            self.box.add_class(f"agentstack-status-{node.status}")
            self.box.add_class(f"s-{node.status}")
            if node.status in TERMINAL:
                self._confirming(False)
                if node.parent_id is not None and not self._touched and self.body.layout.display != "none":
                    self._on_toggle(None, auto=True)  # a finished subagent folds to its header line
        root = node.parent_id is None
        _hidden(self.stop, not root or node.status in TERMINAL or self._asking)
        self.update_title(node)
        self.update_meta(node, now)
        self._update_transcript(node)
        if node.result is not None and not self._folded:
            self._folded = True
            self.work.selected_index = None
        self._update_tools_titles(node)
        _set(self.qa, "value", qa_html(node))
        _hidden(self.qa, not self.qa.value)
        self._update_query(node)
        partial = node.result is None and node.status == "stopped" and node.content.strip()
        if node.result is not None or partial:
            label = ("Final answer" if root else "Result") if node.result is not None else "Partial answer"
            cls = "agentstack-answer-box" + (" partial" if partial else "")
            _set(self.result, "value", f'<div class="{cls}"><b>{label}</b>'
                                       f"{markdown(node.result if node.result is not None else node.content)}</div>")
        _hidden(self.result, not (node.result is not None or partial))
        self._update_result_actions(node.result if node.result is not None else (node.content if partial else None))
        if node.error:
            cls = "agentstack-problem" + (" stopped" if node.status == "stopped" else "")
            _set(self.error, "value", f'<div class="{cls}"><b>{escape(node.status)}:</b> {escape(node.error)}</div>')
        _hidden(self.error, not node.error)

    def update_title(self, node: NodeState) -> None:
        """The title (typed prompt, folded result) and the mark for code that raised here or below."""
        folded = node.parent_id is not None and node.status in TERMINAL and self.body.layout.display == "none"
        below = self.tree.failed_below(node.id)
        _set(self.title, "value", node_title(node, folded, below))
        failed = bool(node.code_failed or below)
        if failed != ("agentstack-code-failed" in self.box._dom_classes):
            (self.box.add_class if failed else self.box.remove_class)("agentstack-code-failed")

    def _update_result_actions(self, text: str | None) -> None:
        """One bar for the answer (a Markdown cell) and one per fenced code block in it (code cells)."""
        if text == self._result_text:
            return
        self._result_text = text
        _close_all(self.result_actions.children)
        bars = answer_bars(text, self.tree.model_id)
        self.result_actions.children = tuple(bars)
        _hidden(self.result_actions, not bars)

    def update_meta(self, node: NodeState, now: float) -> None:
        """The activity (with a spinner while working) and the usage and elapsed-time line."""
        doing = activity(node)
        spin = '<span class="agentstack-spinner"></span>' if doing and node.status == "running" else ""
        _set(self.activity, "value", f'<span class="agentstack-quiet">{spin}{escape(doing)}</span>' if doing else "")
        _hidden(self.activity, not doing)
        parts = []
        if node.usage or node.children:  # one figure: the subtree's when the agent has subagents
            state = self.tree.state
            usage = state.subtree_usage(node.id) if node.id in state.nodes else node.usage
            parts.append(token_text(usage, "subtree" if node.children else "this agent"))
            cost = state.subtree_cost(node.id).text if node.id in state.nodes else ""
            if cost:  # priced from the workspace's table (providers/prices.py)
                parts.append(f"cost {escape(cost)}")
        elapsed = node.elapsed(now)
        if elapsed is not None:
            parts.append(format_elapsed(elapsed))
        _set(self.meta, "value", f'<span class="agentstack-quiet">{" · ".join(parts)}</span>')

    def _update_transcript(self, node: NodeState) -> None:
        """Text and tool calls in the order they happened; only changed items are redrawn."""
        if len(self._segments) > len(node.transcript) or any(
                kind != node.transcript[i][0] for i, ((kind, _s), _w) in enumerate(self._segments)):
            _close_all(w for _k, w in self._segments)  # replaced content: start over
            self._segments = []
        segs = list(self._segments)
        for i, (kind, value) in enumerate(node.transcript):
            if kind == "text":
                if i < len(segs):
                    if segs[i][0][1] != value:
                        segs[i][1].value = markdown(value)
                        segs[i] = (("text", value), segs[i][1])
                    continue
                widget = W.HTML(markdown(value), _dom_classes=("agentstack-text",))
                segs.append((("text", value), widget))
            else:
                call = node.tools[value]
                sig = (call.tool, call.done, call.error, call.decision)
                if i < len(segs):
                    if segs[i][0][1] != sig:
                        page = segs[i][1].children[0]
                        page.children[0].value = tool_body(call)
                        _set_code_bar(page.children[1], call.ran_code)
                        segs[i] = (("tool", sig), segs[i][1])
                    continue
                bar = ActionBar(label="code", anchor=self.tree.model_id)
                _set_code_bar(bar, call.ran_code)
                page = W.VBox([W.HTML(tool_body(call)), bar])
                panel = W.Accordion(children=(page,), titles=(tool_title(call),),
                                    selected_index=None, _dom_classes=("agentstack-tool",))
                segs.append((("tool", sig), panel))
        if len(segs) != len(self._segments) or any(a[1] is not b[1] for a, b in zip(segs, self._segments, strict=False)):
            self.transcript.children = tuple(w for _s, w in segs)
        self._segments = segs
        _hidden(self.work, not segs)

    def _update_tools_titles(self, node: NodeState) -> None:
        approvals = [a for a in node.answers if a.get("kind") == "approval"]
        python = 0
        for (kind, value), (_sig, widget) in zip(node.transcript, self._segments, strict=False):
            if kind != "tool":
                continue
            call = node.tools[value]
            by = None
            if call.tool == "python":
                if python < len(approvals):
                    by = source_label(approvals[python].get("source"))
                python += 1
            _set(widget, "titles", (tool_title(call, by),))

    def _update_query(self, node: NodeState) -> None:
        query = node.pending_query
        shown = self.card.query.query_id if self.card else None
        if shown == (query.query_id if query else None) and (query is not None
                                                             or self._answered_from == node.answered_from):
            return
        if self.card is not None:
            self.card.close()  # an answered question's widgets are gone for good
            self.card = None
        if query is None:
            self._answered_from = node.answered_from
            note = W.HTML(f"<i>{escape(node.answered_from)}</i>") if node.answered_from else None
            if note is not None:
                note.add_class("agentstack-answered-elsewhere")
            self.query.children = (note,) if note is not None else ()
            _hidden(self.query, note is None)
            return
        tool = next((t.tool for t in reversed(node.tools) if not t.done), "python")
        self.card = QueryCard(query, lambda r, q=query.query_id: self.tree.respond(self.id, q, r),
                              agent_type=node.type, tool=tool, executor=self.tree.state.executor_of(node.id),
                              try_first=self.tree.trial(query))
        self.query.children = (self.card.box,)
        _hidden(self.query, False)


def _set_code_bar(bar: ActionBar, code: str | None) -> None:
    """The tool panel's Copy / Insert act on the code that actually ran (hidden for tools without code)."""
    if bar.text != (code or ""):
        bar.text = code or ""
    _hidden(bar, not code)


def _close_all(widgets: Iterable[W.Widget]) -> None:
    """Close widgets (and their children) that left the view, so their comms do not pile up."""
    for widget in widgets:
        _close_all(getattr(widget, "children", ()) or ())
        widget.close()


class AgentTree(W.VBox):
    """Live tree of a run. Feed it events (``apply``/``extend``) or ``attach`` it to an AgentRun."""

    def __init__(self, run: Any = None, *, responder: Responder | None = None, stopper: Stopper | None = None,
                 interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic, **kwargs: Any):
        self.style = W.HTML(THEME_CSS.replace("</style>", CONTROLS_CSS + CODEVIEW_CSS + "</style>"),
                            layout=W.Layout(height="0", overflow="hidden", margin="0"))
        self.presence = Presence(on_event=self._on_presence)
        self.views = 0  # front-end views showing this tree now (as the Presence child reports them)
        self._gone: tuple[str, float] | None = None
        # called with "cleared" / "cell-deleted" (what it returns is not used)
        self.on_gone: Callable[[str], object] | None = None
        self.earlier = W.VBox()
        self.earlier.add_class("agentstack-earlier")
        self.notice = W.HTML()
        self.hint = W.HTML('<span class="agentstack-hint">Working in the background: JupyterLab shows the kernel '
                           "as Idle and you can keep running cells.</span>")
        self.hint.add_class("agentstack-background")
        self.nodes_box = W.VBox()
        super().__init__([self.style, self.presence, self.notice, self.earlier, self.hint, self.nodes_box], **kwargs)
        self.add_class("agentstack-tree")
        _hidden(self.notice, True)
        _hidden(self.earlier, True)
        _hidden(self.hint, True)
        self.state = TreeState(clock=clock)
        self.interval = interval
        self.flushes = 0
        self._clock = clock
        self._views: dict[str, NodeView] = {}
        self._dirty: set[str] = set()
        self._last_flush = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._responder = responder
        self._stopper = stopper
        self._unsubscribe: Callable[[], None] | None = None
        self.run = None
        self.on_msg(self._on_custom_msg)
        if run is not None:
            self.attach(run)

    # -- reading what is drawn ----------------------------------------------------------------------
    def node_ids(self) -> list[str]:
        """The agents that have a drawn node, in the order their nodes were drawn."""
        return list(self._views)

    def node_view(self, agent_id: str) -> NodeView:
        """The drawn node of ``agent_id`` (its widgets, to read); ``KeyError`` naming it if it has none."""
        view = self._views.get(agent_id)
        if view is None:
            raise KeyError(f"no drawn node for agent {agent_id!r} (drawn: {', '.join(self._views) or 'none'})")
        return view

    def failed_below(self, agent_id: str) -> int:
        """How many python calls raised in the subagents of ``agent_id`` (all depths)."""
        node = self.state.nodes.get(agent_id)
        if node is None:
            return 0
        return sum(self.state.nodes[c].code_failed + self.failed_below(c) for c in node.children
                   if c in self.state.nodes)

    @property
    def ticking(self) -> bool:
        """Whether the elapsed-time redraw is armed (it is while a followed run has agents at work)."""
        return self._ticker is not None

    # -- feeding ---------------------------------------------------------------------------------
    def attach(self, run: Any) -> AgentTree:
        """Follow an ``AgentRun``: replay its events, then receive new ones as they happen."""
        from agentstack_lab.events import UserResponse

        self.run = run
        config = getattr(getattr(run, "workspace", None), "config", None)
        if config is not None:  # its cost is priced from the workspace's table
            from agentstack_lab.providers.prices import PriceTable

            self.state.prices = PriceTable.from_config(config)
        if self._responder is None:
            self._responder = lambda a, q, r: run.send(UserResponse(agent_id=a, query_id=q, response=r))
        if self._stopper is None:
            self._stopper = lambda a: run.stop(a)
        self._unsubscribe = run.subscribe(self._on_event, replay=True)
        self.flush()
        self._update_hint()
        self._arm_ticker()
        return self

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    def _on_event(self, event: Any) -> None:
        try:
            self.apply(event)
        except Exception:  # a view problem must never break the run
            log.exception("agent tree could not apply %r", event)

    def apply(self, event: Any) -> None:
        """Fold one outbound event in; text deltas are coalesced, everything else redraws now."""
        changed = self.state.apply(event)
        if changed is None:
            return
        self._dirty.add(changed)
        if getattr(event, "type", "") == "text-delta":
            self._schedule()
        else:
            self.flush()

    def extend(self, events: Iterable[Any]) -> AgentTree:
        for event in events:
            self.apply(event)
        return self

    def _schedule(self) -> None:
        wait = self.interval - (self._clock() - self._last_flush)
        if wait <= 0:
            self.flush()
            return
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next event after the interval, or flush(), draws it
        self._timer = loop.call_later(wait, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.flush()
        except Exception:
            log.exception("agent tree redraw failed")

    def flush(self) -> None:
        """Redraw every dirty node now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._last_flush = self._clock()
        if not self._dirty:
            return
        self.flushes += 1
        now = self._clock()
        dirty, self._dirty = self._dirty, set()
        for node_id in self._ordered(dirty):
            self._view(node_id).update(self.state.nodes[node_id], now)
        ancestors = {p for i in dirty for p in self._ancestors(i)} - dirty
        for node_id in ancestors:  # their subtree's token figure (and code that raised below) changed
            if node_id in self._views:
                self._views[node_id].update_meta(self.state.nodes[node_id], now)
                self._views[node_id].update_title(self.state.nodes[node_id])
        self._update_hint()
        self._arm_ticker()

    def _ancestors(self, node_id: str) -> list[str]:
        out, parent = [], self.state.nodes[node_id].parent_id if node_id in self.state.nodes else None
        while parent is not None and parent in self.state.nodes and parent not in out:
            out.append(parent)
            parent = self.state.nodes[parent].parent_id
        return out

    def _update_hint(self) -> None:
        """The background hint shows while a followed run has agents at work."""
        working = any(n.status not in TERMINAL for n in self.state.nodes.values())
        _hidden(self.hint, not (working and self._unsubscribe is not None))

    def _arm_ticker(self) -> None:
        """While agents work, their elapsed time is redrawn once a ``TICK`` (one meta message each)."""
        if self._ticker is not None or self._unsubscribe is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._ticker = loop.call_later(TICK, self._on_tick)

    def _on_tick(self) -> None:
        self._ticker = None
        now = self._clock()
        working = [i for i, n in self.state.nodes.items() if n.status not in TERMINAL and i in self._views]
        try:
            for node_id in working:
                self._views[node_id].update_meta(self.state.nodes[node_id], now)
        except Exception:
            log.exception("agent tree tick failed")
        if working:
            self._arm_ticker()
        else:
            _hidden(self.hint, True)

    def _ordered(self, ids: set[str]) -> list[str]:
        return sorted(ids, key=lambda i: self.state.nodes[i].depth)

    def _view(self, node_id: str) -> NodeView:
        view = self._views.get(node_id)
        if view is not None:
            return view
        view = self._views[node_id] = NodeView(self, node_id)
        parent_id = self.state.nodes[node_id].parent_id
        if parent_id is not None:
            parent = self._view(parent_id)
            parent.children.children = (*parent.children.children, view.box)
        else:
            self.nodes_box.children = (*self.nodes_box.children, view.box)
        self._relink()
        return view

    def _relink(self) -> None:
        """Re-home nodes whose parent became known after they were drawn."""
        for node_id, view in self._views.items():
            parent_id = self.state.nodes[node_id].parent_id
            if parent_id and view.box in self.nodes_box.children and parent_id in self._views:
                self.nodes_box.children = tuple(b for b in self.nodes_box.children if b is not view.box)
                pbox = self._views[parent_id].children
                pbox.children = (*pbox.children, view.box)

    # -- where it is shown ------------------------------------------------------------------------
    def _on_presence(self, event: str, how: str) -> None:
        """Count the views; the last one cleared or its cell deleted: ``on_gone`` after ``GONE_GRACE``.

        The grace lets a cell that only re-displays the tree (``run``) show it again first.
        """
        if event == "shown":
            self.views += 1
            self._gone = None
            return
        self.views = max(0, self.views - 1)
        if self.views or how not in ("cleared", "cell-deleted"):
            return
        self._gone = (how, self._clock() + GONE_GRACE)
        try:
            asyncio.get_running_loop().call_later(GONE_GRACE, self.check_gone)
        except RuntimeError:
            pass  # no loop (tests): check_gone() is called by hand

    def check_gone(self) -> None:
        """Tell ``on_gone`` if no view came back within the grace."""
        gone, self._gone = self._gone, None
        if gone is None or self.views:
            return
        how, due = gone
        if self._clock() < due:
            self._gone = gone
            return
        if self.on_gone is not None:
            try:
                self.on_gone(how)
            except Exception:  # a view problem must never break the kernel's comm handling
                log.exception("agent tree: handling a removed output failed")

    def show_earlier(self, widget: W.Widget) -> None:
        """Show ``widget`` (the cell's earlier runs still going) above the tree."""
        self.earlier.children = (widget,)
        _hidden(self.earlier, False)

    # -- answering ---------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        self.notice.value = f'<div class="agentstack-problem">{escape(text)}</div>'
        _hidden(self.notice, False)

    def respond(self, agent_id: str, query_id: str, response: Any) -> None:
        """Answer a pending query (what the answer box and the approval buttons call)."""
        node = self.state.nodes.get(agent_id)
        if node is None or query_id not in node.queries:
            self._say(f"no pending question {query_id!r} for agent {agent_id!r}")
            return
        if self._responder is None:
            self._say("this tree is not attached to a run; the answer was not sent")
            return
        try:
            self._responder(agent_id, query_id, response)
        except Exception as exc:
            self._say(f"answer not accepted: {exc}")
            return
        self.state.answered(agent_id, query_id)
        self._dirty.add(agent_id)
        self.flush()

    def trial(self, query: Any) -> Callable[[], Awaitable[Any]] | None:
        """The card's "Try it first" for a python approval: the attached run's ``try_first``, else ``None``."""
        try_first: Any = getattr(self.run, "try_first", None)
        if query.kind != "approval" or not callable(try_first) or "code" not in query.options:
            return None
        return lambda: cast("Awaitable[Any]", try_first(query.query_id))

    def stop(self, agent_id: str) -> None:
        """Stop an agent and its subtree."""
        if self._stopper is None:
            self._say("this tree is not attached to a run; nothing to stop")
            return
        try:
            self._stopper(agent_id)
        except Exception as exc:
            self._say(f"stop failed: {exc}")

    def _on_custom_msg(self, _widget: W.Widget, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        action = content.get("action")
        if action == "respond":
            self.respond(str(content.get("agentId")), str(content.get("queryId")), content.get("response"))
        elif action == "stop":
            self.stop(str(content.get("agentId")))
        else:
            self._say(f"unknown action {action!r}; expected respond or stop")

    # -- fallbacks ---------------------------------------------------------------------------------
    def to_text(self) -> str:
        return tree_to_text(self.state.to_tree())

    def watched(self) -> bool:
        """Whether a front end shows this widget: a view of it was shown, or one may be soon.

        One may be when the kernel is a Jupyter Server session's (JupyterLab, Notebook 7:
        ``JPY_SESSION_NAME``) or a widget manager connected to it; headless executors (nbclient,
        papermill, ``workflow run``) do none of these. A view is reported once the front end drew
        it, which may be after a run of a few hundred milliseconds ended.
        """
        return (self.views > 0 or bool(os.environ.get("JPY_SESSION_NAME"))
                or getattr(W.Widget, "_control_comm", None) is not None)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget and the static snapshot; a run that ended unwatched: the snapshot's Markdown and text only.

        The widget's view (and ``text/html``) would win over the Markdown in ``jupyter nbconvert``'s
        exports of a headless run, where no widget manager ever drew it.
        """
        self.flush()
        from agentstack_lab.notebook.snapshot import snapshot_bundle

        live = not getattr(self.run, "done", False) or self.watched()
        data = (super()._repr_mimebundle_(**kwargs) or {}) if live else {}
        # the static snapshot too (custom MIME, HTML, Markdown, text): a saved notebook shows the tree without a kernel
        data.update(snapshot_bundle(self.state.to_tree(), run_id=getattr(self.run, "id", None), html=live))
        return data
