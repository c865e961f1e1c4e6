"""Anthropic Messages API through the official SDK (``AsyncAnthropic``), streamed.

Retries: the SDK retries 408/409/429/5xx/529 responses and connection errors with backoff
(honouring ``retry-after``/``retry-after-ms``) up to ``max_retries``; a stream that drops, stalls
or carries invalid JSON, or an ``overloaded``/``api``/``rate_limit`` error *event* inside it, is
retried here when nothing had been yielded yet.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agentstack_lab.providers.base import (
    AuthenticationError,
    MalformedStreamError,
    Message,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    ProviderTimeout,
    ProviderUnavailable,
    StopEvent,
    StreamDropped,
    TextBlock,
    TextDeltaEvent,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEvent,
    UsageEvent,
)
from agentstack_lab.providers.support import (
    LoopClients,
    missing_extra,
    resolve_key,
    stream_broke,
    stream_with_retries,
)
from agentstack_lab.validation import seconds_text

try:
    import anthropic
    import httpx2
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("anthropic", "anthropic") from _exc

__all__ = ["AnthropicProvider", "DEFAULT_MODEL", "to_anthropic_messages"]

DEFAULT_MODEL = "claude-sonnet-4-6"  # configurable: providers.anthropic.model or model=...
KEY_VAR = "ANTHROPIC_API_KEY"
_RETRYABLE_EVENTS = {"overloaded_error", "api_error", "rate_limit_error"}


def _block(b: Any) -> dict[str, Any]:
    if isinstance(b, TextBlock):
        return {"type": "text", "text": b.text}
    if isinstance(b, ToolUseBlock):
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    if isinstance(b, ToolResultBlock):
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_use_id, "content": b.content}
        if b.is_error:
            out["is_error"] = True
        return out
    raise TypeError(f"anthropic: unsupported content block {b!r}")


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages in the Messages API shape (tool_use / tool_result blocks kept as blocks)."""
    return [{"role": m.role, "content": m.content if isinstance(m.content, str) else [_block(b) for b in m.content]}
            for m in messages]


class AnthropicProvider:
    """Claude through the Messages API (streaming, tool use, usage, retries, timeouts).

    Args:
        model: Default model for requests that do not name one (default ``claude-sonnet-4-6``).
        api_key: Key (str or ``SecretStr``); else ``ANTHROPIC_API_KEY``. Missing → ``MissingKeyError`` now.
        base_url: API root (default: the SDK's, or ``ANTHROPIC_BASE_URL``).
        timeout: Seconds for connecting and between stream reads (a stalled stream times out).
        max_retries: Retries on 429/529/5xx/connection errors.
        retry_delay: Base backoff for in-stream overload errors (seconds).
    """

    name = "anthropic"

    def __init__(self, *, model: str | None = None, api_key: Any = None, base_url: str | None = None,
                 timeout: float = 60.0, max_retries: int = 3, retry_delay: float = 0.5) -> None:
        self._key, self._key_source = resolve_key(api_key, KEY_VAR, "anthropic")
        self.model = model or DEFAULT_MODEL
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.retry_delay = float(retry_delay)
        self._clients = LoopClients(lambda: anthropic.AsyncAnthropic(
            api_key=self._key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries))

    def secrets(self) -> tuple[str, ...]:
        """The values this provider holds that must never be shown (its API key), for redaction."""
        return (self._key,) if self._key else ()

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _client(self) -> anthropic.AsyncAnthropic:
        return self._clients.get()

    def _params(self, request: ProviderRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system:
            params["system"] = request.system
        # request.temperature is not sent: the current Messages API (SDK 2.x) takes no sampling parameters.
        if request.stop_sequences:
            params["stop_sequences"] = list(request.stop_sequences)
        if request.tools:
            params["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                               for t in request.tools]
            if request.tool_choice in ("auto", "any", "none"):
                params["tool_choice"] = {"type": request.tool_choice}
            elif request.tool_choice:
                params["tool_choice"] = {"type": "tool", "name": request.tool_choice}
        return params

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply as text deltas, tool uses (parsed input), usage, then stop."""
        params = self._params(request)

        async def open_stream() -> Any:
            return await self._client().messages.create(**params, stream=True)

        try:
            async for ev in stream_with_retries(open_stream, self._events, retryable=_retryable,
                                                max_retries=self.max_retries, base_delay=self.retry_delay):
                yield ev
        except (anthropic.APIError, httpx2.HTTPError, json.JSONDecodeError) as exc:
            raise self._map(exc) from exc

    async def _events(self, events: Any) -> AsyncIterator[ProviderEvent]:
        try:
            async for ev in self._parse(events):
                yield ev
        except (anthropic.APIConnectionError, httpx2.HTTPError, json.JSONDecodeError) as exc:
            raise self._broken(exc) from exc

    def _broken(self, exc: BaseException) -> ProviderError:
        """What went wrong with a stream that had begun (its request was answered)."""
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return ProviderTimeout(f"anthropic: the stream stalled (nothing within {seconds_text(self.timeout)})")
        if isinstance(exc, json.JSONDecodeError):
            return MalformedStreamError(f"anthropic: the stream carried invalid JSON ({exc.msg})")
        return StreamDropped(f"anthropic: the connection dropped mid-stream: {exc.__cause__ or exc}")

    async def _parse(self, events: Any) -> AsyncIterator[ProviderEvent]:
        blocks: dict[int, dict[str, Any]] = {}
        input_tokens = output_tokens = cache_read = cache_write = 0
        stop_reason: str | None = None
        async with events:
            async for event in events:
                etype = getattr(event, "type", None)
                if etype == "message_start":
                    usage = getattr(event.message, "usage", None)
                    cache_read = _tokens(usage, "cache_read_input_tokens")
                    cache_write = _tokens(usage, "cache_creation_input_tokens")
                    input_tokens = _tokens(usage, "input_tokens") + cache_read + cache_write
                    output_tokens = _tokens(usage, "output_tokens")
                elif etype == "content_block_start":
                    block = event.content_block
                    btype = getattr(block, "type", None)
                    if btype == "tool_use":
                        blocks[event.index] = {"type": "tool_use", "id": block.id, "name": block.name,
                                               "json": "", "input": getattr(block, "input", None) or {}}
                    else:
                        blocks[event.index] = {"type": btype}
                        if btype == "text" and getattr(block, "text", ""):
                            yield TextDeltaEvent(text=block.text)
                elif etype == "content_block_delta":
                    state = blocks.get(event.index)
                    if state is None:
                        raise MalformedStreamError(f"anthropic: delta for unknown content block {event.index}")
                    delta = event.delta
                    dtype = getattr(delta, "type", None)
                    if dtype == "text_delta":
                        yield TextDeltaEvent(text=delta.text)
                    elif dtype == "input_json_delta":
                        state["json"] += delta.partial_json
                elif etype == "content_block_stop":
                    state = blocks.pop(event.index, None)
                    if state is None:
                        raise MalformedStreamError(f"anthropic: stop for unknown content block {event.index}")
                    if state["type"] == "tool_use":
                        yield ToolUseEvent(id=state["id"], name=state["name"], input=_tool_input(state))
                elif etype == "message_delta":
                    stop_reason = getattr(event.delta, "stop_reason", None) or stop_reason
                    output_tokens = max(output_tokens, _tokens(getattr(event, "usage", None), "output_tokens"))
                elif etype == "message_stop":
                    yield UsageEvent(input_tokens=input_tokens, output_tokens=output_tokens,
                                     cache_read_tokens=cache_read, cache_write_tokens=cache_write)
                    yield StopEvent(reason=stop_reason or "end_turn")
                    return
                elif etype is None:
                    raise MalformedStreamError(f"anthropic: stream event without a type: {event!r}"[:300])
        raise MalformedStreamError("anthropic: the stream ended before message_stop")

    def _map(self, exc: BaseException) -> ProviderError:
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
            return AuthenticationError(f"anthropic rejected the API key ({exc.status_code}); "
                                       f"check {self._key_source}")
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return ProviderTimeout(f"anthropic: no response within {seconds_text(self.timeout)} (request or stalled stream)")
        if isinstance(exc, anthropic.APIConnectionError):
            return ProviderUnavailable(f"anthropic: cannot connect to {self.base_url or 'the Anthropic API'}: "
                                       f"{exc.__cause__ or exc}")
        if isinstance(exc, json.JSONDecodeError):
            return MalformedStreamError(f"anthropic: the stream carried invalid JSON ({exc.msg})")
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code if exc.status_code != 200 else "stream error"
            return ProviderError(f"anthropic: {status}: {_error_message(exc)}")
        if isinstance(exc, httpx2.HTTPError):
            return ProviderError(f"anthropic: connection failed mid-stream: {exc}")
        return ProviderError(f"anthropic: {exc}")


def _tokens(usage: Any, name: str) -> int:
    return int(getattr(usage, name, 0) or 0) if usage is not None else 0


def _tool_input(state: dict[str, Any]) -> dict[str, Any]:
    raw = state["json"]
    if not raw.strip():
        return dict(state["input"])
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MalformedStreamError(f"anthropic: tool {state['name']!r} input is not valid JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise MalformedStreamError(f"anthropic: tool {state['name']!r} input is not a JSON object")
    return value


def _retryable(exc: BaseException) -> bool:
    """A broken stream, or an overloaded/API error *event* (status 200); HTTP errors were retried by the SDK."""
    return stream_broke(exc) or (isinstance(exc, anthropic.APIStatusError) and exc.status_code == 200
                                 and _error_type(exc) in _RETRYABLE_EVENTS)


def _error_body(exc: anthropic.APIStatusError) -> dict[str, Any]:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error", body)
    return err if isinstance(err, dict) else {}


def _error_type(exc: anthropic.APIStatusError) -> str | None:
    return _error_body(exc).get("type")


def _error_message(exc: anthropic.APIStatusError) -> str:
    err = _error_body(exc)
    if err.get("message"):
        return f"{err.get('type', 'error')}: {err['message']}"
    return str(exc)
