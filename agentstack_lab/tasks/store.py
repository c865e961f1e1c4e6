"""Tasks and their relationships in the workspace database (docs/mcp.md task tools, docs/tasks.md tables).

Every agent of an engine run is a task row with the agent's id (written by the engine's event log
in the same transaction as the ``agents`` row); tasks can also be created directly (CLI, MCP).
Direct status changes follow :data:`TRANSITIONS`; bad input (unknown task, invalid transition,
duplicate or self relationship) raises a one-line :class:`TaskError` and changes nothing.

``tasks.session_id`` holds no foreign key (since ``tasks_session_id_without_fk``): sessions may live in
the team's PostgreSQL (``memory.backend = "postgres"``), not in this database. A session id is checked
in ``sessions`` of this database first (same transaction) and otherwise through ``session_exists``,
the memory backend's lookup (``Workspace.session_lookup``); found ids are remembered (sessions are
ended, never deleted).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from agentstack_lab.errors import AgentstackError, NotFoundError
from agentstack_lab.events import TERMINAL, RelationshipType
from agentstack_lab.events import TRANSITIONS as AGENT_TRANSITIONS

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Task", "TaskRelationship", "TaskStore", "TaskError", "TaskNotFoundError", "TRANSITIONS",
           "TASK_STATUSES", "TERMINAL", "RELATIONSHIP_TYPES"]

# The agent lifecycle (events.TRANSITIONS) without ``idle``, so an engine agent and its task always agree;
# a task created directly may also be ended straight from any unfinished status (completed from pending).
TRANSITIONS: dict[str, frozenset[str]] = {
    status: (AGENT_TRANSITIONS[status] | (TERMINAL if status not in TERMINAL else frozenset())) - {"idle"}
    for status in AGENT_TRANSITIONS if status != "idle"
}
TASK_STATUSES = tuple(TRANSITIONS)
RELATIONSHIP_TYPES: tuple[str, ...] = get_args(RelationshipType)


class TaskError(AgentstackError, ValueError):
    """Bad task input: invalid status transition, duplicate or self relationship, bad value."""


class TaskNotFoundError(NotFoundError):
    """No task with that id."""


@dataclass(frozen=True, kw_only=True)
class Task:
    """One row of ``tasks``."""

    id: str
    agent_type: str
    status: str
    input: str | None = None
    output: str | None = None
    error: str | None = None
    session_id: str | None = None
    parent_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    depth: int = 0
    risk_level: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float | None = None
    completed_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True)
class TaskRelationship:
    """One row of ``task_relationships``: ``from_task_id`` —type→ ``to_task_id``."""

    id: str
    from_task_id: str
    to_task_id: str
    relationship_type: str
    metadata: dict[str, Any] | None = None
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


_COLUMNS = ("id", "session_id", "agent_type", "status", "input", "output", "metadata", "created_at",
            "completed_at", "parent_id", "run_id", "agent_id", "error", "risk_level", "depth", "updated_at")


def _task(row: Any) -> Task:
    data = dict(zip(row.keys(), tuple(row), strict=True))
    data["metadata"] = json.loads(data.get("metadata") or "{}")
    return Task(**data)


def _relationship(row: Any) -> TaskRelationship:
    data = dict(zip(row.keys(), tuple(row), strict=True))
    data["metadata"] = json.loads(data["metadata"]) if data.get("metadata") else None
    return TaskRelationship(**data)


def check_transition(task_id: str, current: str, new: str) -> None:
    """Raise :class:`TaskError` unless ``current → new`` is allowed."""
    if new not in TRANSITIONS:
        raise TaskError(f"unknown task status {new!r}; expected one of {', '.join(TASK_STATUSES)}")
    if new not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none (terminal)"
        raise TaskError(f"task {task_id}: cannot go from {current!r} to {new!r} (allowed: {allowed})")


class TaskStore:
    """Create, read, move and relate tasks of one workspace database."""

    def __init__(self, db: Database, *, session_exists: Callable[[str], bool] | None = None):
        self.db = db
        self.session_exists = session_exists
        self._known: set[str] = set()
        self._unknown: set[str] = set()

    def _session_known(self, conn: Any, session_id: str, *, remember_missing: bool = False) -> bool:
        """Whether ``session_id`` is a session here or in the memory backend (see the module doc)."""
        if session_id in self._known:
            return True
        if session_id in self._unknown:
            return False
        found = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None
        if not found and self.session_exists is not None:
            found = bool(self.session_exists(session_id))
        if found:
            self._known.add(session_id)
        elif remember_missing:
            self._unknown.add(session_id)
        return found

    # --- tasks -------------------------------------------------------------------------------------
    def create(self, agent_type: str, input: str | None = None, *, parent_id: str | None = None,  # noqa: A002
               session_id: str | None = None, run_id: str | None = None, task_id: str | None = None,
               risk_level: str | None = None, metadata: dict[str, Any] | None = None,
               conn: Any = None) -> Task:
        """A new ``pending`` task; with ``parent_id`` also the ``parent_of`` relationship (one transaction)."""
        if not isinstance(agent_type, str) or not agent_type.strip():
            raise TaskError("task agent type must be a non-empty string")
        if conn is None:
            with self.db.transaction() as c:
                return self.create(agent_type, input, parent_id=parent_id, session_id=session_id, run_id=run_id,
                                   task_id=task_id, risk_level=risk_level, metadata=metadata, conn=c)
        depth = 0
        if parent_id is not None:
            parent = conn.execute("SELECT depth FROM tasks WHERE id = ?", (parent_id,)).fetchone()
            if parent is None:
                raise TaskNotFoundError(f"no task with id {parent_id!r} (the parent)")
            depth = parent[0] + 1
        if session_id is not None and not self._session_known(conn, session_id):
            raise TaskError(f"no session with id {session_id!r}")
        task_id = task_id or str(uuid.uuid4())
        if conn.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone():
            raise TaskError(f"a task with id {task_id!r} already exists")
        now = time.time()
        conn.execute("INSERT INTO tasks (id, session_id, agent_type, status, input, metadata, created_at, parent_id,"
                     " run_id, risk_level, depth, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (task_id, session_id, agent_type, "pending", input, json.dumps(metadata or {}, default=str),
                      now, parent_id, run_id, risk_level, depth, now))
        if parent_id is not None:
            self.relate(parent_id, task_id, "parent_of", conn=conn)
        return _task(conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone())

    def get(self, task_id: str) -> Task:
        rows = self.db.query("SELECT * FROM tasks WHERE id = ?", (task_id,))
        if not rows:
            raise TaskNotFoundError(f"no task with id {task_id!r}")
        return _task(rows[0])

    def find(self, task_id: str) -> Task | None:
        rows = self.db.query("SELECT * FROM tasks WHERE id = ?", (task_id,))
        return _task(rows[0]) if rows else None

    def list(self, *, session_id: str | None = None, status: str | None = None, run_id: str | None = None,
             parent_id: str | None = None, limit: int = 100, offset: int = 0) -> list[Task]:
        """Tasks, oldest first, filtered by session, status, run or parent."""
        if status is not None and status not in TRANSITIONS:
            raise TaskError(f"unknown task status {status!r}; expected one of {', '.join(TASK_STATUSES)}")
        where, params = [], []
        for col, val in (("session_id", session_id), ("status", status), ("run_id", run_id),
                         ("parent_id", parent_id)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = ("SELECT * FROM tasks" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY created_at, rowid LIMIT ? OFFSET ?")
        return [_task(r) for r in self.db.query(sql, [*params, int(limit), int(offset)])]

    def set_status(self, task_id: str, status: str, *, output: str | None = None, error: str | None = None,
                   agent_id: str | None = None) -> Task:
        """Move a task to ``status`` if the lifecycle allows it (checked inside the write transaction)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT status FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None:
                raise TaskNotFoundError(f"no task with id {task_id!r}")
            check_transition(task_id, row[0], status)
            now = time.time()
            conn.execute("UPDATE tasks SET status = ?, updated_at = ?, output = COALESCE(?, output),"
                         " error = COALESCE(?, error), agent_id = COALESCE(?, agent_id),"
                         " completed_at = CASE WHEN ? IN ('completed','failed','stopped') THEN ? ELSE completed_at END"
                         " WHERE id = ?", (status, now, output, error, agent_id, status, now, task_id))
        return self.get(task_id)

    def assign(self, task_id: str, agent_id: str) -> Task:
        """Give a pending task to an agent: it becomes ``running`` (seed ``task_assign``)."""
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise TaskError("task_assign: agent id must be a non-empty string")
        return self.set_status(task_id, "running", agent_id=agent_id)

    def complete(self, task_id: str, output: str | None = None, *, status: str = "completed") -> Task:
        """Finish a task with its output (``status``: completed or failed)."""
        if status not in ("completed", "failed"):
            raise TaskError(f"task_complete: status must be 'completed' or 'failed', got {status!r}")
        return self.set_status(task_id, status, output=output if status == "completed" else None,
                               error=output if status == "failed" else None)

    # --- used by the engine: one batched upsert per event-log flush -----------------------------------
    def upsert_agents(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        """Mirror engine ``agents`` rows into ``tasks`` (the engine enforces transitions in memory first)."""
        if not rows:
            return
        now = time.time()
        conn.executemany(
            "INSERT INTO tasks (id, session_id, agent_type, status, input, output, error, metadata, created_at,"
            " completed_at, parent_id, run_id, agent_id, depth, updated_at)"
            " VALUES (?,?,?,?,?,?,?,'{}',?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET status = excluded.status,"
            " output = excluded.output, error = excluded.error, completed_at = excluded.completed_at,"
            " agent_id = excluded.agent_id, updated_at = excluded.updated_at",
            [(r["id"], self._session(conn, r.get("session_id")), r["type"], r["status"], r.get("prompt"), r.get("result"),
              r.get("error"), r.get("_created", now), now if r["status"] in TERMINAL else None, r.get("parent_id"),
              r.get("run_id"), r["id"], r.get("depth", 0), now) for r in rows])
        conn.executemany(
            "INSERT OR IGNORE INTO task_relationships (id, from_task_id, to_task_id, relationship_type, created_at)"
            " VALUES (?,?,?,'parent_of',?)",
            [(str(uuid.uuid4()), r["parent_id"], r["id"], now) for r in rows if r.get("parent_id")])

    def _session(self, conn: Any, session_id: str | None) -> str | None:
        """The session id if that session exists (an engine run without sessions uses its run id: dropped)."""
        if session_id is None:
            return None
        return session_id if self._session_known(conn, session_id, remember_missing=True) else None

    # --- relationships -------------------------------------------------------------------------------
    def relate(self, from_task_id: str, to_task_id: str, relationship_type: str, *,
               metadata: dict[str, Any] | None = None, conn: Any = None) -> TaskRelationship:
        """Record ``from —type→ to``; unknown tasks, self links and duplicates are errors."""
        if relationship_type not in RELATIONSHIP_TYPES:
            raise TaskError(f"unknown relationship type {relationship_type!r}; expected one of "
                            f"{', '.join(RELATIONSHIP_TYPES)}")
        if from_task_id == to_task_id:
            raise TaskError(f"a task cannot have a {relationship_type} relationship with itself ({from_task_id})")
        if conn is None:
            with self.db.transaction() as c:
                return self.relate(from_task_id, to_task_id, relationship_type, metadata=metadata, conn=c)
        for tid in (from_task_id, to_task_id):
            if conn.execute("SELECT 1 FROM tasks WHERE id = ?", (tid,)).fetchone() is None:
                raise TaskNotFoundError(f"no task with id {tid!r}")
        if conn.execute("SELECT 1 FROM task_relationships WHERE from_task_id = ? AND to_task_id = ? AND"
                        " relationship_type = ?", (from_task_id, to_task_id, relationship_type)).fetchone():
            raise TaskError(f"relationship {from_task_id} {relationship_type} {to_task_id} already exists")
        rel = TaskRelationship(id=str(uuid.uuid4()), from_task_id=from_task_id, to_task_id=to_task_id,
                               relationship_type=relationship_type, metadata=metadata, created_at=time.time())
        conn.execute("INSERT INTO task_relationships (id, from_task_id, to_task_id, relationship_type, metadata,"
                     " created_at) VALUES (?,?,?,?,?,?)",
                     (rel.id, from_task_id, to_task_id, relationship_type,
                      json.dumps(metadata) if metadata is not None else None, rel.created_at))
        return rel

    def relationships(self, task_id: str, direction: str = "both") -> list[TaskRelationship]:
        """Relationships of a task: ``outgoing`` (from it), ``incoming`` (to it) or ``both``; newest first."""
        self.get(task_id)
        where = {"outgoing": "from_task_id = ?", "incoming": "to_task_id = ?",
                 "both": "(from_task_id = ? OR to_task_id = ?)"}.get(direction)
        if where is None:
            raise TaskError(f"direction must be outgoing, incoming or both, got {direction!r}")
        params = (task_id, task_id) if direction == "both" else (task_id,)
        rows = self.db.query(f"SELECT * FROM task_relationships WHERE {where} ORDER BY created_at DESC, rowid DESC",
                             params)
        return [_relationship(r) for r in rows]

    def ancestors(self, task_id: str, max_depth: int = 3) -> list[tuple[str, int]]:
        """``(ancestor id, distance)`` breadth first through ``parent_of`` and ``derived_from`` (docs/tasks.md)."""
        out: list[tuple[str, int]] = []
        seen = {task_id}
        frontier = [(task_id, 0)]
        while frontier:
            current, depth = frontier.pop(0)
            if depth >= max_depth:
                continue
            rows = self.db.query("SELECT from_task_id FROM task_relationships WHERE to_task_id = ? AND"
                                 " relationship_type IN ('parent_of', 'derived_from') ORDER BY rowid", (current,))
            for (parent,) in rows:
                if parent not in seen:
                    seen.add(parent)
                    out.append((parent, depth + 1))
                    frontier.append((parent, depth + 1))
        return out

