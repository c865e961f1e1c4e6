"""A worker: claims queued tasks of its agent types and runs each, holding a lease renewed by a heartbeat.

The worker does not know how to run an agent: it is handed a ``runner`` (``async runner(task) ->
JSON result``). The engine supplies the one that runs the task as an agent
(:class:`agentstack_lab.engine.coordinate.Worker`, what ``agentstack-lab worker`` and a kernel use);
the services layer never imports the engine.

Up to ``concurrency`` tasks run at once, each as an asyncio task with its own heartbeat (every
``lease_s / 3``). A heartbeat that finds the lease gone (the task was cancelled, or the worker was
paused past its lease and another worker took it) cancels the work: its result would be refused
anyway. :meth:`Worker.stop` stops claiming, lets what runs finish for ``grace`` seconds, then cancels
it and *releases* the tasks (back to the queue unchanged), so Ctrl-C, SIGTERM or a kernel shutdown
loses nothing; a SIGKILL loses only the lease, which expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentstack_lab.coordination.queue import LeaseLostError, QueuedTask, QueueError, TaskQueue, worker_name

__all__ = ["Worker", "Runner", "TaskFailure"]

log = logging.getLogger(__name__)

Runner = Callable[[QueuedTask], Awaitable[Any]]


class TaskFailure(Exception):
    """Raised by a runner whose task failed but left a JSON ``result`` worth keeping with the failure.

    The engine's runner raises it for a queued subagent whose run failed: the result holds the
    subtree and says the run already logged the child's ``error`` event, so the coordinator
    announces the failure without logging it a second time. ``str(exc)`` is the task's error.
    """

    def __init__(self, error: str, result: dict[str, Any]):
        super().__init__(error)
        self.result = result


class Worker:
    """Claims tasks of ``types`` (all types when ``None``) and runs up to ``concurrency`` at once."""

    def __init__(self, queue: TaskQueue, runner: Runner, *, types: list[str] | tuple[str, ...] | None = None,
                 concurrency: int = 1, worker_id: str | None = None, idle_poll: float = 0.5,
                 on_idle: Callable[[Worker], Any] | None = None):
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise QueueError(f"worker concurrency must be a positive integer, got {concurrency!r}")
        if types is not None:
            types = tuple(t.strip() for t in types)
            if not types or any(not t for t in types):
                raise QueueError(f"worker types must be non-empty agent type names, got {list(types)!r}")
        self.queue = queue
        self.runner = runner
        self.types = types
        self.concurrency = concurrency
        self.id = worker_id or worker_name()
        self.idle_poll = idle_poll
        self.on_idle = on_idle
        self.running: dict[str, tuple[QueuedTask, asyncio.Task[Any]]] = {}
        self.completed = 0
        self.failed = 0
        self.released = 0
        self._stopping: asyncio.Event | None = None
        self._grace = 0.0
        self._slot: asyncio.Event | None = None

    @property
    def idle(self) -> bool:
        """No task in hand."""
        return not self.running

    def serves(self, agent_type: str) -> bool:
        return self.types is None or agent_type in self.types

    def stop(self, grace: float = 10.0) -> None:
        """Stop claiming; finish what runs within ``grace`` seconds, then release it (safe from signal handlers)."""
        self._grace = grace
        if self._stopping is not None:
            self._stopping.set()

    async def run(self, *, until_empty: bool = False) -> None:
        """Work until :meth:`stop` (or, with ``until_empty``, until no task of its types is left)."""
        self._stopping = asyncio.Event()
        self._slot = asyncio.Event()
        try:
            while not self._stopping.is_set():
                task = None
                if len(self.running) < self.concurrency:
                    task = await asyncio.to_thread(self.queue.claim, self.id, self.types)
                if task is not None:
                    self._start(task)
                    continue
                if until_empty and not self.running and self.queue.depth(self.types, stale=True) == 0:
                    break
                if not self.running and self.on_idle is not None:
                    self.on_idle(self)
                await self._nap()
        finally:
            await self._drain()

    async def run_one(self, task_id: str, *, poll: float = 0.5,
                      is_lost: Callable[[QueuedTask], bool] | None = None) -> QueuedTask:
        """Take the named task and run it like :meth:`run` would; returns it finished (whoever finished it).

        While another worker holds a live lease on it, wait: it either finishes the task (returned) or
        dies, and once its lease expired this worker takes the task over. ``is_lost(task)`` (asked once
        per holder, on this loop's thread) may say sooner that the holder is gone (a Dask worker the
        scheduler removed): the task is then taken from it at once. A finished task is returned as is.
        """
        self._stopping = asyncio.Event()
        self._slot = asyncio.Event()
        asked: set[str] = set()
        while True:
            current = await asyncio.to_thread(self.queue.get, task_id)
            if current.finished:
                return current
            holder = current.worker_id if current.state == "claimed" and current.worker_id != self.id else None
            lost = False
            if holder and is_lost is not None and holder not in asked:
                asked.add(holder)
                lost = bool(is_lost(current))
            try:
                task = await asyncio.to_thread(self.queue.assign, task_id, self.id, take_from=holder if lost else None)
            except QueueError:
                await asyncio.sleep(poll)
                continue
            if lost:
                log.warning("agentstack-lab: worker %s took task %s over from %s, which is gone", self.id, task_id,
                            holder)
            self._start(task)
            await asyncio.wait([self.running[task.id][1]])  # a lost lease cancels the job: not us
            return await asyncio.to_thread(self.queue.get, task_id)

    # --- internals -------------------------------------------------------------------------------------
    async def _nap(self) -> None:
        """Wait for a free slot (when full) or for new work (when the queue had none)."""
        assert self._slot is not None and self._stopping is not None
        if len(self.running) >= self.concurrency:
            self._slot.clear()
            waiters = [asyncio.ensure_future(self._slot.wait()), asyncio.ensure_future(self._stopping.wait())]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
            return
        stop = asyncio.ensure_future(self._stopping.wait())
        nap = asyncio.ensure_future(self.queue.wait_for_work(self.idle_poll))
        try:
            await asyncio.wait([stop, nap], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            nap.cancel()

    def _start(self, task: QueuedTask) -> None:
        job = asyncio.get_running_loop().create_task(self._work(task), name=f"agentstack-task-{task.id[:8]}")
        self.running[task.id] = (task, job)

    async def _work(self, task: QueuedTask) -> None:
        beat = asyncio.get_running_loop().create_task(self._heartbeat(task, asyncio.current_task()))
        try:
            try:
                result = await self.runner(task)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the task failed; the worker goes on
                log.warning("agentstack-lab: task %s failed in worker %s: %s", task.id, self.id, exc)
                failure = exc if isinstance(exc, TaskFailure) else None
                error = str(exc) if failure is not None else f"{type(exc).__name__}: {exc}"
                with contextlib.suppress(LeaseLostError):
                    await asyncio.to_thread(self.queue.fail, task, error,
                                            result=failure.result if failure is not None else None)
                    self.failed += 1
                return
            try:
                await asyncio.to_thread(self.queue.complete, task, result)
                self.completed += 1
            except LeaseLostError as exc:
                log.warning("agentstack-lab: %s", exc)
        finally:
            beat.cancel()
            self.running.pop(task.id, None)
            if self._slot is not None:
                self._slot.set()

    async def _heartbeat(self, task: QueuedTask, job: asyncio.Task[Any] | None) -> None:
        interval = self.queue.lease_s / 3
        while True:
            await asyncio.sleep(interval)
            try:
                ours = await asyncio.to_thread(self.queue.renew, task)
            except Exception as exc:  # noqa: BLE001 - a busy database: try again next beat
                log.debug("agentstack-lab: heartbeat of task %s failed: %s", task.id, exc)
                continue
            if not ours:
                log.warning("agentstack-lab: worker %s lost the lease of task %s; stopping it", self.id, task.id)
                if job is not None:
                    job.cancel("lease lost")
                return

    async def _drain(self) -> None:
        """Let running tasks finish within the grace period, then cancel and release the rest."""
        if not self.running:
            return
        jobs = [job for _, job in self.running.values()]
        deadline = time.monotonic() + self._grace
        if self._grace > 0:
            await asyncio.wait(jobs, timeout=max(0.0, deadline - time.monotonic()))
        left = list(self.running.values())
        for _task, job in left:
            job.cancel("the worker is stopping")
        if left:
            await asyncio.gather(*(job for _, job in left), return_exceptions=True)
        for task, _job in left:
            with contextlib.suppress(LeaseLostError):
                await asyncio.to_thread(self.queue.release, task)
                self.released += 1
            self.running.pop(task.id, None)
