"""An offline provider driven by a function, a list of canned turns, or a built-in demo.

Shipped in the package (not only in tests) so demos, Binder and CI run with no key:

* ``ScriptedProvider(fn)`` calls ``fn(request)`` for every model call; it returns a string
  (streamed as text), a list of provider events, a dict (the input of the forced tool when
  ``request.tool_choice`` is set, else JSON text), an async iterator of events, or an awaitable
  of any of these.
* ``ScriptedProvider(turns=[...])`` replays canned replies in order (same forms as above) and
  fails clearly when they run out.
* ``ScriptedProvider()`` is the ``"demo"`` behaviour: the canned analyst of
  :mod:`agentstack_lab.providers.demo` (what ``--provider scripted`` plays in the quickstart).

Tests that drive the engine's steps use :class:`~agentstack_lab.providers.testing.TestModel`, which
fills every step they do not script.

``latency`` (seconds) is slept once per call, for benchmarks of concurrency. Every request is
kept in :attr:`ScriptedProvider.requests`, so tests can check what the engine sent.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentstack_lab.providers.base import (
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    StopEvent,
    TextDeltaEvent,
    ToolUseEvent,
    UsageEvent,
    tool_call,
)

__all__ = ["ScriptedProvider", "ScriptExhaustedError", "tool_call", "estimate_tokens"]

_EVENT_TYPES = (TextDeltaEvent, ToolUseEvent, UsageEvent, StopEvent)


class ScriptExhaustedError(ProviderError):
    """A scripted provider was called more times than it had turns."""


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate (about four characters a token)."""
    return max(1, (len(text) + 3) // 4) if text else 0


def _request_text(request: ProviderRequest) -> str:
    parts = [request.system]
    for m in request.messages:
        if isinstance(m.content, str):
            parts.append(m.content)
            continue
        for b in m.content:
            parts.append(getattr(b, "text", None) or getattr(b, "content", None) or json.dumps(getattr(b, "input", "")))
    return "\n".join(p for p in parts if p)


def _chunks(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text) or ([text] if text else [])


class ScriptedProvider:
    """The offline ``scripted`` provider (function-driven, canned turns, or the demo)."""

    name = "scripted"

    def __init__(self, fn: Callable[[ProviderRequest], Any] | None = None, *,
                 turns: list[Any] | None = None, behaviour: str = "demo", latency: float = 0.0,
                 model: str | None = None):
        if fn is not None and turns is not None:
            raise ValueError("ScriptedProvider: pass either fn or turns, not both")
        if fn is not None and not callable(fn):
            raise TypeError(f"ScriptedProvider: fn must be callable, got {type(fn).__name__}")
        if fn is None and turns is None and behaviour != "demo":
            raise ValueError(f"ScriptedProvider: unknown behaviour {behaviour!r}; expected 'demo'")
        if latency < 0:
            raise ValueError(f"ScriptedProvider: latency must be >= 0, got {latency}")
        self.fn = fn
        self.turns = list(turns) if turns is not None else None
        self.behaviour = behaviour
        self.latency = float(latency)
        self.model = model
        self.requests: list[ProviderRequest] = []
        self._turn = 0

    def __repr__(self) -> str:
        mode = "fn" if self.fn else "turns" if self.turns is not None else self.behaviour
        return f"ScriptedProvider({mode}, latency={self.latency})"

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the scripted reply for ``request``."""
        self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.fn is not None:
            reply = self.fn(request)
        elif self.turns is not None:
            if self._turn >= len(self.turns):
                raise ScriptExhaustedError(
                    f"scripted provider: all {len(self.turns)} turns used; call {self._turn + 1} has no reply "
                    f"(step={request.metadata.get('step')!r})")
            reply = self.turns[self._turn]
            self._turn += 1
        else:
            from agentstack_lab.providers.demo import demo_reply

            reply = demo_reply(request)
        if inspect.isawaitable(reply):
            reply = await reply
        async for ev in self._normalise(reply, request):
            yield ev

    async def _normalise(self, reply: Any, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        saw_usage = saw_stop = False
        out_text: list[str] = []
        tool_used = False

        def track(ev: ProviderEvent) -> None:
            nonlocal saw_usage, saw_stop, tool_used
            if isinstance(ev, UsageEvent):
                saw_usage = True
            elif isinstance(ev, StopEvent):
                saw_stop = True
            elif isinstance(ev, TextDeltaEvent):
                out_text.append(ev.text)
            elif isinstance(ev, ToolUseEvent):
                tool_used = True
                out_text.append(json.dumps(ev.input))

        if hasattr(reply, "__aiter__"):
            async for ev in reply:
                ev = _coerce_event(ev)
                track(ev)
                if not isinstance(ev, StopEvent):
                    yield ev
        else:
            for ev in _to_events(reply, request):
                track(ev)
                if not isinstance(ev, StopEvent):
                    yield ev
        if not saw_usage:
            yield UsageEvent(input_tokens=estimate_tokens(_request_text(request)),
                             output_tokens=estimate_tokens("".join(out_text)), estimated=True)
        yield StopEvent(reason="tool_use" if tool_used else "end_turn")


def _coerce_event(ev: Any) -> ProviderEvent:
    if isinstance(ev, _EVENT_TYPES):
        return ev
    if isinstance(ev, str):
        return TextDeltaEvent(text=ev)
    raise TypeError(f"scripted provider: a reply event must be a provider event or str, got {type(ev).__name__}")


def _to_events(reply: Any, request: ProviderRequest) -> list[ProviderEvent]:
    if reply is None:
        return []
    if isinstance(reply, str):
        return [TextDeltaEvent(text=c) for c in _chunks(reply)]
    if isinstance(reply, dict):
        if request.tool_choice:
            return [tool_call(request.tool_choice, reply)]
        return [TextDeltaEvent(text=json.dumps(reply))]
    if isinstance(reply, _EVENT_TYPES):
        return [reply]
    if isinstance(reply, list | tuple):
        out: list[ProviderEvent] = []
        for item in reply:
            out.extend(_to_events(item, request) if isinstance(item, str | dict) else [_coerce_event(item)])
        return out
    raise TypeError(f"scripted provider: cannot stream a reply of type {type(reply).__name__}; "
                    "expected str, dict, a list of provider events, or an async iterator")
