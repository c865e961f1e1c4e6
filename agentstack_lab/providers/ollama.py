"""Ollama over plain HTTP (httpx): ``/api/chat`` streamed as NDJSON with tools, and ``/api/embed``.

Default server ``http://localhost:11434`` (or ``OLLAMA_HOST``). Retries 429/5xx and dropped
connections with backoff honouring ``retry-after``, and a stream that drops, stalls, carries invalid
JSON or an ``error`` line before its first event; a refused connection is reported at once as
"Ollama is not running at …".
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

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
    RETRY_STATUSES,
    resolve_key,
    retry_after_seconds,
    stream_broke,
    stream_with_retries,
    with_retries,
)
from agentstack_lab.validation import seconds_text

__all__ = ["OllamaProvider", "DEFAULT_MODEL", "DEFAULT_EMBEDDING_MODEL", "DEFAULT_HOST", "ollama_base_url",
           "to_ollama_messages"]

DEFAULT_HOST = "http://localhost:11434"
DEFAULT_MODEL = "llama3.2"  # configurable: providers.ollama.model or model=...
DEFAULT_EMBEDDING_MODEL = "all-minilm"  # 384 dimensions, the memory default
KEY_VAR = "OLLAMA_API_KEY"  # only for servers behind auth (e.g. ollama.com); a local server needs none


def ollama_base_url(base_url: str | None = None) -> str:
    """``base_url``, else ``OLLAMA_HOST`` (``host:port`` accepted), else ``http://localhost:11434``."""
    url = (base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST).strip().rstrip("/")
    if "://" not in url:  # bare host[:port], as OLLAMA_HOST allows
        url = f"http://{url}" if ":" in url else f"http://{url}:11434"
    return url.replace("://0.0.0.0", "://127.0.0.1")


def to_ollama_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages in ``/api/chat`` form (tool results become ``role: tool`` with ``tool_name``)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    for m in messages:
        if isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
            continue
        text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
        if m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            calls = [b for b in m.content if isinstance(b, ToolUseBlock)]
            if calls:
                names.update({b.id: b.name for b in calls})
                msg["tool_calls"] = [{"function": {"name": b.name, "arguments": b.input}} for b in calls]
            out.append(msg)
            continue
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                tool: dict[str, Any] = {"role": "tool", "content": f"Error: {b.content}" if b.is_error else b.content}
                if b.tool_use_id in names:
                    tool["tool_name"] = names[b.tool_use_id]
                out.append(tool)
        if text:
            out.append({"role": "user", "content": text})
    return out


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _StreamErrorLine(ProviderError):
    """An ``{"error": ...}`` line inside a 200 stream."""


class OllamaProvider:
    """A local (or remote) Ollama server: streaming chat with tools, usage, embeddings.

    Args:
        model: Default chat model (``llama3.2``).
        base_url: Server root; default ``OLLAMA_HOST`` or ``http://localhost:11434``.
        api_key: Optional bearer token (else ``OLLAMA_API_KEY``), for servers behind auth.
        timeout: Seconds for connecting and between stream reads.
        max_retries: Retries on 429/5xx and dropped connections.
        embedding_model: Default embeddings model (``all-minilm``).
        retry_delay: Base backoff in seconds.
        keep_alive: Passed through to Ollama (how long to keep the model loaded), if given.
    """

    name = "ollama"

    def __init__(self, *, model: str | None = None, base_url: str | None = None, api_key: Any = None,
                 timeout: float = 60.0, max_retries: int = 3, embedding_model: str | None = None,
                 retry_delay: float = 0.5, keep_alive: str | None = None) -> None:
        self.base_url = ollama_base_url(base_url)
        self._key, self._key_source = resolve_key(api_key, KEY_VAR, "ollama", required=False)
        self.model = model or DEFAULT_MODEL
        self.embedding_model = embedding_model or DEFAULT_EMBEDDING_MODEL
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.retry_delay = float(retry_delay)
        self.keep_alive = keep_alive

    def secrets(self) -> tuple[str, ...]:
        """The values this provider holds that must never be shown (its API key), for redaction."""
        return (self._key,) if self._key else ()

    def __repr__(self) -> str:
        return f"OllamaProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        options: dict[str, Any] = {"num_predict": request.max_tokens}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.stop_sequences:
            options["stop"] = list(request.stop_sequences)
        body: dict[str, Any] = {"model": request.model or self.model, "stream": True, "options": options,
                                "messages": to_ollama_messages(request.system, request.messages)}
        tools = request.tools
        if request.tool_choice and request.tool_choice not in ("auto", "any", "none", "required"):
            # Ollama cannot force a tool; offer only that one and say so in the system prompt.
            tools = [t for t in tools if t.name == request.tool_choice] or tools
            note = f"Respond by calling the {request.tool_choice} tool."
            msgs = body["messages"]
            if msgs and msgs[0]["role"] == "system":
                msgs[0] = {"role": "system", "content": f"{msgs[0]['content']}\n\n{note}"}
            else:
                msgs.insert(0, {"role": "system", "content": note})
        if tools and request.tool_choice != "none":
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}} for t in tools]
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body

    def _status_error(self, response: httpx.Response, text: str) -> Exception:
        try:
            detail = json.loads(text).get("error") or text
        except (ValueError, AttributeError):
            detail = text
        detail = str(detail).strip()[:500]
        if response.status_code in (401, 403):
            return AuthenticationError(f"ollama at {self.base_url} rejected the request ({response.status_code}); "
                                       f"set {KEY_VAR} (or providers.ollama.api_key) for a server behind auth")
        if response.status_code in RETRY_STATUSES:
            return _Retryable(f"ollama: {response.status_code}: {detail}", retry_after_seconds(response.headers))
        if response.status_code == 404 and "not found" in detail:
            return ProviderError(f"ollama: {detail} (pull it with `ollama pull <model>`)")
        return ProviderError(f"ollama: {response.status_code}: {detail}")

    def _map(self, exc: BaseException) -> BaseException:
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, _Retryable):
            return ProviderError(str(exc))
        if isinstance(exc, httpx.ConnectError):
            return ProviderUnavailable(f"Ollama is not running at {self.base_url} "
                                       "(start it with `ollama serve`, or set OLLAMA_HOST)")
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(f"ollama: no response within {seconds_text(self.timeout)} (request or stalled stream)")
        if isinstance(exc, httpx.HTTPError):
            return ProviderError(f"ollama: connection to {self.base_url} failed: {exc}")
        return exc

    def _should_retry(self, exc: BaseException) -> tuple[bool, float | None]:
        if isinstance(exc, _Retryable):
            return True, exc.retry_after
        retry = isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.ConnectError | httpx.TimeoutException)
        return retry, None

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply as text deltas, tool uses, usage, then stop."""
        body = self._body(request)
        timeout = httpx.Timeout(self.timeout)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=timeout, headers=self._headers()) as client:

            async def send() -> httpx.Response:
                response = await client.send(client.build_request("POST", "/api/chat", json=body), stream=True)
                if response.status_code != 200:
                    text = (await response.aread()).decode("utf-8", "replace")
                    await response.aclose()
                    raise self._status_error(response, text)
                return response

            async def open_stream() -> httpx.Response:
                return await with_retries(send, max_retries=self.max_retries, base_delay=self.retry_delay,
                                          should_retry=self._should_retry)

            try:
                async for ev in stream_with_retries(open_stream, self._events, retryable=_retryable_in_stream,
                                                    max_retries=self.max_retries, base_delay=self.retry_delay):
                    yield ev
            except (httpx.HTTPError, _Retryable) as exc:
                raise self._map(exc) from exc

    async def _events(self, response: httpx.Response) -> AsyncIterator[ProviderEvent]:
        try:
            async for ev in self._parse(response):
                yield ev
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"ollama: the stream stalled (nothing within {seconds_text(self.timeout)})") from exc
        except httpx.TransportError as exc:
            raise StreamDropped(f"ollama: the connection to {self.base_url} dropped mid-stream: {exc}") from exc
        finally:
            await response.aclose()

    async def _parse(self, response: httpx.Response) -> AsyncIterator[ProviderEvent]:
        used_tools = False
        async for line in response.aiter_lines():
            if not line.strip():
                continue
            try:
                chunk = json.loads(line)
            except json.JSONDecodeError as exc:
                raise MalformedStreamError(f"ollama: the stream carried invalid JSON ({exc.msg}): {line[:80]!r}") from exc
            if not isinstance(chunk, dict):
                raise MalformedStreamError(f"ollama: unexpected stream line {line[:80]!r}")
            if chunk.get("error"):
                raise _StreamErrorLine(f"ollama: error in stream: {chunk['error']}")
            message = chunk.get("message") or {}
            if message.get("content"):
                yield TextDeltaEvent(text=message["content"])
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                args = fn.get("arguments") or {}
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError as exc:
                        raise MalformedStreamError(f"ollama: tool {fn.get('name')!r} arguments are not JSON") from exc
                if not fn.get("name") or not isinstance(args, dict):
                    raise MalformedStreamError(f"ollama: malformed tool call {call!r}"[:200])
                used_tools = True
                yield ToolUseEvent(id=call.get("id") or f"ollama_{uuid.uuid4().hex[:12]}", name=fn["name"], input=args)
            if chunk.get("done"):
                yield UsageEvent(input_tokens=int(chunk.get("prompt_eval_count") or 0),
                                 output_tokens=int(chunk.get("eval_count") or 0))
                reason = chunk.get("done_reason") or "stop"
                yield StopEvent(reason="tool_use" if used_tools else {"stop": "end_turn", "length": "max_tokens"}
                                .get(reason, reason))
                return
        raise MalformedStreamError("ollama: the stream ended before a done message")

    async def embed(self, texts: list[str], *, model: str | None = None) -> list[list[float]]:
        """Embed ``texts`` with ``/api/embed`` (one vector each, in order)."""
        if not texts:
            return []
        body = {"model": model or self.embedding_model, "input": list(texts)}
        async with httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(self.timeout),
                                     headers=self._headers()) as client:

            async def call() -> Any:
                response = await client.post("/api/embed", json=body)
                if response.status_code != 200:
                    raise self._status_error(response, response.text)
                return response.json()

            try:
                data = await with_retries(call, max_retries=self.max_retries, base_delay=self.retry_delay,
                                          should_retry=self._should_retry)
            except (httpx.HTTPError, _Retryable) as exc:
                raise self._map(exc) from exc
        vectors = data.get("embeddings") if isinstance(data, dict) else None
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise MalformedStreamError(f"ollama: asked for {len(texts)} embeddings, got {data!r}"[:200])
        return vectors


def _retryable_in_stream(exc: BaseException) -> bool:
    """A broken stream or an error line inside it (HTTP errors were retried when the stream was opened)."""
    return stream_broke(exc) or isinstance(exc, _StreamErrorLine)
