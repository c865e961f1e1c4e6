"""A dry run of agent code in a sandboxed copy-on-write fork of the live kernel (Linux).

:func:`dry_run` is called inside the kernel process: it forks, and the child runs the code against
its copy of the namespace while the real one is never touched. Before the code runs the child
closes every inherited descriptor (the kernel's ZMQ sockets included) except its result pipe, puts
``/dev/null`` on stdio, and applies what the running Linux offers, each reported by name in
:attr:`DryRunResult.protections`:

* ``network``: a new network namespace (``unshare(CLONE_NEWNET)``; a user namespace first when not
  root), so no interface is up;
* ``landlock``: writes only in a scratch folder; reads only beneath the Python installation,
  ``sys.path``, system folders and the kernel's working folder (its top-level entries, hidden ones
  such as ``.ssh`` or ``.env`` excluded); TCP bind/connect refused and signals to processes outside
  the sandbox refused where the Landlock ABI has them;
* ``seccomp``: refuses ``kill``/``tgkill`` to other processes, ``ptrace``, process-memory access,
  sockets other than ``AF_UNIX``, new processes (threads are allowed), ``exec``, namespaces, mounts
  and other kernel-level calls (x86_64 only);
* ``rlimits``: CPU seconds, address space (what the kernel uses plus a budget), file size, no core
  dumps, and a process count where the kernel enforces it (not for root: seccomp guards there);
* ``timeout``: the parent kills the child after a wall-clock limit.

The child reports over its pipe: names created / changed / deleted with provenance's value-free
summaries (:func:`~agentstack_lab.engine.provenance.summarise`), its stdout/stderr and error (bounded),
the files it opened and the calls the sandbox refused. The report is written by the sandboxed
process itself, so code that sets out to forge it can: a dry run informs a person, it does not
certify hostile code. A ``MAP_SHARED`` mapping the kernel holds stays shared with the child.

Only the standard library and the engine's light provenance helpers are imported here.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import ctypes
import errno
import functools
import io
import json
import os
import platform
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from agentstack_lab.engine.capture import mentioned_names
from agentstack_lab.engine.provenance import Journal, Pending, summarise
from agentstack_lab.redaction import redact

__all__ = ["DryRunLimits", "DryRunResult", "dry_run", "protections", "REFUSED_ERRNOS"]

OUTPUT_CHARS = 20_000  # characters of stdout / stderr / traceback a dry run keeps
MAX_ITEMS = 200  # files opened / calls refused kept
REPORT_BYTES = 4 * 1024 * 1024  # a child's report longer than this is cut off (and the child killed)
REFUSED_ERRNOS = frozenset({errno.EPERM, errno.EACCES, errno.EROFS, errno.ENETUNREACH, errno.ENOSYS})
_FILENAME = "<agent-dry-run>"
_MAGIC = b"AGENTSTACK-DRY-RUN\n"


@dataclass(frozen=True, kw_only=True)
class DryRunLimits:
    """The child's limits: wall-clock and CPU seconds, memory on top of the kernel's, file size."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    file_mb: int = 64


@dataclass(kw_only=True)
class DryRunResult:
    """What the code would do: namespace changes, output, error, files, refusals, and the protections."""

    protections: dict[str, str] = field(default_factory=dict[str, str])  # name -> "active: …" / "unavailable: …"
    changes: list[dict[str, str]] = field(default_factory=list[dict[str, str]])  # name, action, before, after
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None
    traceback: str | None = None
    opened: list[dict[str, str]] = field(default_factory=list[dict[str, str]])  # path, access
    refused: list[dict[str, str]] = field(default_factory=list[dict[str, str]])  # call, target, error
    ended: str = "finished"  # finished | timeout | killed by SIGXCPU … | no report
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        """The code finished without an error and the sandbox refused nothing."""
        return self.ended == "finished" and self.error is None and not self.refused

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a surface shows (camelCase keys, as on the wire)."""
        data = asdict(self)
        data["clean"] = self.clean
        return data


# --- the parent: fork, wait with a deadline, read the report --------------------------------------
def dry_run(namespace: dict[str, Any], code: str, *, limits: DryRunLimits | None = None,
            secrets: Sequence[str] = (), shell: Any = None, cwd: str | None = None) -> DryRunResult:
    """Run ``code`` in a sandboxed fork against a copy of ``namespace``; ``namespace`` is never touched.

    Blocking (the caller waits up to ``limits.timeout_s`` plus a moment): call it from a worker
    thread of the kernel. ``secrets`` are redacted from everything reported.
    """
    if not hasattr(os, "fork"):
        raise RuntimeError("a dry run needs os.fork (Linux or another POSIX system)")
    limits = limits or DryRunLimits()
    cwd = cwd or os.getcwd()
    scratch = tempfile.mkdtemp(prefix="agentstack-dryrun-")
    read_end, write_end = os.pipe()
    started = time.monotonic()
    try:
        pid = os.fork()
        if pid == 0:  # the child never returns from here
            code_ = 70
            try:
                os.close(read_end)
                _child(namespace, code, write_end, scratch, cwd, limits, shell, secrets)
                code_ = 0
            except BaseException as exc:  # noqa: BLE001 - said in the report, never raised into the kernel's copy
                with contextlib.suppress(BaseException):
                    failed = {"error": f"the sandbox failed: {type(exc).__name__}: {exc}"[:2000]}
                    os.write(write_end, _MAGIC + json.dumps(failed).encode())
            finally:
                os._exit(code_)
        os.close(write_end)
        data, status, timed_out = _collect(pid, read_end, started + limits.timeout_s)
    finally:
        with contextlib.suppress(OSError):
            os.close(read_end)
        shutil.rmtree(scratch, ignore_errors=True)
    res = _result(data, status, timed_out, limits)
    res.seconds = round(time.monotonic() - started, 3)
    return _redacted(res, secrets)


def _collect(pid: int, fd: int, deadline: float) -> tuple[bytes, int, bool]:
    """The child's report and wait status; SIGKILL at ``deadline`` or when the report grows too long."""
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        size += len(chunk)
        if size > REPORT_BYTES:
            break
        chunks.append(chunk)
    if timed_out or size > REPORT_BYTES:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # the pipe closed: the child is exiting; wait for it, killing it if it lingers past the deadline
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return b"".join(chunks), status, timed_out
        if time.monotonic() > deadline + 1:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return b"".join(chunks), status, timed_out
        time.sleep(0.005)


def _result(data: bytes, status: int, timed_out: bool, limits: DryRunLimits) -> DryRunResult:
    report: dict[str, Any] = {}
    at = data.rfind(_MAGIC)
    if at >= 0:
        with contextlib.suppress(ValueError):
            loaded: Any = json.loads(data[at + len(_MAGIC):].decode("utf-8", "replace"))
            report = cast("dict[str, Any]", loaded) if isinstance(loaded, dict) else {}
    res = DryRunResult(**{k: v for k, v in report.items() if k in DryRunResult.__dataclass_fields__})
    if timed_out:
        res.ended = "timeout"
        res.error = f"TimeoutError: the dry run ran longer than {limits.timeout_s:g}s and was killed"
    elif os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        res.ended = f"killed by {sig}"
        why = {"SIGXCPU": f" (CPU limit {limits.cpu_s}s)", "SIGKILL": f" (CPU limit {limits.cpu_s}s or memory)",
               "SIGXFSZ": f" (file size limit {limits.file_mb} MB)", "SIGSYS": " (a refused system call)"}
        res.error = res.error or f"the dry run was killed by {sig}{why.get(sig, '')}"
    elif not report:
        res.ended = "no report"
        res.error = res.error or f"the dry run ended (exit status {os.waitstatus_to_exitcode(status)}) without a report"
    res.protections.setdefault("timeout", f"active: killed after {limits.timeout_s:g}s")
    return res


def _redacted(res: DryRunResult, secrets: Sequence[str]) -> DryRunResult:
    if not secrets:
        return res
    for name in ("stdout", "stderr", "result", "error", "traceback"):
        value = getattr(res, name)
        if isinstance(value, str):
            setattr(res, name, redact(value, secrets))
    res.opened = [{k: redact(v, secrets) for k, v in o.items()} for o in res.opened]
    res.refused = [{k: redact(v, secrets) for k, v in o.items()} for o in res.refused]
    return res


_PROBED: dict[str, str] = {}


def protections(refresh: bool = False) -> dict[str, str]:
    """Which protections a dry run gets in this process, by name (a trivial dry run, once per process)."""
    if refresh or not _PROBED:
        _PROBED.clear()
        _PROBED.update(dry_run({}, "pass", limits=DryRunLimits(timeout_s=10)).protections)
    return dict(_PROBED)


# --- the child ------------------------------------------------------------------------------------
class _Bounded(io.TextIOBase):
    """A text stream keeping the first :data:`OUTPUT_CHARS` characters and counting the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def write(self, s: str) -> int:
        if self.size < OUTPUT_CHARS:
            self.parts.append(s[: OUTPUT_CHARS - self.size])
        self.size += len(s)
        return len(s)

    def writable(self) -> bool:
        return True

    def text(self) -> str:
        out = "".join(self.parts)
        return out + (f"\n…({self.size - OUTPUT_CHARS} more characters)" if self.size > OUTPUT_CHARS else "")


def _child(ns: dict[str, Any], code: str, pipe: int, scratch: str, cwd: str, limits: DryRunLimits,
           shell: Any, secrets: Sequence[str]) -> None:
    """In the forked child: isolate, run ``code`` on the copy of ``ns``, write the report, return."""
    report: dict[str, Any] = {"protections": {}}
    prot: dict[str, str] = report["protections"]
    with contextlib.suppress(OSError):
        os.setsid()  # its own process group: kill(0, …) reaches no one else
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)  # the kernel's event loop's wakeup descriptor is about to be closed
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too big a file is an EFBIG error, not death
    prot["descriptors"] = _close_descriptors(pipe)
    prot["network"] = _isolate_network()
    prot["landlock"] = _landlock(scratch, cwd)
    prot["seccomp"] = _seccomp()
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    calls = _Calls()
    calls.install(ns)
    stdout, stderr = _Bounded(), _Bounded()
    sys.stdout, sys.stderr = stdout, stderr  # type: ignore[assignment]
    sys.__stdout__, sys.__stderr__ = stdout, stderr  # type: ignore[misc]
    _neutralise_shell(shell, stdout)
    journal = Journal(ignore=("fork", "wait"))
    names = [n for n in mentioned_names(code) if n in ns]
    before = {n: summarise(ns[n], secrets, n) for n in names}
    pending = Pending(before=dict(ns), prints=_prints(ns, names), copies={})
    for name, fn in (("fork", _unavailable), ("wait", _unavailable)):
        ns[name] = fn
    prot["rlimits"] = _rlimits(limits, seccomp_active=prot["seccomp"].startswith("active"))
    real_builtins: dict[str, Any] = builtins.__dict__
    saved_builtins = dict(real_builtins)
    calls.on = True
    try:
        tree = ast.parse(code, _FILENAME, "exec")
        last = None
        tail = tree.body[-1] if tree.body else None
        if isinstance(tail, ast.Expr):
            tree.body.pop()
            last = compile(ast.Expression(tail.value), _FILENAME, "eval")
        exec(compile(tree, _FILENAME, "exec"), ns)
        if last is not None:
            value = eval(last, ns)
            if value is not None:
                report["result"] = summarise(value, secrets) if _big(value) else _text(value, shell)
    except BaseException as exc:  # noqa: BLE001 - everything the code raises is reported
        report["error"] = f"{type(exc).__name__}: {exc}".rstrip(": ")[:OUTPUT_CHARS]
        report["traceback"] = _trimmed_traceback(exc)
        if isinstance(exc, OSError) and exc.errno in REFUSED_ERRNOS:
            calls.refuse("(uncaught)", getattr(exc, "filename", None) or "", exc)
    finally:
        calls.on = False
        real_builtins.update(saved_builtins)  # the report below needs the real len, str, … whatever the code replaced
    for name in ("fork", "wait"):
        ns.pop(name, None)
    changes = journal.finish(pending, ns, secrets=secrets)
    report["changes"] = [{"name": c.name, "action": c.action,
                          "before": before.get(c.name, c.before) if c.action != "created" else c.before,
                          "after": c.after} for c in changes]
    report["stdout"], report["stderr"] = stdout.text(), stderr.text()
    report["opened"], report["refused"] = calls.opened, calls.refused
    blob = _MAGIC + json.dumps(report, default=str).encode()
    view = memoryview(blob)
    while view:
        view = view[os.write(pipe, view):]


def _unavailable(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("fork()/wait() are not available in a dry run: nested agents start only for real")


def _prints(ns: dict[str, Any], names: list[str]) -> dict[str, Any]:
    from agentstack_lab.engine.capture import fingerprint

    return {n: fingerprint(ns[n]) for n in names}


def _big(value: Any) -> bool:
    return hasattr(value, "shape") and not isinstance(value, type)


def _text(value: Any, shell: Any) -> str:
    try:
        formatter = getattr(shell, "display_formatter", None)
        text = str(formatter.format(value)[0].get("text/plain")) if formatter is not None else repr(value)
    except Exception:  # noqa: BLE001 - a broken repr is shown as the type
        text = type(value).__name__
    return text[:OUTPUT_CHARS]


def _trimmed_traceback(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    start = next((i for i, f in enumerate(frames) if f.filename == _FILENAME), 0)
    frames = frames[start:]
    if len(frames) > 12:
        frames = traceback.StackSummary.from_list([*frames[:4], *frames[-8:]])
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + \
        "".join(traceback.format_exception_only(type(exc), exc))
    return text[-OUTPUT_CHARS:]


def _neutralise_shell(shell: Any, stdout: _Bounded) -> None:
    """``display()`` and ``input()`` would talk to the kernel's sockets: keep displays as text, refuse input."""
    pub = getattr(shell, "display_pub", None)
    if pub is not None:
        def publish(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            stdout.write(str((data or {}).get("text/plain", "[display]")) + "\n")

        pub.publish = publish
        pub.clear_output = _ignore

    def no_input(*args: Any, **kwargs: Any) -> str:
        raise EOFError("no input in a dry run")

    builtins.input = no_input


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


def _close_descriptors(keep: int) -> str:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 65536))
    closed = 0
    for fd in fds:
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)
                closed += 1
    return f"active: {closed} inherited descriptors closed (the kernel's sockets included), stdio on /dev/null"


# --- Linux protections through libc (Python 3.11 has no os.unshare) --------------------------------
@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> str:
    err = ctypes.get_errno()
    return f"unavailable: {what} failed ({errno.errorcode.get(err, err)}: {os.strerror(err)})"


def _isolate_network() -> str:
    new_net, new_user = 0x40000000, 0x10000000
    unshare = getattr(os, "unshare", None)
    attempts = [new_net] if os.geteuid() == 0 else [new_user | new_net]
    attempts += [new_user | new_net] if os.geteuid() == 0 else []
    for flags in attempts:
        if unshare is not None:
            try:
                unshare(flags)
                return "active: new network namespace (no interface up)" + (
                    " inside a user namespace" if flags & new_user else "")
            except OSError:
                continue
        if _libc().unshare(flags) == 0:
            return "active: new network namespace (no interface up)" + (
                " inside a user namespace" if flags & new_user else "")
    return _fail("unshare(CLONE_NEWNET)")


_PR_SET_NO_NEW_PRIVS = 38
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446  # the same on x86_64 and aarch64
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | (1 << 14)  # | TRUNCATE
_SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev",
                    "/run/systemd/resolve")


def _readable_roots(cwd: str) -> tuple[list[str], list[str]]:
    """Folders readable beneath (Python, ``sys.path``, system), and the kernel's cwd's visible entries."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *_SYSTEM_READABLE}
    real_cwd = os.path.realpath(cwd)
    for entry in sys.path:
        path = os.path.realpath(entry or cwd)
        if path != real_cwd and os.path.exists(path):
            roots.add(path)
    entries: list[str] = []
    with contextlib.suppress(OSError):
        entries = [os.path.join(real_cwd, n) for n in sorted(os.listdir(real_cwd))[:2000] if not n.startswith(".")]
    return sorted(roots), entries


def _landlock(scratch: str, cwd: str) -> str:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return _fail("landlock_create_ruleset")
    fs = (1 << 13) - 1  # EXECUTE … MAKE_SYM (ABI 1)
    fs |= (1 << 13) if abi >= 2 else 0  # REFER
    fs |= (1 << 14) if abi >= 3 else 0  # TRUNCATE
    net = 0b11 if abi >= 4 else 0  # BIND_TCP | CONNECT_TCP
    scoped = 0b11 if abi >= 6 else 0  # ABSTRACT_UNIX_SOCKET | SIGNAL
    attr = struct.pack("=QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(_LL_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return _fail("landlock_create_ruleset")
    read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR

    def allow(path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= _FS_FILE_RIGHTS
            rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & fs, fd), 12)
            libc.syscall(_LL_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0))
        finally:
            os.close(fd)

    try:
        roots, entries = _readable_roots(cwd)
        for root in roots:
            allow(root, read)
        allow(os.path.realpath(cwd), _FS_READ_DIR)
        for entry in entries:
            allow(entry, read)
        allow(os.path.realpath(scratch), fs)
        allow(os.devnull, _FS_READ_FILE | _FS_WRITE_FILE | (1 << 14))
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_LL_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    extra = (", TCP bind/connect refused" if net else "") + (", signals outside the sandbox refused" if scoped else "")
    return (f"active (ABI {abi}): writes only in the scratch folder; reads only beneath Python, sys.path, system "
            f"folders and the kernel's folder without its hidden entries{extra}")


# seccomp-bpf, x86_64: a hand-built filter (no libseccomp needed)
_X86_64 = 0xC000003E
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_DENY_X86_64 = {  # syscall numbers refused with EPERM
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_open": 434,
    "pidfd_send_signal": 424, "pidfd_getfd": 438, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249,
    "kcmp": 312, "open_by_handle_at": 304, "name_to_handle_at": 303, "swapon": 167, "swapoff": 168,
    "acct": 163, "settimeofday": 164, "clock_settime": 227, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "syslog": 103, "fanotify_init": 300, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "mount_setattr": 442, "quotactl": 179,
}


def _seccomp_program(pid: int) -> list[tuple[int, int, int, int]]:
    eperm = _ERRNO | errno.EPERM
    prog: list[tuple[int, int, int, int]] = [
        (_LD, 0, 0, 4), (_JEQ, 1, 0, _X86_64), (_RET, 0, 0, eperm),  # another architecture: refuse
        (_LD, 0, 0, 0), (_JGE, 0, 1, 0x40000000), (_RET, 0, 0, eperm)]  # x32 system calls: refuse
    for nr in sorted(_DENY_X86_64.values()):
        prog += [(_JEQ, 0, 1, nr), (_RET, 0, 0, eperm)]
    prog += [(_JEQ, 0, 1, 435), (_RET, 0, 0, _ERRNO | errno.ENOSYS)]  # clone3: libc falls back to clone
    # signals only to itself: kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo (first argument = pid)
    for nr in (62, 200, 234, 129, 297):
        prog += [(_JEQ, 0, 6, nr), (_LD, 0, 0, 16), (_JEQ, 0, 2, pid), (_LD, 0, 0, 20),
                 (_JEQ, 1, 0, 0), (_RET, 0, 0, eperm), (_RET, 0, 0, _ALLOW)]
    prog += [(_JEQ, 0, 4, 56), (_LD, 0, 0, 16), (_JSET, 1, 0, 0x10000),  # clone: threads only (CLONE_THREAD)
             (_RET, 0, 0, eperm), (_RET, 0, 0, _ALLOW)]
    prog += [(_JEQ, 0, 4, 41), (_LD, 0, 0, 16), (_JEQ, 1, 0, 1),  # socket: AF_UNIX only
             (_RET, 0, 0, eperm), (_RET, 0, 0, _ALLOW)]
    prog.append((_RET, 0, 0, _ALLOW))
    return prog


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _seccomp() -> str:
    if platform.machine() != "x86_64":
        return f"unavailable: the filter is written for x86_64, this is {platform.machine()}"
    libc = _libc()
    prog = _seccomp_program(os.getpid())
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return _fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        return _fail("prctl(PR_SET_SECCOMP)")
    return ("active: signals only to itself; no ptrace, process-memory access, new processes, exec, sockets "
            "other than AF_UNIX, namespaces, mounts, modules, bpf or io_uring")


def _rlimits(limits: DryRunLimits, *, seccomp_active: bool) -> str:
    import resource

    parts: list[str] = []

    def cap(kind: int, value: int, label: str) -> None:
        hard = resource.getrlimit(kind)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(kind, (value, hard if kind != resource.RLIMIT_CPU else value + 1))
            parts.append(label)
        except (OSError, ValueError) as exc:
            parts.append(f"{label.split()[0]} not set ({exc})")

    cap(resource.RLIMIT_CPU, limits.cpu_s, f"CPU {limits.cpu_s}s")
    cap(resource.RLIMIT_AS, _address_space() + limits.memory_mb * 1024 * 1024, f"memory +{limits.memory_mb} MB")
    cap(resource.RLIMIT_FSIZE, limits.file_mb * 1024 * 1024, f"file size {limits.file_mb} MB")
    cap(resource.RLIMIT_CORE, 0, "no core dumps")
    if os.getuid() == 0:
        parts.append("process count not enforced for root" + (" (seccomp refuses new processes)"
                                                              if seccomp_active else ""))
    else:
        cap(resource.RLIMIT_NPROC, _tasks_of(os.getuid()) + 32, "process count +32")
    return "active: " + ", ".join(parts)


def _address_space() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _tasks_of(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{name}/task"))
    return count


# --- what the code opened, and what the sandbox refused -------------------------------------------
class _Calls:
    """Files opened (audit hook) and refused calls (wrappers that watch the call's ``OSError``)."""

    def __init__(self) -> None:
        self.on = False
        self.opened: list[dict[str, str]] = []
        self.refused: list[dict[str, str]] = []
        self._busy = False
        self._skip: tuple[str, ...] = ()

    def install(self, ns: dict[str, Any]) -> None:
        """Hook this process (the child's copy), and the namespace's own ``open`` (IPython puts one there)."""
        self._skip = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix, "/dev/", "/proc/", "/sys/"})
        sys.addaudithook(self._audit)
        import socket

        for owner, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "kill"), (os, "killpg"),
                            (os, "fork"), (os, "system"), (os, "posix_spawn"), (os, "execv"), (os, "execve"),
                            (os, "remove"), (os, "unlink"), (os, "mkdir"), (os, "rename"), (signal, "pthread_kill"),
                            (socket.socket, "connect"), (socket.socket, "connect_ex"), (socket.socket, "bind"),
                            (socket.socket, "__init__"), (socket, "create_connection")):
            original = getattr(owner, name, None)
            if original is not None:
                setattr(owner, name, self._watch(original, f"{getattr(owner, '__name__', owner)}.{name}"))
        if callable(ns.get("open")):
            ns["open"] = self._watch(ns["open"], "open")
        with contextlib.suppress(ImportError):
            import _posixsubprocess  # subprocess.Popen's fork and exec

            _posixsubprocess.fork_exec = self._watch(_posixsubprocess.fork_exec, "subprocess")  # type: ignore[attr-defined]

    def _watch(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        calls = self

        def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except OSError as exc:
                if calls.on and exc.errno in REFUSED_ERRNOS:
                    calls.refuse(label, _target(label, args), exc)
                raise

        watched.__wrapped__ = fn  # type: ignore[attr-defined]
        watched.__name__ = getattr(fn, "__name__", label)
        return watched

    def refuse(self, call: str, target: Any, exc: BaseException) -> None:
        if len(self.refused) < MAX_ITEMS:
            item = {"call": call, "target": str(target)[:300], "error": f"{type(exc).__name__}: {exc}"[:300]}
            if item not in self.refused:
                self.refused.append(item)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on or self._busy or event != "open" or len(self.opened) >= MAX_ITEMS:
            return
        self._busy = True
        try:
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, str | bytes):
                name = os.fsdecode(path)
                if not (name.startswith(self._skip) or "__pycache__" in name or name.startswith("<")):
                    writes = (isinstance(mode, str) and any(c in mode for c in "wxa+")) or (
                        isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
                    self.opened.append({"path": name[:500], "access": "write" if writes else "read"})
        except Exception:  # noqa: BLE001, S110 - an audit hook must never break the audited code
            pass
        finally:
            self._busy = False


def _target(label: str, args: tuple[Any, ...]) -> str:
    if label.startswith("socket.") and len(args) >= 2:
        return repr(args[1])
    if label == "subprocess" and len(args) >= 2:
        return repr(args[1])[:300]
    return repr(args[0])[:300] if args else ""
