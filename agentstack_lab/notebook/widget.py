"""AgentTree: the live ipywidgets view of a run (standard widgets only).

One collapsible node per agent, nested under its parent: status colour and label, title (type and
prompt excerpt), usage and elapsed time, a Stop button while it works, the streamed text as
sanitised Markdown (folded once the result is in), tool calls folded in an accordion, an answer
box for questions, the code an agent wants to run (read-only until Edit) with Approve / Reject /
Edit, and the final answer highlighted. The header reads on one row from ~480 px up: only the
title shrinks (and wraps to two lines at most); badge, usage and Stop never wrap or clip.

Updates are coalesced: text deltas only mark a node dirty, and dirty nodes are redrawn at most
once per ``interval`` (0.25 s, so at most 4 redraws a second for the whole tree; a redraw sends
at most two comm messages per dirty node, its content and its meta line). Other events (status
changes, questions, tool calls, results) redraw at once. 10,000 deltas arriving over T seconds
therefore cost at most ``2 * (1 + T / interval)`` content messages, whatever their count. While a
tree follows a run, each working agent's elapsed time is also redrawn once a second (one message).

A front end answers by clicking the buttons or by a custom message to the tree widget:
``{"action": "respond", "agentId": ..., "queryId": ..., "response": ...}`` or
``{"action": "stop", "agentId": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as W

from agentstack_lab.notebook.sanitize import escape, markdown_to_html
from agentstack_lab.notebook.tree import (
    TERMINAL,
    NodeState,
    TreeState,
    excerpt,
    format_elapsed,
    tree_to_markdown,
    tree_to_text,
)

__all__ = ["AgentTree", "STATUS_COLOURS", "DEFAULT_INTERVAL"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 0.25
TICK = 1.0
MAX_TOOL_TEXT = 4000
STATUS_COLOURS = {
    "pending": "#9e9e9e", "running": "#1976d2", "waiting_user": "#f9a825",
    "completed": "#2e7d32", "failed": "#c62828", "stopped": "#6d4c41",
}
STATUS_LABELS = {"waiting_user": "waiting for you"}
QUERY_LABELS = {"clarification": "The agent asks:", "blocking": "Before it starts, the agent needs to know:",
                "final": "One more question:"}
GENERIC_APPROVAL_PROMPTS = frozenset({"Run this Python code?"})  # the engine's default says nothing more

Responder = Callable[[str, str, Any], None]
Stopper = Callable[[str], None]


def _hidden(widget: W.Widget, hidden: bool) -> None:
    value = "none" if hidden else None
    if widget.layout.display != value:
        widget.layout.display = value


def _set(widget: W.Widget, name: str, value: Any) -> None:
    if getattr(widget, name) != value:  # traitlets skips equal values too; this keeps intent visible
        setattr(widget, name, value)


def _plain(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, indent=2, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return text


def _close(widgets: Iterable[W.Widget]) -> None:
    """Close widgets (and their children) that left the view, so their comms do not pile up."""
    for widget in widgets:
        _close(getattr(widget, "children", ()) or ())
        widget.close()


def _markdown(text: str) -> str:
    """Untrusted Markdown as sanitised HTML, with the line height of prose (widgets use a taller one)."""
    return f'<div style="line-height:1.45">{markdown_to_html(text)}</div>'


def _tool_input(value: Any) -> str:
    """A tool's input: the code itself for code tools, JSON otherwise."""
    if isinstance(value, dict) and set(value) == {"code"} and isinstance(value["code"], str):
        return value["code"]
    return _plain(value)


def _tool_output(value: Any) -> str:
    """A tool's output: the text the model was given when there is one, else the non-empty fields."""
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return value["text"]
        value = {k: v for k, v in value.items() if not (v is None or (isinstance(v, (str, list, dict)) and not v))}
    return _plain(value)


def _pre(text: str) -> str:
    text = text if len(text) <= MAX_TOOL_TEXT else text[:MAX_TOOL_TEXT] + f"\n… [{len(text) - MAX_TOOL_TEXT} more]"
    return f'<pre style="white-space:pre-wrap;margin:2px 0 6px">{escape(text)}</pre>'


def _title(node: NodeState) -> str:
    """Agent type and prompt excerpt, wrapped at prose line height and clamped to two lines.

    The whole excerpt is the tooltip.
    """
    prompt = escape(excerpt(node.prompt, 200))
    return (f'<div title="{prompt}" style="line-height:1.35;overflow-wrap:anywhere;overflow:hidden;'
            f'display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:2">'
            f"<b>{escape(node.type)}</b> · {prompt}</div>")


def _code_box(code: str) -> str:
    """Code to approve, read-only: monospace, full contrast, in the front end's code colours."""
    return ('<pre style="font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,13px);'
            "line-height:1.4;white-space:pre-wrap;overflow-wrap:anywhere;max-height:24em;overflow:auto;margin:2px 0;"
            "padding:6px 8px;color:var(--jp-content-font-color1,#212121);"
            "background:var(--jp-cell-editor-background,#f5f5f5);"
            f'border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:2px">{escape(code)}</pre>')


def _approval_heading(node: NodeState, prompt: str) -> str:
    """Who wants to run code, and the engine's own words when they add anything."""
    tool = next((t.tool for t in reversed(node.tools) if not t.done), "python")
    what = "this Python code" if tool == "python" else f"this code (tool {escape(tool)})"
    heading = f"<b>{escape(node.type)}</b> wants to run {what}:"
    if prompt.strip() and prompt.strip() not in GENERIC_APPROVAL_PROMPTS:
        heading += _markdown(prompt)
    return heading


class _NodeView:
    """The widgets of one agent node."""

    def __init__(self, tree: AgentTree, node_id: str):
        self.tree = tree
        self.id = node_id
        # Header: toggle, badge, usage/elapsed and Stop keep their size (flex 0 0 auto, one line each);
        # the title takes what is left (at least ~9em, two lines at most). When a row is too narrow for
        # that, usage and Stop move together to a second row, pushed right by their auto left margin.
        fixed = "0 0 auto"
        self.toggle = W.Button(description="▾", tooltip="collapse / expand",
                               layout=W.Layout(width="2.4em", flex=fixed))
        self.status = W.HTML(layout=W.Layout(flex=fixed))
        self.status.add_class("agentstack-badge")
        self.title = W.HTML(layout=W.Layout(flex="1 1 9em", min_width="0", overflow="hidden", margin="2px 6px"))
        self.title.add_class("agentstack-title")
        self.meta = W.HTML(layout=W.Layout(flex=fixed, margin="2px 4px"))
        self.stop = W.Button(description="Stop", button_style="danger", tooltip="stop this agent and its subagents",
                             layout=W.Layout(width="auto", min_width="4.5em", flex=fixed))
        self.stop.add_class("agentstack-stop")
        self.content = W.HTML()
        self.content.add_class("agentstack-content")
        # The streamed text is open while the agent works and folded once its result is shown.
        self.work = W.Accordion(children=(self.content,), titles=("streamed text",), selected_index=0)
        self.work.add_class("agentstack-work")
        self.tools = W.Accordion(children=(), selected_index=None)
        for widget, cls in ((self.toggle, "toggle"), (self.meta, "meta"), (self.tools, "tools")):
            widget.add_class(f"agentstack-{cls}")
        self.query = W.VBox()
        self.query.add_class("agentstack-query")
        self.result = W.HTML()
        self.result.add_class("agentstack-result")
        self.error = W.HTML()
        self.error.add_class("agentstack-error")
        self.children = W.VBox(layout=W.Layout(margin="0 0 0 1.4em"))
        self.body = W.VBox([self.work, self.tools, self.query, self.result, self.error, self.children])
        side = W.HBox([self.meta, self.stop], layout=W.Layout(flex=fixed, margin="0 0 0 auto", align_items="center"))
        header = W.HBox([self.toggle, self.status, self.title, side],
                        layout=W.Layout(align_items="center", flex_flow="row wrap"))
        header.add_class("agentstack-header")
        self.box = W.VBox([header, self.body], layout=W.Layout(border_left="3px solid #9e9e9e", padding="0 0 0 6px",
                                                              margin="2px 0"))
        self.box.add_class("agentstack-node")
        for w in (self.tools, self.query, self.result, self.error, self.work):
            _hidden(w, True)
        self.toggle.on_click(self._on_toggle)
        self.stop.on_click(lambda _b: tree.stop(self.id))
        self._query_id: str | None = None
        self._content_src: str | None = None
        self._tools_sig: tuple = ()
        self._status = ""
        self._folded = False

    def _on_toggle(self, _button: W.Button) -> None:
        collapsed = self.body.layout.display == "none"
        _hidden(self.body, not collapsed)
        self.toggle.description = "▾" if collapsed else "▸"

    def update(self, node: NodeState, now: float) -> None:
        if node.status != self._status:
            self._status = node.status
            colour = STATUS_COLOURS.get(node.status, "#9e9e9e")
            label = STATUS_LABELS.get(node.status, node.status)
            self.status.value = (f'<span style="background:{colour};color:white;border-radius:8px;'
                                 f'padding:1px 8px;font-size:85%;white-space:nowrap">{escape(label)}</span>')
            self.box.layout.border_left = f"3px solid {colour}"
            for cls in list(self.box._dom_classes):
                if cls.startswith("agentstack-status-"):
                    self.box.remove_class(cls)
            self.box.add_class(f"agentstack-status-{node.status}")
            _hidden(self.stop, node.status in TERMINAL)  # a finished agent has nothing to stop
        _set(self.title, "value", _title(node))
        self.update_meta(node, now)
        if node.content != self._content_src:
            self._content_src = node.content
            self.content.value = _markdown(node.content)
            _hidden(self.work, not node.content)
        if node.result is not None and not self._folded:
            self._folded = True
            self.work.selected_index = None
        self._update_tools(node)
        self._update_query(node)
        if node.result is not None:
            colour = "#2e7d32"
            _set(self.result, "value",
                 f'<div style="border-left:4px solid {colour};background:#f1f8e9;padding:4px 8px">'
                 f"<b>{'Final answer' if node.parent_id is None else 'Result'}</b>{_markdown(node.result)}</div>")
        _hidden(self.result, node.result is None)
        if node.error:
            _set(self.error, "value", f'<div style="color:#c62828"><b>{escape(node.status)}:</b> '
                                      f"{escape(node.error)}</div>")
        _hidden(self.error, not node.error)

    def update_meta(self, node: NodeState, now: float) -> None:
        """The usage and elapsed-time line."""
        parts = []
        if node.usage:
            parts.append(f"in {node.usage.get('input_tokens', 0)} · out {node.usage.get('output_tokens', 0)} tok")
        elapsed = node.elapsed(now)
        if elapsed is not None:
            parts.append(format_elapsed(elapsed))
        _set(self.meta, "value", f'<span style="color:#757575;font-size:85%;white-space:nowrap">'
                                 f'{" · ".join(parts)}</span>')

    def _update_tools(self, node: NodeState) -> None:
        sig = tuple((t.tool, t.done, t.error is None) for t in node.tools)
        if sig == self._tools_sig:
            return
        old = list(self.tools.children)
        kids = []
        for i, call in enumerate(node.tools):
            html = (f"<b>input</b>{_pre(_tool_input(call.input))}"
                    + (f"<b>{'error' if call.error else 'output'}</b>{_pre(call.error or _tool_output(call.output))}"
                       if call.done else "<i>running…</i>"))
            if i >= len(old):
                kids.append(W.HTML(html))
                continue
            if i >= len(self._tools_sig) or self._tools_sig[i] != sig[i]:
                old[i].value = html  # a call that just returned: its panel is redrawn in place
            kids.append(old[i])
        self._tools_sig = sig
        self.tools.children = tuple(kids)
        self.tools.titles = tuple(
            f"{t.tool} {'…' if not t.done else ('✗' if t.error else '✓')}" for t in node.tools)
        _hidden(self.tools, not node.tools)

    def _update_query(self, node: NodeState) -> None:
        query = node.pending_query
        qid = query.query_id if query else None
        if qid == self._query_id:
            return
        self._query_id = qid
        _close(self.query.children)  # an answered question's widgets are gone for good
        if query is None:
            self.query.children = ()
            _hidden(self.query, True)
            return
        if query.kind == "approval":
            code = str(query.options.get("code") or query.prompt)
            heading = W.HTML(_approval_heading(node, query.prompt))
            viewer = W.HTML(_code_box(code), layout=W.Layout(width="100%"))
            viewer.add_class("agentstack-code-view")
            editor = W.Textarea(value=code, layout=W.Layout(width="100%", height="10em", display="none"))
            editor.add_class("agentstack-code")
            approve = W.Button(description="Approve", button_style="success")
            reject = W.Button(description="Reject", button_style="warning")
            edit = W.Button(description="Edit", tooltip="edit the code, then Approve runs your version")
            for b, cls in ((approve, "approve"), (reject, "reject"), (edit, "edit")):
                b.add_class(f"agentstack-{cls}")

            def on_approve(_b: W.Button) -> None:
                response = True if editor.value == code else {"approved": True, "code": editor.value}
                self.tree.respond(self.id, query.query_id, response)

            def on_edit(_b: W.Button) -> None:  # read-only until now: the code box becomes an editor
                _hidden(viewer, True)
                _hidden(editor, False)
                edit.disabled = True

            approve.on_click(on_approve)
            reject.on_click(lambda _b: self.tree.respond(self.id, query.query_id, False))
            edit.on_click(on_edit)
            self.query.children = (heading, viewer, editor, W.HBox([approve, reject, edit]))
        else:
            answer = W.Textarea(placeholder="your answer", layout=W.Layout(width="100%"))
            answer.add_class("agentstack-answer")
            send = W.Button(description="Send", button_style="primary")
            send.add_class("agentstack-send")
            send.on_click(lambda _b: self.tree.respond(self.id, query.query_id, answer.value))
            row = [send]
            for choice in query.options.get("choices") or []:
                b = W.Button(description=str(choice)[:40])
                b.on_click(lambda _b, c=choice: self.tree.respond(self.id, query.query_id, c))
                row.append(b)
            label = QUERY_LABELS.get(query.kind, query.kind)
            heading = W.HTML(f"<b>{escape(label)}</b>" + _markdown(query.prompt))
            self.query.children = (heading, answer, W.HBox(row))
        _hidden(self.query, False)


class AgentTree(W.VBox):
    """Live tree of a run. Feed it events (``apply``/``extend``) or ``attach`` it to an AgentRun."""

    def __init__(self, run: Any = None, *, responder: Responder | None = None, stopper: Stopper | None = None,
                 interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic, **kwargs: Any):
        self.notice = W.HTML()
        self.nodes_box = W.VBox()
        super().__init__([self.notice, self.nodes_box], **kwargs)
        self.add_class("agentstack-tree")
        _hidden(self.notice, True)
        self.state = TreeState(clock=clock)
        self.interval = interval
        self.flushes = 0
        self._clock = clock
        self._views: dict[str, _NodeView] = {}
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

    # -- feeding ---------------------------------------------------------------------------------
    def attach(self, run: Any) -> AgentTree:
        """Follow an ``AgentRun``: replay its events, then receive new ones as they happen."""
        from agentstack_lab.events import UserResponse

        self.run = run
        if self._responder is None:
            self._responder = lambda a, q, r: run.send(UserResponse(agent_id=a, query_id=q, response=r))
        if self._stopper is None:
            self._stopper = lambda a: run.stop(a)
        self._unsubscribe = run.subscribe(self._on_event, replay=True)
        self.flush()
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
        self._arm_ticker()

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

    def _ordered(self, ids: set[str]) -> list[str]:
        return sorted(ids, key=lambda i: self.state.nodes[i].depth)

    def _view(self, node_id: str) -> _NodeView:
        view = self._views.get(node_id)
        if view is not None:
            return view
        view = self._views[node_id] = _NodeView(self, node_id)
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

    # -- answering ---------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        self.notice.value = f'<span style="color:#c62828">{escape(text)}</span>'
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

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        self.flush()
        data = super()._repr_mimebundle_(**kwargs) or {}
        tree = self.state.to_tree()
        data["text/plain"] = tree_to_text(tree)
        data["text/markdown"] = tree_to_markdown(tree)
        return data
