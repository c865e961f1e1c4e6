"""``%memory store|get|search|list|delete|reembed``: the workspace memory from a cell.

Reads return pandas DataFrames (pandas is imported on first use) that display as a readable table
(:mod:`.memory_view`: content beside the key, highlighted matches, the default namespace hidden);
writes print one line; every error, a bad argument included, is one line naming what was wrong.
``%memory reembed`` runs in a thread and returns a :class:`Reembedding` at once (``--wait``: when done),
with a progress bar that follows it; the memory stays searchable meanwhile.
"""

from __future__ import annotations

import dataclasses
import html
import threading
import time
from typing import Any

from IPython.core.error import UsageError

from agentstack_lab.errors import AgentstackError
from agentstack_lab.notebook.args import MagicUsageError, MemoryArgs, OneLineError, parse_memory_line

__all__ = ["MemoryError_", "Reembedding", "run_memory", "run_memory_line", "SEARCH_COLUMNS", "ENTRY_COLUMNS"]

SEARCH_COLUMNS = ["key", "content", "tags", "score", "namespace", "matched", "snippet", "agent_id"]
"""Columns of a search frame; ``snippet`` is HTML (escaped text, matches in ``<mark>``) as ``Memory.search`` gives it."""
ENTRY_COLUMNS = ["key", "content", "tags", "namespace", "agent_id", "version", "created_at", "updated_at"]


class MemoryError_(OneLineError):  # noqa: N801 - "MemoryError" is a builtin
    """A ``%memory`` command failed (shown as one line)."""

    def _render_traceback_(self) -> list[str]:
        return [f"%memory: {self}"]


def _record(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "to_dict"):
        data = obj.to_dict()
    elif isinstance(obj, dict):
        data = dict(obj)
    elif dataclasses.is_dataclass(obj):
        data = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    elif hasattr(obj, "model_dump"):
        data = obj.model_dump()
    else:
        data = dict(vars(obj))
    for key, value in data.items():
        if isinstance(value, (set, frozenset)):
            data[key] = ",".join(sorted(map(str, value)))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            data[key] = ",".join(value)
    return data


def _frame(records: list[dict[str, Any]], columns: list[str], kind: str) -> Any:
    from agentstack_lab.notebook.memory_view import memory_frame  # imports pandas

    return memory_frame(records, columns, kind)


def _with_tags(memory: Any, records: list[dict[str, Any]]) -> None:
    """Search hits carry no tags: read each hit's entry (``--limit`` hits, 10 by default; one indexed read each)."""
    for record in records:
        try:
            entry = memory.get(record["key"], namespace=record["namespace"])
        except AgentstackError:  # a hit this memory may not read by key: shown without tags
            entry = None
        tags = getattr(entry, "tags", None) if entry is not None else None
        record["tags"] = ",".join(tags) if tags else ""


class Reembedding:
    """A ``%memory reembed`` running in a thread: ``wait()``, ``stop()``, ``done``, ``result``, a progress bar.

    Displayed once; the display follows the run (a few updates a second at most).
    """

    def __init__(self, memory: Any, batch_size: int) -> None:
        self.done_count = 0
        self.total = 0
        self.result: Any = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._shown = 0.0
        self._handle: Any = None
        self._memory = memory
        self._batch = batch_size
        self._thread = threading.Thread(target=self._run, name="agentstack-reembed", daemon=True)

    def start(self, show: bool = True) -> Reembedding:
        if show:
            from IPython.display import display

            self._handle = display(self, display_id=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = self._memory.reembed(batch_size=self._batch, progress=self._progress, stop=self._stop)
        except BaseException as exc:  # noqa: BLE001 - shown in the progress display and raised by wait()
            self.error = exc
        finally:
            self._finished.set()
            self._show(force=True)

    def _progress(self, done: int, total: int) -> None:
        self.done_count, self.total = done, total
        self._show()

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._handle is not None and (force or now - self._shown >= 0.25):
            self._shown = now
            self._handle.update(self)

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def stop(self) -> None:
        """Stop after the current batch (run ``%memory reembed`` again to resume)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> Any:
        """The :class:`~agentstack_lab.memory.reembed.ReembedResult` once done; a failure is raised as one line."""
        if not self._finished.wait(timeout):
            raise TimeoutError(f"%memory reembed: still running after {timeout} s ({self._status()})")
        if self.error is not None:
            raise MemoryError_(f"reembed failed: {' '.join(str(self.error).split()) or type(self.error).__name__}")
        return self.result

    def _status(self) -> str:
        if self.error is not None:
            return f"failed: {' '.join(str(self.error).split())}"
        r = self.result
        if r is not None and r.finished:
            return (f"re-embedded {r.total} entries with {r.embedder} (model {r.model!r}, dimension {r.dimensions})"
                    + (", resumed" if r.resumed else ""))
        if r is not None:
            return f"stopped at {self.done_count}/{self.total}; run %memory reembed again to resume"
        pct = f" ({100 * self.done_count // self.total}%)" if self.total else ""
        return f"re-embedding: {self.done_count}/{self.total}{pct}"

    def __repr__(self) -> str:
        return f"<%memory reembed: {self._status()}>"

    def _repr_html_(self) -> str:
        bar = "" if self.done else f'<progress value="{self.done_count}" max="{max(self.total, 1)}"></progress> '
        return f"<div>{bar}{html.escape(self._status())}</div>"


def run_memory(memory: Any, args: MemoryArgs) -> Any:
    """Execute one parsed ``%memory`` command against a ``Memory``; reads return DataFrames."""
    ns = {"namespace": args.namespace} if args.namespace else {}
    if args.command == "reembed":
        job = Reembedding(memory, args.batch_size).start(show=True)
        if args.wait:
            job.wait()
        return job
    if args.command == "store":
        entry = memory.store(args.key, args.text, agent_id=args.agent, tags=list(args.tags) or None, **ns)
        where = getattr(entry, "namespace", args.namespace or "default")
        print(f"stored {args.key!r} in namespace {where!r}")
        return None
    if args.command == "get":
        entry = memory.get(args.key, **ns)
        if entry is None:
            raise MemoryError_(f"no entry {args.key!r} in namespace {args.namespace or 'default'!r}")
        return _frame([_record(entry)], ENTRY_COLUMNS, "get")
    if args.command == "delete":
        if not memory.delete(args.key, **ns):
            raise MemoryError_(f"no entry {args.key!r} in namespace {args.namespace or 'default'!r}")
        print(f"deleted {args.key!r} from namespace {args.namespace or 'default'!r}")
        return None
    if args.command == "list":
        kwargs: dict[str, Any] = {"limit": args.limit, "offset": args.offset, **ns}
        if args.agent:
            kwargs["agent_id"] = args.agent
        return _frame([_record(e) for e in memory.list(**kwargs)], ENTRY_COLUMNS, "list")
    results = memory.search(args.query, mode=args.mode, namespace=args.namespace, agent_id=args.agent,
                            limit=args.limit, threshold=args.threshold)
    degraded = getattr(results, "degraded", None)
    records = [_record(r) for r in results]
    _with_tags(memory, records)
    if degraded:   # said once above the frame, and in a column and df.attrs for code that reads it
        print(f"%memory search: {degraded}")
    frame = _frame(records, [*SEARCH_COLUMNS, "degraded"] if degraded else SEARCH_COLUMNS, "search")
    frame.attrs["degraded"] = degraded
    return frame


def run_memory_line(magics: Any, line: str, cell: str | None = None) -> Any:
    """Parse and run a ``%memory`` line for the magics' workspace."""
    try:
        args = parse_memory_line(line, cell)
    except MagicUsageError as exc:
        if exc.help:
            print(exc)
            return None
        raise UsageError(str(exc)) from None
    try:
        if args.command == "reembed":
            return _reembed(magics, args)
        memory = magics.workspace.memory
        if args.session is not None:   # unknown or ended session: one line (a write also re-checks it atomically)
            magics.workspace.sessions.require_active(args.session)
            memory = memory.scoped(args.session)
        return run_memory(memory, args)
    except MemoryError_:
        raise
    except Exception as exc:  # storage and access errors: one line, never a traceback
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise MemoryError_(f"{args.command} failed: {message}") from None


def _reembed(magics: Any, args: MemoryArgs) -> None:
    """``%memory reembed``: one run at a time per kernel, its handle kept as ``magics.reembedding``."""
    running = getattr(magics, "reembedding", None)
    if running is not None and not running.done:
        raise MemoryError_(f"reembed is already running ({running._status()}); it shows its progress above")
    magics.reembedding = run_memory(magics.workspace.memory, args)
    return None
