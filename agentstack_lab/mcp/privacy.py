"""Who may see and touch a private session's runs, tasks, decisions and interventions over MCP.

A session started with ``session_start`` is private (its token's sha256 is stored). Everything a run
of that session owns (its agents, tasks, decisions, interventions) is readable and writable only by a
caller that passes the session's ``session_id`` and ``session_token``; listing tools leave such rows
out for everyone else, and a direct read or write by id names the missing token in one line.
"""

from __future__ import annotations

from typing import Any

from agentstack_lab.errors import UsageError

__all__ = ["Privacy"]


class Privacy:
    """Checks over one workspace database; ``caller`` is the session id a tool call proved (or ``None``)."""

    def __init__(self, workspace: Any):
        self.ws = workspace

    def caller(self, session_id: str | None, token: str | None) -> str | None:
        """The session the call proved with its token (``SessionAccessError`` when the token is wrong)."""
        if session_id is None:
            if token is not None:
                raise UsageError("session_token was given without session_id")
            return None
        self.ws.sessions.authorize(session_id, token)
        return session_id

    def private_sessions(self) -> set[str]:
        return {r[0] for r in self.ws.db.query("SELECT id FROM sessions WHERE token_hash IS NOT NULL")}

    def private_runs(self) -> dict[str, str]:
        """Run id → its private session id, for every run that belongs to a private session."""
        rows = self.ws.db.query("SELECT DISTINCT a.run_id, a.session_id FROM agents a JOIN sessions s ON "
                                "s.id = a.session_id WHERE s.token_hash IS NOT NULL AND a.run_id IS NOT NULL")
        return {r[0]: r[1] for r in rows}

    def owner(self, *, run_id: str | None = None, session_id: str | None = None) -> str | None:
        """The private session owning a row with these ``run_id``/``session_id`` columns, else ``None``."""
        if session_id is not None and session_id in self.private_sessions():
            return session_id
        return self.private_runs().get(run_id) if run_id is not None else None

    def visible(self, caller: str | None, *, run_id: str | None = None, session_id: str | None = None) -> bool:
        owner = self.owner(run_id=run_id, session_id=session_id)
        return owner is None or owner == caller

    def require(self, caller: str | None, what: str, *, run_id: str | None = None,
                session_id: str | None = None) -> None:
        """Raise ``SessionAccessError`` unless ``caller`` may see the row (``what`` names it in the message)."""
        from agentstack_lab.memory.sessions import SessionAccessError

        owner = self.owner(run_id=run_id, session_id=session_id)
        if owner is not None and owner != caller:
            raise SessionAccessError(f"{what} belongs to private session {owner!r}: pass its session_id and "
                                     "session_token")

    def filter(self, caller: str | None, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` (dicts with ``run_id``/``session_id``) without those of private sessions not the caller's."""
        sessions, runs = self.private_sessions(), self.private_runs()

        def ok(r: dict[str, Any]) -> bool:
            run_id = r.get("run_id")
            owner = r.get("session_id") if r.get("session_id") in sessions else \
                (runs.get(run_id) if run_id is not None else None)
            return owner is None or owner == caller
        return [r for r in rows if ok(r)]
