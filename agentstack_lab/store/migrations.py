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
