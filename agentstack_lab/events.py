"""The one event vocabulary every surface speaks, and the other shared vocabularies.

Events are frozen, keyword-only dataclasses with a literal ``type``. Only the engine produces
outbound events (7 types); surfaces produce inbound ones (4 types).

Vocabularies defined here once and derived everywhere else (the spawner's lifecycle, the tree
views' icons, the CLI's colours, the MCP tool schemas, the magics' ``--answer`` kinds):

* :data:`AgentStatus` (8 statuses) with :data:`TRANSITIONS` and :data:`TERMINAL` (3 of them),
* :data:`QueryKind` (4 kinds; :data:`QuestionKind` the 3 that can be answered up front as text),
* :data:`ToolName` (the 3 engine tools), :data:`RelationshipType` (4 task relationships).

Casing rule: every JSON object that leaves the process has camelCase keys. In Python, field
names are snake_case; :func:`to_wire` is the one place that turns an event into its wire form
(``{"type": "text-delta", "agentId": "...", "delta": "..."}``) and :func:`camel_keys` the one
converter for any other JSON a surface sends (CLI ``--json``, MCP tool results, the lab server's
replies: 49 MCP tools and 37 ``--json`` commands go through it), recursively, except inside the user's
and the model's data (:data:`OPAQUE`: metadata, tool inputs, answers, config documents keep their keys).
Payloads the engine builds (``agent-state``'s ``state``, tool outputs) are camelCase at the source, nested
keys included (``ownUsage: {inputTokens, outputTokens}``); :func:`wire_keys` cases a flat record built
from snake_case fields at its source (a workflow finding's ``to_dict()``). :func:`from_wire` is the inverse of
:func:`to_wire` and names the bad field of a message that does not decode.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast, get_args

from agentstack_lab.errors import AgentstackError

AgentStatus = Literal["pending", "idle", "running", "waiting_user", "paused", "completed", "failed", "stopped"]
QuestionKind = Literal["clarification", "blocking", "final"]
QueryKind = Literal[QuestionKind, "approval"]
ToolName = Literal["python", "memory_search", "memory_store"]
RelationshipType = Literal["parent_of", "derived_from", "depends_on", "supersedes"]

AGENT_STATUSES: tuple[str, ...] = get_args(AgentStatus)
QUERY_KINDS: tuple[str, ...] = get_args(QueryKind)
QUESTION_KINDS: tuple[str, ...] = get_args(QuestionKind)
TOOL_NAMES: tuple[str, ...] = get_args(ToolName)
RELATIONSHIP_TYPES: tuple[str, ...] = get_args(RelationshipType)
SettableStatus = Literal["idle", "running", "waiting_user", "completed", "failed", "stopped"]
"""What a client may set (MCP's agent_update_status): pending is where agents start, paused is the engine's own."""
assert set(get_args(SettableStatus)) == set(AGENT_STATUSES) - {"pending", "paused"}

# The engine's lifecycle (pending → running ⇄ waiting_user | paused → completed | failed | stopped) plus
# the spawner's ``idle`` (docs/notebook.md: an agent created but not yet asked anything). ``paused``: held
# at a checkpoint by a pause (``agent pause``, the resource monitor's intervention) until resumed.
TRANSITIONS: Mapping[str, frozenset[str]] = {
    "pending": frozenset({"running", "stopped", "failed"}),
    "idle": frozenset({"running", "stopped"}),
    "running": frozenset({"waiting_user", "paused", "idle", "completed", "failed", "stopped"}),
    "waiting_user": frozenset({"running", "stopped", "failed"}),
    "paused": frozenset({"running", "stopped", "failed"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "stopped": frozenset(),
}
TERMINAL: frozenset[str] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
UNFINISHED: tuple[str, ...] = tuple(s for s in AGENT_STATUSES if s not in TERMINAL and s != "idle")
"""Statuses of an engine agent still at work (its run's process must be alive): pending, running, waiting, paused."""
DecisionKind = Literal[QueryKind, "consensus", "intervention"]
"""Every persisted decision (``agentstack_lab.decisions``): the query kinds plus consensus checkpoints."""
DecisionState = Literal["pending", "answered", "expired", "cancelled"]
"""A decision's life: ``pending → answered | expired | cancelled`` (never back)."""
DECISION_KINDS: tuple[str, ...] = get_args(DecisionKind)
DECISION_STATES: tuple[str, ...] = get_args(DecisionState)

APPROVE_WORDS: tuple[str, ...] = ("approve", "approved", "yes", "y", "ok", "run", "true")
"""Words that approve (an approval, a consensus checkpoint) or resume (an intervention), in any case."""
REJECT_WORDS: tuple[str, ...] = ("reject", "rejected", "no", "n", "deny", "false")
"""Words that reject (or stop, for an intervention), in any case."""

InterventionAction = Literal["comment", "content", "pause", "resume", "stop"]
"""What a person can do to a running agent from another surface (``interventions`` rows)."""
InterventionStatus = Literal["stopped", "paused", "running"]
"""The statuses a ``user-intervention`` may set (``running`` resumes)."""
INTERVENTION_ACTIONS: tuple[str, ...] = get_args(InterventionAction)
INTERVENTION_STATUSES: tuple[str, ...] = get_args(InterventionStatus)
ACTION_OF: Mapping[str, str] = {"stopped": "stop", "paused": "pause", "running": "resume"}
"""The one table between an intervention's status and its action (both ways, see :data:`STATUS_OF`)."""
STATUS_OF: Mapping[str, str] = {action: status for status, action in ACTION_OF.items()}

STATUS_LABELS: Mapping[str, str] = {"waiting_user": "waiting for you"}
"""How a status reads where people see it (the cell, the panel, saved trees); others read as named."""

SURFACE_LABELS: Mapping[str, str] = {
    "widget": "the notebook",
    "notebook": "the notebook",
    "cli": "the terminal",
    "terminal": "the terminal",
    "mcp": "MCP",
    "lab": "JupyterLab",
    "acp": "ACP",
    "python": "Python",
    "worker": "a queue worker",
    "policy": "the run's on_query policy",
    "options": "the run's answers",
    "rule": "an approval rule",
}
"""Every surface a run, decision or intervention comes from, and how a person reads it ("from the terminal")."""


def surface_label(surface: str | None) -> str:
    """``"cli"`` → ``"the terminal"``; an unknown surface is shown as it is."""
    return SURFACE_LABELS.get(surface or "", surface or "an unknown surface")


__all__ = [
    "AgentStatus",
    "QueryKind",
    "QuestionKind",
    "ToolName",
    "RelationshipType",
    "AGENT_STATUSES",
    "SettableStatus",
    "QUERY_KINDS",
    "QUESTION_KINDS",
    "TOOL_NAMES",
    "RELATIONSHIP_TYPES",
    "TRANSITIONS",
    "TERMINAL",
    "STATUS_LABELS",
    "UNFINISHED",
    "DecisionKind",
    "DecisionState",
    "DECISION_KINDS",
    "DECISION_STATES",
    "APPROVE_WORDS",
    "REJECT_WORDS",
    "InterventionAction",
    "InterventionStatus",
    "INTERVENTION_ACTIONS",
    "INTERVENTION_STATUSES",
    "ACTION_OF",
    "STATUS_OF",
    "SURFACE_LABELS",
    "surface_label",
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
    "EVENT_TYPES",
    "to_wire",
    "from_wire",
    "wire_keys",
    "camel_keys",
    "OPAQUE",
    "DATA_KEYED",
    "VALUE_KEYS",
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
    """The agent waits for a person on a decision (``query_id``): one of the :data:`DecisionKind` kinds.

    A question (clarification, blocking, final), a code approval, a consensus checkpoint on the agent's
    plan, or the resource monitor's intervention (answer ``resume`` or ``stop``).
    """

    type: Literal["user-query"] = "user-query"
    agent_id: str
    query_id: str
    kind: DecisionKind
    prompt: str
    options: dict[str, Any] = field(default_factory=dict[str, Any])


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
    options: dict[str, Any] = field(default_factory=dict[str, Any])

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
    status: InterventionStatus | None = None


@dataclass(frozen=True, kw_only=True)
class GetAgentTree:
    """Inbound: ask for a snapshot of the tree (of one run, by id or prefix; else the recent runs)."""

    type: Literal["get-agent-tree"] = "get-agent-tree"
    run_id: str | None = None


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
EVENT_TYPES: tuple[str, ...] = tuple(_BY_TYPE)


_SNAKE = re.compile(r"_([a-z0-9])")


def _camel(name: str) -> str:
    return _SNAKE.sub(lambda m: m.group(1).upper(), name)


def wire_keys(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with its top-level keys in camelCase (``run_id`` → ``runId``), values untouched."""
    return {_camel(str(k)): v for k, v in row.items()}


OPAQUE = frozenset({"metadata", "input", "output", "options", "payload", "answer", "answers", "response", "result",
                    "scores", "config"})
"""Keys whose values are the user's or the model's data, passed through by :func:`camel_keys` as they are.

A memory entry's ``metadata`` ``{"source_url": …}``, a tool call's ``input`` ``{"max_rows": 5}``, an agent's
``result``, a decision's ``options`` or ``response``, a run's ``answers``, a config document (its keys are the
config file's, e.g. ``max_depth``: camel-cased, the file would no longer load) leave the process with the keys
they were written with: camel-casing them would change the data.
"""

DATA_KEYED = frozenset({"available"})
"""Keys whose value is a dict keyed by names that are data (``available``: provider name → availability, and a
plugin's provider may be called ``my_llm``): :func:`camel_keys` keeps that dict's keys and converts its values."""

VALUE_KEYS = frozenset((*AGENT_STATUSES, *get_args(RelationshipType), *get_args(ToolName)))
"""Values of this module's vocabularies: as a key (``{"waiting_user": 2}``, counts per status) a name stays as is."""


def camel_keys(value: Any) -> Any:
    """``value`` with its dict keys in camelCase (``run_id`` → ``runId``), recursively.

    The casing rule for JSON that leaves the process other than events (CLI ``--json``, MCP tool results,
    the lab server's replies). The values of :data:`OPAQUE` keys pass through unchanged, a :data:`DATA_KEYED`
    dict keeps its keys, and a key that is a vocabulary value (``waiting_user``, ``parent_of``) stays.
    Idempotent: camelCase keys come out as they went in, so a value converted at its source may be again.
    """
    if isinstance(value, Mapping):
        mapping = cast("Mapping[Any, Any]", value)
        return {_key(k): v if k in OPAQUE else _data_keyed(v) if k in DATA_KEYED else camel_keys(v)
                for k, v in mapping.items()}
    if isinstance(value, list | tuple):
        return [camel_keys(v) for v in cast("list[Any] | tuple[Any, ...]", value)]
    return value


def _key(key: Any) -> str:
    key = str(key)
    return key if key in VALUE_KEYS else _camel(key)


def _data_keyed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): camel_keys(v) for k, v in cast("Mapping[Any, Any]", value).items()}
    return camel_keys(value)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, wire key, type hint) of an event class, computed once per class."""
    hints = typing.get_type_hints(cls)
    names = getattr(cls, "wire_names", {})
    return tuple((f.name, names.get(f.name, _camel(f.name)), hints[f.name]) for f in dataclasses.fields(cls))


def to_wire(event: Event) -> dict[str, Any]:
    """Return the JSON-able wire form of an event (camelCase keys)."""
    return {key: getattr(event, attr) for attr, key, _ in _fields(type(event))}


def _type_error(hint: Any, value: Any) -> str | None:
    """Why ``value`` does not fit ``hint`` (``None`` if it does); only the shapes events use."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = get_args(hint)
        return None if value in allowed else f"must be one of {', '.join(map(repr, allowed))}, got {value!r}"
    if origin in (typing.Union, types.UnionType):
        errors = [_type_error(h, value) for h in get_args(hint)]
        if any(e is None for e in errors):
            return None
        return " or ".join(e.split(", got")[0] for e in errors if e) + f", got {type(value).__name__}"
    if hint is type(None):
        return None if value is None else "must be null"
    base = origin or hint
    if base is dict:
        got = type(value).__name__
        keys: list[Any] = list(cast("dict[Any, Any]", value)) if isinstance(value, dict) else []
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in keys)
        return None if ok else f"must be an object, got {got}"
    if base is str:
        return None if isinstance(value, str) else f"must be a string, got {type(value).__name__}"
    return None if isinstance(value, base) else f"must be {base.__name__}, got {type(value).__name__}"


def from_wire(message: dict[str, Any]) -> Event:
    """Parse a wire message into its event class; a bad type, field or value is an ``EventDecodeError`` naming it."""
    if not isinstance(cast(object, message), dict):   # callers pass parsed JSON: any value
        raise EventDecodeError(f"event must be a JSON object, got {type(message).__name__}")
    kind = message.get("type")
    cls = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventDecodeError(f"unknown event type {kind!r}; expected one of {sorted(_BY_TYPE)}")
    spec = {key: (attr, hint) for attr, key, hint in _fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in message.items():
        if key not in spec:
            raise EventDecodeError(f"{kind}: unknown field {key!r}; expected {', '.join(sorted(spec))}")
        attr, hint = spec[key]
        problem = _type_error(hint, value)
        if problem is not None:
            raise EventDecodeError(f"{kind}: field {key!r} {problem}")
        kwargs[attr] = value
    fields = {f.name: f for f in dataclasses.fields(cls)}
    missing = [key for key, (attr, _) in spec.items()
               if attr not in kwargs and fields[attr].default is dataclasses.MISSING
               and fields[attr].default_factory is dataclasses.MISSING]
    if missing:
        raise EventDecodeError(f"{kind}: missing field {missing[0]!r}")
    return cls(**kwargs)
