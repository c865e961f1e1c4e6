"""Record a run's model traffic once, replay it offline: cassettes at the provider level.

A cassette is a JSON Lines file, one line per model call, diffable and reviewable in a pull request::

    {"cassette": 1, "provider": "anthropic", "created": "2026-11-30T21:00:00Z"}
    {"key": "9f2c…", "agent": "researcher", "step": "main", "request": {...}, "events": [...]}

``RecordingProvider`` wraps any provider (the SDK ones, the CLI agents, ``scripted``): it forwards
each request, streams the reply through unchanged and appends the request (normalised) and every
streamed event to the cassette. ``ReplayProvider`` serves replies from a cassette with no network
and no key.

Tool results the run saw are recorded too, one ``{"tool": ...}`` line per call (``record_tool_result``,
called by the engine after each tool call): a reviewer reads what the model was shown, and a replay
compares what its tools return now with what they returned then; the first request after a tool
whose result changed then misses, and the error says which tool result differs and where.

Replies are matched by *content*, not by call order: the key is a hash of the normalised request
(model, system, messages, tools, parameters), so a tree whose subagents run in parallel replays the
same whatever order the event loop schedules them in. Identical requests (two agents asking the
same thing) are served their recorded replies in order. A request the cassette lacks is a
:class:`CassetteMissError` naming the agent and the first field where it differs from the closest
recorded request; in ``new_episodes`` mode it goes to the real provider and is appended instead
(vcrpy's record modes: ``strict`` is vcrpy's ``none``, ``new_episodes`` the same; recording is ``all``).

Secrets never reach the file: every string is passed through the caller's ``redact`` (the engine
gives its secret scrubber: values of secret-looking environment variables and configured keys), and
the key is computed after redaction, so a replay without the secret matches. Request ``metadata``
(step, agent type) is stored for error messages but is not part of the key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from agentstack_lab.errors import AgentstackError
from agentstack_lab.providers.base import (
    Provider,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    StopEvent,
    TextDeltaEvent,
    ToolUseEvent,
    UsageEvent,
)

__all__ = ["CassetteError", "CassetteMissError", "RecordingProvider", "ReplayProvider", "ReplayMode",
           "REPLAY_MODES", "normalise_request", "request_key", "load_cassette", "check_replay_mode"]

FORMAT = 1
ReplayMode = Literal["strict", "new_episodes"]
REPLAY_MODES: tuple[str, ...] = ("strict", "new_episodes")
_ALIASES = {"none": "strict"}  # vcrpy's name for strict
_EVENTS = {"text": TextDeltaEvent, "tool_use": ToolUseEvent, "usage": UsageEvent, "stop": StopEvent}
_KEY_FIELDS = ("model", "system", "messages", "tools", "max_tokens", "temperature", "stop_sequences", "tool_choice")


class CassetteError(AgentstackError, ValueError):
    """A cassette file is missing, unreadable or not a cassette (names the file and line)."""


class CassetteMissError(ProviderError):
    """The cassette has no recorded reply for a request (names the agent and the first difference)."""


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _deep_redact(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _deep_redact(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_redact(v, redact) for v in value]
    return value


def normalise_request(request: ProviderRequest, redact: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The fields of ``request`` that decide the reply, as plain JSON (secrets redacted)."""
    plain = _plain(request)
    out = {k: plain[k] for k in _KEY_FIELDS}
    return _deep_redact(out, redact) if redact else out


def request_key(normalised: dict[str, Any]) -> str:
    """A stable hash of a normalised request (sorted keys, no whitespace)."""
    blob = json.dumps(normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def check_replay_mode(mode: Any) -> ReplayMode:
    """``mode`` if it is a replay mode (``none``, vcrpy's name, means ``strict``); else a :class:`CassetteError`."""
    mode = _ALIASES.get(mode, mode) if isinstance(mode, str) else mode
    if mode not in REPLAY_MODES:
        raise CassetteError(f"replay mode must be one of {', '.join(REPLAY_MODES)}, got {mode!r}")
    return mode  # type: ignore[return-value]


def _event_from(data: dict[str, Any], where: str) -> ProviderEvent:
    cls = _EVENTS.get(data.get("type", ""))
    if cls is None:
        raise CassetteError(f"{where}: unknown event type {data.get('type')!r}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise CassetteError(f"{where}: bad {data['type']} event: {exc}") from None


def load_cassette(path: str | Path, tools: list[dict[str, Any]] | None = None
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a cassette: its header and its entries (each ``key``, ``request``, ``events``...).

    Tool-result lines are appended to ``tools`` when a list is given (else skipped).
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CassetteError(f"cassette {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cannot read cassette {path}: {exc}") from None
    if not lines:
        raise CassetteError(f"cassette {path} is empty")
    entries: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CassetteError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if n == 1:
            if not isinstance(obj, dict) or obj.get("cassette") != FORMAT:
                raise CassetteError(f"{path}:1: not an agentstack-lab cassette (expected a header with cassette: 1)")
            header = obj
            continue
        if isinstance(obj, dict) and isinstance(obj.get("tool"), dict):
            if tools is not None:
                tools.append(obj["tool"])
            continue
        if not isinstance(obj, dict) or not {"key", "request", "events"} <= obj.keys():
            raise CassetteError(f"{path}:{n}: an entry needs key, request and events")
        for ev in obj["events"]:
            _event_from(ev, f"{path}:{n}")
        entries.append(obj)
    return header, entries


def _first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """The path of the first field where ``a`` (recorded) and ``b`` (now) differ, or None."""
    if type(a) is not type(b):
        return where or "request"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}.{k}".lstrip(".")
            d = _first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d.lstrip(".")
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = _first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return f"{where} (length {len(a)} recorded, {len(b)} now)" if len(a) != len(b) else None
    return None if a == b else (where.lstrip(".") or "request")


def _lookup(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.replace("]", "").replace("[", ".").split("."):
        if not part:
            continue
        try:
            cur = cur[int(part)] if isinstance(cur, list) else cur[part]
        except (KeyError, IndexError, ValueError, TypeError):
            return None
    return cur


def _short(value: Any, size: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(str(text).split())
    return text if len(text) <= size else text[: size - 1] + "…"


class _Writer:
    """Appends entries to a cassette file, one line per reply, safe across the run's threads."""

    def __init__(self, path: Path, provider: str, *, append: bool, copy_of: Path | None = None):
        self.path, self.provider, self.append, self.copy_of = path, provider, append, copy_of
        self._lock = threading.Lock()
        self._opened = False  # the file is created at the first write: a run that fails to start leaves none

    def _open(self) -> None:
        path, copy_of = self.path, self.copy_of
        path.parent.mkdir(parents=True, exist_ok=True)
        if copy_of is not None and copy_of.resolve() != path.resolve():
            path.write_bytes(copy_of.read_bytes())  # the replayed cassette, then what was new
        elif not self.append or not path.exists() or path.stat().st_size == 0:
            header = {"cassette": FORMAT, "provider": self.provider,
                      "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            path.write_text(json.dumps(header) + "\n", encoding="utf-8")
        self._opened = True

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, sort_keys=False, default=str)
        with self._lock:
            if not self._opened:
                self._open()
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")


def _tool_entry(call: dict[str, Any], redact: Callable[[str], str] | None) -> dict[str, Any]:
    plain = _plain(call)
    return _deep_redact(plain, redact) if redact else plain


def _tool_id(call: dict[str, Any]) -> str:
    """Which recorded tool call ``call`` is: its agent's prompt, the call id the model gave, the input."""
    return request_key({k: call.get(k) for k in ("prompt", "id", "tool", "input")})


def _entry(request: ProviderRequest, normalised: dict[str, Any], events: list[ProviderEvent],
           redact: Callable[[str], str] | None) -> dict[str, Any]:
    meta = request.metadata or {}
    plain_events = [_plain(e) for e in events]
    if redact:
        plain_events = _deep_redact(plain_events, redact)
    return {"key": request_key(normalised), "agent": meta.get("agent_type") or meta.get("agent"),
            "step": meta.get("step"), "request": normalised, "events": plain_events}


class RecordingProvider:
    """Wraps ``inner``: every call is forwarded and recorded to ``path`` (a new cassette)."""

    def __init__(self, inner: Provider, path: str | Path, *, redact: Callable[[str], str] | None = None,
                 append: bool = False):
        self.inner = inner
        self.name = getattr(inner, "name", "provider")
        self.redact = redact
        self._writer = _Writer(Path(path), self.name, append=append)

    def __getattr__(self, item: str) -> Any:  # model, embed(), ... of the wrapped provider
        return getattr(self.inner, item)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        normalised = normalise_request(request, self.redact)
        events: list[ProviderEvent] = []
        async for event in self.inner.stream(request):
            events.append(event)
            yield event
        # Only complete replies are recorded: a stream that failed part-way leaves no entry.
        self._writer.write(_entry(request, normalised, events, self.redact))

    def record_tool_result(self, call: dict[str, Any]) -> None:
        """Append a tool result the run saw (``agent``, ``prompt``, ``id``, ``tool``, ``input``, ``output``, ``error``)."""
        self._writer.write({"tool": _tool_entry(call, self.redact)})


class ReplayProvider:
    """Serves replies from a cassette; ``mode="new_episodes"`` records what it lacks through ``inner``."""

    def __init__(self, path: str | Path, *, mode: ReplayMode = "strict", inner: Provider | None = None,
                 redact: Callable[[str], str] | None = None, record_to: str | Path | None = None):
        mode = check_replay_mode(mode)
        if mode == "new_episodes" and inner is None:
            raise CassetteError("replay mode new_episodes needs a real provider to ask for what the cassette lacks")
        if record_to is not None and mode != "new_episodes":
            raise CassetteError("recording while replaying needs replay mode new_episodes")
        self.path = Path(path)
        tools: list[dict[str, Any]] = []
        header, entries = load_cassette(self.path, tools)
        self._tools = {_tool_id(t): t for t in tools}
        self.misses: list[str] = []  # every miss's message, for callers that catch the agent's failure
        self.tool_mismatches: list[str] = []  # "python tool of agent X: first difference at output.text ..."
        self.name = f"replay:{header.get('provider', '?')}"
        self.mode = mode
        self.inner = inner
        self.redact = redact
        self._entries = entries
        self._replies: dict[str, deque[list[dict[str, Any]]]] = defaultdict(deque)
        for e in entries:
            self._replies[e["key"]].append(e["events"])
        self._served: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
        self._lock = asyncio.Lock()
        target = Path(record_to) if record_to is not None else self.path
        self._writer = (_Writer(target, header.get("provider", "?"), append=True, copy_of=self.path)
                        if mode == "new_episodes" else None)
        self.calls = 0

    def secrets(self) -> list[str]:
        """The real provider's secrets in ``new_episodes`` mode; none when only replaying."""
        held: Callable[[], Iterable[str]] | None = getattr(self.inner, "secrets", None)
        return list(held()) if callable(held) else []

    def record_tool_result(self, call: dict[str, Any]) -> None:
        """Compare a tool result with the recorded one (kept for the next miss's message); append new ones."""
        now = _tool_entry(call, self.redact)
        then = self._tools.get(_tool_id(now))
        if then is None:
            if self._writer is not None:
                self._writer.write({"tool": now})
            return
        where = _first_difference({"output": then.get("output"), "error": then.get("error")},
                                  {"output": now.get("output"), "error": now.get("error")})
        if where is not None:
            field = where.split(" ")[0]
            self.tool_mismatches.append(
                f"the {now.get('tool')} tool result of agent {now.get('agent') or '?'} differs from the recording at "
                f"{where}: recorded {_short(_lookup(then, field))!r}, now {_short(_lookup(now, field))!r}")

    def _take(self, key: str) -> list[dict[str, Any]] | None:
        queue = self._replies.get(key)
        if queue:
            events = queue.popleft()
            self._served[key].append(events)
            return events
        served = self._served.get(key)
        # More identical requests than recorded replies: the same question gets the same answer.
        return served[-1] if served else None

    def _miss(self, request: ProviderRequest, normalised: dict[str, Any]) -> CassetteMissError:
        meta = request.metadata or {}
        agent = meta.get("agent_type") or meta.get("agent") or "?"
        step = meta.get("step")
        same_step = [e for e in self._entries if e.get("step") == step and e.get("agent") == meta.get("agent_type")]
        pool = same_step or self._entries
        now = json.dumps(normalised, sort_keys=True, ensure_ascii=False)

        def agreement(entry: dict[str, Any]) -> int:  # length of the common prefix of the two requests
            then = json.dumps(entry["request"], sort_keys=True, ensure_ascii=False)
            return next((i for i, (x, y) in enumerate(zip(then, now, strict=False)) if x != y), min(len(then), len(now)))

        best = max(pool, key=agreement, default=None)
        best_path = _first_difference(best["request"], normalised) if best is not None else None
        where = f"agent {agent}" + (f" (step {step})" if step else "")
        if best is None or best_path is None:
            return CassetteMissError(f"cassette {self.path} has no reply for {where}")
        field = best_path.split(" ")[0]
        after = f" (after {self.tool_mismatches[-1]})" if self.tool_mismatches else ""
        return CassetteMissError(
            f"cassette {self.path} has no reply for {where}: first difference at {best_path}: "
            f"recorded {_short(_lookup(best['request'], field))!r}, now {_short(_lookup(normalised, field))!r}{after}")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        normalised = normalise_request(request, self.redact)
        key = request_key(normalised)
        self.calls += 1
        events = self._take(key)
        if events is not None:
            for data in events:
                yield _event_from(data, str(self.path))
            return
        if self.mode != "new_episodes" or self.inner is None:
            miss = self._miss(request, normalised)
            self.misses.append(str(miss))
            raise miss
        got: list[ProviderEvent] = []
        async for event in self.inner.stream(request):
            got.append(event)
            yield event
        entry = _entry(request, normalised, got, self.redact)
        async with self._lock:
            self._entries.append(entry)
            self._served[key].append(entry["events"])
            assert self._writer is not None
            self._writer.write(entry)
