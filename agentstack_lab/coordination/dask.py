"""Placing queued tasks on a Dask cluster: one Dask task per queued task, run by a one-task queue worker.

The durable queue stays the one path (docs/tasks.md): a coordinator with a :class:`DaskPlacement`
still enqueues every task in the workspace database and waits for the *row* to finish; instead of
spawning in-process workers it submits, per task, a Dask task that opens the same workspace (the
SQLite file on a filesystem the workers share, or the team's PostgreSQL for memory) and runs
:meth:`~agentstack_lab.coordination.worker.Worker.run_one` for that task id: a lease, a heartbeat,
complete or fail exactly once, as any ``agentstack-lab worker`` would. What runs the task (an agent)
is the engine's function, handed in as ``run_task`` (a module-level function, so Dask pickles it by
reference); this layer never imports the engine.

A Dask worker lost mid-task: Dask reschedules the Dask task on another worker (its own
``allowed-failures``, 3 losses per task by default). Every attempt logs on the scheduler which Dask
worker runs which queue worker (:func:`announce_attempt`, topic ``agentstack-queue-task``), so the
retry asks the scheduler whether the row's holder is still in the cluster
(:func:`lost_dask_worker`) and, when it is gone, takes the task over at once instead of waiting up to
``lease_s`` (30 s by default) for its lease to expire; the result names the lost worker, and the
coordinator reports it. A holder that is not a Dask worker (an ``agentstack-lab worker`` process
that claimed first) keeps its lease: the Dask task waits for its result, or for its lease to expire.

Dask and ``distributed`` are an optional extra: ``pip install 'agentstack-lab[dask]'``.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["ClusterError", "DaskPlacement", "TOPIC", "announce_attempt", "check_address", "connect_cluster",
           "import_distributed", "lost_dask_worker", "shared_local_cluster"]

log = logging.getLogger(__name__)

TOPIC = "agentstack-queue-task"
"""Scheduler event topic: one ``{taskId, queueWorker, daskWorker}`` per attempt of a placed task."""


class ClusterError(AgentstackError, RuntimeError):
    """The Dask cluster cannot be used: extra missing, scheduler unreachable or a bad address."""


def import_distributed() -> Any:
    """``distributed``, or a :class:`ClusterError` naming the extra to install."""
    try:
        import distributed
    except ImportError:
        raise ClusterError("a Dask cluster needs the dask extra: pip install 'agentstack-lab[dask]'") from None
    return distributed


def check_address(address: Any) -> None:
    """A clear error unless ``address`` is ``"local"``, ``scheme://host:port`` or a connected client."""
    if isinstance(address, str):
        if address != "local" and "://" not in address:
            raise ClusterError(f"cluster address must look like tcp://host:8786 or be 'local', got {address!r}")
    elif not hasattr(address, "submit"):
        raise ClusterError(f"cluster must be an address (tcp://host:8786), 'local' or a distributed.Client, "
                           f"got {type(address).__name__}")


def connect_cluster(address: str, *, n_workers: int = 2, timeout: float | None = None) -> tuple[Any, Any]:
    """``(client, local_cluster_or_None)`` for ``address`` (``"local"`` starts a LocalCluster of processes).

    ``timeout`` (seconds) defaults to dask's ``distributed.comm.timeouts.connect`` (30 s unless configured);
    a scheduler not reached by then is a :class:`ClusterError`.
    """
    check_address(address)
    distributed = import_distributed()
    if address == "local":
        cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        return distributed.Client(cluster), cluster
    try:
        return distributed.Client(address, timeout=timeout if timeout is not None else _connect_timeout()), None
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {_one_line(exc)}") from None


def _connect_timeout() -> float:
    import dask.config
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect", "30s"), default="seconds"))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _SharedLocal:
    """The process's one LocalCluster for coordinated runs (``cluster="local"``), started on first use.

    The one piece of process state here, on purpose: a LocalCluster of two worker processes takes
    seconds to start (each worker a fresh interpreter importing distributed), so a kernel that runs
    coordinated runs one after another should pay that once, not per run. Closed at interpreter exit.
    """

    def __init__(self) -> None:
        self.cluster: Any = None
        self.lock = threading.Lock()
        self.hooked = False

    def get(self, n_workers: int) -> Any:
        with self.lock:
            if self.cluster is None or getattr(self.cluster.status, "name", "") in ("closing", "closed", "failed"):
                distributed = import_distributed()
                self.cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                                        dashboard_address=None)
                if not self.hooked:
                    atexit.register(self.close)
                    self.hooked = True
            return self.cluster

    def close(self) -> None:
        with self.lock:
            cluster, self.cluster = self.cluster, None
        if cluster is not None:
            try:
                cluster.close()
            except Exception as exc:  # noqa: BLE001 - at exit: the worker processes are ours and go anyway
                log.debug("agentstack-lab: closing the shared LocalCluster failed: %s", exc)


_SHARED = _SharedLocal()


def shared_local_cluster(n_workers: int = 2) -> Any:
    """This process's LocalCluster for coordinated runs: started on first call, then reused; closed at exit."""
    return _SHARED.get(n_workers)


def announce_attempt(task_id: str, queue_worker: str) -> str | None:
    """Inside a Dask task: log which Dask worker runs ``queue_worker``; its address (``None`` outside Dask)."""
    try:
        worker = import_distributed().get_worker()
    except ValueError:
        return None
    worker.log_event(TOPIC, {"taskId": task_id, "queueWorker": queue_worker, "daskWorker": worker.address})
    return worker.address


def lost_dask_worker(queue_worker: str) -> str | None:
    """Inside a Dask task: the address of the Dask worker that ran ``queue_worker``, if it left the cluster.

    ``None`` when it is still a member, or when ``queue_worker`` never ran on this cluster (an
    ``agentstack-lab worker`` process): only the lease can tell about those.
    """
    client = import_distributed().get_client()
    where = next((ev.get("daskWorker") for _, ev in reversed(client.get_events(TOPIC))
                  if isinstance(ev, dict) and ev.get("queueWorker") == queue_worker), None)
    if where is None:
        return None
    return None if where in client.scheduler_info(n_workers=-1)["workers"] else where


class DaskPlacement:
    """Submit one Dask task per queued task: ``run_task(task_id, *args)`` on some worker.

    Args:
        cluster: a scheduler address, ``"local"`` (the process's shared LocalCluster of ``n_workers``
            processes, see :func:`shared_local_cluster`) or a connected ``distributed.Client`` (left open).
        run_task: the module-level function a Dask worker runs for one task id.
        args: the rest of ``run_task``'s arguments (the workspace to open, the lease).
        retries: Dask retries of a Dask task that raised (``run_task`` reports errors in its result).
    """

    def __init__(self, cluster: Any, run_task: Callable[..., Any], args: tuple[Any, ...] = (), *,
                 n_workers: int = 2, retries: int = 1):
        check_address(cluster)
        self.cluster = cluster
        self.run_task = run_task
        self.args = args
        self.n_workers = n_workers
        self.retries = retries
        self.client: Any = None
        self._local: Any = None
        self._own = isinstance(cluster, str)
        self.futures: dict[str, Any] = {}  # held: Dask forgets a task whose future is dropped
        self._lock = threading.Lock()

    def connect(self) -> Any:
        """The client (connecting, or starting the process's shared LocalCluster, on first use; blocking)."""
        with self._lock:
            if self.client is None:
                if self.cluster == "local":
                    self.client = import_distributed().Client(shared_local_cluster(self.n_workers))
                elif self._own:
                    self.client, self._local = connect_cluster(self.cluster, n_workers=self.n_workers)
                else:
                    self.client = self.cluster
            return self.client

    @property
    def address(self) -> str:
        """The scheduler's address (for messages and task metadata)."""
        return getattr(getattr(self.client, "scheduler", None), "address", None) or str(self.cluster)

    def place(self, task: Any) -> None:
        """Submit the Dask task that runs queued ``task`` (connecting first if needed)."""
        client = self.connect()
        fut = client.submit(self.run_task, task.id, *self.args, key=f"agentstack-task-{task.id}",
                            pure=False, retries=self.retries)
        fut.add_done_callback(_log_failure)
        self.futures[task.id] = fut

    def close(self) -> None:
        """Cancel what is still scheduled and close the client this placement opened (the shared LocalCluster stays)."""
        with self._lock:
            futures, self.futures = list(self.futures.values()), {}
            if self.client is not None and futures:
                try:
                    self.client.cancel([f for f in futures if not f.done()])
                except Exception as exc:  # noqa: BLE001 - a closing cluster: the queue rows are cleared anyway
                    log.debug("agentstack-lab: cancelling Dask tasks failed: %s", exc)
            if self._own and self.client is not None:
                self.client.close()
                if self._local is not None:
                    self._local.close()
                self.client = self._local = None


def _log_failure(fut: Any) -> None:
    if fut.status == "error":  # (fut.exception() would block the client's loop: this runs on it)
        log.warning("agentstack-lab: Dask task %s failed; its queued task finishes through the queue (lease)",
                    fut.key)
