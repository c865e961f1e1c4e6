"""Memory in the workspace's SQLite file: ``memory`` and vectors in ``memory_vec``; FTS5 beside it.

The embedded default. Writes take SQLite's one write lock (``BEGIN IMMEDIATE``), so the
session-active check and the rows it guards commit together; vectors are searched through
:class:`~agentstack_lab.memory.vectors.VectorIndex` (the shared index files, or an exact in-memory
matrix, kept in step with the table). The full-text index is :class:`~agentstack_lab.memory.fts_file.FtsFile`,
a file of its own written by a background thread from the change log, caught up before each search.
A batch of 64+ new rows is written with one ``INSERT ... SELECT`` over packed columns and without the per-row
log trigger (see :class:`_InsertTriggers`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentstack_lab.memory.access import check_sessions_active
from agentstack_lab.memory.backends.base import (
    Background,
    Embed,
    Item,
    OwnerCheck,
    RowReads,
    stale,
)
from agentstack_lab.memory.fts import fts_search, fts_snippets
from agentstack_lab.memory.fts_file import FtsFile
from agentstack_lab.memory.vectors import EmbedderMismatchError, VectorIndex
from agentstack_lab.store.connection import bulk_cache, row_numbers

if TYPE_CHECKING:
    from agentstack_lab.store.connection import SQLiteDatabase

__all__ = ["SqliteBackend", "BULK_ROWS"]

BULK_ROWS = 64   # from this many rows on, a write is a bulk one: embedded in a thread, logged in one statement, big cache
_COLS = "m.rid, m.id, m.key, m.namespace, m.content, m.content_hash, m.metadata, m.agent_id, m.version," \
        " m.created_at, m.updated_at, (SELECT json_group_array(tag) FROM memory_tags t WHERE t.memory_rid = m.rid)"


class _InsertTriggers:
    """The per-row AFTER INSERT trigger on ``memory`` (the change log), as stored in the schema.

    A batch of new rows drops it, inserts, logs the whole rowid range with one ``INSERT ... SELECT``
    and re-creates it from its stored SQL, all inside the writer's transaction, so no other
    connection ever sees the schema without it, and a crash rolls everything back. Invoking a
    trigger costs ~3 µs per row, which is what this saves.
    """

    NAMES = ("memory_vlog_ai",)

    def get(self, conn: Any) -> list[tuple[str, str]]:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memory'"
                            f" AND name IN ({', '.join('?' * len(self.NAMES))})", self.NAMES).fetchall()
        return [(r[0], r[1]) for r in rows]


_INSERT_TRIGGERS = _InsertTriggers()


_CONSTANT_COLUMNS = ("namespace", "metadata", "agent_id")   # sent once when a whole batch shares them
_WIDTH = 13   # bytes an offset takes in _packed: a NULL mark ("1" a value, "2" NULL), then 12 digits


def _packed(texts: Sequence[str | None]) -> tuple[bytes, bytes]:
    """One text column of a bulk insert: its values as one UTF-8 blob, and where each ends in it.

    The ends are fixed-width decimal (``_WIDTH`` bytes each, after one more for the first start, 0), so SQL slices a
    row's value out with ``substr`` on blobs, which is byte-indexed and O(1) (``substr`` on text counts
    characters from the start). Against one JSON array parsed by ``json_each`` and ``->>``: 3.8 against
    6.2 us a row for 10k-row batches at 300k rows, Python's part included (``json.dumps`` escaped every
    character of the content on the calling thread, ~10% of its time at 1M).
    """
    parts = [t.encode("utf-8") if t is not None else b"" for t in texts]
    ends = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=ends[1:])
    marks = ends + 10 ** (_WIDTH - 1)
    nulls = [i + 1 for i, t in enumerate(texts) if t is None]
    if nulls:
        marks[nulls] += 10 ** (_WIDTH - 1)
    return b"".join(parts), marks.astype(f"S{_WIDTH}").tobytes()


def _unpack(n: int) -> str:
    """The SQL for row ``i``'s value of a column that :func:`_packed` put in parameters ``?n-1`` and ``?n``."""
    def end(row: str) -> str:
        return f"CAST(substr(?{n}, ({row}) * {_WIDTH} + 2, {_WIDTH - 1}) AS INTEGER)"
    value = f"CAST(substr(?{n - 1}, {end('i')} + 1, {end('i + 1')} - {end('i')}) AS TEXT)"
    return f"CASE substr(?{n}, (i + 1) * {_WIDTH} + 1, 1) WHEN x'32' THEN NULL ELSE {value} END"


class SqliteBackend(RowReads["SQLiteDatabase"]):
    """The memory tables of a workspace :class:`~agentstack_lab.store.connection.SQLiteDatabase`."""

    cols = _COLS

    dialect = "sqlite"

    def __init__(self, db: SQLiteDatabase, *, dimensions: int, config: Any):
        self.db = db
        self.dimensions = dimensions
        self._config = config
        self.index = self._new_index()
        self.mismatch: EmbedderMismatchError | None = None   # set by ensure(): another embedder made the vectors
        self._wanted = ("", "")
        self._identity: tuple | None = None
        self._df_cache: dict[str, tuple[int, int]] = {}   # FTS term -> (capped entry count, entries then)
        if not isinstance(getattr(db, "path", None), Path):
            raise ValueError(f"memory needs a database file (its full-text index is a file beside it), not {db.path!r}")
        self.fts_index = FtsFile(db.path)
        db.close_with(self)
        self._bulk_mark = 0   # the change-log position after this process's last bulk write
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        """Stop the search thread and the full-text indexing (with the database: ``SQLiteDatabase.close_with``)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.fts_index.close()
        self.index.close()

    def _new_index(self) -> VectorIndex:
        vector = self._config.vector
        return VectorIndex(self.db, dimensions=self.dimensions, use_cache=vector.cache, shared=vector.index == "shared")

    def _read_identity(self, conn: Any = None) -> tuple | None:
        row = (conn or self.db.conn).execute("SELECT embedder, model, dimensions, generation FROM vector_index WHERE id = 1"
                                   ).fetchone()
        return tuple(row) if row is not None else None

    def ensure(self, embedder_name: str, model: str) -> None:
        """Make or check the vector table; another embedder's vectors set :attr:`mismatch` (see ``Memory``)."""
        self._wanted = (embedder_name, model)
        self.mismatch = self.index.ensure(embedder_name, model)
        self._identity = self._read_identity()

    def refresh(self) -> None:
        """Follow a re-embedding that finished since (in any process): a new index, the mismatch looked at again."""
        identity = self._read_identity()
        if identity != self._identity:
            old, self.index = self.index, self._new_index()
            old.close(catch_up=False)   # its files are the old embedding's
            self.ensure(*self._wanted)

    # --- writes -------------------------------------------------------------------------------------
    def _existing(self, conn: Any, items: list[Item]) -> dict[tuple[str, str], tuple]:
        """``(namespace, key) -> (rid, content_hash, agent_id)`` of the items already stored."""
        found: dict[tuple[str, str], tuple] = {}
        by_ns: dict[str, list[str]] = {}
        for it in items:
            by_ns.setdefault(it.namespace, []).append(it.key)
        for ns, keys in by_ns.items():
            rows = conn.execute("SELECT m.key, m.rid, m.content_hash, m.agent_id FROM json_each(?) j CROSS JOIN"
                                " memory m ON m.namespace = ? AND m.key = j.value", (json.dumps(keys), ns))
            found.update({(ns, r[0]): (r[1], r[2], r[3]) for r in rows})
        return found

    @staticmethod
    def _log_mark(conn: Any) -> int:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_vec_log'").fetchone()
        return int(row[0]) if row else 0

    def write(self, items: list[Item], embed: Embed, owner: OwnerCheck, in_process: bool) -> int:
        if not items:
            return 0
        # What is new or changed, read outside the write lock; embedding starts now. A large batch
        # with an in-process embedder is embedded in a thread while the memory and FTS rows are
        # written (numpy and SQLite both release the GIL); otherwise before the lock is taken.
        conn = self.db.conn
        snapshot = not conn.in_transaction
        if snapshot:
            conn.execute("BEGIN")
        try:
            mark = self._log_mark(conn)
            existing = self._existing(conn, items)
        finally:
            if snapshot:
                conn.execute("COMMIT")

        todo = [it for it in items if stale(it, existing)]
        if len(todo) >= BULK_ROWS:
            bulk_cache(conn)
        pending = Background(embed, todo) if len(todo) >= BULK_ROWS and in_process else None
        vectors = embed(todo) if pending is None else {}
        now = time.time()
        # a bulk write's commit leaves its WAL checkpoint to a background thread (SQLiteDatabase.checkpoint_later)
        later = self.db.checkpoint_later() if len(todo) >= BULK_ROWS else contextlib.nullcontext()
        with later, self.db.transaction() as conn:
            # under the write lock: a session ended by another process after our caller checked it is seen here
            check_sessions_active(conn, {it.namespace for it in items})
            if self._read_identity(conn) != self._identity:   # `memory reembed` replaced the vectors meanwhile
                raise EmbedderMismatchError(f"{self.db.path}: the memory was re-embedded by another process during"
                                            " this write; nothing was written, write again")
            if self._log_mark(conn) != mark:   # another writer changed memory meanwhile: look again
                existing = self._existing(conn, items)
            new = [it for it in items if (it.namespace, it.key) not in existing]
            old = [it for it in items if (it.namespace, it.key) in existing]
            first = self._insert_rows(conn, new, now)
            if pending is not None:
                vectors = pending.result()
            vectors.update(embed([it for it in items if id(it) not in vectors and stale(it, existing)]))
            if new:
                self.index.add_block(conn, first, np.stack([vectors[id(it)] for it in new]))
            tag_rows = [(first + i, t) for i, it in enumerate(new) for t in (it.tags or [])]
            tag_rows += self._update_rows(conn, old, existing, vectors, now, owner)
            if tag_rows:
                conn.executemany("INSERT OR IGNORE INTO memory_tags (memory_rid, tag) VALUES (?, ?)", tag_rows)
            if len(items) > 100 or (new and (first + len(new) - 1) % 1000 == 0):
                self.index.prune_log(conn)
            mark = self._log_mark(conn)
        self.fts_index.kick()   # the full-text index follows in the background
        self.index.kick()       # and the shared vector index
        if len(todo) >= BULK_ROWS:   # a bulk load runs at most one batch ahead of them
            self.fts_index.wait_for(self._bulk_mark)
            self.index.wait_for(self._bulk_mark)
            self._bulk_mark = mark
        return len(items)

    def _insert_rows(self, conn: Any, new: list[Item], now: float) -> int:
        """Insert the ``memory`` rows of new items with consecutive rowids; returns the first one."""
        row = conn.execute("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memory'), 0),"
                           " coalesce((SELECT max(rid) FROM memory), 0))").fetchone()
        first = row[0] + 1
        if not new:
            return first
        base = f"{time.time_ns() // 1000:013x}{secrets.token_hex(3)}"   # time-ordered ids append to the index
        bulk = len(new) >= BULK_ROWS
        triggers = _INSERT_TRIGGERS.get(conn) if bulk else []
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        # one statement rather than executemany: SQLite then works without the GIL while the embedder
        # thread runs, instead of taking it back for every row's parameters (see _packed for the layout)
        params: list[Any] = [first, base, now, len(new)]
        exprs: list[str] = []
        for name, values in (("key", [it.key for it in new]), ("namespace", [it.namespace for it in new]),
                             ("content", [it.content for it in new]), ("content_hash", [it.hash for it in new]),
                             ("metadata", [it.meta_json or "{}" for it in new]),
                             ("agent_id", [it.agent_id for it in new])):
            if name in _CONSTANT_COLUMNS and len(set(values)) == 1:   # the usual bulk load: one value for all
                params.append(values[0])
                exprs.append(f"?{len(params)}")
            else:
                params += _packed(values)
                exprs.append(_unpack(len(params)))
        conn.execute(f"{row_numbers(4)} INSERT INTO memory (rid, id, key, namespace, content, content_hash, metadata, agent_id,"
                     f" created_at, updated_at) SELECT ?1 + i, ?2 || printf('%07x', i), {', '.join(exprs)}, ?3, ?3"
                     " FROM s", params)
        if bulk:
            conn.execute("INSERT INTO memory_vec_log (rid) SELECT rid FROM memory WHERE rid BETWEEN ? AND ?",
                         (first, first + len(new) - 1))
        for _, sql in triggers:
            conn.execute(sql)
        return first

    def _update_rows(self, conn: Any, old: list[Item], existing: dict, vectors: dict[int, np.ndarray],
                     now: float, owner: OwnerCheck) -> list[tuple[int, str]]:
        """Update stored items: content (re-embedded only if its hash changed), metadata/tags/agent when given."""
        tag_rows: list[tuple[int, str]] = []
        for it in old:
            rid, old_hash, old_agent = existing[(it.namespace, it.key)]
            owner(it.key, old_agent)
            agent = it.agent_id if it.agent_id is not None else old_agent
            changed = old_hash != it.hash
            conn.execute(
                "UPDATE memory SET content = ?, content_hash = ?, metadata = coalesce(?, metadata),"
                " agent_id = ?, version = version + ?, updated_at = ? WHERE rid = ?",
                (it.content, it.hash, it.meta_json, agent, 1 if changed else 0, now, rid))
            if changed:   # an agent change needs no vector write: the log trigger tells the index
                self.index.remove(conn, [rid])
                self.index.add(conn, [(rid, vectors[id(it)].tobytes())])
            if it.tags is not None:
                conn.execute("DELETE FROM memory_tags WHERE memory_rid = ?", (rid,))
                tag_rows += [(rid, t) for t in it.tags]
        return tag_rows

    def delete(self, namespace: str, key: str, owner: OwnerCheck) -> bool:
        with self.db.transaction() as conn:
            row = conn.execute("SELECT rid, agent_id FROM memory WHERE namespace = ? AND key = ?",
                               (namespace, key)).fetchone()
            if row is None:
                return False
            owner(key, row[1])
            self.index.remove(conn, [row[0]])
            conn.execute("DELETE FROM memory WHERE rid = ?", (row[0],))
        self.fts_index.kick()
        self.index.kick()
        return True

    def purge(self, conn: Any, namespace: str, agent_id: str | None = None) -> int:
        """Delete the entries of ``namespace`` (only ``agent_id``'s and shared ones when given)."""
        where, params = "namespace = ?", [namespace]
        if agent_id is not None:   # an agent view deletes what delete() would let it delete, no more
            where, params = where + " AND (agent_id IS NULL OR agent_id = ?)", [namespace, agent_id]
        rids = [r[0] for r in conn.execute(f"SELECT rid FROM memory WHERE {where}", params)]
        self.index.remove(conn, rids)
        conn.execute(f"DELETE FROM memory WHERE {where}", params)
        return len(rids)

    # --- reads --------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        q = self.db.query
        self.fts_index.catch_up()
        return {"memory": q("SELECT count(*) FROM memory")[0][0],
                "fts": self.fts_index.query("SELECT count(*) FROM memory_fts_docsize")[0][0],
                "vector": q("SELECT count(*) FROM memory_vec")[0][0]}

    # --- search -------------------------------------------------------------------------------------
    def fts(self, query: str, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
        self.fts_index.catch_up()   # every committed write is searchable
        return fts_search(self.fts_index.conn, query, where, params, limit, self._df_cache)

    def fts_async(self, query: str, where: str, params: list[Any], limit: int) -> Future:
        """:meth:`fts` on a worker thread (its own connection) while the caller searches vectors.

        SQLite and numpy/faiss release the GIL, so a hybrid search costs the slower of its two searches
        rather than their sum.
        """
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentstack-fts")
        return self._pool.submit(self.fts, query, where, params, limit)

    def snippets(self, query: str, rids: list[int]) -> dict[int, str]:
        """Snippets of the FTS hits a search returns (computed after ranking)."""
        return fts_snippets(self.fts_index.snippets, query, rids)

    def vector(self, query: np.ndarray, flt: Any, where: str, params: list[Any], k: int) -> list[tuple[int, float]]:
        return self.index.search(query, flt, k)

    def rows(self, rids: list[int]) -> dict[int, Any]:
        """``rid -> (rid, key, namespace, content, agent_id, metadata JSON)`` of the hits."""
        return {r[0]: r for r in self.db.query(
            f"SELECT rid, key, namespace, content, agent_id, metadata FROM memory WHERE rid IN"
            f" ({','.join('?' * len(rids))})", rids)}
