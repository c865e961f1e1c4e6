"""Sessions: a session owns the memory namespace ``session:{id}``; ending it deletes that namespace.

Ending a session removes, in one transaction, every entry of its namespace together
with what hangs off them (FTS rows by trigger, vector rows, tags, versions and
relationships by ``ON DELETE CASCADE``). Entries of other namespaces are untouched.

An ended session's namespace stays empty: every memory write checks, inside its own
``BEGIN IMMEDIATE`` transaction, that the session of each session namespace it touches is
active (:func:`~agentstack_lab.memory.access.check_sessions_active`). Ending takes the same
write lock, so a writer in another process either commits before the end (and its rows are
purged with the rest) or sees the session ended and writes nothing. Checking only before
the transaction (as the surfaces did) left a row behind or crashed the writer in 3 of 3 trials
of the two-process test in ``tests/test_memory_sessions_hardening.py``.

On PostgreSQL (``memory.backend = "postgres"``) the sessions table lives with the memory, and the
same guarantee holds through row locks: writers lock their session rows ``FOR SHARE``, :meth:`Sessions.end`
locks its row ``FOR UPDATE`` before purging.

Session ids are not secrets (they are listed by ``active()`` and shown by every surface), so a
session may also be guarded by a secret token: :meth:`Sessions.start_private` and
:meth:`Sessions.issue_token` return 32 random bytes (URL-safe, 43 characters) once and store only
their sha256; :meth:`Sessions.authorize` checks a presented token in constant time. The MCP
server requires it; the local user's own surfaces (CLI, Python API, notebook) do not.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import AgentstackError
from agentstack_lab.memory.access import SessionError, check_session_id, session_namespace

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Session", "Sessions", "SessionError", "SessionAccessError", "token_hash"]


class SessionAccessError(AgentstackError, PermissionError):
    """A session's private namespace was asked for without its secret token (nothing was read or changed)."""


def token_hash(token: str) -> str:
    """What is stored of a session token: its sha256 (hex). The token is 256 random bits, so no salt or KDF."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Session:
    id: str
    name: str | None
    status: str                      # "active" | "ended"
    started_at: float
    ended_at: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entries: int = 0                 # memory entries in its namespace now (for end(): how many were removed)

    @property
    def namespace(self) -> str:
        return session_namespace(self.id)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "status": self.status, "started_at": self.started_at,
                "ended_at": self.ended_at, "metadata": dict(self.metadata), "namespace": self.namespace,
                "entries": self.entries}


class Sessions:
    """Start, end and inspect sessions of one workspace database."""

    def __init__(self, db: Database, memory: Any):
        self.db = db
        self.memory = memory

    def _row(self, session_id: str) -> Any:
        check_session_id(session_id)
        row = self.db.conn.execute("SELECT id, name, status, started_at, ended_at, metadata FROM sessions"
                                   " WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionError(f"no session with id {session_id!r}")
        return row

    def _session(self, row: Any, entries: int | None = None) -> Session:
        if entries is None:
            entries = int(self.db.conn.execute("SELECT count(*) FROM memory WHERE namespace = ?",
                                               (session_namespace(row[0]),)).fetchone()[0])
        return Session(id=row[0], name=row[1], status=row[2], started_at=row[3], ended_at=row[4],
                       metadata=json.loads(row[5]), entries=entries)

    def start(self, name: str | None = None, *, metadata: dict[str, Any] | None = None) -> Session:
        """Open a new active session."""
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise SessionError(f"session name must be a non-empty string, got {name!r}")
        try:
            meta = json.dumps(metadata or {})
        except (TypeError, ValueError) as exc:
            raise SessionError(f"session metadata is not JSON-serialisable: {exc}") from None
        sid = uuid.uuid4().hex[:12]
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO sessions (id, name, status, started_at, metadata) VALUES (?, ?, 'active', ?, ?)",
                         (sid, name, time.time(), meta))
        return self.status(sid)

    def end(self, session_id: str) -> Session:
        """End an active session and delete its namespace; ``entries`` on the result = entries removed."""
        with self.db.transaction() as conn:
            check_session_id(session_id)
            # PostgreSQL: wait for writers holding the row FOR SHARE, and keep new ones out until we commit
            conn.execute(f"SELECT id FROM sessions WHERE id = ?{getattr(conn, 'FOR_UPDATE', '')}", (session_id,))
            row = self._row(session_id)
            if row[2] != "active":
                raise SessionError(f"session {session_id!r} is already {row[2]}; only an active session can end")
            removed = self.memory._purge(conn, session_namespace(session_id))
            conn.execute("UPDATE sessions SET status = 'ended', ended_at = ? WHERE id = ?", (time.time(), session_id))
            row = self._row(session_id)
        return self._session(row, entries=removed)

    def status(self, session_id: str) -> Session:
        return self._session(self._row(session_id))

    def require_active(self, session_id: str) -> Session:
        """The session, if it exists and is active: an ended session's namespace takes no new entries."""
        s = self.status(session_id)
        if s.status != "active":
            raise SessionError(f"session {session_id!r} has ended; start a new one")
        return s

    # --- secret tokens (MCP session privacy) -------------------------------------------------------
    def start_private(self, name: str | None = None, *,
                      metadata: dict[str, Any] | None = None) -> tuple[Session, str]:
        """Start a session guarded by a secret token; returns ``(session, token)``, the token only this once."""
        session = self.start(name, metadata=metadata)
        return session, self.issue_token(session.id)

    def issue_token(self, session_id: str) -> str:
        """A new secret token for an active session (an earlier one stops working); only its sha256 is kept."""
        token = secrets.token_urlsafe(32)
        with self.db.transaction() as conn:
            row = self._row(session_id)
            if row[2] != "active":
                raise SessionError(f"session {session_id!r} has ended; start a new one")
            conn.execute("UPDATE sessions SET token_hash = ? WHERE id = ?", (token_hash(token), session_id))
        return token

    def authorize(self, session_id: str, token: str | None) -> Session:
        """The session, if ``token`` is its secret; :class:`SessionAccessError` when missing, wrong or never issued."""
        row = self.db.conn.execute("SELECT token_hash FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionError(f"no session with id {session_id!r}")
        if row[0] is None:
            raise SessionAccessError(f"session {session_id!r} has no session token (it was started outside MCP); "
                                     "its owner can issue one with Sessions.issue_token")
        if not token:
            raise SessionAccessError(f"session {session_id!r} is private: pass the session_token that "
                                     "session_start returned")
        if not hmac.compare_digest(row[0], token_hash(token)):
            raise SessionAccessError(f"wrong session_token for session {session_id!r}")
        return self.status(session_id)

    def get(self, session_id: str) -> Session | None:
        """The session, or ``None`` when there is none with that id (an empty id still raises)."""
        check_session_id(session_id)
        try:
            return self.status(session_id)
        except SessionError:
            return None

    def active(self) -> builtins.list[Session]:
        """Active sessions, most recent first."""
        return self.list(status="active")

    def list(self, *, status: str | None = None, limit: int = 100) -> builtins.list[Session]:
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
        rows = self.db.query(f"SELECT id, name, status, started_at, ended_at, metadata FROM sessions {where}"
                             " ORDER BY started_at DESC LIMIT ?", [*params, limit])
        return [self._session(r) for r in rows]
