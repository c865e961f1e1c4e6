"""Workflow batches on a Dask cluster: each run a Dask task, on a fresh pooled kernel of some worker.

``run_batch_on_cluster(specs, cluster="tcp://scheduler:8786")`` (or ``"local"``: the process's one
``distributed.LocalCluster`` of worker processes, shared with coordinated runs and started on first
use, see :func:`~agentstack_lab.coordination.dask.shared_local_cluster`; two batches in one Python
process use one scheduler and find the first batch's warm kernel pools) submits one task per run. Each worker holds a
kernel pool (:class:`~agentstack_lab.workflows.dask_pool.KernelPoolPlugin`, a ``WorkerPlugin``
registered for the batch's kernel, fork mode and working directory; it stays registered, so the
next batch on that cluster finds warm kernels, and workers that join later start one too). On its
worker a task runs its notebook on a fresh kernel of that pool (never reused), writes the executed
notebook and report into a scratch folder of the worker, and returns their bytes with the pool's
statistics (``ClusterRun.pool``), so the caller writes them where the spec says: workers need no
shared disk.

A worker lost mid-batch (killed, out of memory, machine gone): Dask reschedules its tasks on the
other workers (``distributed.scheduler.allowed-failures`` such losses per task, 3 by default); a run
that raised is retried ``retries`` times (Dask's ``retries=``). Every attempt logs an event on the
scheduler, so each result says how many attempts it took and on which workers (``attempts``,
``workers``). A run whose every attempt was lost is reported as an error (exit 2), never dropped.

Dask and ``distributed`` are an optional extra: ``pip install 'agentstack-lab[dask]'``.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.coordination.dask import (
    ClusterError,
    connect_cluster,
    import_distributed,
    shared_local_cluster,
)
from agentstack_lab.workflows.batch import RunSpec, notebook_kernel
from agentstack_lab.workflows.execute import RunResult

if TYPE_CHECKING:
    from agentstack_lab.workflows.dask_pool import KernelPoolPlugin

__all__ = ["ClusterError", "ClusterRun", "run_batch_on_cluster", "connect_cluster", "ensure_pool"]

EVENT_TOPIC = "agentstack-workflow-attempt"
DONE_TOPIC = "agentstack-workflow-done"
"""Scheduler event topic: one ``{key, worker}`` per run that finished its notebook (never executed again)."""


@dataclass(frozen=True, kw_only=True)
class ClusterRun:
    """One run's result plus where it ran: ``attempts`` > 1 means a worker was lost or the run retried."""

    result: RunResult
    attempts: int = 1
    workers: list[str] = field(default_factory=list)
    pool: dict[str, Any] | None = None  # the serving worker's pool: id, pid, zygotePid, run (its n-th run)
    scheduler: str | None = None  # the Dask scheduler's address the batch ran on

    @property
    def repeated(self) -> bool:
        """The notebook was executed more than once: it was in flight on a lost worker (or raised and was retried)."""
        return self.attempts > 1


def _run_on_worker(spec: dict[str, Any], options: dict[str, Any], key: str, plugin: str) -> dict[str, Any]:
    """The task: one run on this worker's kernel pool; returns the result, the files' bytes and the pool's stats."""
    from distributed import get_worker

    worker = get_worker()
    done = _finished_on(key)
    if done is not None:  # it finished on a worker lost before its result was fetched: never run twice
        return {"finishedOn": done}
    worker.log_event(EVENT_TOPIC, {"key": key, "worker": worker.address})
    pool = cast("KernelPoolPlugin | None", worker.plugins.get(plugin))   # distributed types it WorkerPlugin
    if pool is None:  # the plugin is registered before any task is submitted, on every worker
        raise RuntimeError(f"worker {worker.address} has no kernel pool ({plugin})")
    # in the worker's own directory: Dask removes it even when this worker is killed mid-run
    with tempfile.TemporaryDirectory(prefix="agentstack-dask-", dir=worker.local_directory) as tmp:
        output, report = Path(tmp) / "out.ipynb", Path(tmp) / "report.json"
        got = pool.run(spec["notebook"], spec["parameters"], output, report, **options)
        files = {name: p.read_bytes() for name, p in (("output", output), ("report", report)) if p.exists()}
    worker.log_event(DONE_TOPIC, {"key": key, "worker": worker.address})
    return {**got, "files": files, "worker": worker.address}


def _finished_on(key: str) -> str | None:
    """Inside a task: the worker on which run ``key`` already finished its notebook, if any."""
    from distributed import get_client

    events = cast("Iterable[tuple[float, Any]]", get_client().get_events(DONE_TOPIC))   # sync client: not awaited
    return next((ev.get("worker") for _, ev in events
                 if isinstance(ev, dict) and ev.get("key") == key), None)


def ensure_pool(client: Any, *, kernel_name: str = "python3", fork: bool = True, cwd: str | None = None,
                size: int = 2) -> str:
    """Register the kernel-pool plugin for these settings unless the cluster has it; returns its name."""
    from agentstack_lab.workflows.dask_pool import KernelPoolPlugin

    plugin = KernelPoolPlugin(kernel_name=kernel_name, fork=fork, cwd=cwd, size=size)
    present = client.run_on_scheduler(_has_plugin, name=plugin.name)
    if not present:
        client.register_plugin(plugin)
    return plugin.name


def _has_plugin(dask_scheduler: Any = None, *, name: str) -> bool:
    return name in getattr(dask_scheduler, "worker_plugins", {})


def _lost(spec: RunSpec, exc: BaseException) -> RunResult:
    return RunResult(notebook=str(spec.notebook), status="error", exit_code=2,
                     message=f"the run was lost on the cluster: {type(exc).__name__}: {exc}",
                     parameters=dict(spec.parameters))


def run_batch_on_cluster(specs: list[RunSpec], *, cluster: str | Any, kernel_name: str | None = None,
                         fork: bool = True, cwd: str | None = None, cell_timeout: float | None = None,
                         timeout: float | None = None, retries: int = 2, n_workers: int = 2,
                         pool_size: int = 2,
                         on_done: Callable[[RunSpec, ClusterRun], None] | None = None) -> list[ClusterRun]:
    """Run ``specs`` as Dask tasks; results in ``specs`` order, every spec reported exactly once.

    ``cluster`` is a scheduler address, ``"local"`` (the process's shared LocalCluster of ``n_workers``
    processes, started by the first user and left running for the next batch or coordinated run;
    closed at interpreter exit), or a connected ``distributed.Client``. Each worker runs its share on
    its own kernel pool of ``pool_size`` ready kernels (``kernel_name``, default the first notebook's
    kernelspec).
    """
    distributed = import_distributed()
    own = not isinstance(cluster, distributed.Client)
    client: Any   # a distributed.Client
    local: Any    # the LocalCluster connect_cluster started, if it did
    if isinstance(cluster, str) and cluster == "local":  # our own client on the shared cluster: the client is closed below, the cluster stays
        client, local = distributed.Client(shared_local_cluster(n_workers)), None
    else:
        client, local = connect_cluster(cluster, n_workers=n_workers) if own else (cluster, None)
    scheduler = getattr(client.scheduler, "address", None)
    batch = uuid.uuid4().hex[:8]
    options = {"kernel_name": kernel_name, "cell_timeout": cell_timeout, "timeout": timeout}
    pooled = kernel_name or (notebook_kernel(specs[0].notebook) if specs else None) or "python3"
    try:
        plugin = ensure_pool(client, kernel_name=pooled, fork=fork,
                             cwd=str(Path(cwd).resolve()) if cwd else None, size=pool_size)
        keys = [f"agentstack-run-{batch}-{i:04d}" for i in range(len(specs))]
        index = {key: i for i, key in enumerate(keys)}
        # only as_completed holds the futures: each is released once its result is here, so a worker
        # lost later does not make Dask compute (run the notebook) again what was already fetched
        done = distributed.as_completed([
            client.submit(_run_on_worker, {"notebook": str(Path(s.notebook).resolve()),
                                           "parameters": dict(s.parameters)}, options, key,
                          plugin, key=key, retries=retries, pure=False)
            for s, key in zip(specs, keys, strict=True)])
        raw: dict[int, dict[str, Any] | BaseException] = {}
        for fut in done:
            i = index[fut.key]
            try:
                raw[i] = fut.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker, a worker crash, a bug: reported as error
                raw[i] = exc
            fut.release()
            del fut
        attempts: dict[str, list[str]] = {}
        for _, ev in client.get_events(EVENT_TOPIC):
            if ev.get("key") in keys:
                attempts.setdefault(ev["key"], []).append(ev["worker"])
        out: list[ClusterRun] = []
        for i, spec in enumerate(specs):
            got = raw[i]
            if isinstance(got, BaseException):
                res = _lost(spec, got)
            elif "finishedOn" in got:
                res = RunResult(notebook=str(spec.notebook), status="error", exit_code=2,
                                message=f"the run finished on worker {got['finishedOn']}, which was lost before its "
                                        "result was fetched; not executed again", parameters=dict(spec.parameters))
            else:
                res = RunResult(**got["result"])
                for name, dest in (("output", spec.output), ("report", spec.report)):
                    if dest is not None and name in got["files"]:
                        Path(dest).parent.mkdir(parents=True, exist_ok=True)
                        Path(dest).write_bytes(got["files"][name])
                res.output = str(spec.output) if spec.output and "output" in got["files"] else None
                res.report_path = str(spec.report) if spec.report and "report" in got["files"] else None
            seen = attempts.get(keys[i], [])
            run = ClusterRun(result=res, attempts=max(1, len(seen)), workers=seen,
                             pool=None if isinstance(got, BaseException) else got.get("pool"), scheduler=scheduler)
            out.append(run)
            if on_done is not None:
                on_done(spec, run)
        return out
    finally:
        if own:
            client.close()
            if local is not None:
                local.close()
