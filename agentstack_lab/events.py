"""The one event vocabulary every surface speaks.

Events are frozen, keyword-only dataclasses with a literal ``type``. On the wire
(widget comms, server websocket, the ``events`` table) they are JSON objects with
camelCase keys: ``{"type": "text-delta", "agentId": "...", "delta": "..."}``.
Only the engine produces outbound events; surfaces produce inbound ones.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from agentstack_lab.errors import AgentstackError

AgentStatus = Literal["pending", "running", "waiting_user", "completed", "failed", "stopped"]
QueryKind = Literal["clarification", "blocking", "approval", "final"]
"""What a ``user-query`` asks: the four questions an agent puts to a person."""
DecisionKind = Literal["clarification", "blocking", "approval", "final", "consensus"]
"""Every persisted decision (``agentstack_lab.decisions``): the query kinds plus consensus checkpoints."""
DecisionState = Literal["pending", "answered", "expired", "cancelled"]
"""A decision's life: ``pending → answered | expired | cancelled`` (never back)."""
QUERY_KINDS: tuple[str, ...] = get_args(QueryKind)
DECISION_KINDS: tuple[str, ...] = get_args(DecisionKind)
DECISION_STATES: tuple[str, ...] = get_args(DecisionState)

__all__ = [
    "AgentStatus",
    "QueryKind",
    "DecisionKind",
    "DecisionState",
    "QUERY_KINDS",
    "DECISION_KINDS",
    "DECISION_STATES",
    "AgentState",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "UserQuery",
    "AgentCompleted",
    "ErrorEvent",
    "StartAgent",
    "UserResponse",
    "UserIntervention",
    "GetAgentTree",
    "Event",
    "OutboundEvent",
    "InboundEvent",
    "to_wire",
    "from_wire",
    "EventDecodeError",
]


class EventDecodeError(AgentstackError, ValueError):
    """A wire message is not a valid event (names the problem)."""


@dataclass(frozen=True, kw_only=True)
class AgentState:
    """An agent's state changed; ``state`` is a JSON-able snapshot (status, type, parentId, ...)."""

    type: Literal["agent-state"] = "agent-state"
    agent_id: str
    state: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class TextDelta:
    """A chunk of streamed model text for one agent."""

    type: Literal["text-delta"] = "text-delta"
    agent_id: str
    delta: str


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """An agent called a tool."""

    type: Literal["tool-call"] = "tool-call"
    agent_id: str
    tool: str
    input: Any


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """A tool returned (``error`` is set when it failed)."""

    type: Literal["tool-result"] = "tool-result"
    agent_id: str
    tool: str
    output: Any
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class UserQuery:
    """The agent waits for a person: clarification, blocking question, code approval or final question."""

    type: Literal["user-query"] = "user-query"
    agent_id: str
    query_id: str
    kind: QueryKind
    prompt: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AgentCompleted:
    """The agent finished with a result."""

    type: Literal["agent-completed"] = "agent-completed"
    agent_id: str
    result: str


@dataclass(frozen=True, kw_only=True)
class ErrorEvent:
    """The agent failed or was stopped; ``error`` says why."""

    type: Literal["error"] = "error"
    agent_id: str
    error: str


@dataclass(frozen=True, kw_only=True)
class StartAgent:
    """Inbound: start a run."""

    type: Literal["start-agent"] = "start-agent"
    prompt: str
    agent_type: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    wire_names: ClassVar[dict[str, str]] = {"agent_type": "agentType"}


@dataclass(frozen=True, kw_only=True)
class UserResponse:
    """Inbound: the answer to a ``user-query``."""

    type: Literal["user-response"] = "user-response"
    agent_id: str
    query_id: str
    response: Any


@dataclass(frozen=True, kw_only=True)
class UserIntervention:
    """Inbound: a comment for the agent's next turn, replaced content, or a status (``stopped``)."""

    type: Literal["user-intervention"] = "user-intervention"
    agent_id: str
    user_comment: str | None = None
    user_content: str | None = None
    status: AgentStatus | None = None


@dataclass(frozen=True, kw_only=True)
class GetAgentTree:
    """Inbound: ask for a snapshot of the tree."""

    type: Literal["get-agent-tree"] = "get-agent-tree"


OutboundEvent = AgentState | TextDelta | ToolCall | ToolResult | UserQuery | AgentCompleted | ErrorEvent
InboundEvent = StartAgent | UserResponse | UserIntervention | GetAgentTree
Event = OutboundEvent | InboundEvent

_BY_TYPE: dict[str, type] = {
    cls.__dataclass_fields__["type"].default: cls
    for cls in (
        AgentState, TextDelta, ToolCall, ToolResult, UserQuery, AgentCompleted, ErrorEvent,
        StartAgent, UserResponse, UserIntervention, GetAgentTree,
    )
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _wire_name(cls: type, name: str) -> str:
    return getattr(cls, "wire_names", {}).get(name, _camel(name))


def to_wire(event: Event) -> dict[str, Any]:
    """Return the JSON-able wire form of an event (camelCase keys)."""
    return {_wire_name(type(event), f.name): getattr(event, f.name) for f in dataclasses.fields(event)}


def from_wire(message: dict[str, Any]) -> Event:
    """Parse a wire message into its event class; unknown types or fields are an ``EventDecodeError``."""
    if not isinstance(message, dict):
        raise EventDecodeError(f"event must be a JSON object, got {type(message).__name__}")
    kind = message.get("type")
    cls = _BY_TYPE.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise EventDecodeError(f"unknown event type {kind!r}; expected one of {sorted(_BY_TYPE)}")
    reverse = {_wire_name(cls, f.name): f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in message.items():
        name = reverse.get(key) or (_snake(key) if _snake(key) in cls.__dataclass_fields__ else None)
        if name is None:
            raise EventDecodeError(f"{kind}: unknown field {key!r}")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise EventDecodeError(f"{kind}: {exc}") from None
