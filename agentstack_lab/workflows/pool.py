"""Kernels started ahead of time, each used for exactly one run and then discarded.

A :class:`KernelPool` keeps ``size`` ready kernels (manager + connected client). ``acquire()``
hands one out and starts a replacement in the background; ``discard()`` kills a used kernel, so
no run ever sees another run's variables or imports. With ``fork=True`` (the default where
possible) kernels are forked from a pre-warmed :class:`~agentstack_lab.workflows.zygote.Zygote`,
which makes a fresh kernel cost a fraction of a normal start.

A kernel's files (its process log and its connection file) go to the temporary folder and are removed
when it is discarded, or to ``scratch`` when given: the Dask pool passes its worker's own directory,
which Dask removes even when the worker was killed (a killed worker left 3 logs and 3 connection files
in /tmp per test run, as nothing of it ran to discard them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["KernelLease", "KernelPool", "start_kernel"]


@dataclass
class KernelLease:
    """A started kernel: its manager, a connected client, the kernel name and whether it was forked."""

    km: Any
    kc: Any
    kernel_name: str
    forked: bool = False
    log: str | None = None  # the kernel process's own stdout/stderr (not the cells' output)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines the kernel process wrote (e.g. a fatal error), without ipykernel's notices.

        ipykernel's errors stay, and its "Parent appears to have exited, shutting down".
        A native crash is there too: kernels run with ``faulthandler`` on, which writes the crashing
        thread's Python stack to this log (ipykernel does not turn it on itself).
        """
        try:
            text = Path(self.log).read_text("utf-8", errors="replace") if self.log else ""
        except OSError:
            return ""
        text = text.rsplit("--existing", 1)[-1].split("\n", 1)[-1] if "--existing" in text else text  # banner
        kept = [ln for ln in text.splitlines() if ln.strip() and ("[IPKernelApp]" not in ln or _LOUD.search(ln))]
        crash = next((i for i, ln in enumerate(kept) if ln.startswith("Fatal Python error")), None)
        if crash is not None:   # the error and the crashing thread's innermost frames, not the other threads'
            here = next((i for i in range(crash, len(kept)) if kept[i].startswith("Current thread")), crash)
            frames = list(itertools.takewhile(lambda ln: ln.startswith(" "), kept[here + 1:]))
            return "\n".join([kept[crash], *([kept[here]] if here != crash else []), *frames[:lines]])
        return "\n".join(kept[-lines:])


_LOUD = re.compile(r"\[IPKernelApp\] (ERROR|CRITICAL)\b|shutting down")   # ipykernel's own notices worth quoting


class _PortTaken(RuntimeError):
    """The kernel could not bind a port it was given (another process took it in between)."""


async def start_kernel(kernel_name: str, *, cwd: str | None = None, zygote: Any = None,
                       startup_timeout: float = 60.0, scratch: str | None = None) -> KernelLease:
    """Start one kernel (forked from ``zygote`` when given) and wait until it answers.

    jupyter_client picks free ports, then the kernel binds them; with several kernels starting at
    once another process can take a port in between. That start is retried with new ports (twice).
    ``scratch`` is the folder for the kernel's log and connection file (default: the temporary folder).
    """
    for attempt in range(3):
        try:
            return await _start_once(kernel_name, cwd, zygote, startup_timeout, scratch)
        except _PortTaken as exc:
            if attempt == 2:
                raise RuntimeError(str(exc)) from exc
    raise AssertionError("unreachable")


async def _start_once(kernel_name: str, cwd: str | None, zygote: Any, startup_timeout: float,
                      scratch: str | None = None) -> KernelLease:
    from agentstack_lab.workflows.zygote import ZygoteKernelManager

    # the kernel process's own output (ipykernel's start-up notices, a fatal error) goes to a log
    # file instead of our terminal; a dead kernel's report quotes its tail
    if scratch:
        os.makedirs(scratch, exist_ok=True)
    fd, log = tempfile.mkstemp(prefix="agentstack-kernel-", suffix=".log", dir=scratch)
    # forked from the zygote when there is one; else started as usual (with faulthandler on, see log_tail)
    km = ZygoteKernelManager(zygote, kernel_name=kernel_name, kernel_log=log)
    if scratch:  # else jupyter_client's mkstemp in the temporary folder (removed by cleanup_resources)
        km.connection_file = os.path.join(scratch, f"kernel-{uuid.uuid4().hex}.json")
    try:
        with os.fdopen(fd, "wb") as out:
            await km.start_kernel(cwd=cwd or os.getcwd(), stdout=out, stderr=out)
    except BaseException:
        # the process may be running already (a failure or Ctrl-C after the launch): stop it too
        await discard_kernel(KernelLease(km=km, kc=None, kernel_name=kernel_name, log=log))
        raise
    kc = km.client()
    kc.start_channels()
    forked = type(getattr(km.provisioner, "process", None)).__name__ == "_ForkedProcess"
    lease = KernelLease(km=km, kc=kc, kernel_name=kernel_name, forked=forked, log=log)
    try:
        await _wait_ready(km, kc, startup_timeout)
    except BaseException as exc:
        tail = lease.log_tail()
        await discard_kernel(lease)
        if isinstance(exc, RuntimeError) and tail:
            error = _PortTaken if "Address already in use" in tail else RuntimeError
            raise error(f"{exc}; the kernel wrote:\n{tail}") from exc
        raise
    kc.allow_stdin = False
    return lease


async def _wait_ready(km: Any, kc: Any, timeout: float) -> None:
    """Like ``wait_for_ready`` but polling in 50 ms steps: a kernel_info reply, then any IOPub message."""
    from queue import Empty

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    replied = False
    while True:
        if not replied:
            kc.kernel_info()
        try:
            if not replied:
                msg = await kc.shell_channel.get_msg(timeout=0.05)
                replied = msg["msg_type"] == "kernel_info_reply"
                if replied:
                    kc._handle_kernel_info_reply(msg)
            else:
                await kc.iopub_channel.get_msg(timeout=0.05)
                return
        except Empty:
            if replied:  # IOPub not subscribed yet: ask again so the kernel publishes a status
                replied = False
        if not await km.is_alive():
            raise RuntimeError("kernel died before replying to kernel_info")
        if loop.time() > deadline:
            raise RuntimeError(f"kernel did not answer within {timeout:.0f}s")


async def discard_kernel(lease: KernelLease) -> None:
    """Stop a used kernel at once (it is never reused) and release its resources."""
    with contextlib.suppress(Exception):
        lease.kc.stop_channels()
    with contextlib.suppress(Exception):
        if await lease.km.is_alive():
            await lease.km.shutdown_kernel(now=True)
    with contextlib.suppress(Exception):
        await lease.km.cleanup_resources()
    if lease.log:
        Path(lease.log).unlink(missing_ok=True)


class KernelPool:
    """A pool of ready, never-reused kernels.

    Args:
        size: How many kernels to keep ready.
        kernel_name: Kernelspec name (``python3`` by default).
        cwd: Working directory the kernels start in.
        fork: Fork kernels from a zygote when the kernelspec is a plain ipykernel (falls back to
            ordinary starts otherwise, or if the zygote cannot start).
        total: Start at most this many kernels over the pool's life (a batch knows how many it needs).
        scratch: Folder for the kernels' logs and connection files (default: the temporary folder).
    """

    def __init__(self, size: int = 2, kernel_name: str = "python3", *, cwd: str | None = None,
                 fork: bool = True, startup_timeout: float = 60.0, total: int | None = None,
                 scratch: str | None = None):
        if size < 1:
            raise ValueError(f"pool size must be >= 1, got {size}")
        self.size = size
        self.kernel_name = kernel_name
        self.cwd = cwd or os.getcwd()
        self.fork = fork
        self.startup_timeout = startup_timeout
        self.zygote: Any = None
        self._ready: asyncio.Queue[KernelLease | BaseException] = asyncio.Queue()
        self._tasks: set[asyncio.Task] = set()
        self._closed = False
        self.started = 0
        self.total = total
        self.scratch = scratch
        self._scheduled = 0

    async def start(self) -> KernelPool:
        """Start the zygote (if forking) and the first ``size`` kernels in the background."""
        if self.fork:
            self.zygote = await asyncio.to_thread(self._start_zygote)
        for _ in range(self.size):
            self._refill()
        return self

    def _start_zygote(self) -> Any:
        from jupyter_client.kernelspec import KernelSpecManager

        from agentstack_lab.workflows.zygote import Zygote, ZygoteError, split_kernel_cmd

        try:
            spec = KernelSpecManager().get_kernel_spec(self.kernel_name)
        except Exception:  # no such kernel: each run reports it when its kernel fails to start
            return None
        split = split_kernel_cmd(spec.argv)
        if split is None:
            return None
        try:
            return Zygote(split[0]).start(timeout=self.startup_timeout)
        except (ZygoteError, OSError):
            return None

    def _refill(self) -> None:
        if self._closed or (self.total is not None and self._scheduled >= self.total):
            return
        self._scheduled += 1

        async def one() -> None:
            try:
                lease = await start_kernel(self.kernel_name, cwd=self.cwd, zygote=self.zygote,
                                           startup_timeout=self.startup_timeout, scratch=self.scratch)
            except BaseException as exc:  # handed to the next acquire()
                await self._ready.put(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            self.started += 1
            if self._closed:
                await discard_kernel(lease)
            else:
                await self._ready.put(lease)

        task = asyncio.ensure_future(one())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def acquire(self) -> KernelLease:
        """Take a ready kernel (waiting for one if needed); a replacement starts at once."""
        if self._closed:
            raise RuntimeError("kernel pool is closed")
        item = await self._ready.get()
        self._refill()
        if isinstance(item, BaseException):
            raise RuntimeError(f"kernel {self.kernel_name!r} failed to start: {item}") from item
        if not await item.km.is_alive():  # died while waiting: skip it, start one more
            await discard_kernel(item)
            if self.total is not None:
                self.total += 1
                self._refill()
            return await self.acquire()
        return item

    def discard(self, lease: KernelLease) -> asyncio.Task:
        """Kill a used kernel in the background (it is never handed out again)."""
        task = asyncio.ensure_future(discard_kernel(lease))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Stop every kernel the pool holds, then the zygote."""
        self._closed = True
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.startup_timeout)
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if isinstance(item, KernelLease):
                await discard_kernel(item)
        if self.zygote is not None:
            await asyncio.to_thread(self.zygote.close)
            self.zygote = None

    async def __aenter__(self) -> KernelPool:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
