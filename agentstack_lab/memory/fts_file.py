"""The full-text index in a file of its own beside the workspace's, filled by a background thread.

Why: SQLite has one writer per file. With ``memory_fts`` inside the workspace file, every
``store_many`` wrote its FTS5 rows on the calling thread, inside the same transaction as the
``memory`` and vector rows: 15.9 µs an entry over 1M entries (17.6 µs over the last tenth; FTS5's
segment merges grow with the index), half of that thread's work, while the second core mostly waited.
Here the index lives in ``fts/<db name>`` next to the database and is written through its own
connection, so a batch's FTS rows are indexed while the next batch's ``memory`` rows are written.

How it stays in step: the workspace file stays the one source of truth. Every insert, delete and
content change of ``memory`` already appends its ``rid`` to ``memory_vec_log`` (the change log the
shared vector index follows, :mod:`agentstack_lab.memory.index`). The index file records the log
position it reflects (``fts_state.seq``) in the same transaction as its rows, so a crash leaves it
at a consistent older position, and the next catch-up (:meth:`FtsFile.catch_up`) re-reads every
``rid`` logged after it from ``memory`` (absent: deleted). A search first catches up to the log's
position (two small reads when nothing is new), so it sees every committed entry, as before. An index
that cannot follow the log (the log was pruned past it, the index is ahead of it, or it belongs to
another database) is rebuilt from ``memory`` in one transaction, with a warning in the log.
A catch-up reads the changed rows in one short transaction (into temp tables) and writes the index in
another, so no read of the workspace file stays open while the index is written: an open read keeps SQLite
from restarting the workspace's WAL (see :meth:`FtsFile._catch_up_once`).

Segments merge 16 at a time (``automerge``; FTS5's default is 4): with 10k-entry batches the default
rewrote older entries through three levels of merges by 1M; this thread's CPU over the last tenth of 1M
was 24 µs an entry against 15 µs with 16 (standalone FTS5, same run). A search reads a few more segments:
keyword p50 through ``Memory.search`` at 1M was 6.9-12.9 ms in five runs, 8.3 ms with 4 (``bench_memory.py``).

The index holds no copy of the text (a contentless FTS5 table with ``contentless_delete=1``, so a
changed entry's old row is deleted by rowid alone): a copy cost ~3 µs an entry more to write. Snippets
for the few hits a search returns are made by :meth:`FtsFile.snippets` from ``memory``'s text. Reading
connections ``ATTACH`` the workspace file as ``src``; unqualified ``memory`` and ``sqlite_sequence``
resolve to it (this file has neither), so the queries of :mod:`agentstack_lab.memory.fts` run unchanged. Searches inside an
uncommitted transaction of the workspace connection see what is committed (the index is written from
committed rows only).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from agentstack_lab.store.connection import (
    _retry,
    bulk_cache,
    connect,
    read_only_uri,
    writable,
    write_transaction,
)
from agentstack_lab.store.per_thread import PerThreadConnections

log = logging.getLogger(__name__)

__all__ = ["FtsFile", "FORMAT"]

FORMAT = 3   # PRAGMA user_version of the index file; a file of another format is emptied and rebuilt
HASH_SIZE = 8 * 1024 * 1024   # pending terms kept before FTS5 writes a segment (a 10k batch: one segment)
AUTOMERGE = 16   # segments of one level merged at once (FTS5's default 4 rewrote each entry ~3 times by 1M)
_CREATE = ("CREATE VIRTUAL TABLE memory_fts USING fts5(key, content, content='', contentless_delete=1,"
           " tokenize='porter unicode61')",
           f"INSERT INTO memory_fts(memory_fts, rank) VALUES ('hashsize', {HASH_SIZE})",
           f"INSERT INTO memory_fts(memory_fts, rank) VALUES ('automerge', {AUTOMERGE})")
_TOP = "coalesce((SELECT seq FROM src.sqlite_sequence WHERE name = 'memory_vec_log'), 0)"
_DB_ID = "(SELECT created_at FROM src.vector_index WHERE id = 1)"   # which database the index belongs to
_TEMP_TABLES = ("CREATE TEMP TABLE fts_rows (rid INTEGER PRIMARY KEY, key TEXT, content TEXT)",
                "CREATE TEMP TABLE fts_gone (rid INTEGER PRIMARY KEY)")
_STATE = f"SELECT seq, db_id IS {_DB_ID}, {_TOP} FROM fts_state WHERE id = 1"


def _rebuild_reason(c: Any, seq: int, same: bool, top: int) -> str | None:
    """Why an index at log position ``seq`` cannot catch up from the change log (it is rebuilt), or ``None``."""
    first = c.execute("SELECT min(seq) FROM src.memory_vec_log").fetchone()[0]
    new = seq == 0 and c.execute("SELECT db_id FROM fts_state WHERE id = 1").fetchone()[0] is None
    if (same or new) and seq <= top and first is not None and first <= seq + 1:
        return None   # (a new index follows the log from its start, if it has one)
    return ("new" if new else "another database's" if not same else
            "behind the change log's start" if seq < top else "ahead of the change log")


class FtsFile(PerThreadConnections):
    """``memory_fts`` of one workspace database, in ``fts/<db name>`` beside it (a connection per thread)."""

    def __init__(self, source: Path):
        super().__init__()
        self.source = Path(source)
        self.path = self.source.parent / "fts" / self.source.name
        self._catching = threading.Lock()         # one catch-up at a time in this process
        self._cv = threading.Condition()
        self._applied = -1                         # the log position this process last saw applied
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._closed = False
        self.error: BaseException | None = None    # the background catch-up's last failure

    # --- connections ----------------------------------------------------------------------------------
    def _open(self) -> Any:
        readonly = self.path.is_file() and not writable(self.path)   # a read-only workspace: read what is there
        conn = connect(self.path, readonly=readonly)
        try:
            # a derived file: a power cut may lose its last commits (each with its log position), never
            # tear one, and the next catch-up redoes them from the log; so no fsync at its checkpoints
            conn.execute("PRAGMA synchronous = OFF")
            if readonly:
                conn.execute("ATTACH DATABASE ? AS src", (read_only_uri(self.source),))
            else:
                self._prepare(conn)
                conn.execute("ATTACH DATABASE ? AS src", (str(self.source),))
            for sql in _TEMP_TABLES:   # a catch-up's changed rows, between its read and its write
                conn.execute(sql)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _prepare(conn: Any) -> None:
        """Create (or, from another format, re-create) the index tables; before ``src`` is attached."""
        if conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT:
            return
        _retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != FORMAT:   # another process may have won
                conn.execute("DROP TABLE IF EXISTS memory_fts")
                conn.execute("DROP TABLE IF EXISTS fts_state")
                for sql in _CREATE:
                    conn.execute(sql)
                conn.execute("CREATE TABLE fts_state (id INTEGER PRIMARY KEY CHECK (id = 1), db_id,"
                             " seq INTEGER NOT NULL)")
                conn.execute("INSERT INTO fts_state (id, db_id, seq) VALUES (1, NULL, 0)")
                conn.execute(f"PRAGMA user_version = {FORMAT}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _begin(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        """A write transaction on the index file only (``BEGIN IMMEDIATE`` would lock ``src`` too)."""
        return write_transaction(conn, "BEGIN", "UPDATE fts_state SET seq = seq WHERE id = 1")

    # --- keeping in step ------------------------------------------------------------------------------
    def catch_up(self) -> int:
        """Apply every change logged since the index's position; returns the position now held."""
        seq, same, top = self.conn.execute(_STATE).fetchone()
        if seq == top and same:
            self._seen(seq)
            return seq
        bulk_cache(self.conn)   # the connection that writes the index
        with self._catching:
            while (top := self._catch_up_once()) is None:   # another process moved the index meanwhile
                pass
        self._seen(top)
        return top

    def _catch_up_once(self) -> int | None:
        """One catch-up: read what changed, then write it; ``None`` when another process wrote the index between.

        The changed rows are copied to temp tables inside a short read of both files; the index is then
        written with no read of ``src`` open. A read open during the write (~0.1 s a 10k batch, most of a bulk
        load's time) kept SQLite from restarting the workspace's WAL: it grew to 2 GB over 1M entries stored,
        and each batch's commit took 65 ms instead of 12 (``store_many`` 1M, 10k a call).
        """
        c = self.conn
        try:
            with write_transaction(c, "BEGIN"):
                seq, same, top = c.execute(_STATE).fetchone()
                if seq == top and same:
                    return top
                follows = _rebuild_reason(c, seq, same, top) is None
                db_id = None   # read below when the index follows (else it is rebuilt whole)
                if follows:
                    db_id = c.execute(f"SELECT {_DB_ID}").fetchone()[0]
                    last = c.execute("SELECT coalesce(max(id), 0) FROM memory_fts_docsize").fetchone()[0]
                    c.execute("INSERT INTO temp.fts_gone (rid) SELECT rid FROM src.memory_vec_log"
                              " WHERE seq > ? AND seq <= ? AND rid <= ?", (seq, top, last))   # new rids: nothing to drop
                    c.execute("INSERT INTO temp.fts_rows (rid, key, content) SELECT rid, key, content FROM src.memory"
                              " WHERE rid IN (SELECT rid FROM src.memory_vec_log WHERE seq > ? AND seq <= ?)",
                              (seq, top))
            if not follows:   # rebuilt under the index's write lock, reading src throughout: rare, and whole
                return self._rebuild_whole()
            with self.transaction() as w:
                if w.execute("SELECT seq FROM fts_state WHERE id = 1").fetchone()[0] != seq:
                    return None
                w.execute("DELETE FROM memory_fts WHERE rowid IN (SELECT rid FROM temp.fts_gone)")
                w.execute("INSERT INTO memory_fts (rowid, key, content) SELECT rid, key, content FROM temp.fts_rows")
                w.execute("UPDATE fts_state SET seq = ?, db_id = ? WHERE id = 1", (top, db_id))
            return top
        finally:
            c.execute("DELETE FROM temp.fts_rows")
            c.execute("DELETE FROM temp.fts_gone")

    def _rebuild_whole(self) -> int | None:
        """Rebuild the index from ``src`` in one write transaction of the index (reading ``src`` throughout).

        ``None`` when the index turns out to follow the log after all (another process rebuilt it meanwhile):
        the caller's next round catches it up.
        """
        with self.transaction() as c:
            seq, same, top = c.execute(_STATE).fetchone()
            if seq == top and same:
                return top
            why = _rebuild_reason(c, seq, same, top)
            if why is None:
                return None
            self._rebuild(c, why)
            c.execute(f"UPDATE fts_state SET seq = ?, db_id = {_DB_ID} WHERE id = 1", (top,))
        return top

    def _rebuild(self, c: Any, why: str) -> None:
        n = c.execute("SELECT count(*) FROM src.memory").fetchone()[0]
        if n:
            log.warning("memory: building the full-text index %s from %d entries (the index was %s)", self.path, n,
                        why)
        c.execute("DROP TABLE memory_fts")
        for sql in _CREATE:
            c.execute(sql)
        c.execute("INSERT INTO memory_fts (rowid, key, content) SELECT rid, key, content FROM src.memory")

    def _seen(self, seq: int) -> None:
        with self._cv:
            if seq > self._applied:
                self._applied = seq
                self._cv.notify_all()

    def snippets(self, expr: str, rids: list[int]) -> dict[int, str | None]:
        """``rid -> snippet()`` of the content column for ``rids`` that match FTS5 expression ``expr``.

        The index keeps no text, so the hits' key and content are copied into a per-connection
        ``temp`` FTS5 table with the same tokenizer and matched there (~20 µs a hit).
        """
        conn = self.conn
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.snippet_fts USING fts5(key, content,"
                     " tokenize='porter unicode61')")
        marks = ",".join("?" * len(rids))
        conn.execute(f"INSERT INTO temp.snippet_fts (rowid, key, content) SELECT rid, key, content FROM memory"
                     f" WHERE rid IN ({marks})", rids)
        try:
            return {r[0]: r[1] for r in conn.execute(
                "SELECT rowid, snippet(snippet_fts, 1, char(2), char(3), '…', 24) FROM temp.snippet_fts"
                " WHERE snippet_fts MATCH ?", (expr,))}
        finally:
            conn.execute("DELETE FROM temp.snippet_fts")

    # --- the background writer ------------------------------------------------------------------------
    def kick(self) -> None:
        """Have the background thread catch up (a write was committed)."""
        with self._cv:
            if self._closed:
                return
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="agentstack-fts-index", daemon=True)
                self._worker.start()
        self._wake.set()

    def wait_for(self, seq: int) -> None:
        """Block until the index holds log position ``seq`` (or the background thread failed or stopped).

        ``store_many`` waits for its previous batch, so the index is at most one batch behind a bulk load
        and the load's rate includes the indexing.
        """
        with self._cv:
            while self._applied < seq and self.error is None and self._worker is not None and self._worker.is_alive():
                self._cv.wait(0.5)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            # a write kicked the index, so catch up even when close() woke the thread: a process that writes
            # and exits at once (``agentstack-lab memory store``) leaves the index holding its write
            try:
                self.catch_up()
                self.error = None
            except Exception as exc:   # the next search catches up itself and raises it to its caller
                log.warning("memory: the background full-text indexing of %s failed: %s", self.path, exc)
                with self._cv:
                    self.error = exc
                    self._cv.notify_all()
            if self._closed:
                return

    def close(self) -> None:
        """Stop the background thread after it has indexed every write kicked so far, then close the connections."""
        with self._cv:
            self._closed = True
            worker, self._worker = self._worker, None
            self._cv.notify_all()
        self._wake.set()
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        super().close()
