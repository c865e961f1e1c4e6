"""User interventions addressed to a run that may live in another process (seed 000 ``user-intervention``).

The CLI (``agent comment|pause|resume|stop ID``) and MCP write a row; the engine that owns the run
reads its unapplied rows (the same ``PRAGMA data_version`` check as decisions, every
:data:`~agentstack_lab.decisions.store.POLL_S`), applies each between steps and tool calls, and
marks it applied. A row for a run whose process is gone is never applied: the writer checks that
the agent is still unfinished, and the reaper fails such runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentstack_lab.decisions.store import DecisionError
from agentstack_lab.events import INTERVENTION_ACTIONS, TERMINAL

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Intervention", "Interventions", "ACTIONS", "interventions_for"]

ACTIONS = INTERVENTION_ACTIONS
"""What a person can do to a running agent from any surface (defined in :mod:`agentstack_lab.events`)."""


@dataclass(frozen=True, kw_only=True)
class Intervention:
    """One requested intervention (``text`` for ``comment`` and ``content``)."""

    id: int
    run_id: str
    agent_id: str
    action: str
    text: str | None = None
    surface: str | None = None
    created_by: str | None = None
    created_at: float = 0.0
    applied_at: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_COLUMNS = ("id", "run_id", "agent_id", "action", "text", "surface", "created_by", "created_at", "applied_at",
            "error")


class Interventions:
    """Queue and read interventions (``ws.interventions``)."""

    def __init__(self, db: Database):
        self.db = db

    def request(self, agent_id: str, action: str, text: str | None = None, *, surface: str = "python",
                by: str | None = None) -> Intervention:
        """Queue ``action`` for agent ``agent_id`` (an id or unique id prefix of an unfinished engine agent)."""
        if action not in ACTIONS:
            raise DecisionError(f"unknown intervention {action!r}; expected one of {', '.join(ACTIONS)}")
        if action in ("comment", "content") and (not isinstance(text, str) or not text.strip()):
            raise DecisionError(f"intervention {action!r} needs a non-empty text")
        rows = self.db.query("SELECT id, run_id, status FROM agents WHERE id = ? OR (length(?) >= 4 AND id >= ?"
                             " AND id < ?) LIMIT 2", (agent_id, agent_id, agent_id, agent_id + "\uffff"))
        exact = [r for r in rows if r[0] == agent_id]
        rows = exact or rows
        if not rows:
            from agentstack_lab.errors import NotFoundError

            raise NotFoundError(f"no agent {agent_id!r}")
        if len(rows) > 1:
            raise DecisionError(f"agent id prefix {agent_id!r} is ambiguous; give more of it")
        full_id, run_id, status = rows[0][0], rows[0][1], rows[0][2]
        if run_id is None:
            raise DecisionError(f"agent {full_id} is not part of an engine run")
        if status in TERMINAL:
            raise DecisionError(f"agent {full_id} is {status}: nothing to {action}")
        now = time.time()
        with self.db.transaction() as conn:
            cur = conn.execute("INSERT INTO interventions (run_id, agent_id, action, text, surface, created_by,"
                               " created_at) VALUES (?,?,?,?,?,?,?)", (run_id, full_id, action, text, surface, by, now))
            new_id = cur.lastrowid
        return self.get(int(new_id))

    def get(self, id: int) -> Intervention:  # noqa: A002
        rows = self.db.query(f"SELECT {', '.join(_COLUMNS)} FROM interventions WHERE id = ?", (int(id),))
        if not rows:
            from agentstack_lab.errors import NotFoundError

            raise NotFoundError(f"no intervention {id}")
        return Intervention(**dict(zip(_COLUMNS, tuple(rows[0]), strict=True)))

    def pending(self, run_id: str) -> list[Intervention]:
        """Unapplied interventions of a run, oldest first."""
        rows = self.db.query(f"SELECT {', '.join(_COLUMNS)} FROM interventions WHERE run_id = ? AND applied_at"
                             " IS NULL ORDER BY id", (run_id,))
        return [Intervention(**dict(zip(_COLUMNS, tuple(r), strict=True))) for r in rows]

    def mark_applied(self, id: int, error: str | None = None) -> None:  # noqa: A002
        """Record that the engine applied (or refused, with ``error``) an intervention."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE interventions SET applied_at = ?, error = ? WHERE id = ? AND applied_at IS NULL",
                         (time.time(), error, int(id)))


def interventions_for(workspace: Any) -> Interventions:
    """The :class:`Interventions` queue of a workspace's database."""
    return Interventions(workspace.db)
