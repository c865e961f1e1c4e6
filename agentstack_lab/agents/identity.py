"""Persistent agent identities with a lifecycle and an audit trail (docs/notebook.md).

created → active ⇄ dormant → retired (and created → retired). Every change, including
metadata updates, writes an ``identity_audit`` row in the same transaction.

An engine run may act as an identity (``RunOptions(identity=...)``): the run's agents carry its id
(``agents.identity_id``) and the identity's audit gets one ``spawned`` row per run. A retired identity
cannot spawn: the status is checked inside the transaction that would write that row, so the audit
never claims a spawn that was refused.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentstack_lab.agents.spawner import InvalidTransitionError, now_iso
from agentstack_lab.errors import AgentstackError, UsageError

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["IdentityService", "AgentIdentity", "AuditEntry", "IDENTITY_TRANSITIONS", "IdentityNotFoundError",
           "IdentityRetiredError"]

IDENTITY_TRANSITIONS: dict[str, frozenset[str]] = {
    "created": frozenset({"active", "retired"}),
    "active": frozenset({"dormant", "retired"}),
    "dormant": frozenset({"active", "retired"}),
    "retired": frozenset(),
}


class IdentityNotFoundError(AgentstackError, KeyError):
    """No identity with that id or name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IdentityRetiredError(AgentstackError, PermissionError):
    """A retired identity was asked to spawn an agent (retirement is final)."""


@dataclass(kw_only=True)
class AgentIdentity:
    agent_id: str
    agent_type: str
    status: str
    capabilities: list[Any] = field(default_factory=list)
    version: int = 1
    display_name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    last_active_at: str = ""
    retired_at: str | None = None
    retirement_reason: str | None = None
    created_by: str | None = None
    updated_at: str = ""

    @classmethod
    def from_row(cls, row: Any) -> AgentIdentity:
        d = dict(zip(row.keys(), tuple(row), strict=True))
        d["capabilities"] = json.loads(d["capabilities"] or "[]")
        d["metadata"] = json.loads(d["metadata"] or "{}")
        return cls(**d)


@dataclass(kw_only=True)
class AuditEntry:
    id: int
    agent_id: str
    action: str
    previous_status: str | None
    new_status: str | None
    reason: str | None
    actor_id: str | None
    metadata: dict[str, Any]
    timestamp: str


class IdentityService:
    """Create, look up, list and move identities through their lifecycle."""

    def __init__(self, db: Database, registry: Any = None):
        self.db = db
        self.registry = registry

    def create(self, agent_type: str, *, display_name: str | None = None, description: str | None = None,
               capabilities: list[Any] | None = None, metadata: dict[str, Any] | None = None,
               created_by: str | None = None, agent_id: str | None = None) -> AgentIdentity:
        """Create an identity in status ``created``."""
        if self.registry is not None:
            self.registry.get(agent_type)
        agent_id = agent_id or str(uuid.uuid4())
        stamp = now_iso()
        with self.db.transaction() as conn:
            self._check_name_free(conn, display_name, agent_id)
            conn.execute(
                "INSERT INTO identities (agent_id, agent_type, status, capabilities, display_name, description,"
                " metadata, created_at, last_active_at, created_by, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (agent_id, agent_type, "created", json.dumps(capabilities or []), display_name, description,
                 json.dumps(metadata or {}), stamp, stamp, created_by, stamp))
            self._audit(conn, agent_id, "created", None, "created", None, created_by)
        return self.get(agent_id)  # type: ignore[return-value]

    def get(self, agent_id: str) -> AgentIdentity | None:
        rows = self.db.query("SELECT * FROM identities WHERE agent_id = ?", (agent_id,))
        return AgentIdentity.from_row(rows[0]) if rows else None

    def get_by_name(self, display_name: str) -> AgentIdentity | None:
        rows = self.db.query("SELECT * FROM identities WHERE display_name = ?", (display_name,))
        return AgentIdentity.from_row(rows[0]) if rows else None

    def list(self, *, status: str | None = None, agent_type: str | None = None, limit: int = 100) -> list[AgentIdentity]:
        where, params = [], []
        if status is not None:
            if status not in IDENTITY_TRANSITIONS:
                raise ValueError(f"unknown identity status {status!r}; expected one of {', '.join(IDENTITY_TRANSITIONS)}")
            where.append("status = ?")
            params.append(status)
        if agent_type is not None:
            where.append("agent_type = ?")
            params.append(agent_type)
        sql = ("SELECT * FROM identities" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY created_at, rowid LIMIT ?")
        return [AgentIdentity.from_row(r) for r in self.db.query(sql, [*params, int(limit)])]

    def update(self, agent_id: str, *, actor_id: str | None = None, display_name: str | None = None,
               description: str | None = None, capabilities: list[Any] | None = None,
               metadata: dict[str, Any] | None = None) -> AgentIdentity:
        """Update descriptive fields (bumps ``version``); retired identities cannot change."""
        changes = {k: v for k, v in (("display_name", display_name), ("description", description),
                                     ("capabilities", capabilities), ("metadata", metadata)) if v is not None}
        if not changes:
            raise ValueError("update needs at least one of display_name, description, capabilities, metadata")
        with self.db.transaction() as conn:
            current = self._row(conn, agent_id)
            if current["status"] == "retired":
                raise InvalidTransitionError(f"identity {agent_id}: retired identities cannot be updated")
            self._check_name_free(conn, display_name, agent_id)
            sets = ", ".join(f"{k} = ?" for k in changes)
            values = [json.dumps(v) if k in ("capabilities", "metadata") else v for k, v in changes.items()]
            conn.execute(f"UPDATE identities SET {sets}, version = version + 1, updated_at = ? WHERE agent_id = ?",
                         (*values, now_iso(), agent_id))
            self._audit(conn, agent_id, "updated", current["status"], current["status"], None, actor_id,
                        {"fields": sorted(changes)})
        return self.get(agent_id)  # type: ignore[return-value]

    def activate(self, agent_id: str, actor_id: str | None = None, reason: str | None = None) -> AgentIdentity:
        return self._transition(agent_id, "active", "activated", reason, actor_id)

    def deactivate(self, agent_id: str, reason: str | None = None, actor_id: str | None = None) -> AgentIdentity:
        return self._transition(agent_id, "dormant", "deactivated", reason, actor_id)

    def retire(self, agent_id: str, reason: str | None = None, actor_id: str | None = None) -> AgentIdentity:
        return self._transition(agent_id, "retired", "retired", reason, actor_id)

    def resolve(self, ref: str) -> AgentIdentity:
        """The identity whose id or display name is ``ref`` (id first); unknown is :class:`IdentityNotFoundError`."""
        found = self.get(ref) or self.get_by_name(ref)
        if found is None:
            raise IdentityNotFoundError(f"no identity with id or name {ref!r}")
        return found

    def require_can_spawn(self, ref: str) -> AgentIdentity:
        """The identity ``ref``, if it may spawn agents now (any status but ``retired``)."""
        identity = self.resolve(ref)
        if identity.status == "retired":
            raise IdentityRetiredError(_retired_message(identity.agent_id, identity.display_name))
        return identity

    def record_spawn(self, agent_id: str, spawned_agent_id: str, actor_id: str | None = None) -> AgentIdentity:
        """Record in the audit trail that this identity spawned ``spawned_agent_id``.

        The status is read inside the write transaction: a retired identity raises
        :class:`IdentityRetiredError` and nothing is written.
        """
        with self.db.transaction() as conn:
            current = self._row(conn, agent_id)
            if current["status"] == "retired":
                raise IdentityRetiredError(_retired_message(agent_id, current["display_name"]))
            conn.execute("UPDATE identities SET last_active_at = ? WHERE agent_id = ?", (now_iso(), agent_id))
            self._audit(conn, agent_id, "spawned", current["status"], current["status"], None, actor_id,
                        {"spawned_agent_id": spawned_agent_id})
        return self.get(agent_id)  # type: ignore[return-value]

    def get_audit_trail(self, agent_id: str, limit: int = 50) -> list[AuditEntry]:
        """Audit entries for an identity, newest first."""
        rows = self.db.query("SELECT * FROM identity_audit WHERE agent_id = ? ORDER BY id DESC LIMIT ?",
                             (agent_id, int(limit)))
        out = []
        for r in rows:
            d = dict(zip(r.keys(), tuple(r), strict=True))
            d["metadata"] = json.loads(d["metadata"] or "{}")
            out.append(AuditEntry(**d))
        return out

    # --- internals --------------------------------------------------------------------------

    @staticmethod
    def _check_name_free(conn: Any, display_name: str | None, agent_id: str) -> None:
        if display_name and conn.execute("SELECT 1 FROM identities WHERE display_name = ? AND agent_id != ?",
                                         (display_name, agent_id)).fetchone():
            raise UsageError(f"an identity named {display_name!r} already exists")

    def _row(self, conn: Any, agent_id: str) -> Any:
        row = conn.execute("SELECT * FROM identities WHERE agent_id = ?", (agent_id,)).fetchone()
        if row is None:
            raise IdentityNotFoundError(f"no identity with id {agent_id!r}")
        return row

    def _transition(self, agent_id: str, new: str, action: str, reason: str | None,
                    actor_id: str | None) -> AgentIdentity:
        with self.db.transaction() as conn:
            current = self._row(conn, agent_id)["status"]
            if new not in IDENTITY_TRANSITIONS[current]:
                allowed = ", ".join(sorted(IDENTITY_TRANSITIONS[current])) or "none (retired is final)"
                raise InvalidTransitionError(
                    f"identity {agent_id}: cannot go from {current!r} to {new!r} (allowed: {allowed})")
            stamp = now_iso()
            extra = ", retired_at = ?, retirement_reason = ?" if new == "retired" else ""
            params: tuple[Any, ...] = (new, stamp, stamp) + ((stamp, reason) if new == "retired" else ())
            conn.execute(f"UPDATE identities SET status = ?, updated_at = ?, last_active_at = ?{extra}"
                         " WHERE agent_id = ?", (*params, agent_id))
            self._audit(conn, agent_id, action, current, new, reason, actor_id)
        return self.get(agent_id)  # type: ignore[return-value]

    def _audit(self, conn: Any, agent_id: str, action: str, previous: str | None, new: str | None,
               reason: str | None, actor_id: str | None, metadata: dict[str, Any] | None = None) -> None:
        conn.execute("INSERT INTO identity_audit (agent_id, action, previous_status, new_status, reason, actor_id,"
                     " metadata, timestamp) VALUES (?,?,?,?,?,?,?,?)",
                     (agent_id, action, previous, new, reason, actor_id, json.dumps(metadata or {}), now_iso()))


def _retired_message(agent_id: str, display_name: str | None) -> str:
    label = f"{display_name!r} ({agent_id})" if display_name else repr(agent_id)
    return f"identity {label} is retired and cannot spawn agents"
