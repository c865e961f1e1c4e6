"""A connection per thread, opened on first use, with joinable transactions: what both databases share.

The workspace's ``SQLiteDatabase`` (:mod:`agentstack_lab.store.connection`) and the team memory's
``PgDatabase`` (:mod:`agentstack_lab.memory.backends.postgres`) were two copies of the same ~40 lines:
each thread gets its own connection (a transaction belongs to a connection, so threads sharing one
would write into each other's transactions), a transaction opened inside another on the same thread
joins it, and closing closes every thread's connection. They differ in three things only: how a
connection is opened, whether a cached one is still usable, and how a transaction begins and ends
(SQLite: ``BEGIN IMMEDIATE`` with retry on busy; PostgreSQL: psycopg's ``transaction()``). Those
are the hooks below; this module imports no driver.

Closing never pulls a connection from under a thread that is using it. CPython's ``sqlite3`` frees a
connection's statements on ``close()`` even while another thread is stepping one of them: a use after
free. Measured here: a thread running a 20k-row query, the main thread closing its connection 2 ms in,
crashed the interpreter (SIGSEGV) within 300 tries; a kernel running a workflow died that way when a run
ended while its interventions poll was still reading in a worker thread. So :meth:`close` closes the
calling thread's connection and drops its references to the others: each of them is closed by
reference counting when nothing uses it any more, which for an idle thread is at once, and for a busy
one when its statement is done.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import Generator
from typing import Any

__all__ = ["PerThreadConnections"]


class PerThreadConnections(abc.ABC):
    """Base of a database object: ``conn``, ``execute``, ``query``, ``transaction``, ``close``.

    Subclasses set ``path`` (shown by ``repr``) and implement :meth:`_open` and :meth:`_begin`;
    :meth:`_usable` and :meth:`_close_one` have defaults.
    """

    path: Any

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.RLock()
        self._all: list[tuple[int, Any]] = []   # (thread id, connection) of every connection opened

    # --- hooks --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def _open(self) -> Any:
        """A new connection for the calling thread."""

    def _usable(self, conn: Any) -> bool:
        """False when this thread's cached connection must be replaced (closed by the server)."""
        return True

    @abc.abstractmethod
    def _begin(self, conn: Any) -> contextlib.AbstractContextManager[Any]:
        """One outermost transaction on ``conn``: begins on enter, commits on exit, rolls back on error."""

    def _close_one(self, conn: Any) -> None:
        conn.close()

    closes_across_threads = False
    """Close every thread's connection in :meth:`close`, not only the caller's (sqlite3's must not be)."""

    # --- shared -------------------------------------------------------------------------------------
    @property
    def conn(self) -> Any:
        """This thread's connection (opened on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or not self._usable(conn):
            conn = self._open()
            self._local.conn = conn
            with self._lock:
                self._all.append((threading.get_ident(), conn))
        return conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params: Any = ()) -> list[Any]:
        return self.conn.execute(sql, params).fetchall()

    @contextlib.contextmanager
    def transaction(self) -> Generator[Any]:
        """One transaction on this thread's connection (see :meth:`_begin`); nested use joins the outer one."""
        conn = self.conn
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield conn
            finally:
                self._local.depth = depth
            return
        self._local.depth = 1
        try:
            with self._begin(conn):
                yield conn
        finally:
            self._local.depth = 0

    def close(self) -> None:
        """Close this thread's connection; every other one closes once no thread is using it (see above).

        A thread that uses the database again opens a new connection.
        """
        me = threading.get_ident()
        with self._lock:
            opened, self._all = self._all, []
            self._local = threading.local()   # the other threads' cached references go with the old one
        for ident, conn in opened:
            if ident == me or self.closes_across_threads:
                with contextlib.suppress(Exception):
                    self._close_one(conn)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"
