"""The kernel pool of one Dask worker: a ``distributed.WorkerPlugin`` that owns a :class:`KernelPool`.

Without it every run sent to a worker would start its own pool (a zygote, then a kernel): ~1-2 s
of start-up per run on this machine, paid by every task. The plugin starts one pool when the
worker starts (or when the plugin is registered), keeps ``size`` kernels ready, and closes it when
the worker closes (teardown), so a run on a worker takes an already started kernel. Each kernel is
still used for exactly one run and then discarded: the pool's guarantee, unchanged.

The pool lives on its own event loop in a thread of the worker process (its asyncio objects belong
to that loop); a Dask task (which runs in one of the worker's task threads) hands its run to that
loop and blocks on the answer. Each result carries ``pool`` statistics taken from what happened:
which pool (id), in which process, which zygote the kernel was forked from, and the how-manieth run
of that pool this was, so a caller can see the run was served by its worker's pool.

This module imports ``distributed`` at import time: it is imported only by the cluster code
(``workflows/cluster.py``), which has checked that the dask extra is installed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import uuid
from concurrent.futures import Future
from dataclasses import asdict
from pathlib import Path
from typing import Any

from distributed import WorkerPlugin

from agentstack_lab.workflows.execute import run_notebook
from agentstack_lab.workflows.pool import KernelPool

__all__ = ["KernelPoolPlugin", "plugin_name"]

START_TIMEOUT = 120.0


def plugin_name(kernel_name: str, fork: bool, cwd: str | None) -> str:
    """One plugin (one pool per worker) per kernel, fork mode and working directory."""
    digest = hashlib.sha1(f"{kernel_name}\0{fork}\0{cwd}".encode()).hexdigest()[:10]
    return f"agentstack-kernel-pool-{digest}"


class _Recording:
    """The pool as ``run_notebook`` sees it, remembering the kernel the run was given."""

    def __init__(self, pool: KernelPool):
        self.pool = pool
        self.kernel_name = pool.kernel_name
        self.cwd = pool.cwd
        self.lease: Any = None

    async def acquire(self) -> Any:
        self.lease = await self.pool.acquire()
        return self.lease

    def discard(self, lease: Any) -> Any:
        return self.pool.discard(lease)


class KernelPoolPlugin(WorkerPlugin):
    """A per-worker :class:`KernelPool` (``size`` ready kernels), started on setup and closed on teardown.

    Args:
        kernel_name: the pool's kernelspec (a notebook needing another kernel gets its own start).
        fork: fork kernels from a zygote (see :mod:`agentstack_lab.workflows.zygote`).
        cwd: the kernels' working directory (default: the worker's).
        size: kernels kept ready per worker.
    """

    def __init__(self, *, kernel_name: str = "python3", fork: bool = True, cwd: str | None = None, size: int = 2):
        self.name = plugin_name(kernel_name, fork, cwd)
        self.kernel_name, self.fork, self.cwd, self.size = kernel_name, fork, cwd, size
        self._reset()

    def _reset(self) -> None:
        self.id: str | None = None
        self.pool: KernelPool | None = None
        self.served = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._count = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # sent to the workers before setup: settings only
        return {"name": self.name, "kernel_name": self.kernel_name, "fork": self.fork, "cwd": self.cwd,
                "size": self.size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def _submit(self, coro: Any) -> Future:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def setup(self, worker: Any = None) -> None:
        """Start the pool's loop thread, then the pool (zygote and first kernels) without blocking the worker."""
        self.id = uuid.uuid4().hex[:12]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"agentstack-kernel-pool-{self.id}")
        self._thread.start()
        # the kernels' logs and connection files live in the worker's own directory, which Dask
        # removes when the worker closes and, for a killed worker, when its next worker starts
        scratch = os.path.join(worker.local_directory, "agentstack-kernels") if worker is not None else None
        pool = KernelPool(self.size, self.kernel_name, cwd=self.cwd, fork=self.fork, scratch=scratch)
        self.pool = await asyncio.wrap_future(self._submit(pool.start()))

    async def teardown(self, worker: Any = None) -> None:
        """Stop every kernel of the pool and its zygote, then the loop thread."""
        if self._loop is None:
            return
        if self.pool is not None:
            await asyncio.wrap_future(self._submit(self.pool.close()))
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)
        self._loop.close()
        self._reset()

    def stats(self) -> dict[str, Any]:
        """The pool's identity and counters (``served``: runs it handed a kernel to)."""
        zygote = getattr(self.pool, "zygote", None)
        proc = getattr(zygote, "_proc", None)
        return {"id": self.id, "pid": os.getpid(), "size": self.size, "served": self.served,
                "kernelsStarted": getattr(self.pool, "started", 0),
                "zygotePid": getattr(proc, "pid", None)}

    def run(self, notebook: str, parameters: dict[str, Any], output: Path, report: Path, *,
            kernel_name: str | None = None, cell_timeout: float | None = None,
            timeout: float | None = None) -> dict[str, Any]:
        """Run one notebook on a fresh kernel of this pool (blocking the calling task thread)."""
        if self.pool is None:
            raise RuntimeError(f"kernel pool plugin {self.name} is not set up on this worker")
        view = _Recording(self.pool)
        res = self._submit(run_notebook(notebook, parameters=parameters, output=output, report_path=report,
                                        kernel_name=kernel_name, cwd=self.cwd, cell_timeout=cell_timeout,
                                        timeout=timeout, pool=view)).result()
        with self._count:
            if view.lease is not None:
                self.served += 1
            stats = self.stats()
        stats["run"] = stats["served"] if view.lease is not None else None  # None: not a pooled kernel
        stats["forked"] = bool(getattr(view.lease, "forked", False))
        return {"result": asdict(res), "pool": stats}
