"""What every module that reads or writes the store asks of a database object: the ``Database`` protocol.

Both databases satisfy it: the workspace's :class:`~agentstack_lab.store.connection.SQLiteDatabase` and the
team memory's ``PgDatabase`` (:mod:`agentstack_lab.memory.backends.postgres`), each a
:class:`~agentstack_lab.store.per_thread.PerThreadConnections`. Code that takes a database is typed with
this protocol, so it says what it relies on and a type checker holds both databases to it. Rows and
connections stay ``Any``: ``sqlite3.Row`` and psycopg's rows are read the same way (by index or by name)
but share no type.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Database"]


@runtime_checkable
class Database(Protocol):
    """A database object: a connection per thread, joinable transactions, closing."""

    @property
    def path(self) -> str | Path:
        """Where it is: the SQLite file (or ``":memory:"``), or a PostgreSQL address without its password."""
        ...

    @property
    def conn(self) -> Any:
        """The calling thread's connection (opened on first use)."""
        ...

    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run one statement on this thread's connection; the cursor."""
        ...

    def query(self, sql: str, params: Any = ()) -> list[Any]:
        """Run one statement; every row."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """One transaction (begun on enter, committed on exit, rolled back on error); nested use joins it."""
        ...

    def close(self) -> None:
        """Close this thread's connection; the others close once no thread uses them."""
        ...
