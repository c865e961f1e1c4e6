"""Follows the workspace's event log and fans it out to WebSocket clients, coalescing text.

Every run in the workspace — from a kernel, the CLI, a worker, MCP, or this server — appends its
events to the ``events`` table, so one reader that tails the table by sequence number sees them all,
whatever process wrote them. The hub polls every ``poll_interval`` seconds (50 ms) in a worker
thread (one indexed range query), and hands each batch to every subscriber.

Coalescing: within a batch, consecutive ``text-delta`` events of one agent (nothing else of that
agent in between) become one message, so a client receives at most one text message per streaming
agent per poll — at most 20 per second per agent at the default interval — instead of one per
token. Order per agent is kept exactly; ``seq`` of a merged message is its last delta's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.activity import EventFollower

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["EventHub", "coalesce"]

log = logging.getLogger(__name__)

Message = dict[str, Any]


def _message(row: dict[str, Any]) -> Message:
    """A logged event as sent to clients: its wire form plus ``runId`` and ``seq``."""
    return {**row["payload"], "runId": row["run_id"], "seq": row["seq"]}


def coalesce(rows: list[dict[str, Any]]) -> list[Message]:
    """Log rows → client messages, merging runs of one agent's text deltas (per-agent order kept)."""
    out: list[Message] = []
    open_text: dict[tuple[str, str], int] = {}   # (run, agent) -> index of its merged text message
    for row in rows:
        payload = row["payload"]
        key = (row["run_id"], payload.get("agentId") or "")
        if payload.get("type") == "text-delta":
            i = open_text.get(key)
            if i is not None:
                out[i] = {**out[i], "delta": out[i]["delta"] + payload.get("delta", ""), "seq": row["seq"]}
                continue
            open_text[key] = len(out)
        else:
            open_text.pop(key, None)
        out.append(_message(row))
    return out


class EventHub:
    """One tail of the event log shared by every connected client."""

    def __init__(self, db: Database, *, poll_interval: float = 0.05, start_at_head: bool = True):
        self.db = db
        self.poll_interval = poll_interval
        self._follower = EventFollower(db)
        if start_at_head:
            self._follower.seq = self._follower.head()
        self._subscribers: set[Callable[[list[Message]], None]] = set()
        self._task: asyncio.Task[None] | None = None
        self.polls = 0
        self.rows = 0

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @property
    def seq(self) -> int:
        return self._follower.seq

    def subscribe(self, send: Callable[[list[Message]], None]) -> Callable[[], None]:
        self._subscribers.add(send)
        return lambda: self._subscribers.discard(send)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agentstack-event-hub")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def poll_once(self) -> int:
        rows = await asyncio.to_thread(self._follower.poll)
        self.polls += 1
        if not rows:
            return 0
        self.rows += len(rows)
        messages = coalesce(rows)
        for send in list(self._subscribers):
            try:
                send(messages)
            except Exception:  # a broken client must not stop the others
                log.exception("agentstack-lab: dropping a WebSocket subscriber that failed")
                self._subscribers.discard(send)
        return len(rows)

    async def _run(self) -> None:
        while True:
            try:
                got = await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("agentstack-lab: reading the event log failed; retrying")
                got = 0
            if not got:
                await asyncio.sleep(self.poll_interval)


def dumps(message: Message) -> str:
    return json.dumps(message, ensure_ascii=False, default=str)
