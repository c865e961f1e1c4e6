"""The ``provenance`` table: which run, agent and tool call changed which kernel variable.

The engine's journal (``engine/provenance.py``) keeps the restorable objects in the kernel; this
module keeps the record any process can read: one row per name and python tool call, and one per
name an undo put back. Summaries arrive already redacted and short (type, shape or length, a
small repr of scalars); :func:`write` clips them again to :data:`MAX_SUMMARY` characters so no
row grows with the value. Reads join the ``agents`` table for the agent's readable name.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["ACTIONS", "COLUMNS", "MAX_SUMMARY", "write", "read", "frame", "run_ids"]

ACTIONS = ("created", "changed", "deleted", "restored", "removed")
COLUMNS = ["time", "run_id", "agent", "call_id", "name", "action", "before", "after"]
MAX_SUMMARY = 200


def _clip(text: Any) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


def write(db: Database, rows: Iterable[dict[str, Any]]) -> int:
    """Insert rows (``run_id``, ``agent_id``, ``call_id``, ``name``, ``action``, ``before``, ``after``, ``at``)."""
    values: list[tuple[Any, ...]] = []
    for r in rows:
        if r["action"] not in ACTIONS:
            raise ValueError(f"provenance action must be one of {', '.join(ACTIONS)}, got {r['action']!r}")
        values.append((r["run_id"], r.get("agent_id"), r.get("call_id"), r["name"], r["action"],
                       _clip(r.get("before")), _clip(r.get("after")), float(r.get("at") or time.time())))
    if values:
        with db.transaction() as conn:
            conn.executemany("INSERT INTO provenance (run_id, agent_id, call_id, name, action, before, after, "
                             "created_at) VALUES (?,?,?,?,?,?,?,?)", values)
    return len(values)


def read(db: Database, *, name: str | None = None, run_id: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows oldest first, of one ``name`` and/or one ``run_id`` (``limit``: the newest that many)."""
    where: list[str] = []
    params: list[Any] = []
    if name is not None:
        where.append("p.name = ?")
        params.append(name)
    if run_id is not None:
        where.append("p.run_id = ?")
        params.append(run_id)
    sql = ("SELECT p.id, p.created_at, p.run_id, COALESCE(a.name, p.agent_id) AS agent, p.agent_id, p.call_id, "
           "p.name, p.action, p.before, p.after FROM provenance p LEFT JOIN agents a ON a.id = p.agent_id"
           + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY p.id DESC")
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    rows = [dict(zip(r.keys(), tuple(r), strict=True)) for r in db.query(sql, tuple(params))]
    rows.reverse()
    return rows


def run_ids(db: Database, prefix: str) -> list[str]:
    """The runs with provenance rows whose id starts with ``prefix``."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return [r[0] for r in db.query("SELECT DISTINCT run_id FROM provenance WHERE run_id LIKE ? ESCAPE '\\' "
                                   "ORDER BY run_id", (escaped + "%",))]


def frame(rows: list[dict[str, Any]]) -> Any:
    """Rows as a pandas DataFrame with :data:`COLUMNS` (``time`` a local timestamp); pandas imported here."""
    pd: Any = importlib.import_module("pandas")   # typed loosely: pandas ships no complete types

    records = [{"time": r["created_at"], **{c: r.get(c) for c in COLUMNS[1:]}} for r in rows]
    out = pd.DataFrame.from_records(records, columns=COLUMNS)
    out["time"] = pd.to_datetime(out["time"].astype(float), unit="s").dt.round("ms")
    return out
