"""Where memory lives: the workspace's SQLite file (default) or a team's PostgreSQL + pgvector.

A backend owns every SQL statement about the memory tables; :class:`~agentstack_lab.memory.api.Memory`
(validation, access control, the search pipeline) is the same class over both. The contract is
:class:`~agentstack_lab.memory.backends.base.Backend`; :func:`open_backend` picks the implementation
from the database object it is handed (the workspace's ``SQLiteDatabase`` or a
:class:`~agentstack_lab.memory.backends.postgres.PgDatabase`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["open_backend"]


def open_backend(db: Database, *, dimensions: int, embedder_name: str, model: str, config: Any) -> Any:
    """The memory backend for ``db`` with its vector table made (or checked against the embedder)."""
    if getattr(db, "dialect", "sqlite") == "postgres":
        from agentstack_lab.memory.backends.postgres import PgDatabase, PostgresBackend

        if not isinstance(db, PgDatabase):
            raise TypeError(f"postgres memory needs a PgDatabase, got {type(db).__name__}")
        backend: Any = PostgresBackend(db, dimensions=dimensions, config=config)
    else:
        from agentstack_lab.memory.backends.sqlite import SqliteBackend
        from agentstack_lab.store.connection import SQLiteDatabase

        if not isinstance(db, SQLiteDatabase):
            raise TypeError(f"sqlite memory needs a SQLiteDatabase, got {type(db).__name__}")
        backend = SqliteBackend(db, dimensions=dimensions, config=config)
    backend.ensure(embedder_name, model)
    return backend
