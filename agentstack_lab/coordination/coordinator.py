"""The hierarchical coordinator (docs/tasks.md): one coordinator, a durable queue, workers.

``submit(agent_type, input, priority)`` queues a task (in the coordinator's group) and makes sure a
worker can take it: an idle in-process worker of that type picks it up itself; otherwise a new
in-process worker (an asyncio task running :class:`~agentstack_lab.coordination.worker.Worker` with
``concurrency=1``) is spawned for that type while there are fewer than ``max_workers``; at the limit,
the task waits for a worker of its type to free up, or, when no worker serves its type, an idle
worker of another type is retired to make room.
External ``agentstack-lab worker`` processes that joined the workspace take tasks from the same
queue, whichever claims first. ``wait(task_id)`` returns the finished task (result or error), from
whichever process ran it. ``shutdown()`` stops every in-process worker and clears the group's
unfinished tasks (their workers see the cancellation at their next heartbeat).

With a ``placement`` (:class:`~agentstack_lab.coordination.dask.DaskPlacement`) no in-process worker
is spawned: each submitted task is also handed to the placement, which runs it on a Dask worker
through the same queue row (lease, heartbeat, exactly-once completion); ``shutdown()`` closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from agentstack_lab.coordination.queue import QueuedTask, QueueError, TaskQueue
from agentstack_lab.coordination.worker import Runner, Worker

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)


class Coordinator:
    """Submit tasks to the durable queue and run them with on-demand in-process workers (and external ones)."""

    def __init__(self, queue: TaskQueue, runner: Runner | None = None, *, max_workers: int = 4,
                 group_id: str | None = None, placement: Any = None):
        if not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 0:
            raise QueueError(f"max_workers must be a non-negative integer, got {max_workers!r}")
        if max_workers and runner is None and placement is None:
            raise QueueError("a coordinator with in-process workers needs a runner")
        self.queue = queue
        self.runner = runner
        self.max_workers = max_workers
        self.group_id = group_id or str(uuid.uuid4())
        self.placement = placement
        self.workers: list[tuple[Worker, asyncio.Task[None]]] = []
        self.spawned = 0
        self._closed = False

    def submit(self, agent_type: str, input: str, *, priority: int = 5, payload: dict[str, Any] | None = None,  # noqa: A002
               task_id: str | None = None, max_attempts: int = 3) -> QueuedTask:
        """Queue a task in this coordinator's group and make sure some worker can take it."""
        if self._closed:
            raise QueueError("this coordinator was shut down")
        task = self.queue.enqueue(agent_type, input, priority=priority, payload=payload, task_id=task_id,
                                  group_id=self.group_id, max_attempts=max_attempts)
        if self.placement is not None:
            self.placement.place(task)
        else:
            self._ensure_worker(agent_type)
        return task

    async def wait(self, task_id: str, timeout: float | None = None) -> QueuedTask:
        """The finished task (completed, failed or cancelled), whoever ran it."""
        return await self.queue.wait(task_id, timeout)

    async def wait_all(self, timeout: float | None = None) -> list[QueuedTask]:
        """Wait for every task of the group; returns them in claim order (priority, then age)."""
        pending = [t.id for t in self.queue.list(group_id=self.group_id, limit=1_000_000) if not t.finished]
        await asyncio.gather(*(self.queue.wait(t, timeout) for t in pending))
        return self.queue.list(group_id=self.group_id, limit=1_000_000)

    async def shutdown(self, *, grace: float = 0.0, reason: str = "the coordinator shut down") -> int:
        """Stop every in-process worker and clear the group's unfinished tasks; returns how many were cleared."""
        self._closed = True
        cleared = await asyncio.to_thread(self.queue.clear, self.group_id, reason)
        for worker, _ in self.workers:
            worker.stop(grace)
        jobs = [job for _, job in self.workers]
        if jobs:
            await asyncio.gather(*jobs, return_exceptions=True)
        self.workers.clear()
        if self.placement is not None:
            await asyncio.to_thread(self.placement.close)
        return cleared

    # --- in-process workers ------------------------------------------------------------------------------
    def _ensure_worker(self, agent_type: str) -> None:
        if not self.max_workers:
            return
        self.workers = [(w, j) for w, j in self.workers if not j.done()]
        mine = [w for w, _ in self.workers if w.serves(agent_type)]
        if any(w.idle for w in mine):
            return  # reuse: an idle worker of this type will claim it
        if len(self.workers) >= self.max_workers:
            if mine:
                return  # a worker of its type takes it when it is free (or an external worker does)
            spare = next((w for w, _ in self.workers if w.idle), None)
            if spare is None:
                return  # it waits for a worker to free up; the next idle one makes room for it
            spare.stop(0)  # retire an idle worker of another type to make room
            self.workers = [(w, j) for w, j in self.workers if w is not spare]
        self._spawn(agent_type)

    def _spawn(self, agent_type: str) -> None:
        assert self.runner is not None
        worker = Worker(self.queue, self.runner, types=(agent_type,), concurrency=1,
                        worker_id=f"coordinator-{self.group_id[:8]}-{agent_type}-{self.spawned + 1}",
                        idle_poll=0.2, on_idle=self._on_idle)
        job = asyncio.get_running_loop().create_task(worker.run(), name=f"agentstack-worker-{worker.id}")
        job.add_done_callback(_log_crash)
        self.workers.append((worker, job))
        self.spawned += 1

    def _on_idle(self, worker: Worker) -> None:
        """A worker with nothing to do: pending tasks of types with no worker get one (it retires)."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            for task in self.queue.list(state="pending", group_id=self.group_id, limit=50):
                if not any(w.serves(task.agent_type) for w, _ in self.workers):
                    self._ensure_worker(task.agent_type)
                    return


def _log_crash(job: asyncio.Task[None]) -> None:
    if not job.cancelled() and job.exception() is not None:
        log.error("agentstack-lab: an in-process worker crashed", exc_info=job.exception())
