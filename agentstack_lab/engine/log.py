"""The event log: every outbound event of a run appended to the ``events`` table, in order.

Events are buffered and written in batches from a worker thread (one batch at a time, so the
sequence numbers follow emission order) together with the changed ``agents`` rows; a run with
thousands of text deltas never blocks its loop on SQLite. The first write also records this
process as the run's owner, and a heartbeat thread keeps that record fresh while the log is open
(see :mod:`agentstack_lab.engine.liveness`). :func:`read_events` and :func:`rebuild_tree` let any
process replay or follow a run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.liveness import Heartbeat, register_owner
from agentstack_lab.engine.threads import thread_call
from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import OutboundEvent, from_wire, to_wire
from agentstack_lab.store.connection import storage_reason
from agentstack_lab.validation import seconds_text, storable

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["EventLog", "EventLogError", "read_events", "rebuild_tree", "list_runs"]

log = logging.getLogger(__name__)


class EventLogError(AgentstackError):
    """The run's events could not be stored (disk full, a read-only or damaged database), even after retrying."""


_REASONS = {"the disk is full": "the disk is full", "read-only": "the database file is read-only",
            "damaged": "the database file is damaged", "locked": "the database is locked by another process"}


def _reason(exc: BaseException | None, folder: Any = None) -> str:
    """A storage failure as people read it: ``the disk is full``, ``the database file is read-only``, ..."""
    if exc is None:
        return "unknown error"
    known = storage_reason(exc, folder)
    return _REASONS[known] if known else f"{type(exc).__name__}: {exc}"


class EventLog:
    """Batches a run's events and agent rows into the workspace database."""

    def __init__(self, db: Database, run_id: str, *, interval: float = 0.05, batch: int = 512, owner: bool = True,
                 session_exists: Any = None, retry_s: float = 30.0,
                 on_outage: Callable[[EventLogError], None] | None = None):
        from agentstack_lab.agents.spawner import Spawner
        from agentstack_lab.tasks.store import TaskStore

        self.db = db
        self.run_id = run_id
        self.interval = interval
        self.batch = batch
        self._spawner = Spawner(db)
        self._tasks = TaskStore(db, session_exists=session_exists)  # every agent is also a task row (same id), written in the same transaction
        self._events: list[tuple[OutboundEvent, float]] = []
        self._rows: dict[str, dict[str, Any]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False
        self._owned = not owner  # a worker writing into its coordinator's run does not own that run
        self._heartbeat: Heartbeat | None = None
        self.written = 0
        # a write that fails (disk full, a locked or read-only file) keeps its batch and is retried with
        # backoff for up to ``retry_s``; then ``on_outage`` is told (the run fails, saying why) and
        # close() raises EventLogError: events are never dropped while the run says "completed"
        self.retry_s = retry_s
        self.on_outage = on_outage
        self.failing_since: float | None = None
        self.last_error: BaseException | None = None
        self.failed_writes = 0
        self._next_try = 0.0
        self._told = False

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task = asyncio.get_running_loop().create_task(self._flusher(), name=f"agentstack-log-{self.run_id[:8]}")
        path = getattr(self.db, "path", None)
        if path is not None and str(path) != ":memory:" and not self._owned:  # in-memory: no other process sees it
            self._heartbeat = Heartbeat(path, self.run_id).start()

    def append(self, event: OutboundEvent) -> None:
        self._events.append((event, time.time()))
        if len(self._events) >= self.batch and self._wake is not None:
            self._wake.set()

    def agent_row(self, row: dict[str, Any]) -> None:
        self._rows[row["id"]] = row

    def _folder(self) -> Any:
        path = getattr(self.db, "path", None)
        return Path(path).parent if isinstance(path, str | Path) and str(path) != ":memory:" else None

    @property
    def pending(self) -> int:
        """Events buffered, not yet written."""
        return len(self._events)

    async def _flusher(self) -> None:
        assert self._wake is not None
        while not self._closed:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Write what is buffered (in a worker thread, one batch at a time); a failed write is kept."""
        if self._lock is None:
            self._attempt(*self._take())
            return
        async with self._lock:
            if time.monotonic() < self._next_try:
                return
            events, rows = self._take()
            if events or rows:
                try:
                    await thread_call(self._write, events, rows)   # a cancelled flush still ends its write
                except Exception as exc:  # noqa: BLE001 - kept and retried; the run is told if it lasts
                    self._failed(events, rows, exc)
                else:
                    self._recovered()

    def write_now(self) -> None:
        """Write what is buffered synchronously (the run's first row); on failure it stays buffered."""
        self._attempt(*self._take())

    def _attempt(self, events: list[tuple[OutboundEvent, float]], rows: list[dict[str, Any]]) -> None:
        if not events and not rows:
            return
        try:
            self._write(events, rows)
        except Exception as exc:  # noqa: BLE001 - kept and retried
            self._failed(events, rows, exc)
        else:
            self._recovered()

    def _failed(self, events: list[tuple[OutboundEvent, float]], rows: list[dict[str, Any]],
                exc: BaseException) -> None:
        self._events[:0] = events            # back in front: order is kept
        for row in rows:                     # a newer row of the same agent, buffered since, wins
            self._rows.setdefault(row["id"], row)
        now = time.monotonic()
        self.failed_writes += 1
        self.last_error = exc
        if self.failing_since is None:
            self.failing_since = now
            log.warning("agentstack-lab: could not write %d events of run %s (%s); retrying for up to %s",
                        len(self._events), self.run_id, _reason(exc, self._folder()), seconds_text(self.retry_s))
        self._next_try = now + min(1.0, self.interval * 2 ** min(self.failed_writes, 10))
        if now - self.failing_since >= self.retry_s and not self._told:
            self._told = True
            if self.on_outage is not None:
                self.on_outage(self.outage())

    def _recovered(self) -> None:
        if self.failing_since is not None:
            log.warning("agentstack-lab: the event log of run %s is written again (after %s)", self.run_id,
                        seconds_text(time.monotonic() - self.failing_since))
        self.failing_since, self.failed_writes, self._next_try = None, 0, 0.0

    def outage(self) -> EventLogError:
        """The error that says which events could not be stored, and why."""
        since = seconds_text(time.monotonic() - self.failing_since) if self.failing_since is not None else "0 s"
        return EventLogError(f"the event log of run {self.run_id} could not be written for {since} "
                             f"({_reason(self.last_error, self._folder())}): {len(self._events)} events are not stored")

    def _take(self) -> tuple[list[tuple[OutboundEvent, float]], list[dict[str, Any]]]:
        events, self._events = self._events, []
        rows, self._rows = list(self._rows.values()), {}
        return events, rows

    def _write(self, events: list[tuple[OutboundEvent, float]], rows: list[dict[str, Any]]) -> None:
        # model text may hold what UTF-8 cannot (a lone surrogate from JSON): stored escaped, not refused
        rows = [{k: storable(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]
        with self.db.transaction() as conn:
            if not self._owned:  # the owner is on record before (or with) the run's first agent row
                register_owner(conn, self.run_id)
            self._spawner.upsert_many(conn, rows)
            self._tasks.upsert_agents(conn, rows)
            conn.executemany(
                "INSERT INTO events (run_id, agent_id, type, payload, created_at) VALUES (?,?,?,?,?)",
                [(self.run_id, getattr(ev, "agent_id", None), ev.type, json.dumps(to_wire(ev), default=str), t)
                 for ev, t in events])
        self._owned = True
        self.written += len(events)

    async def close(self) -> None:
        """Flush everything and stop the flusher.

        Raises:
            EventLogError: what is buffered could not be written within ``retry_s`` (it is retried until then).
        """
        self._closed = True
        try:
            if self._wake is not None:
                self._wake.set()
            if self._task is not None:
                await self._task
            await self.flush()
            while self._events or self._rows:
                if self.failing_since is not None and time.monotonic() - self.failing_since >= self.retry_s:
                    raise self.outage()
                await asyncio.sleep(max(0.0, self._next_try - time.monotonic()) or self.interval)
                await self.flush()
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop()


def read_events(db: Database, run_id: str, *, after_seq: int = 0) -> list[tuple[int, OutboundEvent]]:
    """The logged events of a run as ``(seq, event)``, in order, after ``after_seq``."""
    rows = db.query("SELECT seq, payload FROM events WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, after_seq))
    return [(r[0], from_wire(json.loads(r[1]))) for r in rows]  # type: ignore[misc]


def rebuild_tree(db: Database, run_id: str, *, details: bool = False) -> dict[str, Any]:
    """The run's agent tree rebuilt from the event log alone (``details``: with each agent's tool calls)."""
    from agentstack_lab.engine.state import tree_from_events

    return tree_from_events([ev for _, ev in read_events(db, run_id)], details=details)


def list_runs(db: Database, limit: int = 20) -> list[dict[str, Any]]:
    """Recent runs (root agents) with their status, newest first."""
    rows = db.query("SELECT id, name, type, status, prompt, created_at, ended_at FROM agents"
                    " WHERE parent_id IS NULL AND run_id = id ORDER BY created_at DESC LIMIT ?", (int(limit),))
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]
