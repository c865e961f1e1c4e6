"""Vector index: the ``memory_vec`` table (the source of truth) plus a search structure kept in step.

``memory_vec`` is a plain SQLite table, ``(rid INTEGER PRIMARY KEY, embedding BLOB)`` of float32 bytes.
Databases made before it kept the vectors in a sqlite-vec ``vec0`` virtual table; :meth:`VectorIndex.ensure`
moves them once, in one transaction, with a warning in the log (13.7 s at 1M rows, measured under load). Why not vec0: none of
the search paths below uses its KNN except ``memory.vector.cache = false``, and a vec0 insert writes a
slice of a 384 KiB chunk blob plus a rowid map per row: 9.5-11 us of CPU per stored entry against 2.2-2.9 us
for a plain row (10k-entry batches at 300k rows, same run), a fifth of ``store_many``'s SQLite work. The
``cache = false`` path still asks sqlite-vec: ``vec_distance_cosine`` over the table, with the filters in the
same query (exact; at 1M rows about as slow as vec0's own brute-force KNN, which scanned 1M x 384 floats in
0.75-1.3 s here: nobody should pick it at that size).

Three search paths, chosen by configuration: ``memory.vector.index = "shared"`` (the default) uses the
memory-mapped index files shared by every process (:mod:`agentstack_lab.memory.index`: PQ fast-scan
plus exact rescoring; at 1M entries ~10x faster than the exact scan with recall@10 >= 0.99 and without a
per-process float32 copy; the writing process keeps the files in step from a background thread, see
:meth:`VectorIndex.kick`); ``"exact"`` keeps the exact in-process matrix described below (recall 1.0,
one float32 copy per process); ``memory.vector.cache = false`` asks sqlite-vec itself. An in-memory
database (no file to put index files next to) uses the exact matrix.

The exact matrix: each :class:`VectorIndex` keeps an exact copy of the ``memory_vec`` rows in a numpy
matrix (one BLAS call over it is 4-5x faster than sqlite-vec's SIMD-less scan of the same rows), loaded
lazily on the first vector search and kept in step with the table through ``memory_vec_log``: triggers on
``memory`` append the rowid of every inserted, updated or deleted entry, in this process or any other.
Before each search the index reads the log's high-water mark (one indexed lookup) and re-reads only the
rows that changed, or reloads everything when the log was pruned past its position. Results are therefore
exact (recall 1.0 against brute force), and namespace / session / agent filters are applied as a mask
*before* top-k, inside the search.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentstack_lab.errors import AgentstackError
from agentstack_lab.memory.access import extract_session_id
from agentstack_lab.memory.index import FORMAT, IndexChanging, IndexDamaged, SharedIndex, old_rids
from agentstack_lab.store.connection import row_numbers

if TYPE_CHECKING:
    from agentstack_lab.store.connection import SQLiteDatabase

log = logging.getLogger(__name__)

__all__ = ["VectorIndex", "VectorFilter", "EmbedderMismatchError", "mismatch_error", "vec_metadata"]

MAX_K = 4096          # the most hits one search returns
LOG_KEEP = 200_000    # log rows kept; a reader further behind reloads in full
TAIL_MAX = 50_000     # rows logged since the shared files' position that a search scans exactly (see search)
BLOCK_ROWS = 1_000    # vectors a statement of add_block inserts (one 15 MB blob a 10k batch: 2.5 against 1.5-2 us a row)


_FOR_GOOD = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST)
"""OS errors after which the shared index is given up in this process (the folder will not become writable): the
background indexer stops and searches use the exact matrix. Others, such as a full disk, are logged; that search
is answered in SQL and the next write or search tries again."""


class EmbedderMismatchError(AgentstackError, RuntimeError):
    """The database's vectors were made by another embedder or dimension than the one configured."""


def mismatch_error(where: str, recorded: tuple[str, str, int], configured: tuple[str, str, int]) -> EmbedderMismatchError:
    """One line naming both embedders and dimensions, what still works, and the fix."""
    (r_name, r_model, r_dims), (c_name, c_model, c_dims) = recorded, configured
    return EmbedderMismatchError(
        f"{where}: memory was embedded by {r_name!r} (model {r_model!r}) with dimension {r_dims}, the configured"
        f" embedder {c_name!r} (model {c_model!r}) gives dimension {c_dims}; keyword search and `memory list` still"
        " work: run `agentstack-lab memory reembed` to re-embed the memory with it, or set memory.embedder,"
        " memory.embedder_model and memory.vector.dimensions back")


@dataclass(frozen=True)
class VectorFilter:
    """Which rows a search may return; applied inside the search, before top-k."""

    namespace: str | None = None     # one namespace, or None for every namespace visible to `session_id`
    session_id: str | None = None    # the caller's session (its namespace is visible when namespace is None)
    agent_id: str | None = None      # only this agent's rows (plus shared ones when include_shared)
    include_shared: bool = True


def vec_metadata(namespace: str, agent_id: str | None) -> tuple[str, str, str]:
    """An entry's filter values (namespace, session, agent); '' stands for none."""
    return namespace, extract_session_id(namespace) or "", agent_id or ""


class _Matrix:
    """Exact float32 copy of ``memory_vec`` with per-row filter codes."""

    def __init__(self, dims: int, cap: int = 1024):
        self.dims = dims
        self.n = 0
        self.mat = np.zeros((cap, dims), dtype=np.float32)
        self.rids = np.zeros(cap, dtype=np.int64)
        self.alive = np.zeros(cap, dtype=bool)
        self.ns = np.zeros(cap, dtype=np.int32)
        self.sess = np.zeros(cap, dtype=np.int32)
        self.agent = np.zeros(cap, dtype=np.int32)
        self.pos: dict[int, int] = {}
        self.codes: dict[str, dict[str, int]] = {"ns": {}, "sess": {"": 0}, "agent": {"": 0}}
        self.last_seq = 0

    def _code(self, kind: str, value: str) -> int:
        table = self.codes[kind]
        code = table.get(value)
        if code is None:
            code = table[value] = len(table) + (1 if kind == "ns" else 0)
        return code

    def _grow(self, need: int) -> None:
        cap = len(self.rids)
        if need <= cap:
            return
        new = max(need, cap * 2)
        for name in ("mat", "rids", "alive", "ns", "sess", "agent"):
            old = getattr(self, name)
            arr = np.zeros((new, *old.shape[1:]), dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def put(self, rows: list[tuple[int, bytes, str, str, str]]) -> None:
        fresh = [r for r in rows if r[0] not in self.pos]
        self._grow(self.n + len(fresh))
        for rid, blob, ns, sess, agent in rows:
            i = self.pos.get(rid)
            if i is None:
                i = self.pos[rid] = self.n
                self.n += 1
            self.mat[i] = np.frombuffer(blob, dtype=np.float32)
            self.rids[i] = rid
            self.alive[i] = True
            self.ns[i] = self._code("ns", ns)
            self.sess[i] = self._code("sess", sess)
            self.agent[i] = self._code("agent", agent)

    def drop(self, rids: list[int]) -> None:
        for rid in rids:
            i = self.pos.pop(rid, None)
            if i is not None:
                self.alive[i] = False

    def dead(self) -> int:
        return self.n - len(self.pos)

    def mask(self, f: VectorFilter) -> np.ndarray | None:
        n = self.n
        m = self.alive[:n].copy()
        if f.namespace is not None:
            code = self.codes["ns"].get(f.namespace)
            if code is None:
                return None
            m &= self.ns[:n] == code
        else:
            sess = self.sess[:n]
            code = self.codes["sess"].get(f.session_id or "", -1) if f.session_id else 0
            m &= (sess == 0) | (sess == code)
        if f.agent_id is not None:
            code = self.codes["agent"].get(f.agent_id, -1)
            own = self.agent[:n] == code
            m &= (own | (self.agent[:n] == 0)) if f.include_shared else own
        return m

    def search(self, q: np.ndarray, f: VectorFilter, k: int) -> list[tuple[int, float]]:
        mask = self.mask(f)
        if mask is None or self.n == 0:
            return []
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            return []
        if len(idx) == self.n:
            scores = self.mat[:self.n] @ q
        elif len(idx) * 4 < self.n:      # selective filter: score only the candidates
            scores = self.mat[idx] @ q
        else:
            scores = self.mat[:self.n] @ q
            scores = scores[idx]
        k = min(k, len(idx))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(idx) else np.arange(len(idx))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self.rids[idx[t]]), float(scores[t])) for t in top]


class VectorIndex:
    """The ``memory_vec`` table and the search structure kept in step with it, for one database."""

    def __init__(self, db: SQLiteDatabase, *, dimensions: int, use_cache: bool = True, shared: bool = True):
        self.db = db
        self.dimensions = dimensions
        self.use_cache = use_cache
        self.shared = shared and use_cache and isinstance(getattr(db, "path", None), Path)
        self._lock = threading.RLock()
        self._matrix: _Matrix | None = None
        self._shared: SharedIndex | None = None
        # the background indexer (shared path): follows this process's writes into the shared files
        self._cv = threading.Condition()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._final = True                          # close() catches up once more
        self._indexed = -1                          # the log position the indexer last brought the files to
        self.error: BaseException | None = None     # the background indexing's last failure

    # --- schema ---------------------------------------------------------------------------------
    def ensure(self, embedder_name: str, model: str) -> EmbedderMismatchError | None:
        """Create ``memory_vec``, or check the recorded embedder matches (and move a vec0 table's rows once).

        A mismatch is returned, not raised: the memory stays open for keyword search, reads and deletes
        (this index then has the recorded dimension), and only what needs the embedder refuses.
        """
        d = self.dimensions
        with self.db.transaction() as conn:
            row = conn.execute("SELECT embedder, model, dimensions FROM vector_index WHERE id = 1").fetchone()
            if row is None:
                conn.execute("CREATE TABLE IF NOT EXISTS memory_vec (rid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
                conn.execute("INSERT INTO vector_index (id, embedder, model, dimensions, created_at)"
                             " VALUES (1, ?, ?, ?, ?)", (embedder_name, model, d, time.time()))
                return None
        mismatch = None
        if (row[0], row[1], row[2]) != (embedder_name, model, d):
            mismatch = mismatch_error(str(self.db.path), (row[0], row[1], int(row[2])), (embedder_name, model, d))
            self.dimensions = int(row[2])
        sql = self.db.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'").fetchone()
        if sql is not None and "vec0" in sql[0].lower():
            self._move_vec0()
        return mismatch

    def _move_vec0(self) -> None:
        """Copy a sqlite-vec ``vec0`` ``memory_vec`` (databases made before the plain table) into a plain table."""
        with self.db.transaction() as conn:
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'").fetchone()
            if sql is None or "vec0" not in sql[0].lower():   # another process moved them meanwhile
                return
            rids, mat = self._read_chunks(conn)
            log.warning("memory: moving %d vectors of %s from a sqlite-vec vec0 table to a plain table (once)",
                        len(rids), self.db.path)
            conn.execute("CREATE TABLE memory_vec_plain (rid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
            for i in range(0, len(rids), 10_000):
                conn.executemany("INSERT INTO memory_vec_plain (rid, embedding) VALUES (?, ?)",
                                 zip(rids[i:i + 10_000].tolist(), (r.tobytes() for r in mat[i:i + 10_000]),
                                     strict=True))
            conn.execute("DROP TABLE memory_vec")
            conn.execute("ALTER TABLE memory_vec_plain RENAME TO memory_vec")

    # --- writes (inside the caller's transaction) -------------------------------------------------
    def add(self, conn: Any, rows: list[tuple[int, bytes]]) -> None:
        """Insert ``(rid, float32 bytes)`` rows."""
        if rows:
            conn.executemany("INSERT INTO memory_vec (rid, embedding) VALUES (?, ?)", rows)

    def add_block(self, conn: Any, first: int, vectors: np.ndarray | None) -> None:
        """Insert ``len(vectors)`` rows with consecutive rowids from ``first`` in one statement.

        The vectors travel as one float32 blob sliced with ``substr``: one statement, run by SQLite without
        the GIL while the embedder thread works (``executemany`` takes the GIL back for every row).
        """
        if vectors is None or not len(vectors):
            return
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise ValueError(f"expected vectors of shape (n, {self.dimensions}), got {vectors.shape}")
        size = 4 * self.dimensions
        mat = np.ascontiguousarray(vectors, dtype=np.float32)
        for at in range(0, len(mat), BLOCK_ROWS):   # blobs of ~1.5 MB stay in the CPU cache while SQLite slices them
            part = mat[at:at + BLOCK_ROWS]
            conn.execute(f"{row_numbers(4)} INSERT INTO memory_vec (rid, embedding)"
                         " SELECT ?1 + i, substr(?2, i * ?3 + 1, ?3) FROM s",
                         (first + at, part.data.cast("B"), size, len(part)))

    def remove(self, conn: Any, rids: list[int]) -> None:
        if rids:
            conn.executemany("DELETE FROM memory_vec WHERE rid = ?", [(r,) for r in rids])

    def prune_log(self, conn: Any) -> None:
        conn.execute("DELETE FROM memory_vec_log WHERE seq <= (SELECT seq FROM sqlite_sequence"
                     " WHERE name = 'memory_vec_log') - ?", (LOG_KEEP,))

    # --- search ---------------------------------------------------------------------------------
    def search(self, query: np.ndarray, flt: VectorFilter, k: int,
               threshold: float | None = None) -> list[tuple[int, float]]:
        """Top-``k`` ``(rid, cosine similarity)`` among rows passing ``flt``, best first."""
        k = max(0, min(int(k), MAX_K))
        if k == 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dimensions:
            raise ValueError(f"query vector has {q.shape[0]} dimensions, the index has {self.dimensions}")
        hits = None
        if self.shared:
            with self._lock:
                try:
                    index, tail = self._shared_refresh()
                except OSError as exc:
                    if exc.errno not in _FOR_GOOD:   # a full disk: this search in SQL, the next one tries again
                        log.warning("memory: shared vector index not written (%s); searched exactly", exc)
                        return self._threshold(self._knn(q, flt, k), threshold)
                    # e.g. a read-only workspace: no index files beside the database
                    log.warning("memory: shared vector index unavailable (%s); using the exact in-process matrix",
                                exc)
                    self.shared = False
                except (IndexDamaged, IndexChanging) as exc:   # damaged again, or rebuilt under us: this once in SQL
                    log.warning("memory: shared vector index not usable for this search (%s); searched exactly",
                                exc)
                    return self._threshold(self._knn(q, flt, k), threshold)
                else:
                    if tail is None:
                        hits = index.search(q, k, flt.namespace, flt.session_id, flt.agent_id, flt.include_shared)
                    else:   # files behind the log: their hits less the rows changed since, plus those rows exactly
                        stale, extra, rows = tail
                        hits = [h for h in index.search(q, k + extra, flt.namespace, flt.session_id, flt.agent_id,
                                                        flt.include_shared) if h[0] not in stale]
                        hits = sorted(hits + rows.search(q, flt, k), key=lambda h: -h[1])[:k]
        if hits is not None:
            pass
        elif self.use_cache:
            with self._lock:
                matrix = self._refresh()
                hits = matrix.search(q, flt, k)
        else:
            hits = self._knn(q, flt, k)
        return self._threshold(hits, threshold)

    @staticmethod
    def _threshold(hits: list[tuple[int, float]], threshold: float | None) -> list[tuple[int, float]]:
        return hits if threshold is None else [h for h in hits if h[1] >= threshold]

    def _knn(self, q: np.ndarray, f: VectorFilter, k: int) -> list[tuple[int, float]]:
        """Exact top-``k`` in SQL with sqlite-vec's ``vec_distance_cosine``, the filters in the same query."""
        conn = self.db.conn
        clauses: list[str] = []
        params: list[Any] = []
        if f.namespace is not None:
            clauses.append("m.namespace = ?")
            params.append(f.namespace)
        elif conn.execute("SELECT 1 FROM memory WHERE namespace >= 'session:' AND namespace < 'session;'"
                          " LIMIT 1").fetchone():   # session rows exist: only the caller's are visible
            clauses.append("(substr(m.namespace, 1, 8) != 'session:' OR m.namespace = ?)")
            params.append(f"session:{f.session_id}" if f.session_id else "")
        if f.agent_id is not None:
            clauses.append("(m.agent_id = ? OR m.agent_id IS NULL)" if f.include_shared else "m.agent_id = ?")
            params.append(f.agent_id)
        sql = "SELECT v.rid, vec_distance_cosine(v.embedding, ?) AS d FROM memory_vec v"
        if clauses:
            sql += f" JOIN memory m ON m.rid = v.rid WHERE {' AND '.join(clauses)}"
        rows = conn.execute(sql + " ORDER BY d LIMIT ?", [q.tobytes(), *params, k]).fetchall()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]

    def loaded(self) -> bool:
        return self._matrix is not None or self._shared is not None

    # --- shared index (memory/index.py) -----------------------------------------------------------------
    def shared_index(self) -> SharedIndex:
        """This database's :class:`SharedIndex` (``vectors/<db file name>/`` beside the database)."""
        with self._lock:
            if self._shared is None:
                self._shared = self._new_shared()
            return self._shared

    def _new_shared(self) -> SharedIndex:
        row = self.db.conn.execute("SELECT created_at, generation FROM vector_index WHERE id = 1").fetchone()
        path = Path(self.db.path)
        # the database, and which re-embedding of it (`memory reembed`): either change starts a new index
        db_id = repr(row[0] if row else None) if not row or not row[1] else repr((row[0], row[1]))
        return SharedIndex(path.parent / "vectors" / path.name, self.dimensions, db_id=db_id)

    def _shared_refresh(self) -> tuple[SharedIndex, tuple[set[int], int, _Matrix] | None]:
        """The shared index brought up to the log, and the tail this search scans exactly (or None).

        When another thread or process holds the writers' lock (the background indexer appending a batch),
        the search does not wait for it: it searches the files as they are and scans the rows logged since
        their position exactly (``(rids changed, how many of them may have slots, their rows)``), so it
        waits for no more than those rows. Only a tail over :data:`TAIL_MAX` rows (a database no process
        indexed, a log pruned past the files) waits for the lock and syncs.
        """
        index = self.shared_index()
        tail = None
        with self._log_snapshot() as (conn, top):
            args = (lambda after: self._changes(conn, after), lambda rids: self._fetch(conn, rids),
                    lambda: self._read_all(conn))
            if not index.sync(top, *args, wait=False):
                s = index.state()
                if s is not None and s.get("format", 1) == FORMAT and index.damage(s) is None:
                    rids, pruned = self._changes(conn, s["seq"])
                    stale = old_rids(s, rids)
                    if not pruned and len(rids) <= TAIL_MAX and len(stale) <= 1000:
                        rows = _Matrix(self.dimensions, cap=max(1, len(rids)))
                        rows.put(self._present(conn, rids))
                        tail = (set(rids), len(stale), rows)
                if tail is None:
                    index.sync(top, *args)
        if not index.refresh():   # state.json replaced or removed between the sync and now
            raise IndexChanging(f"{index.dir}: no shared vector index after sync")
        return index, tail

    # --- the background indexer (shared path) ---------------------------------------------------------
    def kick(self) -> None:
        """Have the background thread bring the shared index up to the log (a write was committed)."""
        if not self.shared:
            return
        with self._cv:
            if self._closed:
                return
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="agentstack-vector-index", daemon=True)
                self._worker.start()
        self._wake.set()

    def wait_for(self, seq: int) -> None:
        """Block until the shared files hold log position ``seq`` (or the indexer failed or stopped).

        ``store_many`` waits for its previous batch, so the files are at most one batch behind a bulk load
        and the first search after it scans at most that batch exactly. A position written by another
        process wakes the thread first (nothing in this process kicked it for that write).
        """
        with self._cv:
            behind = self._indexed < seq and not self._closed
            before = self.error   # a failure before this wait (a full disk since cleared) does not end it
        if behind:   # a position another process logged: this thread was never kicked for it
            self.kick()
        with self._cv:
            while (self._indexed < seq and (self.error is None or self.error is before) and self._worker is not None
                   and self._worker.is_alive()):
                self._cv.wait(0.5)

    def _run(self) -> None:
        index: SharedIndex | None = None   # the thread's own: SharedIndex caches state, not thread-safe
        while True:
            self._wake.wait()
            self._wake.clear()
            # catch up even when close() woke the thread: a process that writes and exits at once leaves
            # the shared files holding its writes (not after a re-embedding replaced this index: see close)
            if self._closed and not self._final:
                return
            try:
                if index is None:
                    index = self._new_shared()
                top = self._follow(index)
                with self._cv:
                    self._indexed, self.error = max(self._indexed, top), None
                    self._cv.notify_all()
            except Exception as exc:   # the next search syncs itself (and reports it)
                log.warning("memory: the background vector indexing of %s failed: %s", self.db.path, exc)
                with self._cv:
                    self.error = exc
                    self._cv.notify_all()
                if isinstance(exc, OSError) and exc.errno in _FOR_GOOD:   # e.g. a read-only workspace: no index
                    return                                                      # files beside it (a full disk passes)
            if self._closed:
                return

    def _follow(self, index: SharedIndex) -> int:
        """Bring ``index``'s files up to the log; returns the log position they hold.

        The changed rows are read in one short read of the database and written to the files after it: a
        read open while the files are written (and the PQ codes encoded) would keep SQLite from restarting
        the WAL during a bulk load (see :mod:`.fts_file`). Only a rebuild reads throughout.
        """
        while True:
            s = index.state()
            usable = s is not None and s.get("format", 1) == FORMAT and index.damage(s) is None
            rows, rids = None, []
            with self._log_snapshot() as (conn, top):
                if usable and s is not None:
                    if s["seq"] >= top:
                        return top
                    rids, pruned = self._changes(conn, s["seq"])
                    if not pruned and index.appendable(s, rids, False):
                        rows = self._fetch(conn, rids)
            if rows is not None and s is not None:
                if index.append(s["seq"], top, rids, rows):
                    return top
                continue   # another writer moved the files meanwhile: look again
            with self._log_snapshot() as (conn, top):
                index.sync(top, lambda after: self._changes(conn, after), lambda r: self._fetch(conn, r),
                           lambda: self._read_all(conn))
            return top

    def close(self, *, catch_up: bool = True) -> None:
        """Stop the background indexer after it has indexed every write kicked so far.

        ``catch_up=False``: stop without indexing more (a re-embedding replaced this index: its files now
        belong to another embedding of the database).
        """
        with self._cv:
            self._closed = True
            self._final = catch_up
            worker, self._worker = self._worker, None
            self._cv.notify_all()
        self._wake.set()
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    @staticmethod
    def _changes(conn: Any, after: int) -> tuple[list[int], bool]:
        first = conn.execute("SELECT min(seq) FROM memory_vec_log").fetchone()[0]
        if first is None or first > after + 1:
            return [], True
        return [r[0] for r in conn.execute("SELECT DISTINCT rid FROM memory_vec_log WHERE seq > ?", (after,))], False

    @staticmethod
    def _present(conn: Any, rids: list[int]) -> list[tuple[int, bytes, str, str, str]]:
        """``(rid, float32 bytes, namespace, session, agent)`` of those ``rids`` still stored, 500 per query."""
        found: list[tuple[int, bytes, str, str, str]] = []
        if len(rids) > 500 and max(rids) - min(rids) < 2 * len(rids):   # a bulk write's rids: one range read
            wanted = set(rids)
            cache: dict[tuple[str, Any], tuple[str, str, str]] = {}
            for rid, blob, ns, agent in conn.execute(
                    "SELECT v.rid, v.embedding, m.namespace, m.agent_id FROM memory_vec v JOIN memory m ON m.rid = v.rid"
                    " WHERE v.rid BETWEEN ? AND ?", (min(rids), max(rids))):
                if rid in wanted:
                    meta = cache.get((ns, agent))
                    if meta is None:
                        meta = cache[(ns, agent)] = vec_metadata(ns, agent)
                    found.append((rid, blob, *meta))
            return found
        for i in range(0, len(rids), 500):
            chunk = rids[i:i + 500]
            found += [(r[0], r[1], *vec_metadata(r[2], r[3])) for r in conn.execute(
                "SELECT v.rid, v.embedding, m.namespace, m.agent_id FROM memory_vec v JOIN memory m ON m.rid = v.rid"
                f" WHERE v.rid IN ({','.join('?' * len(chunk))})", chunk)]
        return found

    def _fetch(self, conn: Any, rids: list[int]) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str, str]]]:
        found = self._present(conn, rids)
        vecs = np.frombuffer(b"".join(r[1] for r in found), dtype=np.float32).reshape(len(found), self.dimensions)
        return np.array([r[0] for r in found], dtype=np.int64), vecs, [r[2:] for r in found]

    def _read_all(self, conn: Any) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str, str]]]:
        rids, mat = self._vectors(conn)
        if not len(rids):
            return rids, mat, []
        meta = conn.execute("SELECT rid, namespace, agent_id FROM memory ORDER BY rid").fetchall()
        mrids = np.fromiter((r[0] for r in meta), dtype=np.int64, count=len(meta))
        at = np.clip(np.searchsorted(mrids, rids), 0, max(len(mrids) - 1, 0))
        ok = (mrids[at] == rids) if len(mrids) else np.zeros(len(rids), dtype=bool)
        cache: dict[tuple[str, Any], tuple[str, str, str]] = {}
        out = []
        for j in at[ok].tolist():
            key = (meta[j][1], meta[j][2])
            got = cache.get(key)
            if got is None:
                got = cache[key] = vec_metadata(*key)
            out.append(got)
        return rids[ok], mat[ok], out

    def _vectors(self, conn: Any) -> tuple[np.ndarray, np.ndarray]:
        """Every ``(rid, vector)`` of ``memory_vec`` in rid order, read in blocks into one matrix."""
        d = self.dimensions
        count = conn.execute("SELECT count(*) FROM memory_vec").fetchone()[0]
        rids = np.empty(count, dtype=np.int64)
        mat = np.empty((count, d), dtype=np.float32)
        cur = conn.execute("SELECT rid, embedding FROM memory_vec ORDER BY rid")
        n = 0
        while n < count and (block := cur.fetchmany(65_536)):
            block = block[:count - n]
            rids[n:n + len(block)] = [r[0] for r in block]
            mat[n:n + len(block)] = np.frombuffer(b"".join(r[1] for r in block), dtype=np.float32).reshape(-1, d)
            n += len(block)
        cur.close()
        return rids[:n], mat[:n]

    @contextlib.contextmanager
    def _log_snapshot(self) -> Iterator[tuple[Any, int]]:
        """One read snapshot for the change log's high-water mark and the rows read after it."""
        conn = self.db.conn
        own_txn = not conn.in_transaction
        if own_txn:
            conn.execute("BEGIN")
        try:
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_vec_log'").fetchone()
            yield conn, (int(row[0]) if row else 0)
        finally:
            if own_txn:
                conn.execute("COMMIT")

    def _refresh(self) -> _Matrix:
        with self._log_snapshot() as (conn, top):
            m = self._matrix
            if m is not None and top == m.last_seq:
                return m
            if m is not None:
                first = conn.execute("SELECT min(seq) FROM memory_vec_log").fetchone()[0]
                changed = [r[0] for r in conn.execute(
                    "SELECT DISTINCT rid FROM memory_vec_log WHERE seq > ?", (m.last_seq,))]
                behind = first is not None and first > m.last_seq + 1
                if not behind and len(changed) <= max(2000, len(m.pos) // 4):
                    self._apply(conn, m, changed)
                    m.last_seq = top
                    if m.dead() > max(1024, m.n // 2):
                        self._matrix = m = self._load(conn, top)
                    return m
            self._matrix = m = self._load(conn, top)
            return m

    def _load(self, conn: Any, top: int) -> _Matrix:
        rids, mat = self._vectors(conn)
        n = len(rids)
        m = _Matrix(self.dimensions, cap=max(1024, int(n * 1.25)))
        if n:
            meta = conn.execute("SELECT rid, namespace, agent_id FROM memory ORDER BY rid").fetchall()
            mrids = np.fromiter((r[0] for r in meta), dtype=np.int64, count=len(meta))
            at = np.clip(np.searchsorted(mrids, rids), 0, max(len(mrids) - 1, 0))
            ok = (mrids[at] == rids) if len(mrids) else np.zeros(n, dtype=bool)
            rids, mat, at = rids[ok], mat[ok], at[ok]
            n = len(rids)
            m.mat[:n] = mat
            m.rids[:n] = rids
            m.alive[:n] = True
            for i, j in enumerate(at.tolist()):
                ns, sess, agent = vec_metadata(meta[j][1], meta[j][2])
                m.ns[i] = m._code("ns", ns)
                m.sess[i] = m._code("sess", sess)
                m.agent[i] = m._code("agent", agent)
            m.pos = dict(zip(rids.tolist(), range(n), strict=True))
            m.n = n
        m.last_seq = top
        return m

    def _read_chunks(self, conn: Any) -> tuple[np.ndarray, np.ndarray]:
        """The rows of a sqlite-vec 0.1.9 ``vec0`` ``memory_vec``, read from its chunk tables (whole blobs)."""
        d = self.dimensions
        vectors = dict(conn.execute("SELECT rowid, vectors FROM memory_vec_vector_chunks00").fetchall())
        all_rids, all_vecs = [], []
        for chunk_id, size, validity, rowids in conn.execute(
                "SELECT chunk_id, size, validity, rowids FROM memory_vec_chunks ORDER BY chunk_id"):
            valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].astype(bool)
            ids = np.frombuffer(rowids, dtype=np.int64)[:size]
            vec = np.frombuffer(vectors[chunk_id], dtype=np.float32)[:size * d].reshape(size, d)
            all_rids.append(ids[valid])
            all_vecs.append(vec[valid])
        if not all_rids:
            return np.zeros(0, dtype=np.int64), np.zeros((0, d), dtype=np.float32)
        return np.concatenate(all_rids), np.concatenate(all_vecs)

    def _apply(self, conn: Any, m: _Matrix, rids: list[int]) -> None:
        found = self._present(conn, rids)
        present = {r[0] for r in found}
        m.drop([r for r in rids if r not in present])
        m.put(found)  # overwrites in place: embedding, namespace and agent may all have changed
