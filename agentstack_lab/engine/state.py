"""Agent state, tree snapshots, and rebuilding a tree from the event log alone.

An :class:`AgentNode` carries the design seed's fields (id, parent, status, user content, user
comment, subagents, messages, result, metadata, created-at) plus type, depth, usage and timings.
Every change that shows in a snapshot is announced by an ``agent-state`` event (``content``
only when it was replaced; streamed content travels as ``text-delta``), so
:func:`tree_from_events` rebuilds exactly what :meth:`Tree.snapshot` shows live.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

from agentstack_lab.agents.spawner import TERMINAL, check_transition
from agentstack_lab.events import (
    AgentCompleted,
    AgentState,
    ErrorEvent,
    TextDelta,
    from_wire,
)
from agentstack_lab.providers.base import Message, Usage, combine_basis

__all__ = ["AgentNode", "tree_from_events", "snapshot_tree", "token_text", "tree_scope"]

_STATE_KEYS = ("id", "parentId", "name", "type", "status", "prompt", "result", "error", "depth", "userComment",
               "ownUsage", "metadata", "createdAt", "startedAt", "endedAt", "subagents")


@dataclass(kw_only=True, eq=False)
class AgentNode:
    """One agent of a run."""

    id: str
    type: str
    prompt: str  # the seed's userContent: what this agent was asked
    depth: int = 0
    parent_id: str | None = None
    identity_id: str | None = None  # the persistent identity the run acts as (``agents.identity_id``)
    name: str = ""
    status: str = "pending"
    content: str = ""  # streamed text (main answer and summary), or the user's replacement
    result: str | None = None
    error: str | None = None
    user_comment: str | None = None
    pending_comments: list[str] = field(default_factory=list[str])
    subagents: list[str] = field(default_factory=list[str])
    messages: list[Message] = field(default_factory=list[Message])
    history: list[Message] = field(default_factory=list[Message])  # a follow-up root's earlier turns (engine/followup.py)
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    row_only: dict[str, Any] = field(default_factory=dict[str, Any])  # metadata for the agents row, not every snapshot
    usage: Usage = field(default_factory=Usage)
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    ended_at: float | None = None
    stop_reason: str | None = None
    task: Any = None

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.type}-{self.id[:8]}"

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def set_status(self, new: str) -> None:
        """Change status if the lifecycle allows it (``InvalidTransitionError`` otherwise)."""
        check_transition(self.id, self.status, new)
        self.status = new
        now = time.time()
        if new == "running" and self.started_at is None:
            self.started_at = now
        if new in TERMINAL:
            self.ended_at = now

    def state(self, *, with_content: bool = False, with_prompt: bool = True) -> dict[str, Any]:
        """The JSON-able state carried by ``agent-state`` events.

        ``with_prompt=False`` leaves the prompt out (it never changes: an agent's first state carries it,
        and every reader merges states), so a long prompt is not logged again with each status change.
        """
        out = {
            "id": self.id, "parentId": self.parent_id, "name": self.name, "type": self.type,
            "status": self.status, "prompt": self.prompt, "result": self.result, "error": self.error,
            "depth": self.depth, "userComment": self.user_comment,
            "ownUsage": {"inputTokens": self.usage.input_tokens, "outputTokens": self.usage.output_tokens,
                         "basis": self.usage.basis, **self._cache_tokens()},
            "metadata": dict(self.metadata), "createdAt": self.created_at, "startedAt": self.started_at,
            "endedAt": self.ended_at, "subagents": list(self.subagents),
        }
        if with_content:
            out["content"] = self.content
        if not with_prompt:
            del out["prompt"]
        return out

    def _cache_tokens(self) -> dict[str, int]:
        """Prompt-cache reads and writes (part of the input tokens), when the provider reported any."""
        u = self.usage
        return {k: v for k, v in (("cacheReadTokens", u.cache_read_tokens), ("cacheWriteTokens", u.cache_write_tokens)) if v}

    def row(self, run_id: str, session_id: str | None) -> dict[str, Any]:
        """This agent as an ``agents`` table row."""
        from agentstack_lab.agents.spawner import now_iso

        return {"id": self.id, "name": self.name, "type": self.type, "status": self.status, "run_id": run_id,
                "identity_id": self.identity_id,
                "parent_id": self.parent_id, "session_id": session_id, "depth": self.depth, "prompt": self.prompt,
                "result": self.result, "error": self.error, "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens, "metadata": {**self.metadata, **self.row_only, "tokenBasis": self.usage.basis,
                                                                   **self._cache_tokens()},
                "created_at": now_iso(self.created_at),
                "started_at": now_iso(self.started_at) if self.started_at else None,
                "ended_at": now_iso(self.ended_at) if self.ended_at else None, "updated_at": now_iso()}


def _nest(flat: dict[str, dict[str, Any]], root_id: str | None) -> dict[str, Any]:
    def build(agent_id: str) -> dict[str, Any]:
        node = dict(flat[agent_id])
        kids = [build(c) for c in node.pop("subagents", []) if c in flat]
        rolled = {"basis": "none", **node["ownUsage"]}
        for k in kids:
            rolled["inputTokens"] += k["usage"]["inputTokens"]
            rolled["outputTokens"] += k["usage"]["outputTokens"]
            rolled["basis"] = combine_basis(rolled["basis"], k["usage"].get("basis", "none"))
        node["usage"] = rolled
        node["children"] = kids
        return node

    if root_id is None or root_id not in flat:
        return {}
    return build(root_id)


def snapshot_tree(nodes: dict[str, AgentNode], root_id: str | None) -> dict[str, Any]:
    """The nested tree snapshot (usage rolled up to parents)."""
    return _nest({i: n.state(with_content=True) for i, n in nodes.items()}, root_id)


def tree_from_events(events: list[Any], *, details: bool = False) -> dict[str, Any]:
    """Rebuild the tree snapshot from outbound events (dataclasses or wire dicts) alone.

    ``details``: each agent also gets ``tools``, its tool calls as :func:`~.transcript.tool_record`
    makes them (the code that ran, its output and traceback), for the views of a saved run.
    """
    flat: dict[str, dict[str, Any]] = {}
    root_id = None
    for ev in events:
        if isinstance(ev, dict):
            ev = from_wire(cast("dict[str, Any]", ev))
        if isinstance(ev, AgentState):
            node = flat.setdefault(ev.agent_id, {"content": ""})
            node.update({k: v for k, v in ev.state.items() if k in _STATE_KEYS or k == "content"})
            if root_id is None and ev.state.get("parentId") is None:
                root_id = ev.agent_id
        elif isinstance(ev, TextDelta) and ev.agent_id in flat:
            flat[ev.agent_id]["content"] += ev.delta
        elif isinstance(ev, AgentCompleted) and ev.agent_id in flat:
            flat[ev.agent_id]["result"] = ev.result
        elif isinstance(ev, ErrorEvent) and ev.agent_id in flat:
            flat[ev.agent_id]["error"] = ev.error
    if details:
        from agentstack_lab.engine.transcript import tool_records

        for agent_id, records in tool_records(events).items():
            if agent_id in flat:
                flat[agent_id]["tools"] = records
    return _nest(flat, root_id)


def token_text(usage: dict[str, Any] | None, scope: str) -> str:
    """One token figure for people, named by ``scope`` ("this agent", "subtree") and labelled by its basis.

    ``usage`` is a wire usage dict (``inputTokens``, ``outputTokens``, ``basis``; snake_case accepted).
    """
    usage = usage or {}
    total = sum(int(usage.get(k) or 0) for k in ("inputTokens", "outputTokens", "input_tokens", "output_tokens"))
    basis = usage.get("basis") or ("reported" if total else "none")
    if basis == "unknown":
        return f"tokens unknown ({scope})"
    if basis == "estimated":
        return f"~{total:,} tokens (estimated, {scope})"
    if basis == "partial":
        return f"≥{total:,} tokens (some unknown, {scope})"
    return f"{total:,} tokens ({scope})"


def tree_scope(node: dict[str, Any]) -> str:
    """What a tree node's figure counts: the subtree when it has children, else this agent."""
    return "subtree" if node.get("children") else "this agent"
