"""The message bus between agents (docs/tasks.md), across processes.

Every message is a row of ``messages`` (``seq`` orders them, as ``events`` orders a run's events), so
an agent in a worker process and its coordinator in a kernel talk through the workspace file. A
subscriber in the process that sent a message gets it at once (the in-process fast path: no database
read); messages written by other processes are found by a tail that reads ``PRAGMA data_version``
every :data:`POLL_S` (25 ms; a counter in the WAL index, ~2 µs) and only reads rows when another
connection has committed. Each subscriber sees each message once, in ``seq`` order per process.

    bus = MessageBus(ws.db)
    bus.subscribe("agent-b", print)          # messages to agent-b, and broadcasts
    bus.send("agent-a", "agent-b", "hello", {"n": 1})
    bus.broadcast("coordinator", "shutdown")

The task queue publishes ``task:added``, ``task:assigned``, ``task:completed``, ``task:failed`` and
``queue:empty`` here as broadcasts from ``queue`` (in the same transaction as the queue change).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import UsageError

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Message", "MessageBus", "POLL_S", "publish"]

log = logging.getLogger(__name__)

POLL_S = 0.025
"""Seconds between two looks at the database for messages from other processes."""


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message; ``recipient`` ``None`` is a broadcast."""

    seq: int
    id: str
    sender: str
    recipient: str | None
    type: str
    payload: Any
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _check(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"message {name} must be a non-empty string, got {value!r}")
    return value


def publish(conn: Any, sender: str, recipient: str | None, type: str, payload: Any = None) -> Message:  # noqa: A002
    """Write one message inside the caller's transaction (the queue uses this for its events)."""
    now = time.time()
    mid = str(uuid.uuid4())
    try:
        body = json.dumps(payload, default=str)
    except ValueError as exc:  # circular structures
        raise UsageError(f"message payload is not JSON-serialisable: {exc}") from None
    cur = conn.execute("INSERT INTO messages (id, sender, recipient, type, payload, created_at) VALUES (?,?,?,?,?,?)",
                       (mid, sender, recipient, type, body, now))
    return Message(seq=cur.lastrowid, id=mid, sender=sender, recipient=recipient, type=type,
                   payload=json.loads(body), created_at=now)


def _row(r: Any) -> Message:
    return Message(seq=r[0], id=r[1], sender=r[2], recipient=r[3], type=r[4], payload=json.loads(r[5]),
                   created_at=r[6])


class MessageBus:
    """``send``, ``broadcast``, ``subscribe(agent)``, ``subscribe_all`` over one workspace database."""

    def __init__(self, db: Database, *, poll: float = POLL_S):
        self.db = db
        self.poll = poll
        self._lock = threading.Lock()
        self._subs: list[tuple[str | None, Callable[[Message], Any]]] = []  # (agent or None for all, callback)
        self._seen = self._last_seq()  # a new bus delivers what is sent from now on
        self._delivered: set[int] = set()  # seqs already delivered in-process, above _seen
        self._tail: asyncio.Task[None] | None = None

    # --- sending ---------------------------------------------------------------------------------------
    def send(self, sender: str, recipient: str, type: str, payload: Any = None) -> Message:  # noqa: A002
        """A direct message; delivered to ``recipient``'s subscribers (and ``subscribe_all``)."""
        return self._post(_check("sender", sender), _check("recipient", recipient), _check("type", type), payload)

    def broadcast(self, sender: str, type: str, payload: Any = None) -> Message:  # noqa: A002
        """A message to every subscriber."""
        return self._post(_check("sender", sender), None, _check("type", type), payload)

    def _post(self, sender: str, recipient: str | None, type: str, payload: Any) -> Message:  # noqa: A002
        with self.db.transaction() as conn:
            msg = publish(conn, sender, recipient, type, payload)
        self.deliver_local([msg])
        return msg

    def deliver_local(self, messages: list[Message]) -> None:
        """The in-process fast path: hand messages this process wrote to its subscribers now."""
        for msg in messages:
            with self._lock:
                if msg.seq <= self._seen or msg.seq in self._delivered:
                    continue
                self._delivered.add(msg.seq)
            self._dispatch(msg)

    # --- receiving -------------------------------------------------------------------------------------
    def subscribe(self, agent: str, callback: Callable[[Message], Any]) -> Callable[[], None]:
        """Call ``callback(message)`` for messages to ``agent`` and for broadcasts; returns unsubscribe."""
        return self._add(_check("agent", agent), callback)

    def subscribe_all(self, callback: Callable[[Message], Any]) -> Callable[[], None]:
        """Call ``callback(message)`` for every message (a global listener)."""
        return self._add(None, callback)

    def _add(self, agent: str | None, callback: Callable[[Message], Any]) -> Callable[[], None]:
        if not callable(callback):
            raise UsageError(f"subscribe: callback must be callable, got {type(callback).__name__}")
        entry = (agent, callback)
        with self._lock:
            self._subs.append(entry)
        self._ensure_tail()

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._subs.remove(entry)

        return unsubscribe

    def read(self, *, after_seq: int = 0, agent: str | None = None, type: str | None = None,  # noqa: A002
             limit: int = 1000) -> list[Message]:
        """Messages after ``after_seq`` (to ``agent`` or broadcast when given, of ``type`` when given)."""
        where: list[str] = ["seq > ?"]
        params: list[Any] = [int(after_seq)]
        if agent is not None:
            where.append("(recipient = ? OR recipient IS NULL)")
            params.append(agent)
        if type is not None:
            where.append("type = ?")
            params.append(type)
        rows = self.db.query(f"SELECT seq, id, sender, recipient, type, payload, created_at FROM messages"
                             f" WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?", [*params, int(limit)])
        return [_row(r) for r in rows]

    def poll_once(self) -> int:
        """Deliver messages other processes wrote since the last look; returns how many were delivered."""
        with self._lock:
            after = self._seen
        rows = self.read(after_seq=after)
        n = 0
        for msg in rows:
            with self._lock:
                self._seen = max(self._seen, msg.seq)
                local = msg.seq in self._delivered
                self._delivered.discard(msg.seq)
            if not local:
                self._dispatch(msg)
                n += 1
        return n

    def close(self) -> None:
        """Stop the tail (subscribers stay registered; a later subscribe restarts it)."""
        if self._tail is not None:
            self._tail.cancel()
            self._tail = None

    # --- internals -------------------------------------------------------------------------------------
    def _last_seq(self) -> int:
        row = self.db.query("SELECT COALESCE(MAX(seq), 0) FROM messages")
        return int(row[0][0])

    def _dispatch(self, msg: Message) -> None:
        with self._lock:
            subs = list(self._subs)
        for agent, cb in subs:
            if agent is None or msg.recipient is None or msg.recipient == agent:
                try:
                    cb(msg)
                except Exception:  # a broken subscriber must not break the bus
                    log.exception("agentstack-lab: message subscriber %r failed", cb)

    def _ensure_tail(self) -> None:
        if self._tail is not None and not self._tail.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: call poll_once() yourself (a CLI loop, a test)
        self._tail = loop.create_task(self._run_tail(), name="agentstack-bus-tail")

    async def _run_tail(self) -> None:
        version, ticks = None, 0
        while True:
            ticks += 1
            with self._lock:
                if not self._subs:
                    self._tail = None
                    return
            try:
                now = self.db.query("PRAGMA data_version")[0][0]
                if now != version or ticks % 40 == 0:  # data_version misses this connection's own commits
                    version = now
                    self.poll_once()
            except Exception as exc:  # noqa: BLE001 - a locked or closed database: try again next tick
                log.debug("agentstack-lab: bus tail: %s", exc)
            await asyncio.sleep(self.poll)
