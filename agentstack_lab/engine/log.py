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
from typing import Any

from agentstack_lab.engine.liveness import Heartbeat, register_owner
from agentstack_lab.engine.threads import thread_call
from agentstack_lab.events import OutboundEvent, from_wire, to_wire

__all__ = ["EventLog", "read_events", "rebuild_tree", "list_runs"]

log = logging.getLogger(__name__)


class EventLog:
    """Batches a run's events and agent rows into the workspace database."""

    def __init__(self, db: Any, run_id: str, *, interval: float = 0.05, batch: int = 512, owner: bool = True,
                 session_exists: Any = None):
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
        """Write what is buffered (in a worker thread, one batch at a time)."""
        if self._lock is None:
            self._write(*self._take())
            return
        async with self._lock:
            events, rows = self._take()
            if events or rows:
                try:
                    await thread_call(self._write, events, rows)   # a cancelled flush still ends its write
                except Exception as exc:  # the run goes on; the log says what was lost
                    log.error("agentstack-lab: could not write %d events of run %s: %s", len(events), self.run_id, exc)

    def write_now(self) -> None:
        """Write what is buffered synchronously (the run's first row); on failure it stays buffered."""
        events, rows = self._take()
        try:
            self._write(events, rows)
        except Exception as exc:  # the flusher retries with the next batch
            log.warning("agentstack-lab: could not write the start of run %s yet: %s", self.run_id, exc)
            self._events[:0] = events
            for row in rows:
                self._rows.setdefault(row["id"], row)

    def _take(self) -> tuple[list[tuple[OutboundEvent, float]], list[dict[str, Any]]]:
        events, self._events = self._events, []
        rows, self._rows = list(self._rows.values()), {}
        return events, rows

    def _write(self, events: list[tuple[OutboundEvent, float]], rows: list[dict[str, Any]]) -> None:
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
        """Flush everything and stop the flusher."""
        self._closed = True
        try:
            if self._wake is not None:
                self._wake.set()
            if self._task is not None:
                await self._task
            await self.flush()
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop()


def read_events(db: Any, run_id: str, *, after_seq: int = 0) -> list[tuple[int, OutboundEvent]]:
    """The logged events of a run as ``(seq, event)``, in order, after ``after_seq``."""
    rows = db.query("SELECT seq, payload FROM events WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, after_seq))
    return [(r[0], from_wire(json.loads(r[1]))) for r in rows]  # type: ignore[misc]


def rebuild_tree(db: Any, run_id: str) -> dict[str, Any]:
    """The run's agent tree rebuilt from the event log alone."""
    from agentstack_lab.engine.state import tree_from_events

    return tree_from_events([ev for _, ev in read_events(db, run_id)])


def list_runs(db: Any, limit: int = 20) -> list[dict[str, Any]]:
    """Recent runs (root agents) with their status, newest first."""
    rows = db.query("SELECT id, name, type, status, prompt, created_at, ended_at FROM agents"
                    " WHERE parent_id IS NULL AND run_id = id ORDER BY created_at DESC LIMIT ?", (int(limit),))
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]
