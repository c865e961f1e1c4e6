"""``%memory store|get|search|list|delete``: the workspace memory from a cell.

Reads return pandas DataFrames (pandas is imported on first use) that display as a readable table
(:mod:`.memory_view`: content beside the key, highlighted matches, the default namespace hidden);
writes print one line; every error, a bad argument included, is one line naming what was wrong.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from IPython.core.error import UsageError

from agentstack_lab.errors import AgentstackError
from agentstack_lab.notebook.args import MagicUsageError, MemoryArgs, OneLineError, parse_memory_line

__all__ = ["MemoryError_", "run_memory", "run_memory_line", "SEARCH_COLUMNS", "ENTRY_COLUMNS"]

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


def run_memory(memory: Any, args: MemoryArgs) -> Any:
    """Execute one parsed ``%memory`` command against a ``Memory``; reads return DataFrames."""
    ns = {"namespace": args.namespace} if args.namespace else {}
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
