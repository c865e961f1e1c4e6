"""The durable task queue (docs/tasks.md) in the workspace database, with leases.

The seed keeps its queue in one process's memory; ours must survive what notebooks do to processes
(a kernel restarts, a terminal closes, a worker is SIGKILLed), so every queued task is a row of
``task_queue`` and a claim is a *lease*:

* ``claim`` (the seed's ``dequeue`` + ``assign``) is one statement inside ``BEGIN IMMEDIATE``:
  ``UPDATE … WHERE seq = (SELECT seq … ORDER BY priority DESC, seq LIMIT 1) RETURNING …``. Pending
  rows and claimed rows whose lease expired are both candidates, so a task whose worker died goes
  back to the queue :attr:`TaskQueue.lease_s` seconds (default 30) after its last heartbeat, at its
  priority. Every claim writes a fresh lease token.
* ``renew`` (the worker's heartbeat, every ``lease_s / 3``) pushes the expiry out; it returns
  ``False`` once the token is no longer current (the lease was lost, or the task was cancelled), so
  the worker stops working on it.
* ``complete`` and ``fail`` are conditional on the token: a worker whose lease was lost (it paused
  past its lease and another worker took the task) is refused with :class:`LeaseLostError`, so a
  task is completed exactly once.
* ``requeue`` puts a claimed task back one priority lower (the seed's requeue); ``release`` puts it
  back unchanged (a worker shutting down); ``cancel``/``clear`` take tasks out (``shutdown``).

Each change publishes ``task:added``, ``task:assigned``, ``task:completed``, ``task:failed`` or
``queue:empty`` on the message bus in the same transaction. Measured on this machine (2 shared
cores): claim + complete ≈ 1 ms per task; see ``benchmarks/bench_queue.py`` for end-to-end rates.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentstack_lab.coordination.bus import Message, MessageBus, publish
from agentstack_lab.errors import AgentstackError, NotFoundError, UsageError
from agentstack_lab.validation import seconds_text

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["QueuedTask", "TaskQueue", "QueueError", "LeaseLostError", "QueuedTaskNotFoundError", "worker_name",
           "QUEUE_STATES", "LEASE_S", "POLL_S"]

LEASE_S = 30.0
"""Default lease: a claimed task whose worker sent no heartbeat for this long is claimable again."""
POLL_S = 0.025
"""Seconds between two looks at the database while waiting for a task or a result from another process."""
QUEUE_STATES = ("pending", "claimed", "completed", "failed", "cancelled")
_FINISHED = ("completed", "failed", "cancelled")
_COLS = ("seq, id, agent_type, priority, state, input, payload, group_id, worker_id, lease, lease_expires_at,"
         " attempts, max_attempts, result, error, created_at, claimed_at, finished_at")


class QueueError(UsageError):
    """Bad queue input (priority, agent type, state) or an operation the task's state does not allow."""


class LeaseLostError(AgentstackError):
    """The caller's lease on a task is no longer current: another worker has it, or it finished."""


class QueuedTaskNotFoundError(NotFoundError):
    """No queued task with that id."""


def worker_name(prefix: str = "worker") -> str:
    """A worker id that says where it runs: ``worker-<host>-<pid>-<random>``."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, kw_only=True)
class QueuedTask:
    """One row of ``task_queue``; ``result`` is the decoded JSON the worker completed it with."""

    seq: int
    id: str
    agent_type: str
    priority: int
    state: str
    input: str
    payload: dict[str, Any] = field(default_factory=dict)
    group_id: str | None = None
    worker_id: str | None = None
    lease: str | None = None
    lease_expires_at: float | None = None
    attempts: int = 0
    max_attempts: int = 3
    result: Any = None
    error: str | None = None
    created_at: float = 0.0
    claimed_at: float | None = None
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.state in _FINISHED

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _task(r: Any) -> QueuedTask:
    data = dict(zip(r.keys(), tuple(r), strict=True))
    data["payload"] = json.loads(data["payload"] or "{}")
    data["result"] = json.loads(data["result"]) if data["result"] is not None else None
    return QueuedTask(**data)


def _priority(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10:
        raise QueueError(f"priority must be an integer from 1 to 10 (higher first), got {value!r}")
    return value


def _types(agent_type: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    if agent_type is None:
        return None
    types = (agent_type,) if isinstance(agent_type, str) else tuple(agent_type)
    if not types or any(not isinstance(t, str) or not t.strip() for t in types):
        raise QueueError(f"agent type must be a non-empty string (or a list of them), got {agent_type!r}")
    return types


class TaskQueue:
    """Enqueue, claim (lease), renew, complete, fail, requeue, release and cancel queued tasks."""

    def __init__(self, db: Database, *, bus: MessageBus | None = None, lease_s: float = LEASE_S, poll: float = POLL_S):
        if not isinstance(lease_s, int | float) or lease_s <= 0:
            raise QueueError(f"lease must be > 0 seconds, got {lease_s!r}")
        self.db = db
        self.bus = bus
        self.lease_s = float(lease_s)
        self.poll = poll
        self._wake: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    # --- producing -------------------------------------------------------------------------------------
    def enqueue(self, agent_type: str, input: str, *, priority: int = 5, payload: dict[str, Any] | None = None,  # noqa: A002
                task_id: str | None = None, group_id: str | None = None, max_attempts: int = 3) -> QueuedTask:
        """Add a task (``priority`` 1-10, higher first; FIFO within a priority); publishes ``task:added``."""
        (agent_type,) = _types(agent_type) or ("",)
        if not isinstance(input, str) or not input.strip():
            raise QueueError("a queued task needs a non-empty input (the prompt)")
        _priority(priority)
        if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise QueueError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        try:
            body = json.dumps(payload or {})
        except (TypeError, ValueError) as exc:
            raise QueueError(f"task payload must be JSON-serialisable: {exc}") from None
        task_id = task_id or str(uuid.uuid4())
        with self.db.transaction() as conn:
            if conn.execute("SELECT 1 FROM task_queue WHERE id = ?", (task_id,)).fetchone():
                raise QueueError(f"a queued task with id {task_id!r} already exists")
            row = conn.execute(
                f"INSERT INTO task_queue (id, agent_type, priority, input, payload, group_id, max_attempts, created_at)"
                f" VALUES (?,?,?,?,?,?,?,?) RETURNING {_COLS}",
                (task_id, agent_type, priority, input, body, group_id, max_attempts, time.time())).fetchone()
            msgs = [publish(conn, "queue", None, "task:added",
                            {"taskId": task_id, "agentType": agent_type, "priority": priority, "seq": row[0]})]
        self._after(msgs)
        return _task(row)

    # --- consuming -------------------------------------------------------------------------------------
    def claim(self, worker_id: str, agent_type: str | list[str] | tuple[str, ...] | None = None) -> QueuedTask | None:
        """Lease the next task (highest priority, oldest first) of ``agent_type`` (any type when ``None``).

        Pending tasks and claimed tasks whose lease expired are candidates. Returns ``None`` when there
        is none. Publishes ``task:assigned`` (and ``queue:empty`` when it took the last pending task).
        """
        _check_worker(worker_id)
        types = _types(agent_type)
        type_sql, params = "", []
        if types is not None:
            type_sql = f" AND agent_type IN ({','.join('?' * len(types))})"
            params = list(types)
        now = time.time()
        lease = uuid.uuid4().hex
        with self.db.transaction() as conn:
            row = conn.execute(
                f"UPDATE task_queue SET state = 'claimed', worker_id = ?, lease = ?, lease_expires_at = ?,"
                f" attempts = attempts + 1, claimed_at = ? WHERE seq = (SELECT seq FROM task_queue"
                f" WHERE (state = 'pending' OR (state = 'claimed' AND lease_expires_at < ?)){type_sql}"
                f" ORDER BY priority DESC, seq LIMIT 1) RETURNING {_COLS}",
                [worker_id, lease, now + self.lease_s, now, now, *params]).fetchone()
            if row is None:
                return None
            task = _task(row)
            msgs = [publish(conn, "queue", None, "task:assigned",
                            {"taskId": task.id, "workerId": worker_id, "priority": task.priority, "seq": task.seq,
                             "attempt": task.attempts})]
            if conn.execute("SELECT 1 FROM task_queue WHERE state = 'pending' LIMIT 1").fetchone() is None:
                msgs.append(publish(conn, "queue", None, "queue:empty", {}))
        self._after(msgs)
        return task

    def dequeue(self, agent_type: str | None = None, *, worker_id: str | None = None) -> QueuedTask | None:
        """The seed's ``dequeue(agentType?)``: :meth:`claim` under a generated worker id."""
        return self.claim(worker_id or worker_name("dequeue"), agent_type)

    def assign(self, task_id: str, worker_id: str, *, take_from: str | None = None) -> QueuedTask:
        """Lease one named pending task to ``worker_id`` (the seed's ``assign``); ``QueueError`` if not pending.

        ``take_from`` names a holder known to be dead (its machine or process is gone): the task is
        taken from it at once, without waiting for its lease to expire. Should it still be alive, its
        next heartbeat finds the lease gone and stops, and its result is refused (the token changed).
        """
        _check_worker(worker_id)
        now = time.time()
        with self.db.transaction() as conn:
            row = conn.execute(
                f"UPDATE task_queue SET state = 'claimed', worker_id = ?, lease = ?, lease_expires_at = ?,"
                f" attempts = attempts + 1, claimed_at = ? WHERE id = ? AND (state = 'pending' OR"
                f" (state = 'claimed' AND (lease_expires_at < ? OR worker_id = ?))) RETURNING {_COLS}",
                (worker_id, uuid.uuid4().hex, now + self.lease_s, now, task_id, now, take_from)).fetchone()
            if row is None:
                current = self._get(conn, task_id)
                raise QueueError(f"task {task_id} is {current.state}"
                                 + (f" (held by {current.worker_id})" if current.state == "claimed" else "")
                                 + "; only a pending task can be assigned")
            task = _task(row)
            msgs = [publish(conn, "queue", None, "task:assigned",
                            {"taskId": task.id, "workerId": worker_id, "priority": task.priority, "seq": task.seq,
                             "attempt": task.attempts, **({"takenFrom": take_from} if take_from else {})})]
        self._after(msgs)
        return task

    def renew(self, task: QueuedTask | str, lease: str | None = None) -> bool:
        """Heartbeat: extend the lease; ``False`` when it is no longer ours (lost, finished or cancelled)."""
        task_id, lease = _ref(task, lease)
        with self.db.transaction() as conn:
            return conn.execute("UPDATE task_queue SET lease_expires_at = ? WHERE id = ? AND lease = ? AND"
                                " state = 'claimed'", (time.time() + self.lease_s, task_id, lease)).rowcount == 1

    def complete(self, task: QueuedTask | str, result: Any = None, *, lease: str | None = None) -> QueuedTask:
        """Finish a claimed task with ``result`` (JSON); :class:`LeaseLostError` unless the lease is current."""
        return self._finish(task, lease, "completed", result=result)

    def fail(self, task: QueuedTask | str, error: str, *, lease: str | None = None, retry: bool = False,
             result: Any = None) -> QueuedTask:
        """Fail a claimed task; with ``retry`` and attempts left it goes back to the queue one priority lower.

        ``result`` (JSON, optional) is kept with the failure: what the failed work left (an agent's tree).
        """
        if retry:
            current = self.get(_ref(task, lease)[0])
            if current.attempts < current.max_attempts:
                return self.requeue(task, lease=lease, error=error)
        return self._finish(task, lease, "failed", error=str(error), result=result)

    def requeue(self, task: QueuedTask | str, *, lease: str | None = None, error: str | None = None) -> QueuedTask:
        """Put a claimed task back, one priority lower (not below 1), as the seed's ``requeue``."""
        return self._put_back(task, lease, lower=True, error=error)

    def release(self, task: QueuedTask | str, *, lease: str | None = None) -> QueuedTask:
        """Put a claimed task back unchanged (a worker that stops before finishing it); the attempt is not counted."""
        return self._put_back(task, lease, lower=False)

    def cancel(self, task_id: str, reason: str = "cancelled") -> bool:
        """Take a task out of the queue (pending or claimed; its worker's next heartbeat sees it)."""
        with self.db.transaction() as conn:
            changed = conn.execute("UPDATE task_queue SET state = 'cancelled', error = ?, finished_at = ?, lease = NULL"
                                   " WHERE id = ? AND state IN ('pending', 'claimed')",
                                   (reason, time.time(), task_id)).rowcount
            msgs = [publish(conn, "queue", None, "task:failed", {"taskId": task_id, "error": reason,
                                                                  "cancelled": True})] if changed else []
        self._after(msgs)
        return bool(changed)

    def clear(self, group_id: str | None = None, reason: str = "the queue was cleared") -> int:
        """Cancel every unfinished task (of ``group_id`` when given); returns how many."""
        where = "state IN ('pending', 'claimed')" + (" AND group_id = ?" if group_id is not None else "")
        params: list[Any] = [reason, time.time()] + ([group_id] if group_id is not None else [])
        with self.db.transaction() as conn:
            n = conn.execute(f"UPDATE task_queue SET state = 'cancelled', error = ?, finished_at = ?, lease = NULL"
                             f" WHERE {where}", params).rowcount
            msgs = [publish(conn, "queue", None, "queue:empty", {"cleared": n, "groupId": group_id})] if n else []
        self._after(msgs)
        return n

    # --- reading ---------------------------------------------------------------------------------------
    def get(self, task_id: str) -> QueuedTask:
        return self._get(self.db.conn, task_id)

    def list(self, *, state: str | None = None, group_id: str | None = None, limit: int = 100) -> list[QueuedTask]:
        """Queued tasks in claim order (priority, then age), filtered by state and group."""
        if state is not None and state not in QUEUE_STATES:
            raise QueueError(f"unknown queue state {state!r}; expected one of {', '.join(QUEUE_STATES)}")
        where, params = [], []
        for col, val in (("state", state), ("group_id", group_id)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = (f"SELECT {_COLS} FROM task_queue" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY priority DESC, seq LIMIT ?")
        return [_task(r) for r in self.db.query(sql, [*params, int(limit)])]

    def depth(self, agent_type: str | list[str] | tuple[str, ...] | None = None, *, group_id: str | None = None,
              stale: bool = False) -> int:
        """Pending tasks (of a type or types / group), the ``queue depth`` of metrics and health.

        With ``stale``, claimed tasks whose lease expired count too (they are claimable again).
        """
        sql = ("SELECT count(*) FROM task_queue WHERE (state = 'pending'"
               + (" OR (state = 'claimed' AND lease_expires_at < ?))" if stale else ")"))
        params: list[Any] = [time.time()] if stale else []
        types = _types(agent_type)
        if types is not None:
            sql += f" AND agent_type IN ({','.join('?' * len(types))})"
            params.extend(types)
        if group_id is not None:
            sql += " AND group_id = ?"
            params.append(group_id)
        return int(self.db.query(sql, params)[0][0])

    def stale_leases(self, now: float | None = None) -> list[QueuedTask]:
        """Claimed tasks whose lease expired and that nobody took back yet (health: a dead worker)."""
        now = time.time() if now is None else now
        return [_task(r) for r in self.db.query(f"SELECT {_COLS} FROM task_queue WHERE state = 'claimed' AND"
                                                f" lease_expires_at < ? ORDER BY seq", (now,))]

    async def wait(self, task_id: str, timeout: float | None = None) -> QueuedTask:
        """Wait until a task is finished (completed, failed or cancelled) by any process; returns it.

        Changes by this :class:`TaskQueue` wake the waiter at once; other processes' within ``poll``
        seconds (``PRAGMA data_version`` first, so an idle wait reads no rows).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        wake = asyncio.Event()
        entry = (asyncio.get_running_loop(), wake)
        self._wake.append(entry)
        try:
            version = None
            ticks = 0
            while True:
                ticks += 1
                now_version = self.db.query("PRAGMA data_version")[0][0]
                if now_version != version or wake.is_set() or ticks % 40 == 0:
                    version = now_version
                    wake.clear()
                    task = self.get(task_id)
                    if task.finished:
                        return task
                if timeout is not None and deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"queued task {task_id} not finished after {seconds_text(timeout)}")
                await _nap(wake, self.poll)
        finally:
            self._wake.remove(entry)

    async def wait_for_work(self, timeout: float) -> None:
        """Sleep until this process changed the queue, another process committed anything, or ``timeout``."""
        wake = asyncio.Event()
        entry = (asyncio.get_running_loop(), wake)
        self._wake.append(entry)
        try:
            start = self.db.query("PRAGMA data_version")[0][0]
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not wake.is_set():
                await _nap(wake, min(self.poll, max(0.0, deadline - time.monotonic())))
                if self.db.query("PRAGMA data_version")[0][0] != start:
                    return
        finally:
            self._wake.remove(entry)

    # --- internals -------------------------------------------------------------------------------------
    def _get(self, conn: Any, task_id: str) -> QueuedTask:
        row = conn.execute(f"SELECT {_COLS} FROM task_queue WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise QueuedTaskNotFoundError(f"no queued task with id {task_id!r}")
        return _task(row)

    def _finish(self, task: QueuedTask | str, lease: str | None, state: str, *, result: Any = None,
                error: str | None = None) -> QueuedTask:
        task_id, lease = _ref(task, lease)
        try:
            body = json.dumps(result) if state == "completed" or result is not None else None
        except (TypeError, ValueError) as exc:
            raise QueueError(f"task result must be JSON-serialisable: {exc}") from None
        with self.db.transaction() as conn:
            row = conn.execute(f"UPDATE task_queue SET state = ?, result = ?, error = ?, finished_at = ?, lease = NULL"
                               f" WHERE id = ? AND lease = ? AND state = 'claimed' RETURNING {_COLS}",
                               (state, body, error, time.time(), task_id, lease)).fetchone()
            if row is None:
                current = self._get(conn, task_id)
                raise LeaseLostError(f"task {task_id}: lease lost (it is {current.state}"
                                     + (f", held by {current.worker_id}" if current.state == "claimed" else "")
                                     + f"); this {'completion' if state == 'completed' else 'failure'} was refused")
            done = _task(row)
            payload = {"taskId": task_id, "workerId": done.worker_id, "attempt": done.attempts}
            if state == "failed":
                payload["error"] = error
            msgs = [publish(conn, "queue", None, f"task:{state}", payload)]
        self._after(msgs)
        return done

    def _put_back(self, task: QueuedTask | str, lease: str | None, *, lower: bool, error: str | None = None
                  ) -> QueuedTask:
        task_id, lease = _ref(task, lease)
        prio = "MAX(1, priority - 1)" if lower else "priority"
        attempts = "attempts" if lower else "MAX(0, attempts - 1)"
        with self.db.transaction() as conn:
            row = conn.execute(f"UPDATE task_queue SET state = 'pending', priority = {prio}, attempts = {attempts},"
                               f" worker_id = NULL, lease = NULL, lease_expires_at = NULL, error = COALESCE(?, error)"
                               f" WHERE id = ? AND lease = ? AND state = 'claimed' RETURNING {_COLS}",
                               (error, task_id, lease)).fetchone()
            if row is None:
                current = self._get(conn, task_id)
                raise LeaseLostError(f"task {task_id}: lease lost (it is {current.state}); not put back")
            back = _task(row)
            msgs = [publish(conn, "queue", None, "task:added",
                            {"taskId": task_id, "agentType": back.agent_type, "priority": back.priority,
                             "seq": back.seq, "requeued": lower, "released": not lower})]
        self._after(msgs)
        return back

    def _after(self, msgs: list[Message]) -> None:
        if self.bus is not None:
            self.bus.deliver_local(msgs)
        for loop, ev in list(self._wake):
            if loop.is_closed():
                continue
            try:
                if asyncio.get_running_loop() is loop:
                    ev.set()
                    continue
            except RuntimeError:
                pass
            loop.call_soon_threadsafe(ev.set)


async def _nap(wake: asyncio.Event, timeout: float) -> None:
    """Wait for ``wake`` or ``timeout``; unlike ``wait_for`` (3.11) it never swallows a cancellation."""
    waiter = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()


def _check_worker(worker_id: Any) -> None:
    if not isinstance(worker_id, str) or not worker_id.strip():
        raise QueueError(f"worker id must be a non-empty string, got {worker_id!r}")


def _ref(task: QueuedTask | str, lease: str | None) -> tuple[str, str]:
    if isinstance(task, QueuedTask):
        return task.id, lease or task.lease or ""
    if lease is None:
        raise QueueError("pass the QueuedTask you claimed, or its id with lease=")
    return task, lease
