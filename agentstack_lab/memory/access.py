"""Session isolation for memory (docs/notebook.md).

A session's private memory lives in the namespace ``session:{id}``. Every memory
operation is checked: a caller scoped to session A may use its own namespace and
the non-session (shared) namespaces, never ``session:B``. An unscoped caller (the
user at the CLI or in a notebook) may use the shared namespaces only. Denials raise
:class:`AccessDeniedError` and are logged; :func:`can_access_entry` is the
non-throwing form used to filter rows.

An empty session id is an error, never "no session": treating ``""`` as unscoped would put a
note meant to be private into the shared namespace, readable by all and never cleaned up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["AccessContext", "AccessDeniedError", "MemoryValidationError", "SessionError", "SESSION_PREFIX", "check_session_id",
           "session_namespace", "is_session_namespace", "extract_session_id", "validate_access", "can_access_entry",
           "derive_namespace", "check_sessions_active"]

log = logging.getLogger(__name__)

SESSION_PREFIX = "session:"


class AccessDeniedError(AgentstackError, PermissionError):
    """A memory operation reached into a session namespace it does not belong to."""


class MemoryValidationError(AgentstackError, ValueError):
    """Bad input to a memory operation (nothing was changed)."""


class SessionError(AgentstackError, ValueError):
    """Unknown, ended or empty session id, or an invalid status transition (nothing was changed)."""


def check_session_id(session_id: object) -> str:
    """``session_id`` if it is a usable id; ``""`` (or only spaces, or a non-string) raises :class:`SessionError`."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise SessionError(f"session id must be a non-empty string, got {session_id!r}; "
                           "leave it out to use the shared namespaces")
    return session_id


@dataclass(frozen=True)
class AccessContext:
    """Who is asking: a session (optional for the user), an agent within it, and whether shared rows count."""

    session_id: str | None = None
    agent_id: str | None = None
    include_shared: bool = True

    def __post_init__(self) -> None:
        if self.session_id is not None:
            check_session_id(self.session_id)


def session_namespace(session_id: str) -> str:
    return f"{SESSION_PREFIX}{check_session_id(session_id)}"


def is_session_namespace(namespace: str) -> bool:
    return namespace.startswith(SESSION_PREFIX)


def extract_session_id(namespace: str) -> str | None:
    return namespace[len(SESSION_PREFIX):] if is_session_namespace(namespace) else None


def can_access_entry(context: AccessContext | None, namespace: str, agent_id: str | None = None) -> bool:
    """Non-throwing check: may ``context`` see an entry in ``namespace`` owned by ``agent_id``?"""
    owner = extract_session_id(namespace)
    if owner is not None and (context is None or context.session_id != owner):
        return False
    if context is not None and context.agent_id is not None:
        if agent_id is None:
            return context.include_shared
        return agent_id == context.agent_id
    return True


def validate_access(context: AccessContext | None, namespace: str, operation: str) -> None:
    """Raise :class:`AccessDeniedError` (and log it) when ``namespace`` belongs to another session."""
    owner = extract_session_id(namespace)
    if owner is None:
        return
    mine = context.session_id if context else None
    if mine == owner:
        return
    who = f"session {mine!r}" if mine else "an unscoped caller"
    log.warning("memory access denied: %s tried to %s in namespace %r", who, operation, namespace)
    raise AccessDeniedError(f"{operation} denied: namespace {namespace!r} belongs to another session"
                            + ("" if mine else f" (scope the memory with session_id={owner!r} to use it)"))


def derive_namespace(context: AccessContext | None, namespace: str | None = None) -> str:
    """The namespace an operation uses: the explicit one, else the session's own, else ``"default"``."""
    if namespace is not None:
        return namespace
    if context is not None and context.session_id is not None:
        return session_namespace(context.session_id)
    return "default"


def check_sessions_active(conn: Any, namespaces: Iterable[str]) -> None:
    """Raise :class:`SessionError` unless the session of every session namespace exists and is active.

    Call it inside the write transaction (SQLite: ``BEGIN IMMEDIATE``): ending a session takes the same
    write lock, so no write can slip in between this check and its own commit. On PostgreSQL the
    rows are locked ``FOR SHARE`` and :meth:`Sessions.end` locks its row ``FOR UPDATE`` first.
    """
    ids = sorted({sid for ns in namespaces if (sid := extract_session_id(ns)) is not None})
    if not ids:
        return
    # PostgreSQL: lock the session rows FOR SHARE (ending one locks FOR UPDATE); SQLite: the write lock is held
    lock = getattr(conn, "FOR_SHARE", "")
    found = dict(conn.execute(f"SELECT id, status FROM sessions WHERE id IN ({','.join('?' * len(ids))}){lock}",
                              ids).fetchall())
    for sid in ids:
        status = found.get(sid)
        if status is None:
            raise SessionError(f"no session with id {sid!r}; start one before writing to {session_namespace(sid)!r}")
        if status != "active":
            raise SessionError(f"session {sid!r} has ended; its namespace takes no new entries (start a new session)")
