"""An offline provider driven by a function, a list of canned turns, or a built-in demo.

Shipped in the package (not only in tests) so demos, Binder and CI run with no key:

* ``ScriptedProvider(fn)`` calls ``fn(request)`` for every model call; it returns a string
  (streamed as text), a list of provider events, a dict (the input of the forced tool when
  ``request.tool_choice`` is set, else JSON text), an async iterator of events, or an awaitable
  of any of these.
* ``ScriptedProvider(turns=[...])`` replays canned replies in order (same forms as above) and
  fails clearly when they run out.
* ``ScriptedProvider()`` is the ``"demo"`` behaviour: deterministic, asks nothing, plans two or
  three subquestions for the root agent, inspects a variable named in the prompt (e.g. ``df``)
  with the ``python`` tool, then summarises. Everything it writes says it is offline.

``latency`` (seconds) is slept once per call, for benchmarks of concurrency. Every request is
kept in :attr:`ScriptedProvider.requests`, so tests can check what the engine sent.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentstack_lab.providers.base import (
    Message,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    StopEvent,
    TextDeltaEvent,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEvent,
    UsageEvent,
)

__all__ = ["ScriptedProvider", "ScriptExhaustedError", "tool_call", "OFFLINE_TAG", "estimate_tokens"]

OFFLINE_TAG = "[offline scripted demo]"

_EVENT_TYPES = (TextDeltaEvent, ToolUseEvent, UsageEvent, StopEvent)
_ids = itertools.count(1)


class ScriptExhaustedError(ProviderError):
    """A scripted provider was called more times than it had turns."""


def tool_call(name: str, input: dict[str, Any] | None = None, *, id: str | None = None) -> ToolUseEvent:
    """A tool-use event with a fresh id (for scripts)."""
    return ToolUseEvent(id=id or f"toolu_scripted_{next(_ids)}", name=name, input=dict(input or {}))


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
                             output_tokens=estimate_tokens("".join(out_text)))
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


# --- the built-in demo ---------------------------------------------------------------------------

_BACKTICK = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
_DATA_NAME = re.compile(r"\b(df\w*|\w+_df|data(?:set)?|[a-z]+_[a-z0-9_]+)\b")


def find_variable(prompt: str) -> str | None:
    """The variable a prompt names: a backticked identifier, else ``df``-like or snake_case words."""
    m = _BACKTICK.search(prompt) or _DATA_NAME.search(prompt)
    return m.group(1) if m else None


def _inspect_code(var: str) -> str:
    return (f"print(type({var}).__name__)\n"
            f"if hasattr({var}, 'describe'):\n"
            f"    {var}_summary = {var}.describe()\n"
            f"else:\n"
            f"    {var}_summary = repr({var})[:500]\n"
            f"{var}_summary\n")


def _first_user_text(request: ProviderRequest) -> str:
    for m in request.messages:
        if m.role == "user":
            return m.text()
    return ""


def _last_tool_result(messages: list[Message]) -> ToolResultBlock | None:
    if messages and messages[-1].role == "user" and not isinstance(messages[-1].content, str):
        for b in messages[-1].content:
            if isinstance(b, ToolResultBlock):
                return b
    return None


def _has_tool_use(messages: list[Message]) -> bool:
    return any(isinstance(b, ToolUseBlock) for m in messages if not isinstance(m.content, str) for b in m.content)


def demo_reply(request: ProviderRequest) -> Any:
    """The deterministic offline reply for one engine step (see the module docstring)."""
    meta = request.metadata or {}
    step = meta.get("step")
    prompt = meta.get("prompt") or _first_user_text(request)
    if step == "clarify":
        return {"needs_clarification": False, "question": None}
    if step == "blocking":
        return {"has_question": False, "question": None}
    if step == "final":
        return {"has_question": False, "question": None}
    if step == "subquestions":
        if meta.get("depth", 0) > 0:
            return {"subquestions": []}
        topic = prompt.strip().rstrip("?.!") or "the question"
        var = find_variable(prompt)
        subs = [
            {"question": f"What background is needed to answer: {topic}?", "agent_type": "researcher"},
            {"question": f"What caveats or risks apply to: {topic}?", "agent_type": "reviewer"},
        ]
        if var:
            subs.insert(0, {"question": f"Which analyses of `{var}` would answer: {topic}?",
                            "agent_type": "analyst"})
        return {"subquestions": subs}
    if step == "main":
        tools = {t.name for t in request.tools}
        var = find_variable(prompt) if "python" in tools and meta.get("depth", 0) == 0 else None
        result = _last_tool_result(request.messages)
        if var and not _has_tool_use(request.messages):
            return [f"{OFFLINE_TAG} Let me look at `{var}` with Python.\n",
                    tool_call("python", {"code": _inspect_code(var)})]
        if result is not None:
            status = "failed" if result.is_error else "returned"
            excerpt = result.content.strip()[:400]
            return (f"{OFFLINE_TAG} I inspected `{var}` with Python and it {status}:\n\n"
                    f"{excerpt}\n\nThe summary is kept in `{var}_summary`. "
                    "(Offline demo: no real model was called.)")
        return (f"{OFFLINE_TAG} This is an offline demo answer to: {prompt.strip()}\n"
                "No real model was called; configure a provider for real answers.")
    if step == "summary":
        return _demo_summary(_first_user_text(request))
    return f"{OFFLINE_TAG} No real model was called. You said: {_first_user_text(request)[:500]}"


def _demo_summary(body: str) -> str:
    main = body.partition("Your answer:\n")[2].partition("\n\nSubagents' results:")[0].strip()
    subs = [line[2:] for line in body.splitlines() if line.startswith("- [")]
    lines = [f"{OFFLINE_TAG} Summary (no real model was called).", "", "Main answer:", main[:600] or "(none)"]
    if subs:
        lines += ["", f"{len(subs)} subagent(s) explored:"] + [f"- {s}" for s in subs]
    return "\n".join(lines)
