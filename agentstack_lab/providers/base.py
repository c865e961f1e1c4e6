"""The provider protocol: a request in, a stream of typed provider events out.

The engine talks to models only through this module's types. Every provider
(Anthropic, OpenAI, Ollama, the CLI agents, the offline ``scripted`` one)
implements :class:`Provider`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agentstack_lab.errors import AgentstackError

__all__ = [
    "TokenBasis",
    "combine_basis",
    "TextBlock",
    "ToolUseBlock",
    "ToolResultBlock",
    "ContentBlock",
    "Message",
    "ToolSpec",
    "ProviderRequest",
    "TextDeltaEvent",
    "AgentCalls",
    "AGENT_CALLS",
    "ToolUseEvent",
    "tool_call",
    "UsageEvent",
    "StopEvent",
    "ProviderEvent",
    "Usage",
    "Completion",
    "Provider",
    "ProviderError",
    "AuthenticationError",
    "MissingKeyError",
    "ProviderTimeout",
    "MalformedStreamError",
    "StreamDropped",
    "ProviderUnavailable",
]


# --- request -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TextBlock:
    type: Literal["text"] = "text"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolUseBlock:
    """A tool call the model made (kept in the assistant message)."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolResultBlock:
    """The result of a tool call, sent back in a user message."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True, kw_only=True)
class Message:
    """One conversation turn; ``content`` is a plain string or a list of blocks."""

    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]

    def text(self) -> str:
        """All text in this message, joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool the model may call, with a JSON schema for its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ProviderRequest:
    system: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    model: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None
    stop_sequences: list[str] = field(default_factory=list)
    tool_choice: str | None = None  # None = auto; a tool name forces that tool
    metadata: dict[str, Any] = field(default_factory=dict)  # e.g. {"step": "subquestions", "agent_type": ...}


# --- stream events ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TextDeltaEvent:
    type: Literal["text"] = "text"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolUseEvent:
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


_tool_ids = itertools.count(1)


def tool_call(name: str, input: dict[str, Any] | None = None, *, id: str | None = None) -> ToolUseEvent:
    """A tool-use event with a fresh id (for the offline models' scripts)."""
    return ToolUseEvent(id=id or f"toolu_scripted_{next(_tool_ids)}", name=name, input=dict(input or {}))


@dataclass(frozen=True, kw_only=True)
class UsageEvent:
    type: Literal["usage"] = "usage"
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False  # counted by us (the offline scripted provider), not reported by a model's API
    # of input_tokens, those read from and written to the provider's prompt cache (priced apart: providers/prices.py)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class StopEvent:
    type: Literal["stop"] = "stop"
    reason: str  # "end_turn" | "tool_use" | "max_tokens" | "stop_sequence" | provider-specific


ProviderEvent = TextDeltaEvent | ToolUseEvent | UsageEvent | StopEvent


TokenBasis = Literal["none", "reported", "estimated", "unknown", "partial"]
"""Where a token figure comes from: no model call yet, the provider's report, our estimate, nothing (the
provider reports no usage: a CLI agent), or a sum over calls some of which reported nothing."""


def combine_basis(a: str, b: str) -> str:
    """The basis of a sum of two figures (``unknown`` plus a number is ``partial``: a lower bound)."""
    if a == "none" or a == b:
        return b
    if b == "none":
        return a
    if "unknown" in (a, b) or "partial" in (a, b):
        return "partial"
    return "estimated"  # reported + estimated: the sum is an estimate


@dataclass(kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    basis: str = "none"  # a TokenBasis
    cache_read_tokens: int = 0  # part of input_tokens, as in UsageEvent
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage | UsageEvent) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        basis = other.basis if isinstance(other, Usage) else "estimated" if other.estimated else "reported"
        self.basis = combine_basis(self.basis, basis)


@dataclass(kw_only=True)
class Completion:
    """A gathered stream: text, tool calls, usage and the stop reason."""

    text: str = ""
    tool_calls: list[ToolUseEvent] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None


@runtime_checkable
class Provider(Protocol):
    """What every provider implements."""

    name: str

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the model's reply as provider events."""
        ...


# --- a provider that is itself an agent ----------------------------------------------------


class AgentCalls(Protocol):
    """What a provider that is itself an agent (``provider: acp``) tells the run about the agent calling it.

    The engine sets one per model call in :data:`AGENT_CALLS`: the external agent's own tool calls appear
    in the caller's tree, and its permission requests become the run's decisions (``on_query`` applies).
    """

    def tool_call(self, call_id: str, title: str, kind: str, input: Any) -> None:
        """The external agent started a tool call of its own."""
        ...

    def tool_result(self, call_id: str, output: Any, error: str | None = None) -> None:
        """That tool call ended (``error`` when it failed)."""
        ...

    async def approve(self, title: str, details: dict[str, Any]) -> bool:
        """Ask the run's person (or its policy) whether the external agent may go on; ``True`` = allowed."""
        ...


AGENT_CALLS: ContextVar[AgentCalls | None] = ContextVar("agentstack_agent_calls", default=None)
"""The calling agent of the model call in progress (set by the engine around each call), or ``None``."""


# --- errors ----------------------------------------------------------------------------------


class ProviderError(AgentstackError, RuntimeError):
    """A provider failed; the message says which provider and why."""


class AuthenticationError(ProviderError):
    """The provider rejected the credentials (names the key variable)."""


class MissingKeyError(ProviderError):
    """A required API key is not set (names the variable)."""


class ProviderTimeout(ProviderError):
    """The provider did not answer, or a stream stalled, within the timeout."""


class MalformedStreamError(ProviderError):
    """The provider's stream could not be parsed."""


class StreamDropped(ProviderError):
    """The connection broke off after the provider had started its streamed answer."""


class ProviderUnavailable(ProviderError):
    """The provider's service or binary is not there (e.g. Ollama not running)."""
