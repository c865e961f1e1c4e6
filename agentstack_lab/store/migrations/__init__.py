"""Named, append-only schema migrations, recorded in ``_migrations``.

Never edit or reorder a migration that has shipped: append a new one. A migration is a function
taking a connection, named after what it adds; it runs once per database, in the order of
:data:`MIGRATIONS`, and its name is what ``_migrations`` records. The steps live by area
(:mod:`.foundation`, :mod:`.engine`, :mod:`.control_plane`; one module of 680 lines before) and the
order is the single list at the bottom of this module: a new migration goes into its area's module
and at the end of that list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentstack_lab.store.migrations import control_plane, engine, foundation

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["MIGRATIONS", "migration", "migrate", "applied"]

MIGRATIONS: list[tuple[str, Callable[[Any], None]]] = []


def migration(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register ``fn`` as the next migration, named after the function."""
    if any(name == fn.__name__ for name, _ in MIGRATIONS):
        raise ValueError(f"duplicate migration name {fn.__name__!r}")
    MIGRATIONS.append((fn.__name__, fn))
    return fn


def applied(db: Database) -> list[str]:
    return [r[0] for r in db.query("SELECT name FROM _migrations ORDER BY id")]


def migrate(db: Database, *, upto: int | None = None) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied now.

    ``upto`` applies only the first ``upto`` migrations: a database as an older release left it
    (the upgrade test starts from every such prefix).
    """
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
               " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))")
    done: list[str] = []
    for name, fn in MIGRATIONS[:upto]:
        with db.transaction() as conn:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name) VALUES (?)", (name,))
            done.append(name)
    return done


def _register(*steps: Callable[[Any], None]) -> None:
    for step in steps:
        migration(step)


# --- the order, oldest first (append only) ------------------------------------------------------
_register(
    engine.engine_agents,
    engine.engine_identities,
    engine.engine_events,
    foundation.foundation_memory,
    foundation.foundation_vectors,
    foundation.foundation_sessions_tasks,
    foundation.foundation_memory_bulk,
    foundation.foundation_memory_lean_inserts,
    engine.engine_run_owners,
    foundation.foundation_fts_hashsize,
    foundation.foundation_session_tokens,
    engine.engine_agents_identity,
    engine.engine_agents_names_free_when_done,
    control_plane.services_decisions,
    control_plane.services_interventions,
    control_plane.tasks_control_plane,
    control_plane.coordination_queue_and_messages,
    control_plane.monitoring_phase_changes,
    engine.engine_provenance,
    control_plane.workflows_review_loops,
    control_plane.tasks_session_id_without_fk,
    foundation.foundation_fts_own_file,
    engine.engine_runs_list_indexes,
    foundation.foundation_memory_reembed,
    control_plane.approval_saved_rules,
)
