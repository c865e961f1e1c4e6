"""Code executors behind the ``python`` tool: the live kernel and an isolated subprocess.

Both implement ``async run(code, *, context=None) -> ExecResult``.

* :class:`LiveKernelExecutor` runs code in the IPython user namespace (or a given dict), so the
  agent sees and creates the user's variables. The code runs in a worker thread, which keeps
  the kernel's event loop (and with it the widget's comms) responsive; ``fork``/``wait`` are
  injected while agent code runs and call back into the run's loop. Stopping the agent raises
  :class:`CodeInterrupted` inside the running code. Output is routed per thread: the agent's
  stdout, stderr and ``display()`` calls (the shell's display publisher, so ``plt.show()`` too)
  are captured into the :class:`ExecResult`, while the user's own cells keep printing normally.
  Changed names are names bound to a new object, plus names the code mentions whose object
  changed in place, detected by a cheap fingerprint taken before and after (see
  :func:`fingerprint`; values too large to hash are compared by shape/length only).
* :class:`SubprocessExecutor` runs code in a fresh ``python -I`` with an address-space limit
  (``RLIMIT_AS``), a wall-clock timeout (the process group is killed) and API-key-looking
  variables (and any variable holding such a value) removed from its environment. ``fork``/``wait``
  are not available there: calling them raises a clear ``RuntimeError`` (use the live executor for nested agents).
"""

from __future__ import annotations

import abc
import ast
import asyncio
import contextlib
import ctypes
import functools
import json
import linecache
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.engine.capture import (
    MAX_OUTPUT,
    Capture,
    ThreadOutput,
    attach,
    bundle_text,
    current_output,
    keep_bundle,
)
from agentstack_lab.engine.provenance import Journal
from agentstack_lab.redaction import SECRET_HINTS, clip, redact, redact_cut, secret_values
from agentstack_lab.validation import as_dict, seconds_text

if TYPE_CHECKING:
    from agentstack_lab.engine.sandbox import DryRunLimits, DryRunResult

__all__ = ["ExecResult", "ExecContext", "Executor", "LiveKernelExecutor", "SubprocessExecutor",
           "CodeInterrupted", "make_executor", "secret_values", "redact"]

_INJECTED = ("fork", "wait")
class CodeInterrupted(BaseException):  # noqa: N818 - raised inside user code, reads best as-is
    """Raised inside running agent code when its agent is stopped."""


@dataclass(kw_only=True)
class ExecResult:
    """What running a piece of code produced."""

    stdout: str = ""
    stderr: str = ""
    result: str | None = None  # text/plain form of the last expression's value
    result_data: dict[str, Any] = field(default_factory=dict[str, Any])  # other MIME forms of that value (text/html, ...)
    display: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # display() outputs: MIME bundles, in order
    error: str | None = None  # "NameError: name 'x' is not defined"
    traceback: str | None = None
    changed_names: list[str] = field(default_factory=list[str])  # names created, rebound or changed in place
    deleted_names: list[str] = field(default_factory=list[str])
    changes: list[dict[str, str]] = field(default_factory=list[dict[str, str]])  # provenance: name, action, before, after
    not_snapshotted: list[str] = field(default_factory=list[str])  # mentioned names too big to copy: undo cannot restore them
    files: dict[str, int] = field(default_factory=dict[str, int])  # files the code opened: read, written, modified

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_text(self, limit: int = 8000, secrets: Sequence[str] = ()) -> str:
        """A compact text form for the model: ``secrets`` redacted first, then cut to ``limit`` characters."""
        parts: list[str] = []
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr}")
        shown = [bundle_text(b) for b in self.display]
        if shown:
            parts.append("display:\n" + "\n".join(shown))
        if self.result is not None:
            parts.append(f"result:\n{self.result}")
        if self.error:
            parts.append(f"error:\n{self.traceback or self.error}")
        if self.changed_names:
            parts.append("names created or changed: " + ", ".join(self.changed_names))
        if self.deleted_names:
            parts.append("names deleted: " + ", ".join(self.deleted_names))
        text = "\n".join(parts) or "(no output)"
        return clip(text, limit, secrets)

    def to_dict(self) -> dict[str, Any]:
        return {"stdout": self.stdout, "stderr": self.stderr, "result": self.result, "resultData": self.result_data,
                "display": self.display, "error": self.error, "traceback": self.traceback,
                "changedNames": self.changed_names, "deletedNames": self.deleted_names,
                "changes": self.changes, "notSnapshotted": self.not_snapshotted, "files": self.files}


@dataclass(kw_only=True)
class ExecContext:
    """Callables the engine gives running code: ``fork(prompt, type=None)`` and ``wait(handle, timeout=None)``.

    They are called from the worker thread and must be thread-safe (the engine's use
    ``asyncio.run_coroutine_threadsafe`` back to the run's loop).
    """

    fork: Callable[..., Any] | None = None
    wait: Callable[..., Any] | None = None
    agent_id: str | None = None
    run_id: str | None = None
    call_id: str | None = None  # the tool call, for provenance
    secrets: Sequence[str] = ()  # redacted from captured output before it is capped at MAX_OUTPUT


class Executor(abc.ABC):
    """The interface: ``await executor.run(code, context=...)``."""

    name = "executor"
    supports_fork = False
    supports_dry_run = False
    dry_run_first = False  # run a dry run before asking for approval (config ``approval.dry_run``)

    @abc.abstractmethod
    async def run(self, code: str, *, context: ExecContext | None = None) -> ExecResult:
        """Run ``code`` and return what it printed, displayed, returned and raised."""

    def undo_plan(self, code: str) -> list[str]:
        """Names ``code`` mentions that are too big to snapshot (undo could not restore them): none here."""
        return []

    async def dry_run(self, code: str, *, secrets: Sequence[str] = (), limits: DryRunLimits | None = None) -> DryRunResult:
        """What ``code`` would do, found in a sandbox without changing anything (the live executor has one)."""
        raise RuntimeError(f"the {self.name} executor has no dry run; it needs the live kernel executor")


def make_executor(kind: str | Executor | None) -> Executor:
    """An executor from its name (``"live"`` or ``"subprocess"``) or an executor instance."""
    if isinstance(kind, Executor):
        return kind
    if kind in (None, "live"):
        return LiveKernelExecutor()
    if kind == "subprocess":
        return SubprocessExecutor()
    raise ValueError(f"unknown executor {kind!r}; expected 'live' or 'subprocess'")


def _split_last_expr(code: str, filename: str) -> tuple[Any, Any]:
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        tail = tree.body.pop()
        assert isinstance(tail, ast.Expr)
        last = ast.Expression(tail.value)
    return compile(tree, filename, "exec"), (compile(last, filename, "eval") if last is not None else None)


def _user_traceback(exc: BaseException, filename: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    start = next((i for i, f in enumerate(frames) if f.filename == filename), 0)
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames[start:]),
             *traceback.format_exception_only(type(exc), exc)]
    return "".join(lines)


def _truncate(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` redacted, then capped at :data:`MAX_OUTPUT` characters (in that order: no half secret survives)."""
    text = redact(text, secrets)
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n…(output truncated)…"


# --- file accounting (the resource monitor's files read/written/modified) -------------------------
def file_access_kind(event: str, args: tuple[Any, ...]) -> str | None:
    """``read``, ``written`` or ``modified`` for an audit event that touches a file, else ``None``.

    ``open`` with mode ``r`` reads, ``w``/``x`` writes (creates or truncates), ``a`` or ``+`` modifies;
    ``os.remove``/``os.rename``/``shutil.*`` modify. Interpreter files (the stdlib, site-packages,
    bytecode, the agent's own pseudo-files) are not the agent's doing and are not counted.
    """
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if not isinstance(path, str | bytes | os.PathLike) or isinstance(path, int):
            return None
        name = os.fsdecode(cast("str | bytes | os.PathLike[str]", path))
        if name.startswith(_INTERPRETER_PREFIXES) or "__pycache__" in name or name.startswith("<"):
            return None
        if isinstance(mode, str):
            return "modified" if ("a" in mode or "+" in mode) else "written" if ("w" in mode or "x" in mode) else "read"
        flags = flags if isinstance(flags, int) else 0
        if flags & (os.O_WRONLY | os.O_RDWR):
            return "modified" if flags & (os.O_APPEND | os.O_RDWR) else "written"
        return "read"
    if event in ("os.remove", "os.rename", "os.truncate", "shutil.copyfile", "shutil.move", "shutil.rmtree"):
        return "modified"
    return None


_INTERPRETER_PREFIXES = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix, "/dev/", "/proc/"})


@functools.cache
def _install_thread_audit_hook() -> None:
    """Install (once per process: audit hooks cannot be removed) a hook counting file access per thread.

    It counts only on a thread with a capture attached (the live executor's worker thread while agent
    code runs, see ``capture.attach``), so the user's own cells and other agents' threads are not attributed.
    """

    def hook(event: str, args: tuple[Any, ...]) -> None:
        output = current_output()
        if output is None or output.auditing:
            return
        output.auditing = True  # file_access_kind must not count itself
        try:
            kind = file_access_kind(event, args)
            if kind is not None:
                output.files[kind] += 1
        except Exception:  # noqa: BLE001, S110 - an audit hook must never break the audited code
            pass
        finally:
            output.auditing = False

    sys.addaudithook(hook)


# --- live kernel ---------------------------------------------------------------------------------
def _thread_context() -> ExecContext:
    out = current_output()
    ctx = out.context if out is not None else None
    if ctx is None:
        raise RuntimeError("fork()/wait() can only be called from code an agent runs with the python tool")
    return ctx


def fork(prompt: str, type: str | None = None) -> Any:  # noqa: A002 - the seed's spelling
    """Start a nested agent from agent code; returns a handle for :func:`wait`."""
    ctx = _thread_context()
    if ctx.fork is None:
        raise RuntimeError("fork() is not available in this run")
    return ctx.fork(prompt, type=type)


def wait(handle: Any, timeout: float | None = None) -> str:
    """Block until the forked agent finishes and return its result (raises if it failed)."""
    ctx = _thread_context()
    if ctx.wait is None:
        raise RuntimeError("wait() is not available in this run")
    return ctx.wait(handle, timeout=timeout)


class LiveKernelExecutor(Executor):
    """Runs code in the live IPython user namespace (or ``namespace`` when there is no IPython)."""

    name = "live"
    supports_fork = True
    supports_dry_run = hasattr(os, "fork")

    def __init__(self, shell: Any = None, *, namespace: dict[str, Any] | None = None, timeout: float | None = None,
                 journal: Journal | None = None):
        self._shell = shell
        self._namespace = namespace
        self.timeout = timeout
        self._capture = Capture()
        self._inject_lock = threading.Lock()
        self._active = 0
        self._saved_names: dict[str, Any] = {}
        self._counter = 0
        # provenance and undo of what agent code changes; a kernel's runs may share one (the notebook does)
        self.journal = journal if journal is not None else Journal(ignore=_INJECTED)

    @property
    def shell(self) -> Any:
        if self._shell is None and self._namespace is None:
            try:
                from IPython import get_ipython

                self._shell = get_ipython()
            except ImportError:  # pragma: no cover - IPython is a dependency
                self._shell = None
            if self._shell is None:
                self._namespace = {"__name__": "__main__"}
        return self._shell

    @property
    def namespace(self) -> dict[str, Any]:
        shell = self.shell
        return shell.user_ns if shell is not None and self._namespace is None else self._namespace  # type: ignore[return-value]

    def undo_plan(self, code: str) -> list[str]:
        """Names ``code`` mentions whose values are too big to snapshot (the approval card lists them)."""
        return self.journal.plan(self.namespace, code)

    async def dry_run(self, code: str, *, secrets: Sequence[str] = (), limits: DryRunLimits | None = None) -> DryRunResult:
        """Run ``code`` in a sandboxed copy-on-write fork of this process (:mod:`~agentstack_lab.engine.sandbox`).

        The namespace is never touched; the fork is made from a worker thread, so the kernel stays responsive.
        """
        from agentstack_lab.engine.sandbox import dry_run

        if not self.supports_dry_run:
            raise RuntimeError("a dry run needs os.fork (Linux)")
        return await asyncio.to_thread(dry_run, self.namespace, code, shell=self.shell, secrets=secrets, limits=limits)

    async def run(self, code: str, *, context: ExecContext | None = None) -> ExecResult:
        """Run ``code`` in a worker thread; stopping the caller interrupts the code."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[ExecResult] = loop.create_future()
        self._counter += 1
        filename = f"<agent-python-{self._counter}>"

        def deliver(exc: BaseException | None, res: ExecResult | None) -> None:
            if not done.done():
                done.set_exception(exc) if exc is not None else done.set_result(res)  # type: ignore[arg-type]

        def target() -> None:
            exc: BaseException | None = None
            res: ExecResult | None = None
            try:
                res = self._run_sync(code, context, filename)
            except BaseException as e:  # noqa: BLE001 - delivered to the awaiting task
                exc = e
            with contextlib.suppress(RuntimeError):  # the loop may be gone after a stop
                loop.call_soon_threadsafe(deliver, exc, res)

        thread = threading.Thread(target=target, name=f"agentstack-code{self._counter}", daemon=True)
        thread.start()
        try:
            return await asyncio.wait_for(asyncio.shield(done), self.timeout)
        except asyncio.CancelledError:
            self._interrupt(thread)
            raise
        except TimeoutError:  # like the subprocess executor: the model sees it, the agent goes on
            self._interrupt(thread)
            limit = seconds_text(self.timeout) if self.timeout is not None else "its limit"
            return ExecResult(error=f"TimeoutError: code ran longer than {limit} and was interrupted")

    @staticmethod
    def _interrupt(thread: threading.Thread) -> None:
        if thread.is_alive() and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(CodeInterrupted))

    def _inject(self, ns: dict[str, Any]) -> None:
        with self._inject_lock:
            if self._active == 0:
                for name, fn in zip(_INJECTED, (fork, wait), strict=True):
                    if name in ns and ns[name] is not fn:
                        self._saved_names[name] = ns[name]
                    ns[name] = fn
            self._active += 1

    def _uninject(self, ns: dict[str, Any]) -> None:
        with self._inject_lock:
            self._active -= 1
            if self._active == 0:
                for name, fn in zip(_INJECTED, (fork, wait), strict=True):
                    if ns.get(name) is fn:
                        if name in self._saved_names:
                            ns[name] = self._saved_names.pop(name)
                        else:
                            del ns[name]

    def _format(self, value: Any) -> tuple[str, dict[str, Any]]:
        shell = self.shell
        if shell is not None:
            data, _ = shell.display_formatter.format(value)
            return str(data.get("text/plain", repr(value))), {k: v for k, v in keep_bundle(data).items()
                                                             if k != "text/plain"}
        display: dict[str, Any] = {}
        html = getattr(value, "_repr_html_", None)
        if callable(html):
            with contextlib.suppress(Exception):
                rendered = html()
                if rendered:
                    display["text/html"] = rendered
        return repr(value), display

    def _run_sync(self, code: str, context: ExecContext | None, filename: str) -> ExecResult:
        ns = self.namespace
        res = ExecResult()
        thread = threading.current_thread()
        context = context or ExecContext()
        captured = ThreadOutput(display=res.display, context=context)
        attach(thread, captured)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        pending = self.journal.begin(ns, code)
        self._inject(ns)
        _install_thread_audit_hook()
        try:
            with self._capture(self.shell):
                try:
                    body, last = _split_last_expr(code, filename)
                    exec(body, ns)
                    if last is not None:
                        value = eval(last, ns)
                        if value is not None:
                            res.result, res.result_data = self._format(value)
                except (Exception, CodeInterrupted, SystemExit) as exc:
                    res.error = f"{type(exc).__name__}: {exc}".rstrip(": ")
                    res.traceback = _user_traceback(exc, filename)
        finally:
            self._uninject(ns)
            attach(thread, None)
        if captured.dropped:
            captured.stderr.write(f"({captured.dropped} more display outputs not kept)\n")
        hidden = context.secrets
        res.stdout = _truncate(captured.stdout.getvalue(), hidden)
        res.stderr = _truncate(captured.stderr.getvalue(), hidden)
        res.files = dict(captured.files)
        changes = self.journal.finish(pending, ns, run_id=context.run_id, agent_id=context.agent_id,
                                      call_id=context.call_id, secrets=hidden)
        res.changed_names = [c.name for c in changes if c.action != "deleted"]
        res.deleted_names = [c.name for c in changes if c.action == "deleted"]
        res.changes = [{"name": c.name, "action": c.action, "before": c.before, "after": c.after} for c in changes]
        res.not_snapshotted = list(pending.too_big)
        return res


# --- subprocess ----------------------------------------------------------------------------------

_RUNNER = r'''
import ast, json, linecache, os, resource, sys, traceback
report, mem = sys.argv[1], int(sys.argv[2])
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
code = sys.stdin.read()
FN = "<agent-python>"
linecache.cache[FN] = (len(code), None, code.splitlines(True), FN)
def _unsupported(*a, **k):
    raise RuntimeError("fork()/wait() are not available in the subprocess executor; "
                       "use the live kernel executor (executor='live') for nested agents")
ns = {"__name__": "__main__", "fork": _unsupported, "wait": _unsupported}
out = {"result": None, "result_data": {}, "error": None, "traceback": None}
FILES = {"read": 0, "written": 0, "modified": 0, "on": 1}
SKIP = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix, "/dev/", "/proc/"})
def _audit(event, args):
    if not FILES["on"]:
        return
    FILES["on"] = 0
    try:
        kind = None
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            name = os.fsdecode(args[0]); mode = args[1]; flags = args[2] if isinstance(args[2], int) else 0
            if not (name.startswith(SKIP) or "__pycache__" in name or name.startswith("<")):
                if isinstance(mode, str):
                    kind = "modified" if ("a" in mode or "+" in mode) else "written" if ("w" in mode or "x" in mode) else "read"
                elif flags & (os.O_WRONLY | os.O_RDWR):
                    kind = "modified" if flags & (os.O_APPEND | os.O_RDWR) else "written"
                else:
                    kind = "read"
        elif event in ("os.remove", "os.rename", "os.truncate", "shutil.copyfile", "shutil.move", "shutil.rmtree"):
            kind = "modified"
        if kind:
            FILES[kind] += 1
    finally:
        FILES["on"] = 1
sys.addaudithook(_audit)
try:
    tree = ast.parse(code, FN, "exec")
    last = ast.Expression(tree.body.pop().value) if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, FN, "exec"), ns)
    if last is not None:
        value = eval(compile(last, FN, "eval"), ns)
        if value is not None:
            out["result"] = repr(value)
            html = getattr(value, "_repr_html_", None)
            if callable(html):
                try:
                    out["result_data"]["text/html"] = html()
                except Exception:
                    pass
except BaseException as exc:
    out["error"] = (type(exc).__name__ + ": " + str(exc)).rstrip(": ")
    frames = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in frames if f.filename == FN] or frames
    out["traceback"] = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + \
        "".join(traceback.format_exception_only(type(exc), exc))
finally:
    FILES["on"] = 0
    sys.stdout.flush(); sys.stderr.flush()
    out["files"] = {k: FILES[k] for k in ("read", "written", "modified")}
    out["changed_names"] = sorted(k for k in ns if not k.startswith("_") and k not in ("fork", "wait"))
    with open(report, "w") as fh:
        json.dump(out, fh, default=repr)
'''


class SubprocessExecutor(Executor):
    """Runs code in an isolated ``python -I`` with a timeout and a memory limit."""

    name = "subprocess"
    supports_fork = False

    def __init__(self, timeout: float = 30, memory_mb: int = 512, *, python: str | None = None):
        if timeout <= 0:
            raise ValueError(f"SubprocessExecutor: timeout must be > 0, got {timeout}")
        if memory_mb < 0:
            raise ValueError(f"SubprocessExecutor: memory_mb must be >= 0 (0 = no limit), got {memory_mb}")
        self.timeout = float(timeout)
        self.memory_mb = int(memory_mb)
        self.python = python or sys.executable

    @staticmethod
    def _env() -> dict[str, str]:
        """The parent's environment without secrets: secret-looking names, and any value holding a secret."""
        known = secret_values()
        long = [s for s in known if len(s) >= 20]  # API-key sized: safe to look for inside other values
        return {k: v for k, v in os.environ.items() if not any(h in k.upper() for h in SECRET_HINTS)
                and v.strip() not in known and not any(s in v for s in long)}

    async def run(self, code: str, *, context: ExecContext | None = None) -> ExecResult:
        """Run ``code`` in a new interpreter; the process group is killed on timeout or cancellation."""
        fd, report = tempfile.mkstemp(prefix="agentstack-exec-", suffix=".json")
        os.close(fd)
        try:
            proc = await asyncio.create_subprocess_exec(
                self.python, "-I", "-c", _RUNNER, report, str(self.memory_mb * 1024 * 1024),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, env=self._env())
            assert proc.stdin is not None
            proc.stdin.write(code.encode())
            proc.stdin.close()
            hidden = context.secrets if context is not None else ()
            readers = [asyncio.ensure_future(_read_limited(proc.stdout, hidden)),
                       asyncio.ensure_future(_read_limited(proc.stderr, hidden))]
            timed_out = False
            try:
                await asyncio.wait_for(proc.wait(), self.timeout)
            except TimeoutError:
                timed_out = True
                _kill_group(proc)
                await proc.wait()
            except asyncio.CancelledError:
                _kill_group(proc)
                for r in readers:
                    r.cancel()
                raise
            stdout, stderr = await asyncio.gather(*readers)
            res = ExecResult(stdout=stdout, stderr=stderr)
            data: dict[str, Any] = {}
            with contextlib.suppress(OSError, ValueError):
                with open(report) as fh:
                    text = fh.read()
                data = json.loads(text) if text else {}
            res.result, res.result_data = data.get("result"), data.get("result_data") or {}
            res.error, res.traceback = data.get("error"), data.get("traceback")
            res.changed_names = list(data.get("changed_names") or [])
            res.files = {str(k): int(v) for k, v in as_dict(data.get("files")).items()}
            if timed_out:
                res.error = f"TimeoutError: code ran longer than {seconds_text(self.timeout)} and was killed"
            elif res.error and res.error.startswith("MemoryError"):
                res.error = f"MemoryError: the code hit the {self.memory_mb} MB memory limit"
            elif not data and proc.returncode:
                sig = -proc.returncode if proc.returncode < 0 else None
                res.error = (f"the subprocess was killed by {signal.Signals(sig).name}" if sig
                             else f"the subprocess exited with code {proc.returncode}")
                if sig == signal.SIGKILL and self.memory_mb:
                    res.error += f" (memory limit {self.memory_mb} MB?)"
            return res
        finally:
            with contextlib.suppress(OSError):
                os.unlink(report)


async def _read_limited(stream: Any, secrets: Sequence[str] = ()) -> str:
    """A pipe's text, read to the end but kept to about :data:`MAX_OUTPUT` characters, secrets redacted."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        if size < MAX_OUTPUT:
            chunks.append(chunk)
        size += len(chunk)
    text = b"".join(chunks).decode("utf-8", "replace")
    if size <= MAX_OUTPUT:
        return _truncate(text, secrets)
    return redact_cut(text, secrets)[:MAX_OUTPUT] + "\n…(output truncated)…"


def _kill_group(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
