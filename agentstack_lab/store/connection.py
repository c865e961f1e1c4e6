"""One place owns the SQLite driver and connection set-up.

Driver: ``sqlean.py``. The stdlib ``sqlite3`` of many Pythons (this one included)
is built without ``enable_load_extension``, so it cannot load sqlite-vec.
``sqlean.py`` is a drop-in DB-API module (same API as ``sqlite3``) that bundles a
recent SQLite with FTS5 and extension loading, with wheels for Linux, macOS and
Windows on x86_64 and arm64 (``pysqlite3-binary`` ships Linux x86_64 only, and
``apsw`` has a different API that every caller would have to learn).
Nothing else in the package imports a driver: use :func:`connect`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlite_vec  # pyright: ignore[reportMissingTypeStubs]

if TYPE_CHECKING:  # sqlean ships no types; it is the standard library's sqlite3 module, built with extensions
    import sqlite3 as sqlite
else:
    import sqlean as sqlite

from agentstack_lab.errors import AgentstackError
from agentstack_lab.store.per_thread import PerThreadConnections

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["connect", "bulk_cache", "row_numbers", "write_transaction", "SQLiteDatabase", "DatabaseOpenError", "ForeignDatabaseError", "StorageError", "storage_error", "storage_reason", "writable", "read_only_uri", "sqlite", "OperationalError", "IntegrityError", "is_busy"]

OperationalError = sqlite.OperationalError
IntegrityError = sqlite.IntegrityError
Row = sqlite.Row

BUSY_TIMEOUT_MS = 30_000
PAGE_SIZE = 16_384
AUTOCHECKPOINT = 1000   # SQLite's default: a commit that leaves >= 1000 WAL frames checkpoints in the committing thread
# Page cache of a connection that writes in bulk (store_many, the full-text indexer), instead of SQLite's
# 2 MB: a 10k-entry batch dirties ~25 MB of pages (its vectors alone are 15 MB), and with 2 MB SQLite
# spills them to the WAL mid-transaction and reads them back. At 1M entries (same run, one after the
# other): system time 10-12 against 19.5 us an entry, the calling thread 25 against 30 us, 26-27k
# against 23.7k entries/s; 128 MB gave no more. Other connections keep the default.
BULK_CACHE_KB = 65_536


class DatabaseOpenError(AgentstackError):
    """The database file cannot be opened: its folder cannot be made, or it is not an SQLite database."""


class ForeignDatabaseError(DatabaseOpenError):
    """The file at the workspace's database path is another program's SQLite database: left untouched."""


class StorageError(AgentstackError):
    """The database could not be read or written: the disk is full, the file is read-only or damaged."""


def storage_reason(exc: BaseException, folder: str | Path | None = None) -> str | None:
    """What an SQLite (or OS) error says about the database file, as people read it; None: not about the file.

    ``"the disk is full"``, ``"read-only"``, ``"damaged"`` or ``"locked"``; ``folder`` (the database's) lets a
    "disk I/O error" (SQLite failing to grow its -shm file) be recognised as a full disk.
    """
    if not isinstance(exc, sqlite.DatabaseError | OSError):
        return None
    low = str(exc).lower()
    if "disk is full" in low or "no space" in low or ("disk i/o" in low and folder is not None
                                                       and _disk_full(Path(folder))):
        return "the disk is full"
    if "readonly" in low or "read-only" in low:
        return "read-only"
    if "malformed" in low or "not a database" in low:
        return "damaged"
    if is_busy(exc):
        return "locked"
    return None


def storage_error(exc: BaseException, path: str | Path) -> StorageError | None:
    """The one line for an SQLite error about the file itself (None: not such an error, or only busy).

    Surfaces turn these into a message instead of "internal error": what happened, to which file, what to do.
    """
    reason = storage_reason(exc, Path(path).parent)
    if reason == "the disk is full":
        return StorageError(f"cannot write the database {path}: the disk is full; free some space and try again")
    if reason == "read-only":
        return StorageError(f"cannot write the database {path}: it is on a read-only file system or file; "
                            "reading works, this needs to write")
    if reason == "damaged":
        return StorageError(f"the database {path} is damaged ({exc}); restore it from a backup, or move it away "
                            "and a new one is made")
    return None


def writable(path: str | Path) -> bool:
    """Whether the database at ``path`` (and its folder, for the -wal and -shm files) can be written."""
    path = Path(path)
    folder = path.parent if path.parent.exists() else path.parent.parent
    return os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def read_only_uri(path: str | Path) -> str:
    """The URI that opens (or ATTACHes) ``path`` read-only; see :func:`_ro_params`."""
    return f"{Path(path).resolve().as_uri()}?{_ro_params(Path(path))}"


def _ro_params(path: Path) -> str:
    """URI parameters of a read-only connection: ``immutable=1`` in a folder nobody can write, else ``mode=ro``.

    In a read-only folder SQLite could not make the ``-shm`` file that a WAL reader needs.
    """
    return "immutable=1" if not os.access(path.parent, os.W_OK) else "mode=ro"


def refuse_foreign(path: str | Path) -> None:
    """Read ``path``'s schema (read-only, changing nothing); a file of another program or no database is refused.

    Raises:
        ForeignDatabaseError: an SQLite database whose tables are not this product's (nothing was written to it).
        DatabaseOpenError: the file is not an SQLite database at all, or is damaged.
    """
    path = Path(path)
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        conn = sqlite.connect(f"{path.resolve().as_uri()}?{_ro_params(path)}", uri=True,
                              timeout=BUSY_TIMEOUT_MS / 1000)
    except OSError:
        return          # the ordinary open says what is wrong
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                            " AND name NOT LIKE 'sqlite_%'")]
    except sqlite.DatabaseError as exc:
        if is_busy(exc):
            return
        known = storage_error(exc, path)
        if known is not None and "not a database" not in str(exc):
            raise known from None
        raise DatabaseOpenError(f"cannot open the database {path}: {exc} (is it a file of another program? "
                                "move it away and a new one is made)") from None
    finally:
        conn.close()
    if names and "_migrations" not in names:
        shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
        raise ForeignDatabaseError(f"{path} is another program's SQLite database (tables {shown}); it was left "
                                   "untouched: point the workspace elsewhere (-w) or move that file")


def connect(path: str | Path, *, readonly: bool = False) -> Any:
    """Open a connection; :class:`DatabaseOpenError` (naming the path) when the file cannot be opened.

    See :func:`_connect` for the set-up.
    """
    try:
        return _connect(path, readonly=readonly)
    except (OSError, sqlite.DatabaseError) as exc:  # OperationalError is a DatabaseError
        if isinstance(exc, sqlite.DatabaseError) and is_busy(exc):
            raise  # busy past the retries is not a broken file: callers retry or report it
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if _disk_full(Path(path).parent):   # SQLite says "disk I/O error" when it cannot grow its -shm file
            reason = "the disk is full"
        raise DatabaseOpenError(f"cannot open the database {path}: {reason}") from exc


def _disk_full(folder: Path) -> bool:
    """No block left for an ordinary user on ``folder``'s file system (False when that cannot be told)."""
    try:
        st = os.statvfs(folder if folder.exists() else folder.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < PAGE_SIZE


def _connect(path: str | Path, *, readonly: bool = False) -> Any:
    """Open a connection with sqlite-vec loaded, WAL, ``synchronous=NORMAL``, busy timeout, foreign keys, temp_store=MEMORY.

    New database files get :data:`PAGE_SIZE` pages.

    ``path`` must be a file path; an in-memory database is only made when ``":memory:"``
    is passed explicitly (tests), never as a fallback.
    """
    path = str(path)
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    uri = read_only_uri(path) if readonly else path
    conn = sqlite.connect(uri, uri=readonly, timeout=BUSY_TIMEOUT_MS / 1000,
                          isolation_level=None, check_same_thread=False)
    try:
        _prepare(conn, path, readonly=readonly)
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: Any, path: str, *, readonly: bool) -> None:
    conn.row_factory = sqlite.Row
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # A new database gets 16 KiB pages (a no-op for an existing one, fixed once it has content).
    # Chosen when vectors lived in a sqlite-vec vec0 table (per 10k stored entries: vec0 inserts -25%,
    # commit -45%); the plain ``memory_vec`` table that replaced it fits ten 1,536-byte vector rows in a
    # page instead of two. Not re-measured against 4 KiB since.
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    if not readonly and path != ":memory:":
        _retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # statement journals (one per executed statement that fires triggers, e.g. every row of an
    # executemany into ``memory``) and temp b-trees stay in RAM: ~10 µs less per inserted entry
    conn.execute("PRAGMA temp_store = MEMORY")


def is_busy(exc: BaseException) -> bool:
    """True when an error is SQLite's "database is locked/busy"."""
    return isinstance(exc, OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def _retry(fn: Callable[[], T], attempts: int = 50) -> T | None:
    for i in range(attempts):
        try:
            return fn()
        except OperationalError as exc:
            if not is_busy(exc) or i == attempts - 1:
                raise
            time.sleep(min(0.5, 0.01 * (2 ** min(i, 6))) * (0.5 + random.random()))
    return None


def row_numbers(count_param: int) -> str:
    """A ``WITH`` clause giving ``s(i)`` for ``i`` in ``0 .. ?count_param - 1``.

    For one ``INSERT ... SELECT ... FROM s`` that slices a batch's rows out of a few big parameters
    (SQLite works without the GIL for the whole batch; ``generate_series`` is not built in here).
    """
    return f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?{count_param})"


def bulk_cache(conn: Any) -> None:
    """Give ``conn``, a connection about to write in bulk, a :data:`BULK_CACHE_KB` page cache (kept)."""
    conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KB}")


@contextlib.contextmanager
def write_transaction(conn: Any, begin: str, *then: str) -> Generator[None]:
    """``begin`` and the statements ``then`` (each retried on busy) … ``COMMIT``; ROLLBACK on any error."""
    _retry(lambda: conn.execute(begin))
    try:
        for sql in then:
            _retry(lambda sql=sql: conn.execute(sql))
        yield
        _retry(lambda: conn.execute("COMMIT"))
    except BaseException:
        # also when COMMIT itself fails (a deferred constraint, busy past the retries): never leave
        # the transaction open; SQLite may already have rolled back (then ROLLBACK would mask the error)
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class SQLiteDatabase(PerThreadConnections):
    """A workspace database: one file, a connection per thread, migrated on open.

    Use :meth:`transaction` for writes: it takes the write lock up front
    (``BEGIN IMMEDIATE``), retries when another process holds it, and commits or
    rolls back as a whole; nested use joins the outer transaction.
    """

    def __init__(self, path: str | Path, *, migrate: bool = True):
        super().__init__()
        self.path = Path(path) if str(path) != ":memory:" else path
        self._checkpointer: ThreadPoolExecutor | None = None
        self._checkpoint_queued = False
        self._companions: list[Any] = []
        memory = str(path) == ":memory:"
        if not memory:
            refuse_foreign(self.path)      # before the first connection, which would switch it to WAL
        # a read-only file or file system: read-only connections, so reads work and writes say why
        self.readonly = not memory and self.path.is_file() and not writable(self.path)
        if migrate and self.readonly:
            from agentstack_lab.store.migrations import MIGRATIONS, applied

            pending = len(MIGRATIONS) - len(applied(self))
            if pending:
                log.warning("agentstack-lab: %s is read-only and %d schema steps behind this version; "
                            "what needs them will fail", self.path, pending)
        elif migrate:
            from agentstack_lab.store.migrations import migrate as run_migrations

            run_migrations(self)

    def _open(self) -> Any:
        return connect(self.path, readonly=self.readonly)

    def _begin(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` with retry on busy."""
        return write_transaction(conn, "BEGIN IMMEDIATE")

    @contextlib.contextmanager
    def checkpoint_later(self) -> Generator[None]:
        """Commits inside skip SQLite's automatic WAL checkpoint; one runs on a background thread afterwards.

        Why: a ``store_many`` batch of 10k entries leaves ~40 MB of WAL frames, so its commit checkpoints
        them at once, and the checkpoint waits for two ``fsync`` calls. Measured over 300k entries stored
        in 10k batches (two runs side by side): 12.4k entries/s with the checkpoint in the committing
        thread, 14.0k/s with none at all; the calling thread's CPU barely differs (35.7 vs 34.2 us an entry),
        so the difference is waiting for the disk, which a background thread can do instead (with it: 11.9k
        against 11.0k entries/s, side by side on a machine with load 12). The checkpoint
        is ``PASSIVE`` (never blocks readers or the next writer) and coalesced: at most one queued at a time.
        """
        if not isinstance(self.path, Path):
            yield
            return
        conn = self.conn
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT}")
            with self._lock:
                if not self._checkpoint_queued:
                    if self._checkpointer is None:
                        self._checkpointer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentstack-wal")
                    self._checkpoint_queued = True
                    self._checkpointer.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        with self._lock:
            self._checkpoint_queued = False
        try:
            conn = sqlite.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                conn.close()
        except sqlite.Error as exc:   # the next commit over the threshold checkpoints in its own thread
            log.warning("background WAL checkpoint of %s failed: %s", self.path, exc)

    def close_with(self, companion: Any) -> None:
        """Close ``companion`` (anything with ``close()``: a file derived from this one) when this closes."""
        with self._lock:
            self._companions.append(companion)

    def close(self) -> None:
        with self._lock:
            companions, self._companions = self._companions, []
        for companion in companions:
            companion.close()
        if self._checkpointer is not None:   # a running checkpoint finishes first (it has its own connection)
            self._checkpointer.shutdown(wait=True)
            self._checkpointer = None
        super().close()
