"""The agent tree as plain data, built from the event stream, and its text/Markdown rendering.

:class:`TreeState` folds outbound events (``agent-state``, ``text-delta``, ``tool-call``, ...)
into one :class:`NodeState` per agent. Each node keeps a transcript (text and tool calls in the
order they happened, as a chat shows them), the step it is in (:func:`activity` says it in words),
where its code runs, and the questions it asked with their answers (from the engine's
``metadata.answers``, so an answer given from another surface shows too). :meth:`TreeState.to_tree` returns the same nested shape as
``AgentRun.tree``, and :func:`tree_to_text` / :func:`tree_to_markdown` render either one; they
are the fallback for front ends without widgets and what ``make demo`` prints.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentstack_lab.engine.state import token_text, tree_scope
from agentstack_lab.engine.transcript import code_failed, tool_record
from agentstack_lab.events import (
    TERMINAL,
    AgentCompleted,
    AgentState,
    ErrorEvent,
    TextDelta,
    ToolCall,
    ToolResult,
    UserQuery,
)
from agentstack_lab.providers.base import combine_basis
from agentstack_lab.providers.prices import Cost, PriceTable, run_model
from agentstack_lab.validation import excerpt, typed_prompt

__all__ = ["NodeState", "ToolCallState", "TreeState", "tree_to_text", "tree_to_markdown", "excerpt", "format_elapsed",
           "STATUS_ICONS", "activity", "STEP_LABELS", "badges", "typed_prompt", "inert_markdown"]

STATUS_ICONS = {
    "pending": "○", "running": "◐", "waiting_user": "?", "paused": "⏸", "completed": "✓", "failed": "✗",
    "stopped": "■",
}


def format_elapsed(seconds: float) -> str:
    """``"32 ms"`` under a second, ``"4.2 s"`` above."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"





# What an agent is doing, by the step the engine reports (``metadata.step``) and the last event.
STEP_LABELS = {
    "clarify": "clarifying the question", "blocking": "checking what it needs to know",
    "subquestions": "planning subagents", "main": "waiting for the model", "summary": "summarising",
    "final": "checking for a follow-up question", "subagents": "waiting for its subagents",
}


def activity(node: NodeState) -> str:
    """What a working agent is doing, in a few words (empty once it has finished)."""
    if node.status in TERMINAL or node.status == "pending":
        return "" if node.status in TERMINAL else "starting"
    if node.status == "waiting_user":
        query = node.pending_query
        return "waiting for your approval" if query and query.kind == "approval" else "waiting for your answer"
    running = next((t for t in reversed(node.tools) if not t.done), None)
    if running is not None:
        return "running code" if running.tool == "python" else f"calling {running.tool}"
    step = node.step or ""
    if step in ("main", "summary") and node.transcript and node.transcript[-1][0] == "text" and node.streaming:
        return "writing the answer" if step == "main" else "summarising"
    return STEP_LABELS.get(step, "working")


@dataclass
class ToolCallState:
    """One tool call and (once it returned) its result."""

    tool: str
    input: Any
    output: Any = None
    error: str | None = None
    done: bool = False

    @property
    def ran_code(self) -> str | None:
        """The code that actually ran: the person's edited version when there is one."""
        if isinstance(self.output, dict) and isinstance(self.output.get("code"), str):
            return self.output["code"]
        if isinstance(self.input, dict) and isinstance(self.input.get("code"), str):
            return self.input["code"]
        return None

    @property
    def cancelled(self) -> bool:
        """The agent was stopped while this call waited for approval or ran (``output.cancelled``)."""
        return self.done and isinstance(self.output, dict) and self.output.get("cancelled") is True

    @property
    def decision(self) -> str | None:
        """``approved`` / ``edited`` / ``rejected`` / ``cancelled`` for a code call that needed approval (once it returned)."""
        if not self.done or self.tool != "python":
            return None
        if self.cancelled:
            return "cancelled"
        if self.error == "rejected by the user":
            return "rejected"
        if isinstance(self.output, dict) and (self.output.get("edited") is True or "code" in self.output):
            return "edited"
        return "approved"

    def record(self) -> dict[str, Any]:
        """What a saved tree keeps of this call (:func:`~agentstack_lab.engine.transcript.tool_record`)."""
        return tool_record(self.tool, self.input, self.output, self.error, self.done)


@dataclass
class NodeState:
    """What the views know about one agent."""

    id: str
    parent_id: str | None = None
    type: str = "agent"
    status: str = "pending"
    prompt: str = ""
    content: str = ""
    result: str | None = None
    error: str | None = None
    depth: int = 0
    usage: dict[str, Any] = field(default_factory=dict)  # this agent's own (inputTokens, outputTokens, basis)
    tools: list[ToolCallState] = field(default_factory=list)
    queries: dict[str, UserQuery] = field(default_factory=dict)
    answered_from: str | None = None  # "answered from the terminal (by alice)" when another surface answered
    children: list[str] = field(default_factory=list)
    # ("text", str) and ("tool", index into tools), in the order they happened
    transcript: list[tuple[str, Any]] = field(default_factory=list)
    step: str | None = None
    streaming: bool = False  # the last event was streamed text
    executor: str | None = None  # "live" (the kernel) or "subprocess"; the root's, inherited by children
    model: tuple[str | None, str | None] = (None, None)  # the run's provider and model (the root's metadata)
    answers: list[dict[str, Any]] = field(default_factory=list)  # questions asked and answered, in order
    name: str = ""
    started: float | None = None
    ended: float | None = None
    started_at: float | None = None  # wall-clock times reported by the engine, when it does
    ended_at: float | None = None
    badges: list[str] = field(default_factory=list)  # control-plane facts: drift warnings, consensus checkpoints
    follows: str | None = None  # a follow-up root: the question it follows (``metadata.continuesPrompt``)

    @property
    def code_failed(self) -> int:
        """How many of this agent's python calls ran and raised."""
        return code_failed(t.record() for t in self.tools if t.tool == "python" and t.done)

    @property
    def pending_query(self) -> UserQuery | None:
        """The oldest query still waiting for an answer."""
        return next(iter(self.queries.values()), None)

    def elapsed(self, now: float | None = None) -> float | None:
        """Seconds since the agent started running (until it ended)."""
        if self.started_at is not None:
            return max(0.0, (self.ended_at if self.ended_at is not None else time.time()) - self.started_at)
        if self.started is None:
            return None
        end = self.ended if self.ended is not None else (now if now is not None else time.monotonic())
        return max(0.0, end - self.started)


def _num(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _answered_from(answer: dict[str, Any]) -> str | None:
    """A line for a question another surface answered (the widget's own answers need none)."""
    from agentstack_lab.decisions import surface_label

    source = answer.get("source")
    if source in (None, "widget", "user") or answer.get("state") == "cancelled":
        return None
    by = f" (by {answer['by']})" if answer.get("by") else ""
    return f"{answer.get('kind', 'question')} answered from {surface_label(source)}{by}"


class TreeState:
    """Agents by id, folded from events; ``apply`` returns the ids of the nodes it changed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, prices: PriceTable | None = None):
        self.nodes: dict[str, NodeState] = {}
        self.roots: list[str] = []
        self._clock = clock
        self.prices = prices or PriceTable()  # the workspace's table once a run is attached (providers/prices.py)
        # subtree costs of the fold as it is (cleared by apply; keyed to the price table, which may be replaced):
        # a widget update prices every shown node's subtree, O(n^2) lookups without it
        self._costs: tuple[PriceTable, dict[str, Cost]] = (self.prices, {})

    def node(self, agent_id: str) -> NodeState:
        node = self.nodes.get(agent_id)
        if node is None:
            node = self.nodes[agent_id] = NodeState(id=agent_id)
            self.roots.append(agent_id)
        return node

    def _set_parent(self, node: NodeState, parent_id: str | None) -> None:
        if not parent_id or parent_id == node.parent_id or parent_id == node.id:
            return
        if node.id in self.roots:
            self.roots.remove(node.id)
        parent = self.node(parent_id)
        node.parent_id = parent_id
        if node.id not in parent.children:
            parent.children.append(node.id)

    def _set_status(self, node: NodeState, status: str) -> None:
        if status == node.status:
            return
        now = self._clock()
        if status == "running" and node.started is None:
            node.started = now
        if status in TERMINAL:
            node.ended = now
            node.queries.clear()
        elif status != "waiting_user":
            node.queries.clear()
        node.status = status

    def apply(self, event: Any) -> str | None:
        """Fold one outbound event in; returns the id of the changed agent (or None)."""
        agent_id = getattr(event, "agent_id", None)
        if agent_id is None:
            return None
        self._costs[1].clear()
        node = self.node(agent_id)
        if isinstance(event, AgentState):
            s = event.state or {}
            self._set_parent(node, s.get("parentId") or s.get("parent_id"))
            node.type = s.get("type") or s.get("agentType") or node.type
            node.prompt = s.get("prompt") or node.prompt
            node.depth = _num(s.get("depth", node.depth))
            usage = s.get("ownUsage") or s.get("usage")
            if isinstance(usage, dict):
                node.usage = {k: str(v) if k == "basis" else _num(v) for k, v in usage.items()}
            if "content" in s and s["content"] is not None:
                node.content = str(s["content"])  # replaced content (streamed text arrives as deltas)
                tools = [seg for seg in node.transcript if seg[0] == "tool"]
                node.transcript = ([("text", node.content)] if node.content else []) + tools
            meta = s.get("metadata")
            if isinstance(meta, dict):
                if isinstance(meta.get("step"), str):
                    node.step = meta["step"]
                if isinstance(meta.get("executor"), str):
                    node.executor = meta["executor"]
                if isinstance(meta.get("provider"), str):
                    node.model = run_model(s)
                if isinstance(meta.get("answers"), list):
                    node.answers = [a for a in meta["answers"] if isinstance(a, dict)]
                if isinstance(meta.get("continues"), str):
                    node.follows = str(meta.get("continuesPrompt") or "the previous run")
            if isinstance(s.get("name"), str):
                node.name = s["name"]
            for key, attr in (("startedAt", "started_at"), ("endedAt", "ended_at")):
                if isinstance(s.get(key), (int, float)):
                    setattr(node, attr, float(s[key]))
            if isinstance(s.get("metadata"), dict):
                node.badges = badges(s["metadata"])
            if s.get("result") is not None:
                node.result = str(s["result"])
            if s.get("error"):
                node.error = str(s["error"])
            if s.get("status"):
                self._set_status(node, s["status"])
            answers = (s.get("metadata") or {}).get("answers") if isinstance(s.get("metadata"), dict) else None
            if answers and isinstance(answers[-1], dict):
                node.answered_from = _answered_from(answers[-1])
        elif isinstance(event, TextDelta):
            node.content += event.delta
            if node.transcript and node.transcript[-1][0] == "text":
                node.transcript[-1] = ("text", node.transcript[-1][1] + event.delta)
            else:
                node.transcript.append(("text", event.delta))
        elif isinstance(event, ToolCall):
            node.tools.append(ToolCallState(tool=event.tool, input=event.input))
            node.transcript.append(("tool", len(node.tools) - 1))
        elif isinstance(event, ToolResult):
            call = next((t for t in reversed(node.tools) if t.tool == event.tool and not t.done), None)
            if call is None:
                call = ToolCallState(tool=event.tool, input=None)
                node.tools.append(call)
                node.transcript.append(("tool", len(node.tools) - 1))
            call.output, call.error, call.done = event.output, event.error, True
        elif isinstance(event, UserQuery):
            node.queries[event.query_id] = event
        elif isinstance(event, AgentCompleted):
            node.result = event.result
            self._set_status(node, "completed")
        elif isinstance(event, ErrorEvent):
            node.error = event.error
            if node.status not in TERMINAL:  # the engine sends the status first; a bare error is a failure
                self._set_status(node, "failed")
        else:
            return None
        node.streaming = isinstance(event, TextDelta)
        return agent_id

    def executor_of(self, agent_id: str) -> str | None:
        """Where an agent's code runs: its own record, else its nearest ancestor's (the root knows)."""
        node = self.nodes.get(agent_id)
        while node is not None:
            if node.executor:
                return node.executor
            node = self.nodes.get(node.parent_id) if node.parent_id else None
        return None

    def extend(self, events: Iterable[Any]) -> None:
        for event in events:
            self.apply(event)

    # -- cost in USD (issue 27 item 16): priced at display time from the usage the events carry --------------
    def model_of(self, agent_id: str) -> tuple[str | None, str | None]:
        """The provider and model an agent's calls went to: the run's, recorded by its root."""
        node = self.nodes.get(agent_id)
        while node is not None:
            if node.model[0]:
                return node.model
            node = self.nodes.get(node.parent_id) if node.parent_id else None
        return None, None

    def subtree_cost(self, node_id: str) -> Cost:
        """An agent's cost with its descendants' (a lower bound when some of theirs is unknown)."""
        if self._costs[0] is not self.prices:
            self._costs = (self.prices, {})
        memo = self._costs[1]
        if node_id in memo:
            return memo[node_id]
        n = self.nodes[node_id]
        total = self.prices.cost(n.usage, *self.model_of(node_id))
        for child in n.children:
            total = total + self.subtree_cost(child)
        memo[node_id] = total
        return total

    def subtree_usage(self, node_id: str) -> dict[str, Any]:
        """An agent's usage with its descendants', rolled up as ``AgentRun.tree`` does."""
        n = self.nodes[node_id]
        usage = {"inputTokens": _num(n.usage.get("inputTokens")), "outputTokens": _num(n.usage.get("outputTokens")),
                 "basis": str(n.usage.get("basis") or ("reported" if n.usage else "none"))}
        for child in n.children:
            k = self.subtree_usage(child)
            usage["inputTokens"] += k["inputTokens"]
            usage["outputTokens"] += k["outputTokens"]
            usage["basis"] = combine_basis(usage["basis"], k["basis"])
        return usage

    def answered(self, agent_id: str, query_id: str) -> None:
        """Forget a query once it has been answered."""
        node = self.nodes.get(agent_id)
        if node is not None:
            node.queries.pop(query_id, None)

    def to_tree(self) -> list[dict[str, Any]]:
        """Nested dicts in the shape of ``AgentRun.tree`` (one per root)."""

        def build(node_id: str) -> dict[str, Any]:
            n = self.nodes[node_id]
            kids = [build(c) for c in n.children]
            usage = self.subtree_usage(node_id)
            return {
                "id": n.id, "parentId": n.parent_id, "type": n.type, "status": n.status, "prompt": n.prompt,
                "content": n.content, "result": n.result, "error": n.error, "depth": n.depth,
                "usage": usage, "cost": self.subtree_cost(node_id).to_wire(), "elapsed": n.elapsed(self._clock()),
                "tools": [t.record() for t in n.tools], "answers": list(n.answers),
                "badges": list(n.badges), "children": kids,
            }

        return [build(r) for r in self.roots]


def badges(metadata: dict[str, Any]) -> list[str]:
    """Short labels for what the control plane said about an agent (``agent-state`` metadata).

    ``drift``: the engine's drift check warned (its input repeats an ancestor's); ``consensus``: its
    planned subagents wait on, or passed, a consensus checkpoint; ``resources``: the resource monitor's
    phase past ``normal`` (warning, intervention = paused, termination = stopped) and why.
    """
    out = []
    drift = metadata.get("drift")
    if isinstance(drift, dict):
        out.append(f"⚠ drift {_num_text(drift.get('similarity'))} ({drift.get('action', 'warned')})")
    consensus = metadata.get("consensus")
    if isinstance(consensus, dict):
        rejected = len(consensus.get("rejected") or [])
        out.append(f"consensus {consensus.get('status', 'pending')}" + (f", {rejected} rejected" if rejected else ""))
    resources = metadata.get("resources")
    if isinstance(resources, dict) and resources.get("phase") in _MONITOR_BADGES:
        out.append(f"{_MONITOR_BADGES[resources['phase']]}: {resources.get('reason') or ''}".rstrip(": "))
    return out


_MONITOR_BADGES = {"warning": "⚠ resources", "intervention": "⏸ monitor paused", "termination": "■ monitor stopped"}


def _num_text(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "?"


def _usage_text(node: dict[str, Any]) -> str:
    usage = node.get("usage") or {}
    counted = usage.get("inputTokens") or usage.get("outputTokens") or usage.get("basis") not in (None, "none")
    parts = [token_text(usage, tree_scope(node))] if counted else []
    cost = (node.get("cost") or {}).get("text")
    if cost:
        parts.append(f"cost {cost}")
    elapsed = node.get("elapsed")
    if elapsed is None and node.get("startedAt") and node.get("endedAt"):
        try:
            elapsed = float(node["endedAt"]) - float(node["startedAt"])
        except (TypeError, ValueError):
            elapsed = None
    if elapsed is not None:
        parts.append(format_elapsed(elapsed))
    return ", ".join(parts)


def _as_list(tree: dict[str, Any] | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if tree is None:
        return []
    return tree if isinstance(tree, list) else [tree]


def tree_to_text(tree: dict[str, Any] | list[dict[str, Any]] | None, *, width: int = 100) -> str:
    """Plain-text rendering of a tree snapshot: one line per agent plus its result or error."""
    lines: list[str] = []

    def walk(node: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        status = node.get("status", "pending")
        branch = "" if top else ("└─ " if last else "├─ ")
        usage = _usage_text(node)
        marks = node.get("badges")
        if marks is None and isinstance(node.get("metadata"), dict):  # an AgentRun.tree snapshot
            marks = badges(node["metadata"])
        lines.append(f"{prefix}{branch}{STATUS_ICONS.get(status, '·')} {node.get('type', 'agent')} [{status}] "
                     f"{excerpt(typed_prompt(node.get('prompt')), 60)}" + "".join(f" [{m}]" for m in marks or ())
                     + (f"  ({usage})" if usage else ""))
        child_prefix = prefix + ("" if top else ("   " if last else "│  "))
        detail = node.get("error") if status in ("failed", "stopped") else node.get("result")
        if detail:
            label = "error" if status in ("failed", "stopped") else "result"
            lines.append(f"{child_prefix}   {label}: {excerpt(detail, width)}")
        kids = node.get("children") or []
        for i, child in enumerate(kids):
            walk(child, child_prefix, i == len(kids) - 1, False)

    for root in _as_list(tree):
        walk(root, "", True, True)
    return "\n".join(lines) if lines else "(no agents yet)"


def _fence(text: str) -> str:
    ticks = 3
    while "`" * ticks in text:
        ticks += 1
    return "`" * ticks


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)


def inert_markdown(text: str) -> str:
    """Markdown whose raw HTML is text: every ``<`` outside code becomes ``&lt;``, code blocks and spans kept.

    A renderer then shows ``<script>`` as the characters it is; emphasis, lists, links and fenced code
    still render (a renderer's own URL checks apply to links).
    """
    out: list[str] = []
    chunk: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if chunk:
            prose = "".join(chunk)
            parts, at = [], 0
            for m in _CODE_SPAN.finditer(prose):
                parts += [prose[at:m.start()].replace("<", "&lt;"), m.group(0)]
                at = m.end()
            out.append("".join(parts) + prose[at:].replace("<", "&lt;"))
            chunk.clear()

    for line in text.splitlines(keepends=True):
        opened = _FENCE_OPEN.match(line)
        if fence is None and opened:
            flush()
            fence = opened.group(1)
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
        elif line.startswith(("    ", "\t")):
            flush()
            out.append(line)  # an indented code line (or a list item's continuation): no HTML there either way
        else:
            chunk.append(line)
    flush()
    return "".join(out)


def tree_to_markdown(tree: dict[str, Any] | list[dict[str, Any]] | None) -> str:
    """Markdown rendering: the tree as an inert code block, then the root's answer as Markdown.

    Model output is untrusted: the answer is :func:`inert_markdown` (its HTML shows as text), an
    error is fenced.
    """
    roots = _as_list(tree)
    text = tree_to_text(roots)
    fence = _fence(text)
    parts = [f"**Agent tree**\n\n{fence}text\n{text}\n{fence}"]
    for root in roots:
        if root.get("result"):
            parts.append(f"**Answer**\n\n{inert_markdown(str(root['result']))}")
        elif root.get("error"):
            error = str(root["error"])
            f = _fence(error)
            parts.append(f"**Error**\n\n{f}text\n{error}\n{f}")
    return "\n\n".join(parts)
