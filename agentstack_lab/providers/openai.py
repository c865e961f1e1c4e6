"""OpenAI chat completions through the official SDK (``AsyncOpenAI``), streamed, plus embeddings.

``base_url`` makes any OpenAI-compatible server work (vLLM, LM Studio, llama.cpp, Ollama's
``/v1``). Retries: the SDK retries 408/409/429/5xx and connection errors with backoff honouring
``retry-after``; a stream that drops, stalls, carries invalid JSON or an error object is retried
here when nothing had been yielded yet.
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
    import openai
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("openai", "openai") from _exc

__all__ = ["OpenAIProvider", "DEFAULT_MODEL", "DEFAULT_EMBEDDING_MODEL", "to_openai_messages"]

DEFAULT_MODEL = "gpt-5-mini"  # configurable: providers.openai.model or model=...
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
KEY_VAR = "OPENAI_API_KEY"
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


def to_openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as chat-completions messages (tool results become ``role: tool`` messages)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
            continue
        text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
        if m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [{"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input)}}
                     for b in m.content if isinstance(b, ToolUseBlock)]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for b in m.content:  # tool results must directly follow the assistant's tool_calls
            if isinstance(b, ToolResultBlock):
                out.append({"role": "tool", "tool_call_id": b.tool_use_id,
                            "content": f"Error: {b.content}" if b.is_error else b.content})
        if text:
            out.append({"role": "user", "content": text})
    return out


class OpenAIProvider:
    """OpenAI (or a compatible server) chat completions: streaming, tool calls, usage, embeddings.

    Args:
        model: Default chat model (``gpt-5-mini``).
        api_key: Key (str or ``SecretStr``); else ``OPENAI_API_KEY``. Required for the OpenAI API;
            optional when ``base_url`` points at another (local) server.
        base_url: API root, e.g. ``http://localhost:8000/v1``.
        timeout: Seconds for connecting and between stream reads.
        max_retries: Retries on 429/5xx/connection errors.
        embedding_model: Default embeddings model (``text-embedding-3-small``).
        retry_delay: Base backoff for error objects inside the stream (seconds).
    """

    name = "openai"

    def __init__(self, *, model: str | None = None, api_key: Any = None, base_url: str | None = None,
                 timeout: float = 60.0, max_retries: int = 3, embedding_model: str | None = None,
                 retry_delay: float = 0.5) -> None:
        custom_server = bool(base_url) and "api.openai.com" not in str(base_url)
        key, self._key_source = resolve_key(api_key, KEY_VAR, "openai", required=not custom_server)
        # A local OpenAI-compatible server usually needs no key; the SDK insists on a string.
        self._key = key or "no-key-needed"
        self.model = model or DEFAULT_MODEL
        self.embedding_model = embedding_model or DEFAULT_EMBEDDING_MODEL
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.retry_delay = float(retry_delay)
        self._clients = LoopClients(lambda: openai.AsyncOpenAI(
            api_key=self._key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries))

    def secrets(self) -> tuple[str, ...]:
        """The values this provider holds that must never be shown (its API key), for redaction."""
        return (key,) if (key := self._key) != "no-key-needed" else ()

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _client(self) -> openai.AsyncOpenAI:
        return self._clients.get()

    def _params(self, request: ProviderRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": to_openai_messages(request.system, request.messages),
            "max_completion_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.stop_sequences:
            params["stop"] = list(request.stop_sequences)
        if request.tools:
            params["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}} for t in request.tools]
            if request.tool_choice in ("auto", "none", "required"):
                params["tool_choice"] = request.tool_choice
            elif request.tool_choice:
                params["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        return params

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply as text deltas, tool uses (parsed arguments), usage, then stop."""
        params = self._params(request)

        async def open_stream() -> Any:
            return await self._client().chat.completions.create(**params)

        try:
            async for ev in stream_with_retries(open_stream, self._events, retryable=_retryable_in_stream,
                                                max_retries=self.max_retries, base_delay=self.retry_delay):
                yield ev
        except (openai.APIError, json.JSONDecodeError) as exc:
            raise self._map(exc) from exc

    async def _events(self, chunks: Any) -> AsyncIterator[ProviderEvent]:
        try:
            async for ev in self._parse(chunks):
                yield ev
        except (openai.APIConnectionError, json.JSONDecodeError) as exc:
            raise self._broken(exc) from exc

    def _broken(self, exc: BaseException) -> ProviderError:
        """What went wrong with a stream that had begun (its request was answered)."""
        if isinstance(exc, openai.APITimeoutError):
            return ProviderTimeout(f"openai: the stream stalled (nothing within {seconds_text(self.timeout)})")
        if isinstance(exc, json.JSONDecodeError):
            return MalformedStreamError(f"openai: the stream carried invalid JSON ({exc.msg})")
        return StreamDropped(f"openai: the connection dropped mid-stream: {exc.__cause__ or exc}")

    async def _parse(self, chunks: Any) -> AsyncIterator[ProviderEvent]:
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage = None
        async with chunks:
            async for chunk in chunks:
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        yield TextDeltaEvent(text=delta.content)
                    for tc in (delta.tool_calls if delta is not None else None) or []:
                        state = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                        if tc.id:
                            state["id"] = tc.id
                        if tc.function is not None:
                            state["name"] += tc.function.name or ""
                            state["arguments"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
        if finish is None:
            raise MalformedStreamError("openai: the stream ended without a finish_reason")
        for index in sorted(calls):
            yield _tool_event(calls[index], index)
        details = getattr(usage, "prompt_tokens_details", None)
        yield UsageEvent(input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                         output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                         cache_read_tokens=int(getattr(details, "cached_tokens", 0) or 0))
        yield StopEvent(reason=_STOP_REASONS.get(finish, finish))

    async def embed(self, texts: list[str], *, model: str | None = None,
                    dimensions: int | None = None) -> list[list[float]]:
        """Embed ``texts`` (one vector each, in order) with the embeddings endpoint."""
        if not texts:
            return []
        params: dict[str, Any] = {"model": model or self.embedding_model, "input": list(texts),
                                  "encoding_format": "float"}
        if dimensions is not None:
            params["dimensions"] = dimensions
        try:
            response = await self._client().embeddings.create(**params)
        except openai.APIError as exc:
            raise self._map(exc) from exc
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise MalformedStreamError(f"openai: asked for {len(texts)} embeddings, got {len(data)}")
        return [list(d.embedding) for d in data]

    def _map(self, exc: BaseException) -> ProviderError:
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return AuthenticationError(f"openai rejected the API key ({exc.status_code}); check {self._key_source}")
        if isinstance(exc, openai.APITimeoutError):
            return ProviderTimeout(f"openai: no response within {seconds_text(self.timeout)} (request or stalled stream)")
        if isinstance(exc, openai.APIConnectionError):
            return ProviderUnavailable(f"openai: cannot connect to {self.base_url or 'the OpenAI API'}: "
                                       f"{exc.__cause__ or exc}")
        if isinstance(exc, json.JSONDecodeError):
            return MalformedStreamError(f"openai: the stream carried invalid JSON ({exc.msg})")
        if isinstance(exc, openai.APIStatusError):
            return ProviderError(f"openai: {exc.status_code}: {_message(exc)}")
        if isinstance(exc, openai.APIError):
            return ProviderError(f"openai: error in stream: {_message(exc)}")
        return ProviderError(f"openai: {exc}")


def _retryable_in_stream(exc: BaseException) -> bool:
    """A broken stream or an error object inside it; HTTP and connection errors were retried by the SDK."""
    return stream_broke(exc) or (isinstance(exc, openai.APIError)
                                 and not isinstance(exc, openai.APIStatusError | openai.APIConnectionError))


def _message(exc: openai.APIError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error", body)
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    return exc.message


def _tool_event(state: dict[str, Any], index: int) -> ToolUseEvent:
    name = state["name"]
    if not name:
        raise MalformedStreamError(f"openai: tool call {index} has no function name")
    try:
        args = json.loads(state["arguments"]) if state["arguments"].strip() else {}
    except json.JSONDecodeError as exc:
        raise MalformedStreamError(f"openai: tool {name!r} arguments are not valid JSON: {exc.msg}") from exc
    if not isinstance(args, dict):
        raise MalformedStreamError(f"openai: tool {name!r} arguments are not a JSON object")
    return ToolUseEvent(id=state["id"] or f"call_{index}", name=name, input=args)
