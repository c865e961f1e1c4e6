"""Read-side views of agent activity for the surfaces (``agent watch``, ``agent list``, the MCP server).

Everything here reads the workspace database only (the ``agents`` table and the ``events``
log), so it shows runs of any process: a notebook kernel, a CLI run, the MCP server.
:class:`EventFollower` follows the log by sequence number, the way ``tail -f`` follows a file.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import NotFoundError, UsageError
from agentstack_lab.providers.prices import NO_COST, Cost, PriceTable

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["agent_rows", "run_costs", "resolve_run", "last_events", "describe_event", "EventFollower", "elapsed_s",
           "status_counts"]

_ROW = ("id, name, type, status, run_id, parent_id, session_id, depth, prompt, result, error, input_tokens,"
        " output_tokens, json_extract(metadata, '$.tokenBasis') AS token_basis, created_at, started_at, ended_at,"
        " updated_at")
# what prices a row: its prompt-cache tokens, and the provider and model its run's root recorded
_PRICED = (" json_extract(metadata, '$.cacheReadTokens') AS cache_read_tokens,"
           " json_extract(metadata, '$.cacheWriteTokens') AS cache_write_tokens,"
           " (SELECT json_extract(r.metadata, '$.provider') FROM agents r WHERE r.id = agents.run_id) AS provider,"
           " (SELECT json_extract(r.metadata, '$.model') FROM agents r WHERE r.id = agents.run_id) AS model")


def _dicts(rows: list[Any]) -> list[dict[str, Any]]:
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]


def agent_rows(db: Database, *, run_id: str | None = None, status: str | None = None, session_id: str | None = None,
               roots: bool = False, limit: int | None = 50, prices: PriceTable | None = None) -> list[dict[str, Any]]:
    """Agents, newest first, optionally filtered by run, status or session (``roots``: run roots only).

    ``prices``: each row also gets its own ``cost`` (``{usd, basis, text}``, ``providers/prices.py``).
    """
    where: list[str] = []
    params: list[Any] = []
    for col, val in (("run_id", run_id), ("status", status), ("session_id", session_id)):
        if val is not None:
            where.append(f"{col} = ?")
            params.append(val)
    if roots:
        where.append("parent_id IS NULL")
    sql = (f"SELECT {_ROW}{',' + _PRICED if prices else ''} FROM agents" + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY created_at DESC, rowid DESC" + (" LIMIT ?" if limit is not None else ""))
    rows = _dicts(db.query(sql, [*params, *([int(limit)] if limit is not None else [])]))
    if prices is not None:
        for row in rows:
            row["cost"] = _row_cost(row, prices).to_wire()
            for key in ("cache_read_tokens", "cache_write_tokens", "provider", "model"):
                row.pop(key)
    return rows


def _row_cost(row: dict[str, Any], prices: PriceTable) -> Cost:
    usage = {"inputTokens": row.get("input_tokens"), "outputTokens": row.get("output_tokens"),
             "cacheReadTokens": row.get("cache_read_tokens"), "cacheWriteTokens": row.get("cache_write_tokens"),
             "basis": row.get("token_basis")}
    return prices.cost(usage, row.get("provider"), row.get("model"))


def run_costs(db: Database, run_ids: list[str], prices: PriceTable) -> dict[str, Cost]:
    """Each run's cost, summed over its agents (a lower bound when some agent's cost is unknown)."""
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    out: dict[str, Cost] = {}
    for row in _dicts(db.query(f"SELECT run_id, input_tokens, output_tokens, json_extract(metadata, '$.tokenBasis')"
                               f" AS token_basis,{_PRICED} FROM agents WHERE run_id IN ({marks})", run_ids)):
        out[row["run_id"]] = out.get(row["run_id"], NO_COST) + _row_cost(row, prices)
    return out


MIN_PREFIX = 4   # characters of a run id prefix, as for decision and review-loop ids


def resolve_run(db: Database, ref: str) -> str:
    """The run id that ``ref`` names (a full id or a unique prefix of 4+ characters); ``NotFoundError``/``UsageError`` otherwise."""
    ref = (ref or "").strip()
    if not ref:
        raise UsageError("a run id is required")
    if len(ref) < MIN_PREFIX:  # a full id is never this short; a shorter prefix names too much to be safe
        if db.query("SELECT 1 FROM agents WHERE run_id = ? LIMIT 1", (ref,)) or \
                db.query("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", (ref,)):
            return ref
        raise UsageError(f"run id prefix {ref!r} is too short; give at least {MIN_PREFIX} characters")
    found = [r[0] for r in db.query("SELECT DISTINCT run_id FROM agents WHERE substr(run_id, 1, ?) = ? LIMIT 3",
                                    (len(ref), ref))]
    if ref in found:
        return ref
    if not found:
        if db.query("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", (ref,)):
            return ref
        raise NotFoundError(f"no run {ref!r} in this workspace")
    if len(found) > 1:
        raise UsageError(f"run id prefix {ref!r} is ambiguous ({', '.join(f[:12] for f in found)}, ...)")
    return found[0]


def describe_event(etype: str, payload: dict[str, Any]) -> str:
    """A short human line for one logged event."""
    if etype == "agent-state":
        return f"state {payload.get('state', {}).get('status', '?')}"
    if etype == "text-delta":
        return "text " + " ".join(str(payload.get("delta", "")).split())[-40:]
    if etype == "tool-call":
        return f"tool-call {payload.get('tool')}"
    if etype == "tool-result":
        return f"tool-result {payload.get('tool')}" + (" (error)" if payload.get("error") else "")
    if etype == "user-query":
        return f"user-query {payload.get('kind')}"
    if etype == "agent-completed":
        return "completed"
    if etype == "error":
        return "error: " + " ".join(str(payload.get("error", "")).split())[:60]
    return etype


def last_events(db: Database, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The newest logged event of every agent of these runs: ``{agent_id: {seq, type, text, at}}``."""
    run_ids = sorted({r for r in run_ids if r})
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    # one index seek (events_run_agent) per agent of these runs, not a read of every event of the runs
    rows = db.query(f"SELECT e.agent_id, e.seq, e.type, e.payload, e.created_at FROM agents a JOIN events e"
                    f" ON e.seq = (SELECT max(seq) FROM events WHERE run_id = a.run_id AND agent_id = a.id)"
                    f" WHERE a.run_id IN ({marks})", run_ids)
    return {r[0]: {"seq": r[1], "type": r[2], "text": describe_event(r[2], json.loads(r[3])), "at": r[4]}
            for r in rows if r[0] is not None}


class EventFollower:
    """Follows the ``events`` table by sequence number (optionally one run's events)."""

    def __init__(self, db: Database, *, run_id: str | None = None, after_seq: int = 0):
        self.db = db
        self.run_id = run_id
        self.seq = after_seq

    def head(self) -> int:
        """The highest sequence number logged so far (of the run, when following one)."""
        sql, params = ("SELECT max(seq) FROM events WHERE run_id = ?", (self.run_id,)) if self.run_id \
            else ("SELECT max(seq) FROM events", ())
        return self.db.query(sql, params)[0][0] or 0

    def poll(self, limit: int = 10_000) -> list[dict[str, Any]]:
        """Events logged since the last poll, in order: ``{seq, run_id, agent_id, type, payload, at}``."""
        if self.run_id:
            rows = self.db.query("SELECT seq, run_id, agent_id, type, payload, created_at FROM events"
                                 " WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?", (self.run_id, self.seq, limit))
        else:
            rows = self.db.query("SELECT seq, run_id, agent_id, type, payload, created_at FROM events"
                                 " WHERE seq > ? ORDER BY seq LIMIT ?", (self.seq, limit))
        out = [{"seq": r[0], "run_id": r[1], "agent_id": r[2], "type": r[3], "payload": json.loads(r[4]),
                "at": r[5]} for r in rows]
        if out:
            self.seq = out[-1]["seq"]
        return out


def elapsed_s(row: dict[str, Any], now: float | None = None) -> float | None:
    """Seconds an agent ran (so far, when it has not ended)."""
    start = row.get("started_at")
    if not start:
        return None
    begin = datetime.fromisoformat(start).timestamp()
    end = datetime.fromisoformat(row["ended_at"]).timestamp() if row.get("ended_at") else now
    if end is None:
        import time

        end = time.time()
    return max(0.0, end - begin)


def status_counts(db: Database, table: str = "agents") -> dict[str, int]:
    """Rows per status of ``agents``, ``identities`` or ``sessions``."""
    if table not in ("agents", "identities", "sessions"):
        raise ValueError(f"no status counts for table {table!r}")
    return {r[0]: r[1] for r in db.query(f"SELECT status, count(*) FROM {table} GROUP BY status ORDER BY status")}
