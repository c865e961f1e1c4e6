"""Session isolation for memory (design seed §2.5).

A session's private memory lives in the namespace ``session:{id}``. Every memory
operation is checked: a caller scoped to session A may use its own namespace and
the non-session (shared) namespaces, never ``session:B``. An unscoped caller (the
user at the CLI or in a notebook) may use the shared namespaces only. Denials raise
:class:`AccessDeniedError` and are logged; :func:`can_access_entry` is the
non-throwing form used to filter rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agentstack_lab.errors import AgentstackError

__all__ = ["AccessContext", "AccessDeniedError", "SESSION_PREFIX", "session_namespace", "is_session_namespace",
           "extract_session_id", "validate_access", "can_access_entry", "derive_namespace"]

log = logging.getLogger(__name__)

SESSION_PREFIX = "session:"


class AccessDeniedError(AgentstackError, PermissionError):
    """A memory operation reached into a session namespace it does not belong to."""


@dataclass(frozen=True)
class AccessContext:
    """Who is asking: a session (optional for the user), an agent within it, and whether shared rows count."""

    session_id: str | None = None
    agent_id: str | None = None
    include_shared: bool = True


def session_namespace(session_id: str) -> str:
    if not session_id:
        raise ValueError("session id must be a non-empty string")
    return f"{SESSION_PREFIX}{session_id}"


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
    if context is not None and context.session_id:
        return session_namespace(context.session_id)
    return "default"
