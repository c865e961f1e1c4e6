"""Spawned agents and their statuses, persisted in the workspace database (docs/notebook.md).

Every agent (spawned here or by an engine run) is a row of the ``agents`` table, so another
process (``agent watch``, the lab panel, the MCP server) sees it live. Status changes follow
:data:`TRANSITIONS`; an invalid one raises :class:`InvalidTransitionError` and changes nothing.

A name belongs to one live agent at a time: once that agent is terminal (completed, failed,
stopped) the name is free again, so a recurring named agent ("nightly-report") can be spawned
each night. The database enforces it with a partial unique index on non-terminal rows; lookup
by name prefers the live agent, then the most recent one.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import AGENT_STATUSES, TERMINAL, TRANSITIONS

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Spawner", "SpawnedAgent", "TRANSITIONS", "STATUSES", "TERMINAL", "InvalidTransitionError",
           "AgentNotFoundError", "AgentNameTakenError", "check_transition", "now_iso"]

# The lifecycle is defined once in events.py (pending → running ⇄ waiting_user → completed | failed |
# stopped, plus the seed's idle) and re-exported here for the spawner's callers.
STATUSES = AGENT_STATUSES
_LIVE_SQL = "status NOT IN ('completed', 'failed', 'stopped')"  # the partial unique index's condition (= TERMINAL)


class InvalidTransitionError(AgentstackError, ValueError):
    """A status change the lifecycle does not allow."""


class AgentNotFoundError(AgentstackError, KeyError):
    """No agent with that id or name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AgentNameTakenError(AgentstackError, ValueError):
    """A live agent already holds that name (it is free again once that agent is terminal)."""


def check_transition(agent_id: str, current: str, new: str) -> None:
    """Raise :class:`InvalidTransitionError` unless ``current → new`` is allowed."""
    if new not in TRANSITIONS:
        raise InvalidTransitionError(f"unknown agent status {new!r}; expected one of {', '.join(STATUSES)}")
    if new not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none (terminal)"
        raise InvalidTransitionError(f"agent {agent_id}: cannot go from {current!r} to {new!r} (allowed: {allowed})")


def now_iso(t: float | None = None) -> str:
    """A UTC ISO-8601 timestamp with milliseconds."""
    return datetime.fromtimestamp(time.time() if t is None else t, UTC).isoformat(timespec="milliseconds")


@dataclass(kw_only=True)
class SpawnedAgent:
    """One row of the ``agents`` table."""

    id: str
    name: str
    type: str
    status: str
    created_at: str
    session_id: str | None = None
    run_id: str | None = None
    parent_id: str | None = None
    identity_id: str | None = None
    depth: int = 0
    prompt: str | None = None
    result: str | None = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    ended_at: str | None = None
    updated_at: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> SpawnedAgent:
        data = dict(zip(row.keys(), tuple(row), strict=True))
        data["metadata"] = json.loads(data.get("metadata") or "{}")
        return cls(**data)


_COLUMNS = ("id", "name", "type", "status", "run_id", "parent_id", "session_id", "depth", "prompt", "result",
            "error", "input_tokens", "output_tokens", "metadata", "created_at", "started_at", "ended_at",
            "updated_at", "identity_id")


class Spawner:
    """Create, find, list and stop agents in a workspace database."""

    def __init__(self, db: Database, registry: Any = None):
        self.db = db
        self.registry = registry

    def spawn(self, agent_type: str, *, name: str | None = None, session_id: str | None = None,
              metadata: dict[str, Any] | None = None, prompt: str | None = None) -> SpawnedAgent:
        """Create an agent in status ``idle``; unknown types and names held by a live agent are clear errors."""
        if self.registry is not None:
            self.registry.get(agent_type)  # raises UnknownAgentTypeError
        agent_id = str(uuid.uuid4())
        name = name or f"{agent_type}-{agent_id[:8]}"
        stamp = now_iso()
        agent = SpawnedAgent(id=agent_id, name=name, type=agent_type, status="idle", created_at=stamp,
                             updated_at=stamp, session_id=session_id, metadata=dict(metadata or {}), prompt=prompt)
        with self.db.transaction() as conn:
            holder = conn.execute(f"SELECT id, status FROM agents WHERE name = ? AND {_LIVE_SQL}", (name,)).fetchone()
            if holder:
                raise AgentNameTakenError(f"an agent named {name!r} already exists and is {holder[1]} "
                                          f"({holder[0]}); the name is free again once it ends")
            self._insert(conn, agent)
        return agent

    def get(self, agent_id: str) -> SpawnedAgent | None:
        rows = self.db.query("SELECT * FROM agents WHERE id = ?", (agent_id,))
        return SpawnedAgent.from_row(rows[0]) if rows else None

    def get_by_name(self, name: str) -> SpawnedAgent | None:
        """The agent called ``name``: the live one if any, else the most recently created."""
        rows = self.db.query(f"SELECT * FROM agents WHERE name = ? ORDER BY ({_LIVE_SQL}) DESC, created_at DESC,"
                             " rowid DESC LIMIT 1", (name,))
        return SpawnedAgent.from_row(rows[0]) if rows else None

    def list(self, session_id: str | None = None, *, status: str | None = None,
             run_id: str | None = None) -> list[SpawnedAgent]:
        """Agents, oldest first, optionally filtered by session, status or run."""
        where, params = [], []
        for col, val in (("session_id", session_id), ("status", status), ("run_id", run_id)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = "SELECT * FROM agents" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at, rowid"
        return [SpawnedAgent.from_row(r) for r in self.db.query(sql, params)]

    def update_status(self, agent_id: str, status: str, *, error: str | None = None,
                      result: str | None = None) -> SpawnedAgent:
        """Move an agent to ``status`` if the lifecycle allows it (checked inside the write transaction)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT status FROM agents WHERE id = ?", (agent_id,)).fetchone()
            if row is None:
                raise AgentNotFoundError(f"no agent with id {agent_id!r}")
            check_transition(agent_id, row[0], status)
            stamp = now_iso()
            conn.execute(
                "UPDATE agents SET status = ?, updated_at = ?,"
                " started_at = CASE WHEN ? = 'running' AND started_at IS NULL THEN ? ELSE started_at END,"
                " ended_at = CASE WHEN ? IN ('completed','failed','stopped') THEN ? ELSE ended_at END,"
                " error = COALESCE(?, error), result = COALESCE(?, result) WHERE id = ?",
                (status, stamp, status, stamp, status, stamp, error, result, agent_id))
        return self.get(agent_id)  # type: ignore[return-value]

    def stop(self, agent_id: str, reason: str = "stopped") -> SpawnedAgent:
        """Stop an agent (idle, pending, running or waiting); stopping a finished one is an error."""
        return self.update_status(agent_id, "stopped", error=reason)

    # --- used by the engine: one batched upsert per flush --------------------------------------

    def _insert(self, conn: Any, agent: SpawnedAgent) -> None:
        values = [json.dumps(agent.metadata, default=str) if c == "metadata" else getattr(agent, c) for c in _COLUMNS]
        conn.execute(f"INSERT INTO agents ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})", values)

    def upsert_many(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        """Insert or update engine agent rows (the engine enforces transitions in memory first)."""
        if not rows:
            return
        rows = self._unique_names(conn, rows)
        sql = (f"INSERT INTO agents ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
               " ON CONFLICT(id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[3:]))
        conn.executemany(sql, [[json.dumps(r.get(c) or {}, default=str) if c == "metadata" else r.get(c)
                                for c in _COLUMNS] for r in rows])

    @staticmethod
    def _unique_names(conn: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows whose short name (``type-1a2b3c4d``) another live agent holds are stored under ``type-<full id>``.

        A name is unique among live agents; a clash must not fail the whole batch (and lose its
        events). A row keeps the name it was first stored under.
        """
        marks = ",".join("?" * len(rows))
        stored = dict(conn.execute(f"SELECT id, name FROM agents WHERE id IN ({marks})", [r["id"] for r in rows]))
        owner = dict(conn.execute(f"SELECT name, id FROM agents WHERE name IN ({marks}) AND {_LIVE_SQL}",
                                  [r["name"] for r in rows]))
        out = []
        for r in rows:
            name = stored.get(r["id"])
            if name is None:
                name = r["name"] if owner.get(r["name"], r["id"]) == r["id"] else f"{r['type']}-{r['id']}"
            out.append(r if name == r["name"] else {**r, "name": name})
        return out
