"""Re-embed the whole memory with the configured embedder, while it stays searchable.

``agentstack-lab memory reembed``, ``%memory reembed`` and :meth:`Memory.reembed
<agentstack_lab.memory.api.Memory.reembed>` call :func:`reembed`. The new vectors go to
``memory_reembed_vec`` in batches, each its own short transaction, so every other process keeps reading
and writing the memory meanwhile (searches answer from the old vectors when their embedder made them,
from keywords when not). Each new vector is stored with the content hash it was made from: an entry
changed meanwhile is embedded again, and an interrupted run resumes where it stopped (the embedder is
recorded in ``vector_reembed``; another embedder starts over). Last, under the write lock, the few
entries written since are embedded, the new vectors replace ``memory_vec`` and ``vector_index`` names
the new embedder (a new ``generation``); every process follows at its next search or write (``SqliteBackend.refresh``).

PostgreSQL memory (``memory.backend = "postgres"``) is re-embedded the same way, into a table of its own
kind: ``memory_reembed_vec`` is made by the run with the new dimension (``vector(d)``, a foreign key to
``memory`` so deleted entries leave it too) and gets its HNSW index before the swap. The swap takes the
advisory lock every write holds shared (``VECTOR_LOCK``), embeds the stragglers, drops ``memory_vec`` and
renames the new table and its index into its place: searches wait only for that commit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentstack_lab.errors import UsageError

__all__ = ["ReembedResult", "reembed", "pending"]

Progress = Callable[[int, int], None]   # (entries with a new vector, entries in the memory)

_TODO = ("SELECT m.rid, m.content, m.content_hash FROM memory m LEFT JOIN memory_reembed_vec n ON n.rid = m.rid"
         " WHERE m.rid > ? AND (n.rid IS NULL OR n.content_hash != m.content_hash) ORDER BY m.rid LIMIT ?")


@dataclass(frozen=True)
class ReembedResult:
    """What one :func:`reembed` call did."""

    embedded: int     # vectors made by this call
    total: int        # entries in the memory at the end
    finished: bool    # the new vectors replaced the old ones (False: stopped; run again to resume)
    resumed: bool     # an interrupted run with the same embedder was continued
    embedder: str
    model: str
    dimensions: int


def pending(db: Any) -> tuple[str, str, int, int] | None:
    """``(embedder, model, dimensions, vectors made)`` of an unfinished re-embedding, or ``None``."""
    row = db.conn.execute("SELECT embedder, model, dimensions FROM vector_reembed WHERE id = 1").fetchone()
    if row is None:
        return None
    return (row[0], row[1], int(row[2]), int(db.conn.execute("SELECT count(*) FROM memory_reembed_vec").fetchone()[0]))


def _postgres(db: Any) -> bool:
    return getattr(db, "dialect", "sqlite") == "postgres"


def _start(db: Any, target: tuple[str, str, int]) -> bool:
    """Record the embedder of this run; ``True`` when an interrupted run with it resumes."""
    with db.transaction() as conn:
        row = conn.execute("SELECT embedder, model, dimensions FROM vector_reembed WHERE id = 1").fetchone()
        if row is not None and (row[0], row[1], int(row[2])) == target:
            return True
        if _postgres(db):
            conn.execute("DROP TABLE IF EXISTS memory_reembed_vec")
            conn.execute("CREATE TABLE memory_reembed_vec (rid BIGINT PRIMARY KEY REFERENCES memory (rid)"
                         f" ON DELETE CASCADE, content_hash TEXT NOT NULL, embedding vector({int(target[2])}) NOT NULL)")
            conn.execute("INSERT INTO vector_reembed (id, embedder, model, dimensions, started_at)"
                         " VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET embedder = EXCLUDED.embedder,"
                         " model = EXCLUDED.model, dimensions = EXCLUDED.dimensions, started_at = EXCLUDED.started_at",
                         (*target, time.time()))
            return False
        conn.execute("DELETE FROM memory_reembed_vec")
        conn.execute("INSERT OR REPLACE INTO vector_reembed (id, embedder, model, dimensions, started_at)"
                     " VALUES (1, ?, ?, ?, ?)", (*target, time.time()))
        return False


def _embed(embedder: Any, texts: list[str], dims: int) -> np.ndarray:
    vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape != (len(texts), dims):
        raise UsageError(f"memory reembed: embedder {embedder.name!r} returned shape {vecs.shape},"
                         f" expected ({len(texts)}, {dims})")
    return vecs


def _save(conn: Any, rows: list[tuple[int, str, str]], vecs: np.ndarray, postgres: bool = False) -> None:
    """Store new vectors of entries whose content is still what was embedded."""
    if postgres:
        from agentstack_lab.memory.backends.postgres import vector_text

        conn.executemany("INSERT INTO memory_reembed_vec (rid, content_hash, embedding) SELECT ?, ?, ?::vector"
                         " WHERE EXISTS (SELECT 1 FROM memory WHERE rid = ? AND content_hash = ?)"
                         " ON CONFLICT (rid) DO UPDATE SET content_hash = EXCLUDED.content_hash,"
                         " embedding = EXCLUDED.embedding",
                         [(rid, h, vector_text(vecs[i]), rid, h) for i, (rid, _, h) in enumerate(rows)])
        return
    conn.executemany("INSERT OR REPLACE INTO memory_reembed_vec (rid, content_hash, embedding) SELECT ?1, ?2, ?3"
                     " WHERE EXISTS (SELECT 1 FROM memory WHERE rid = ?1 AND content_hash = ?2)",
                     [(rid, h, vecs[i].tobytes()) for i, (rid, _, h) in enumerate(rows)])


def _done(conn: Any) -> int:
    return conn.execute("SELECT count(*) FROM memory_reembed_vec n JOIN memory m ON m.rid = n.rid"
                        " AND m.content_hash = n.content_hash").fetchone()[0]


def reembed(memory: Any, *, batch_size: int = 256, progress: Progress | None = None,
            stop: threading.Event | None = None) -> ReembedResult:
    """Give every entry a vector from ``memory.embedder`` and make them the memory's vectors.

    ``progress(done, total)`` is called after each batch; setting ``stop`` ends the run after the
    current batch (the vectors made so far are kept for the next run).
    """
    backend = memory.backend
    if not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"memory reembed: the batch size must be a positive int, got {batch_size!r}")
    db, embedder = backend.db, memory.embedder
    dims = int(backend.dimensions)
    target = (str(embedder.name), str(embedder.model), dims)
    resumed = _start(db, target)
    conn = db.conn
    made = 0
    total = conn.execute("SELECT count(*) FROM memory").fetchone()[0]
    done = _done(conn)
    if progress is not None:
        progress(done, total)
    while True:
        after = 0
        while rows := [(r[0], r[1], r[2]) for r in conn.execute(_TODO, (after, batch_size)).fetchall()]:
            if stop is not None and stop.is_set():
                return ReembedResult(made, total, False, resumed, *target)
            vecs = _embed(embedder, [r[1] for r in rows], dims)
            with db.transaction() as wconn:
                _save(wconn, rows, vecs, _postgres(db))
            made += len(rows)
            done = min(total, done + len(rows))
            after = rows[-1][0]
            if progress is not None:
                progress(done, total)
        if _postgres(db) and getattr(backend, "index_kind", "") == "hnsw":   # built once, before the swap's lock
            with db.transaction() as wconn:
                wconn.execute("CREATE INDEX IF NOT EXISTS memory_reembed_vec_hnsw ON memory_reembed_vec"
                              " USING hnsw (embedding vector_cosine_ops)")
        if (_swap_postgres if _postgres(db) else _swap)(db, embedder, target, batch_size):
            break
    total = conn.execute("SELECT count(*) FROM memory").fetchone()[0]
    if progress is not None:
        progress(total, total)
    backend.refresh()
    return ReembedResult(made, total, True, resumed, *target)


def _swap(db: Any, embedder: Any, target: tuple[str, str, int], batch_size: int) -> bool:
    """Under the write lock: embed the last stragglers and make the new vectors the memory's ones.

    ``False`` (nothing changed) when more than a batch of entries was written since the last pass.
    """
    with db.transaction() as conn:
        rows = [(r[0], r[1], r[2]) for r in conn.execute(_TODO, (0, batch_size + 1)).fetchall()]
        if len(rows) > batch_size:
            return False
        if rows:   # entries written during the last pass: few, embedded while holding the lock
            _save(conn, rows, _embed(embedder, [r[1] for r in rows], target[2]))
        conn.execute("DELETE FROM memory_reembed_vec WHERE rid NOT IN (SELECT rid FROM memory)")
        conn.execute("DELETE FROM memory_vec")
        conn.execute("INSERT INTO memory_vec (rid, embedding) SELECT rid, embedding FROM memory_reembed_vec")
        conn.execute("UPDATE vector_index SET embedder = ?, model = ?, dimensions = ?, generation = generation + 1"
                     " WHERE id = 1", target)
        conn.execute("DELETE FROM memory_reembed_vec")
        conn.execute("DELETE FROM vector_reembed")
        # every process's vector index follows vector_index.generation (SqliteBackend.refresh: a new index)
    return True


def _swap_postgres(db: Any, embedder: Any, target: tuple[str, str, int], batch_size: int) -> bool:
    """:func:`_swap` on PostgreSQL: the new table and its index take ``memory_vec``'s place (see the module doc)."""
    from agentstack_lab.memory.backends.postgres import VECTOR_LOCK

    with db.transaction() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (VECTOR_LOCK,))   # no write is between its check and commit
        rows = [(r[0], r[1], r[2]) for r in conn.execute(_TODO, (0, batch_size + 1)).fetchall()]
        if len(rows) > batch_size:
            return False
        if rows:
            _save(conn, rows, _embed(embedder, [r[1] for r in rows], target[2]), True)
        conn.execute("DROP TABLE memory_vec")
        conn.execute("ALTER TABLE memory_reembed_vec DROP COLUMN content_hash")
        conn.execute("ALTER TABLE memory_reembed_vec RENAME TO memory_vec")
        conn.execute("ALTER TABLE memory_vec RENAME CONSTRAINT memory_reembed_vec_pkey TO memory_vec_pkey")
        conn.execute("ALTER TABLE memory_vec RENAME CONSTRAINT memory_reembed_vec_rid_fkey TO memory_vec_rid_fkey")
        conn.execute("ALTER INDEX IF EXISTS memory_reembed_vec_hnsw RENAME TO memory_vec_hnsw")
        conn.execute("UPDATE vector_index SET embedder = ?, model = ?, dimensions = ?, generation = generation + 1"
                     " WHERE id = 1", target)
        conn.execute("DELETE FROM vector_reembed")
    return True
