"""Named, append-only schema migrations, recorded in ``_migrations``.

Never edit or reorder a migration that has shipped: append a new one. Each layer
adds its tables here, in order, as a named function taking a connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MIGRATIONS", "migration", "migrate", "applied"]

MIGRATIONS: list[tuple[str, Callable[[Any], None]]] = []


def migration(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register ``fn`` as the next migration, named after the function."""
    if any(name == fn.__name__ for name, _ in MIGRATIONS):
        raise ValueError(f"duplicate migration name {fn.__name__!r}")
    MIGRATIONS.append((fn.__name__, fn))
    return fn


def applied(db: Any) -> list[str]:
    return [r[0] for r in db.query("SELECT name FROM _migrations ORDER BY id")]


def migrate(db: Any) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied now."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
               " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))")
    done: list[str] = []
    for name, fn in MIGRATIONS:
        with db.transaction() as conn:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name) VALUES (?)", (name,))
            done.append(name)
    return done


# --- migrations, in order (append only) ---------------------------------------------------------
# Foundation (memory, sessions, tasks, vectors) first; the engine's tables (agents, identities,
# events) after. See each layer's module for what the tables are for.


@migration
def engine_agents(conn: Any) -> None:
    """Agents of engine runs and of the spawner; status transitions are enforced in ``agents/spawner.py``."""
    conn.execute("""
        CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            status TEXT NOT NULL,
            run_id TEXT,
            parent_id TEXT,
            session_id TEXT,
            depth INTEGER NOT NULL DEFAULT 0,
            prompt TEXT,
            result TEXT,
            error TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            started_at TEXT,
            ended_at TEXT,
            updated_at TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX agents_session ON agents(session_id)")
    conn.execute("CREATE INDEX agents_run ON agents(run_id)")
    conn.execute("CREATE INDEX agents_status ON agents(status)")


@migration
def engine_identities(conn: Any) -> None:
    """Persistent agent identities (created → active ⇄ dormant → retired) and their audit trail."""
    conn.execute("""
        CREATE TABLE identities (
            agent_id TEXT PRIMARY KEY,
            agent_type TEXT NOT NULL,
            status TEXT NOT NULL,
            capabilities TEXT NOT NULL DEFAULT '[]',
            version INTEGER NOT NULL DEFAULT 1,
            display_name TEXT UNIQUE,
            description TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            last_active_at TEXT NOT NULL,
            retired_at TEXT,
            retirement_reason TEXT,
            created_by TEXT,
            updated_at TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX identities_status ON identities(status)")
    conn.execute("""
        CREATE TABLE identity_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            agent_id TEXT NOT NULL REFERENCES identities(agent_id) ON DELETE CASCADE,
            action TEXT NOT NULL,
            previous_status TEXT,
            new_status TEXT,
            reason TEXT,
            actor_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            timestamp TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX identity_audit_agent ON identity_audit(agent_id, id)")


@migration
def engine_events(conn: Any) -> None:
    """The event log: every outbound engine event with a monotonic sequence number (wire JSON)."""
    conn.execute("""
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            agent_id TEXT,
            type TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE INDEX events_run ON events(run_id, seq)")
