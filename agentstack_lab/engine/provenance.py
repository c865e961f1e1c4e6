"""Kernel provenance and undo: which agent changed which variable, and taking it back.

Every python tool call in the live kernel is bracketed by :meth:`Journal.begin` and
:meth:`Journal.finish`. ``begin`` costs nothing for names the code may *rebind* or *delete*: the
namespace dict is shallow-copied (the old objects stay referenced, so restoring them is free —
copy-on-write in effect). Only names the code mentions *and* that hold mutable objects (DataFrames,
arrays, lists, dicts, sets, ...) are deep-copied, because the code may change them in place;
a value bigger than ``max_bytes`` (default 256 MB, ``RunOptions.undo_max_bytes``) is not copied and
is listed in :attr:`Pending.too_big` (the approval card says so, and undo refuses to restore it).
Copy cost measured here: a 1M-cell DataFrame ~4 ms, an 8 MB array ~1 ms.

``finish`` compares the namespace with the copy: names created, rebound or changed in place (by
identity or by :func:`~agentstack_lab.engine.capture.fingerprint`) and deleted. Each change is a
:class:`Change` with a small summary of the value before and after (type and shape or length; a
repr only of scalars and short strings, after redacting known secrets, and never for names that
look secret like ``api_key``). Changes are persisted as ``provenance`` rows by the run (any process
can list them, ``store/provenance.py``); the restorable objects stay in this process, in the journal.

:meth:`Journal.undo` restores a run's changes newest first — created names removed, changed names
restored, deleted names returned (one ``removed``/``restored`` change per name) — and refuses, changing nothing, when any of those names was
changed since by someone else (the user, or a later run): it names them.
"""

from __future__ import annotations

import copy
import reprlib
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from agentstack_lab.engine.capture import fingerprint, mentioned_names
from agentstack_lab.errors import AgentstackError
from agentstack_lab.redaction import SECRET_HINTS, redact

__all__ = ["Change", "Journal", "Pending", "UndoRefusedError", "summarise", "DEFAULT_UNDO_MAX_BYTES"]

DEFAULT_UNDO_MAX_BYTES = 256 * 1024 * 1024
Action = Literal["created", "changed", "deleted", "restored", "removed"]
_SCALARS = (int, float, complex, bool, type(None))
_REPR_CHARS = 40  # a repr longer than this is cut (after redaction, so no partial secret survives)
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range)
_MISSING = object()


class UndoRefusedError(AgentstackError):
    """Undo would overwrite a change made since (names them), or has nothing it can restore."""


def summarise(value: Any, secrets: Sequence[str] = (), name: str = "") -> str:
    """A short description: ``DataFrame (3, 2) [x, y]``, ``list[4]``, ``int = 42``, ``str[5] = 'hello'``.

    Scalars and ``str`` values get a small repr, with ``secrets`` redacted before it is cut; a ``name``
    that looks secret (``api_key``, ``token``) gets none. Column names are redacted too.
    """
    if value is _MISSING:
        return ""
    kind = type(value).__name__
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        text = f"{kind} {shape}"
        columns = getattr(value, "columns", None)
        if columns is not None and hasattr(columns, "__len__"):
            shown = [str(c) for c in list(columns)[:6]]
            text += " [" + ", ".join(shown) + (", …" if len(columns) > 6 else "") + "]"
        return redact(text, secrets)
    secret_name = any(h in name.upper() for h in SECRET_HINTS)
    if isinstance(value, str) and not secret_name:
        return f"{kind}[{len(value)}] = {_short(redact(value, secrets))}"  # redacted whole, then cut
    if isinstance(value, str | bytes | list | dict | set | tuple | frozenset):  # bytes: not redactable, no repr
        return f"{kind}[{len(cast('Sized', value))}]"
    if isinstance(value, _SCALARS) and not secret_name:
        return redact(f"{kind} = {_short(value)}", secrets)
    return kind


_summarise = summarise  # Journal.finish shadows the name with its secrets bound


def _short(value: Any) -> str:
    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = _REPR_CHARS
    try:
        return r.repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ gives no repr
        return "?"


def _size(value: Any) -> int:
    """Approximate bytes of a value (pandas and numpy by their buffers; containers shallowly)."""
    try:
        if hasattr(value, "memory_usage") and hasattr(value, "shape"):  # pandas
            usage = value.memory_usage(deep=False)
            return int(usage.sum() if hasattr(usage, "sum") else usage)
        if hasattr(value, "nbytes"):
            return int(value.nbytes)
        size = sys.getsizeof(value)
        if isinstance(value, list | tuple | set | frozenset):
            size += sum(sys.getsizeof(v) for v in cast("Iterable[object]", value))
        elif isinstance(value, dict):
            size += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in cast("dict[object, object]", value).items())
        return size
    except Exception:  # noqa: BLE001 - unknown objects count as small
        return 0


def _copy(value: Any) -> Any:
    if hasattr(value, "copy") and type(value).__module__.split(".")[0] in ("pandas", "numpy"):
        return value.copy(deep=True) if "pandas" in type(value).__module__ else value.copy()
    return copy.deepcopy(value)


@dataclass(frozen=True, kw_only=True)
class Change:
    """One name an agent's code created, changed or deleted."""

    name: str
    action: Action
    before: str
    after: str


@dataclass(kw_only=True)
class Pending:
    """What :meth:`Journal.begin` kept: the old bindings, deep copies of mutable mentioned values."""

    before: dict[str, Any]
    prints: dict[str, Any]
    copies: dict[str, Any]
    too_big: list[str] = field(default_factory=list[str])


@dataclass(kw_only=True)
class _Record:
    run_id: str | None
    agent_id: str | None
    call_id: str | None
    changes: list[Change]
    restore: dict[str, Any]           # name -> object to put back (_MISSING: remove the name)
    after: dict[str, tuple[Any, Any]]  # name -> (object after, fingerprint after) to detect later edits
    too_big: list[str]
    at: float = field(default_factory=time.time)
    undone: bool = False


class Journal:
    """The undo records of one live executor, plus an optional sink that persists each change."""

    def __init__(self, *, max_bytes: int = DEFAULT_UNDO_MAX_BYTES,
                 sink: Callable[[dict[str, Any]], None] | None = None,
                 ignore: tuple[str, ...] = ("fork", "wait")):  # the live executor's injected helpers
        self.max_bytes = max_bytes
        self.sink = sink
        self.ignore = frozenset(ignore)
        self._records: list[_Record] = []
        self._lock = threading.Lock()

    def _tracked(self, name: str) -> bool:
        return not name.startswith("_") and name not in self.ignore

    def plan(self, ns: dict[str, Any], code: str) -> list[str]:
        """The mentioned names whose values are too big to snapshot (for the approval card)."""
        return [n for n in sorted(mentioned_names(code)) if n in ns and self._tracked(n)
                and not isinstance(ns[n], _IMMUTABLE) and _size(ns[n]) > self.max_bytes]

    def begin(self, ns: dict[str, Any], code: str) -> Pending:
        """Keep what undo needs before ``code`` runs in ``ns``."""
        mentioned = [n for n in mentioned_names(code) if n in ns and self._tracked(n)]
        prints = {n: fingerprint(ns[n]) for n in mentioned}
        copies: dict[str, Any] = {}
        too_big: list[str] = []
        for name in mentioned:
            value = ns[name]
            if isinstance(value, _IMMUTABLE) or callable(value) or type(value).__name__ == "module":
                continue
            if _size(value) > self.max_bytes:
                too_big.append(name)
                continue
            try:
                copies[name] = _copy(value)
            except Exception:  # noqa: BLE001 - an uncopyable object (a socket, a lock) cannot be restored
                too_big.append(name)
        return Pending(before=dict(ns), prints=prints, copies=copies, too_big=sorted(too_big))

    def finish(self, pending: Pending, ns: dict[str, Any], *, run_id: str | None = None,
               agent_id: str | None = None, call_id: str | None = None, secrets: Sequence[str] = ()) -> list[Change]:
        """Record what changed since :meth:`begin`; returns the changes (also sent to the sink).

        ``secrets`` are redacted from the summaries (see :func:`summarise`).
        """
        before = pending.before

        def summarise(value: Any, name: str) -> str:
            return _summarise(value, secrets, name)

        changes: list[Change] = []
        restore: dict[str, Any] = {}
        after: dict[str, tuple[Any, Any]] = {}
        for name, value in ns.items():
            if not self._tracked(name):
                continue
            old = before.get(name, _MISSING)
            if old is _MISSING:
                changes.append(Change(name=name, action="created", before="", after=summarise(value, name)))
                restore[name] = _MISSING
            elif old is not value:
                changes.append(Change(name=name, action="changed", before=summarise(old, name),
                                      after=summarise(value, name)))
                restore[name] = old
            elif name in pending.prints and pending.prints[name] is not None and fingerprint(value) != pending.prints[name]:
                changes.append(Change(name=name, action="changed", before=summarise(pending.copies.get(name, value), name),
                                      after=summarise(value, name)))
                if name in pending.copies:   # too big to copy: recorded, but undo will refuse it
                    restore[name] = pending.copies[name]
            else:
                continue
            after[name] = (value, fingerprint(value))
        for name, old in before.items():
            if self._tracked(name) and name not in ns:
                changes.append(Change(name=name, action="deleted", before=summarise(old, name), after=""))
                restore[name] = old
                after[name] = (_MISSING, None)
        record = _Record(run_id=run_id, agent_id=agent_id, call_id=call_id, changes=changes, restore=restore,
                         after=after, too_big=[c.name for c in changes if c.name not in restore])
        with self._lock:
            self._records.append(record)
        if self.sink is not None and changes:
            for c in changes:
                self.sink({"run_id": run_id, "agent_id": agent_id, "call_id": call_id, "name": c.name,
                           "action": c.action, "before": c.before, "after": c.after, "at": record.at})
        return changes

    def changes(self, run_id: str | None = None) -> list[Change]:
        """The changes recorded in this process, oldest first (of one run, or all)."""
        with self._lock:
            return [c for r in self._records if run_id is None or r.run_id == run_id for c in r.changes]

    def runs(self, *, undone: bool = False) -> list[str]:
        """Run ids with recorded changes in this process, oldest first (``undone``: also those undone)."""
        with self._lock:
            return list(dict.fromkeys(r.run_id for r in self._records
                                      if r.changes and r.run_id and (undone or not r.undone)))

    def undo(self, ns: dict[str, Any], run_id: str, *, secrets: Sequence[str] = ()) -> list[Change]:
        """Restore every name ``run_id`` touched; refuse (changing nothing) if any was changed since.

        Returns one change per name: ``removed`` (the run created it) or ``restored`` (the run changed
        or deleted it), ``before`` the value undo replaced, ``after`` the value it put back.
        """
        with self._lock:
            records = [r for r in self._records if r.run_id == run_id and not r.undone and r.changes]
            if not records:
                done = any(r.run_id == run_id and r.undone for r in self._records)
                raise UndoRefusedError(f"run {run_id} was already undone" if done else
                                       f"run {run_id} changed no kernel variables in this kernel")
            later = [r for r in self._records if r.at > records[-1].at and r.run_id != run_id and not r.undone]
            # the state this run left each name in: the last record of the run that touched it
            final: dict[str, tuple[Any, Any]] = {}
            for r in records:
                final.update(r.after)
            touched_later = sorted({n for r in later for n in r.after} & set(final))
            changed_since = sorted(n for n, (obj, fp) in final.items()
                                   if ns.get(n, _MISSING) is not obj
                                   or (obj is not _MISSING and fp is not None and fingerprint(obj) != fp))
            blocked = sorted(set(changed_since) | set(touched_later))
            if blocked:
                raise UndoRefusedError(f"cannot undo run {run_id}: {', '.join(blocked)} changed since the run "
                                       "(undo would lose that change); nothing was restored")
            unrestorable = sorted({n for r in records for n in r.too_big})
            if unrestorable:
                raise UndoRefusedError(f"cannot undo run {run_id}: {', '.join(unrestorable)} were too big to "
                                       "snapshot before the run (changed in place); nothing was restored")
            first: dict[str, Any] = {}   # name -> what it held before the run's first change to it
            for r in reversed(records):
                for c in reversed(r.changes):
                    first[c.name] = r.restore[c.name]
            undone: list[Change] = []
            for name, value in first.items():
                current = _summarise(ns.get(name, _MISSING), secrets, name)
                if value is _MISSING:
                    ns.pop(name, None)
                    undone.append(Change(name=name, action="removed", before=current, after=""))
                else:
                    ns[name] = value
                    undone.append(Change(name=name, action="restored", before=current,
                                         after=_summarise(value, secrets, name)))
            for r in records:
                r.undone = True
            return undone
