"""Fresh IPython kernels forked from a pre-warmed template process (a "zygote").

Starting an ipykernel costs ~0.5 s of CPU, most of it importing IPython, ipykernel, tornado and
zmq. The zygote is a Python process that has done those imports and nothing else (no sockets, no
threads, no event loop). On request it forks; the child starts a brand-new ``IPKernelApp`` from
the connection file it was given, so every kernel is a fresh process with an empty namespace — it
shares only the already-imported library code, like copy-on-write pages of a normal start.

The zygote talks JSON lines over its stdin/stdout. ``python -m agentstack_lab.workflows.zygote``
runs it; :class:`Zygote` drives it and :class:`ZygoteKernelManager` is an ``AsyncKernelManager``
whose kernels come from it (so nbclient, interrupts, restarts and dead-kernel polling just work).

Every kernel these managers start, forked or not, has ``faulthandler`` writing to its log, so a kernel
that crashes in native code is reported with its stack; ``python -m agentstack_lab.workflows.zygote
--kernel ARGS`` is ``ipykernel_launcher ARGS`` with that, for a kernel started without the zygote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from functools import cache
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["Zygote", "ZygoteError", "ZygoteKernelManager", "split_kernel_cmd", "main"]

_PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "IPython.core.interactiveshell",
            "IPython.core.completer", "jupyter_client.session", "tornado.ioloop", "zmq.asyncio",
            "comm", "debugpy", "ipykernel.debugger", "IPython.core.debugger", "IPython.core.completerlib",
            "IPython.extensions.storemagic", "IPython.core.history", "sqlite3")


class ZygoteError(AgentstackError, RuntimeError):
    """The zygote could not be started or could not fork a kernel."""


def split_kernel_cmd(kernel_cmd: list[str]) -> tuple[list[str], list[str]] | None:
    """Split ``python [opts] -m ipykernel_launcher ARGS`` into (interpreter, ARGS); None if not one."""
    if not hasattr(os, "fork") or sys.platform == "darwin":
        return None
    for i in range(1, len(kernel_cmd) - 1):
        if kernel_cmd[i] == "-m":
            if kernel_cmd[i + 1] == "ipykernel_launcher":
                return list(kernel_cmd[:i]), list(kernel_cmd[i + 2:])
            return None
    return None


# -- the template process ---------------------------------------------------------------------


def _set_pdeathsig() -> None:
    """Ask Linux to SIGKILL this process when its parent (the zygote) dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - not Linux
        pass


def _faulthandler_to_log() -> None:
    """Have a native crash (SIGSEGV, SIGABRT, ...) write its Python stacks to the kernel's log (its fd 2 now).

    ipykernel does not enable ``faulthandler``, and it replaces fd 2 with a pipe to the notebook, which
    dies with the process: so the handler writes to a copy of fd 2 made before. Without it a kernel that
    crashed left an empty log, and the run said only "kernel died".
    """
    import faulthandler

    faulthandler.enable(file=os.fdopen(os.dup(2), "w"), all_threads=True)   # faulthandler keeps the file


def _drop_script_dir() -> None:
    """Take the working directory off ``sys.path``, as ``ipykernel_launcher`` does (IPython puts '' back)."""
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


def run_kernel(argv: list[str]) -> None:
    """``ipykernel_launcher argv`` with :func:`_faulthandler_to_log` (a kernel started without the zygote)."""
    _drop_script_dir()
    _faulthandler_to_log()
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=list(argv))


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become a fresh kernel process; never returns."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _set_pdeathsig()
        devnull = os.open(os.devnull, os.O_RDWR)
        log = request.get("log")
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log else devnull
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        _faulthandler_to_log()
        if request.get("env") is not None:
            os.environ.clear()
            os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        sys.argv = ["ipykernel_launcher", *request["argv"]]
        from ipykernel.kernelapp import IPKernelApp

        IPKernelApp.launch_instance(argv=list(request["argv"]))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # pragma: no cover - reported through the kernel log
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def main() -> None:
    """Run the zygote: preload, then fork one kernel per request line until stdin closes."""
    _drop_script_dir()
    import importlib

    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    import threading

    if threading.active_count() > 1:  # forking a threaded process is unsafe: refuse to serve
        sys.stdout.write(json.dumps({"ready": False, "error": "preloading started threads"}) + "\n")
        sys.stdout.flush()
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are for kernels, not for us
    _set_pdeathsig()
    reply = sys.stdout
    reply.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    reply.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            pid = os.fork()
        except Exception as exc:
            reply.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
            reply.flush()
            continue
        if pid == 0:
            _child(request)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()


# -- the parent side --------------------------------------------------------------------------


class Zygote:
    """A running template process (started by :meth:`start`, stopped by :meth:`close`)."""

    def __init__(self, interpreter: list[str] | None = None, *, log: str | None = None):
        self.interpreter = list(interpreter or [sys.executable])
        self.log = log
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self, timeout: float = 60.0) -> Zygote:
        """Start the template and wait until its imports are done."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._proc = subprocess.Popen([*self.interpreter, "-m", "agentstack_lab.workflows.zygote"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True, env=env, bufsize=1)
        try:
            line = self._readline(timeout)
            if not line.get("ready"):
                raise ZygoteError(f"zygote did not start: {line}")
        except BaseException:
            self.close()   # never leave a half-started template (or its zombie) behind
            raise
        return self

    def _readline(self, timeout: float) -> dict[str, Any]:
        import selectors

        assert self._proc is not None and self._proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                self.close()
                raise ZygoteError(f"zygote gave no answer within {timeout:.0f}s")
        text = self._proc.stdout.readline()
        if not text:
            raise ZygoteError(f"zygote exited (code {self._proc.poll()})")
        try:
            return json.loads(text)
        except ValueError:
            raise ZygoteError(f"zygote answered with something else than JSON: {text.strip()[:200]!r}") from None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def spawn(self, argv: list[str], *, cwd: str | None, env: dict[str, str] | None, log: str | None = None) -> int:
        """Fork a kernel running ``ipykernel_launcher argv`` (its own output to ``log``); return its pid."""
        if not self.alive:
            raise ZygoteError("zygote is not running")
        assert self._proc is not None and self._proc.stdin is not None
        request = {"argv": list(argv), "cwd": str(cwd) if cwd else None, "env": env, "log": log or self.log}
        with self._lock:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            answer = self._readline(30.0)
        if "pid" not in answer:
            raise ZygoteError(f"zygote could not fork: {answer.get('error')}")
        return int(answer["pid"])

    def close(self) -> None:
        """Stop the template (kernels it forked die with it, via PR_SET_PDEATHSIG)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except Exception:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


class _ForkedProcess:
    """The ``Popen`` surface LocalProvisioner uses, for a process that is not our child."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1
            except PermissionError:  # pragma: no cover - pid reused by another user
                self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.01)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


@cache
def _provisioner_class():
    from jupyter_client.provisioning.local_provisioner import LocalProvisioner

    class ZygoteProvisioner(LocalProvisioner):
        """LocalProvisioner whose ``launch_kernel`` forks from a zygote instead of exec'ing."""

        zygote: Zygote | None = None
        log: str | None = None

        async def launch_kernel(self, cmd: list[str], **kwargs: Any):
            split = split_kernel_cmd(cmd)
            if split is None:
                return await super().launch_kernel(cmd, **kwargs)
            if self.zygote is None or split[0] != self.zygote.interpreter:
                if split[0][0] == sys.executable:   # this interpreter: it has agentstack_lab to run the kernel
                    cmd = [*split[0], "-m", "agentstack_lab.workflows.zygote", "--kernel", *split[1]]
                return await super().launch_kernel(cmd, **kwargs)
            pid = self.zygote.spawn(split[1], cwd=kwargs.get("cwd"), env=kwargs.get("env"), log=self.log)
            self.process = _ForkedProcess(pid)  # type: ignore[assignment]
            self.pid = self.pgid = pid
            self.cwd = kwargs.get("cwd") or os.getcwd()
            return self.connection_info

    return ZygoteProvisioner


@cache
def _manager_class():
    import uuid

    from jupyter_client.manager import AsyncKernelManager

    class _ZygoteKernelManager(AsyncKernelManager):
        zygote: Zygote | None = None
        kernel_log: str | None = None

        async def _async_pre_start_kernel(self, **kw: Any):
            if self.provisioner is None:
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
                prov = _provisioner_class()(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
                prov.zygote, prov.log = self.zygote, self.kernel_log
                self.provisioner = prov
            return await super()._async_pre_start_kernel(**kw)

    return _ZygoteKernelManager


def ZygoteKernelManager(zygote: Zygote | None, *, kernel_log: str | None = None, **kwargs: Any):  # noqa: N802
    """An ``AsyncKernelManager`` whose kernel is forked from ``zygote`` (its own output to ``kernel_log``).

    Without a zygote the kernel starts as usual, with :func:`run_kernel` in place of ``ipykernel_launcher``
    when it is a plain ipykernel of this interpreter.
    """
    km = _manager_class()(**kwargs)
    km.zygote, km.kernel_log = zygote, kernel_log
    return km


if __name__ == "__main__":
    if sys.argv[1:2] == ["--kernel"]:
        run_kernel(sys.argv[2:])
    else:
        main()
