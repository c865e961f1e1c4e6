"""Loopback fake LLM servers speaking the real wire formats, for the real SDKs to talk to.

One uvicorn/Starlette server in a background thread answers:

* ``POST /v1/messages``          Anthropic Messages, SSE (message_start … message_stop, ping, error)
* ``POST /v1/chat/completions``  OpenAI chat completions, SSE with ``tool_calls`` deltas and a usage chunk
* ``POST /v1/embeddings``        OpenAI embeddings (float or base64)
* ``POST /api/chat``             Ollama chat, NDJSON
* ``POST /api/embed``            Ollama embeddings

Tests queue behaviours (``Reply``, ``Status``, ``StreamError``, ``Stall``, ``Malformed``,
``Truncated``, ``Drop``) that the next requests consume in order; every request is recorded.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

API_KEY = "test-key-not-secret"


@dataclass
class Reply:
    """A successful streamed reply: text (streamed word by word) then tool calls."""

    text: str = ""
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (id, name, input)
    usage: tuple[int, int] = (11, 7)
    cache: tuple[int, int] = (0, 0)  # prompt-cache (read, written) input tokens, reported beside usage[0]
    stop: str | None = None  # default: end_turn / tool_use in the provider's words


@dataclass
class Status:
    """An HTTP error response in the provider's error shape."""

    code: int
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamError:
    """A 200 stream that carries an error (Anthropic ``event: error``, OpenAI/Ollama ``error`` object)."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class Stall:
    """Send the first ``after`` frames of ``reply`` then go silent for ``seconds``."""

    reply: Reply = field(default_factory=lambda: Reply(text="partial answer that never ends"))
    after: int = 2
    seconds: float = 30.0


@dataclass
class Malformed:
    """Send the first ``after`` frames of ``reply`` then a frame that is not valid JSON."""

    reply: Reply = field(default_factory=lambda: Reply(text="hello there"))
    after: int = 2


@dataclass
class Truncated:
    """Send the first ``after`` frames of ``reply`` then close the stream early."""

    reply: Reply = field(default_factory=lambda: Reply(text="hello there"))
    after: int = 2


@dataclass
class Drop:
    """Send the 200 headers and the first ``after`` frames of ``reply``, then cut the connection."""

    reply: Reply = field(default_factory=lambda: Reply(text="hello there"))
    after: int = 0


class _DropConnection(Exception):
    """Raised inside a streaming body: uvicorn then closes the socket without ending the response."""


@dataclass
class Captured:
    path: str
    headers: dict[str, str]
    json: Any


def _words(text: str) -> list[str]:
    out, cur = [], ""
    for ch in text:
        cur += ch
        if ch == " ":
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out


def _pieces(s: str, n: int = 3) -> list[str]:
    step = max(1, math.ceil(len(s) / n))
    return [s[i:i + step] for i in range(0, len(s), step)] or [""]


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic unit vector for ``text``."""
    raw = hashlib.sha256(text.encode()).digest() * (dims // 32 + 1)
    vals = [b / 255 - 0.5 for b in raw[:dims]]
    norm = math.sqrt(sum(v * v for v in vals)) or 1.0
    return [v / norm for v in vals]


# --- wire renderers: a Reply -> list of frames (bytes) ------------------------------------------


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


def anthropic_frames(reply: Reply, model: str) -> list[bytes]:
    frames = [
        _sse("message_start", {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": model,
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": reply.usage[0], "output_tokens": 1,  # Anthropic counts cached input apart
                      **({"cache_read_input_tokens": reply.cache[0], "cache_creation_input_tokens": reply.cache[1]}
                         if any(reply.cache) else {})}}}),
        _sse("ping", {"type": "ping"}),
    ]
    index = 0
    if reply.text:
        frames.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
        for w in _words(reply.text):
            frames.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "text_delta", "text": w}}))
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, args in reply.tool_calls:
        frames.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "tool_use", "id": call_id,
                                                                     "name": name, "input": {}}}))
        for piece in _pieces(json.dumps(args)):
            frames.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = reply.stop or ("tool_use" if reply.tool_calls else "end_turn")
    frames.append(_sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": reply.usage[1]}}))
    frames.append(_sse("message_stop", {"type": "message_stop"}))
    return frames


def openai_frames(reply: Reply, model: str) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": w}) for w in _words(reply.text)]
    for i, (call_id, name, args) in enumerate(reply.tool_calls):
        frames.append(chunk({"tool_calls": [{"index": i, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        for piece in _pieces(json.dumps(args)):
            frames.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    frames.append(chunk({}, reply.stop or ("tool_calls" if reply.tool_calls else "stop")))
    frames.append(_sse(None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
                              "choices": [], "usage": {"prompt_tokens": reply.usage[0],
                                                       "completion_tokens": reply.usage[1],
                                                       "total_tokens": sum(reply.usage),
                                                       **({"prompt_tokens_details": {"cached_tokens": reply.cache[0]}}
                                                          if reply.cache[0] else {})}}))
    frames.append(b"data: [DONE]\n\n")
    return frames


def ollama_frames(reply: Reply, model: str) -> list[bytes]:
    def line(obj: dict[str, Any]) -> bytes:
        return (json.dumps({"model": model, "created_at": "2025-01-01T00:00:00Z", **obj}) + "\n").encode()

    frames = [line({"message": {"role": "assistant", "content": w}, "done": False}) for w in _words(reply.text)]
    if reply.tool_calls:
        frames.append(line({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": name, "arguments": args}} for _, name, args in reply.tool_calls]}, "done": False}))
    frames.append(line({"message": {"role": "assistant", "content": ""}, "done": True,
                        "done_reason": reply.stop or "stop", "total_duration": 1000,
                        "prompt_eval_count": reply.usage[0], "eval_count": reply.usage[1]}))
    return frames


# --- the server ---------------------------------------------------------------------------------


class FakeLLMServer:
    """All three fake APIs on one loopback port; behaviours are queued and consumed in order."""

    def __init__(self) -> None:
        self.requests: list[Captured] = []
        self.queue_: list[Any] = []
        self.api_key: str | None = API_KEY
        self.ollama_key: str | None = None
        self.ollama_dims = 8
        self.url = ""
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # configuration used by tests
    def queue(self, *behaviours: Any) -> FakeLLMServer:
        """Queue behaviours (or callables ``fn(json_body) -> behaviour``) for the next requests."""
        with self._lock:
            self.queue_.extend(behaviours)
        return self

    def reset(self) -> None:
        with self._lock:
            self.queue_.clear()
            self.requests.clear()
            self.api_key = API_KEY
            self.ollama_key = None
            self.ollama_dims = 8

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _next(self, body: Any) -> Any:
        with self._lock:
            item = self.queue_.pop(0) if self.queue_ else Reply(text="ok")
        return item(body) if callable(item) else item

    # lifecycle
    def start(self) -> FakeLLMServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = Starlette(routes=[
            Route("/v1/messages", self._anthropic, methods=["POST"]),
            Route("/v1/chat/completions", self._openai_chat, methods=["POST"]),
            Route("/v1/embeddings", self._openai_embed, methods=["POST"]),
            Route("/api/chat", self._ollama_chat, methods=["POST"]),
            Route("/api/embed", self._ollama_embed, methods=["POST"]),
        ])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1,
                                access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)

    # shared request handling
    async def _capture(self, request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            body = None
        self.requests.append(Captured(request.url.path, dict(request.headers), body))
        return body

    @staticmethod
    async def _frames(frames: list[bytes], stall: float = 0.0, tail: bytes = b"", drop: bool = False):
        for f in frames:
            yield f
            await asyncio.sleep(0)
        if tail:
            yield tail
        if stall:
            await asyncio.sleep(stall)
        if drop:
            await asyncio.sleep(0.05)  # let the headers and frames reach the client first
            raise _DropConnection("fake server drops the connection")

    def _stream(self, behaviour: Any, render: Callable[[Reply], list[bytes]], media: str,
                error_frame: Callable[[StreamError], bytes], bad_frame: bytes) -> Response:
        if isinstance(behaviour, Reply):
            return StreamingResponse(self._frames(render(behaviour)), media_type=media)
        if isinstance(behaviour, StreamError):
            return StreamingResponse(self._frames([], tail=error_frame(behaviour)), media_type=media)
        if isinstance(behaviour, Stall):
            return StreamingResponse(self._frames(render(behaviour.reply)[:behaviour.after], stall=behaviour.seconds),
                                     media_type=media)
        if isinstance(behaviour, Malformed):
            return StreamingResponse(self._frames(render(behaviour.reply)[:behaviour.after], tail=bad_frame),
                                     media_type=media)
        if isinstance(behaviour, Truncated):
            return StreamingResponse(self._frames(render(behaviour.reply)[:behaviour.after]), media_type=media)
        if isinstance(behaviour, Drop):
            return StreamingResponse(self._frames(render(behaviour.reply)[:behaviour.after], drop=True),
                                     media_type=media)
        raise TypeError(f"unknown behaviour {behaviour!r}")

    # Anthropic
    async def _anthropic(self, request: Request) -> Response:
        body = await self._capture(request)
        given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        if self.api_key and given != self.api_key:
            return self._anthropic_error(Status(401, "invalid x-api-key"))
        behaviour = self._next(body)
        if isinstance(behaviour, Status):
            return self._anthropic_error(behaviour)
        model = (body or {}).get("model", "claude-fake")
        return self._stream(
            behaviour, lambda r: anthropic_frames(r, model), "text/event-stream",
            lambda e: _sse("error", {"type": "error", "error": {"type": e.error_type, "message": e.message}}),
            b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {\n\n')

    @staticmethod
    def _anthropic_error(s: Status) -> Response:
        kinds = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
        return JSONResponse({"type": "error", "error": {"type": kinds.get(s.code, "api_error"), "message": s.message}},
                            status_code=s.code, headers=s.headers)

    # OpenAI
    def _openai_auth(self, request: Request) -> Response | None:
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return self._openai_error(Status(401, "Incorrect API key provided"))
        return None

    @staticmethod
    def _openai_error(s: Status) -> Response:
        code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(s.code)
        return JSONResponse({"error": {"message": s.message, "type": "invalid_request_error" if s.code < 500
                                       else "server_error", "param": None, "code": code}},
                            status_code=s.code, headers=s.headers)

    async def _openai_chat(self, request: Request) -> Response:
        body = await self._capture(request)
        if (denied := self._openai_auth(request)) is not None:
            return denied
        behaviour = self._next(body)
        if isinstance(behaviour, Status):
            return self._openai_error(behaviour)
        model = (body or {}).get("model", "gpt-fake")
        return self._stream(
            behaviour, lambda r: openai_frames(r, model), "text/event-stream",
            lambda e: _sse(None, {"error": {"message": e.message, "type": e.error_type, "code": None}}),
            b'data: {"id": "chatcmpl-fake", "choices": [{"delta": \n\n')

    async def _openai_embed(self, request: Request) -> Response:
        body = await self._capture(request)
        if (denied := self._openai_auth(request)) is not None:
            return denied
        behaviour = self._next(body)
        if isinstance(behaviour, Status):
            return self._openai_error(behaviour)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or 8)
        data = []
        for i, text in enumerate(inputs):
            vec = fake_vector(str(text), dims)
            if body.get("encoding_format") == "base64":
                emb: Any = base64.b64encode(struct.pack(f"<{dims}f", *vec)).decode()
            else:
                emb = vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(len(str(t).split()) for t in inputs)
        return JSONResponse({"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    # Ollama
    def _ollama_auth(self, request: Request) -> Response | None:
        if self.ollama_key and request.headers.get("authorization") != f"Bearer {self.ollama_key}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return None

    async def _ollama_chat(self, request: Request) -> Response:
        body = await self._capture(request)
        if (denied := self._ollama_auth(request)) is not None:
            return denied
        behaviour = self._next(body)
        if isinstance(behaviour, Status):
            return JSONResponse({"error": behaviour.message}, status_code=behaviour.code, headers=behaviour.headers)
        model = (body or {}).get("model", "llama-fake")
        return self._stream(behaviour, lambda r: ollama_frames(r, model), "application/x-ndjson",
                            lambda e: (json.dumps({"error": e.message}) + "\n").encode(),
                            b'{"model": "x", "message": {"role": \n')

    async def _ollama_embed(self, request: Request) -> Response:
        body = await self._capture(request)
        if (denied := self._ollama_auth(request)) is not None:
            return denied
        behaviour = self._next(body)
        if isinstance(behaviour, Status):
            return JSONResponse({"error": behaviour.message}, status_code=behaviour.code)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = self.ollama_dims
        return JSONResponse({"model": body.get("model"), "embeddings": [fake_vector(str(t), dims) for t in inputs],
                             "prompt_eval_count": len(inputs)})


# --- fixtures (import them into a test module) ----------------------------------------------------

@pytest.fixture(scope="session")
def fake_llm_server():
    """One fake server for the whole session (started once, ~50 ms)."""
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(fake_llm_server):
    """The session's fake server with an empty queue and request log."""
    fake_llm_server.reset()
    yield fake_llm_server
    fake_llm_server.reset()
