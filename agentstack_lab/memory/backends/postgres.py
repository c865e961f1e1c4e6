r"""Team memory on PostgreSQL + pgvector: the same Memory API, several machines sharing one memory.

``memory.backend = "postgres"`` with ``memory.postgres.dsn`` (``${PGPASSWORD}`` etc. expanded from
the environment). Driver: psycopg 3, imported only here (``pip install 'agentstack-lab[postgres]'``).

Semantics kept from SQLite, and how:

* **Writes are serialised per namespace** (``pg_advisory_xact_lock(hashtext(namespace))``), so an
  upsert reads "exists?" and writes under one lock, like SQLite's single write lock.
* **An ended session takes no writes**: the writer locks its session rows ``FOR SHARE`` inside its
  transaction (:func:`~agentstack_lab.memory.access.check_sessions_active`), ending one locks the row
  ``FOR UPDATE`` before purging, so a write either commits before the end (and is purged with
  the rest) or sees the session ended and writes nothing.
* **Keywords**: a generated ``tsvector`` with a GIN index; the query is built from the same
  quoted terms as FTS5 (:func:`~agentstack_lab.memory.fts.fts_terms`: only ``\w+`` words, phrases
  and ``word*`` prefixes reach the database, each as a bound parameter of ``plainto_tsquery``,
  ``phraseto_tsquery`` or ``to_tsquery(word:*)``), so no user text is ever tsquery syntax.
  Unlike FTS5, English stop words (``the``, ``a``) are not indexed.
* **Vectors**: ``vector(d)`` with a cosine HNSW index and ``hnsw.iterative_scan = strict_order``
  (pgvector >= 0.8), so a filtered search still returns k filtered hits; ``index = "exact"`` scans.
* Bulk writes use ``COPY`` (rows as text, vectors in pgvector's binary format).

PostgreSQL text cannot hold NUL characters: such an entry is refused with one line.
"""

from __future__ import annotations

import functools
import re
import secrets
import struct
import time
from typing import Any

import numpy as np

from agentstack_lab.errors import AgentstackError
from agentstack_lab.memory.access import MemoryValidationError, check_sessions_active
from agentstack_lab.memory.backends.base import (
    Embed,
    Item,
    OwnerCheck,
    RowReads,
    stale,
)
from agentstack_lab.memory.fts import common_cap, content_terms, mark_snippet
from agentstack_lab.memory.scores import keyword_scores
from agentstack_lab.memory.vectors import EmbedderMismatchError, mismatch_error
from agentstack_lab.store.per_thread import PerThreadConnections

try:
    import psycopg
    import psycopg.conninfo  # noqa: F401 - loaded by psycopg itself; named so its attribute is typed
except ImportError:   # pragma: no cover - depends on the installed extras
    psycopg = None

__all__ = ["PgDatabase", "PostgresBackend", "PostgresUnavailableError", "VECTOR_LOCK"]

VECTOR_LOCK = 0x61677375   # advisory lock: exclusive to make or replace memory_vec, shared by every write and
                           # vector search

_COLS = "m.rid, m.id, m.key, m.namespace, m.content, m.content_hash, m.metadata::text, m.agent_id, m.version," \
        " m.created_at, m.updated_at, (SELECT json_agg(tag)::text FROM memory_tags t WHERE t.memory_rid = m.rid)"
_WORD = re.compile(r"\w+")
_SNIPPET_WORDS = 24          # like FTS5's snippet(..., 24)
_SNIPPET_SCAN = 100_000      # characters of an entry searched for the snippet's window


def _snippet(content: str, hit_words: set[str]) -> str:
    r"""FTS5-style snippet: up to 24 words around the first match, matches in ``\x02``…``\x03``, text verbatim."""
    toks = list(_WORD.finditer(content[:_SNIPPET_SCAN]))
    if not toks:
        return content[:160]
    first = next((i for i, t in enumerate(toks) if t.group().lower() in hit_words), 0)
    lo = max(0, min(first - 2, len(toks) - _SNIPPET_WORDS))
    hi = min(len(toks), lo + _SNIPPET_WORDS)
    start = 0 if lo == 0 else toks[lo].start()
    end = len(content) if hi == len(toks) and len(content) <= _SNIPPET_SCAN else toks[hi - 1].end()
    out, pos = [], start
    for t in toks[lo:hi]:
        if t.group().lower() in hit_words:
            out += [content[pos:t.start()], "\x02", t.group(), "\x03"]
            pos = t.end()
    out.append(content[pos:end])
    return ("…" if start > 0 else "") + "".join(out) + ("…" if end < len(content) else "")


class PostgresUnavailableError(AgentstackError, RuntimeError):
    """The PostgreSQL memory cannot be used: driver missing, server unreachable or refusing."""


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """``?`` placeholders (the SQL the memory layer shares with SQLite) as psycopg's ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


def _driver():  # the psycopg module (its type, inferred: no annotation names a module)
    """psycopg, or a one-line error naming the extra that installs it (an optional dependency)."""
    if psycopg is None:
        raise PostgresUnavailableError("memory.backend = 'postgres' needs psycopg 3: "
                                       "pip install 'agentstack-lab[postgres]'")
    return psycopg


class _Conn:
    """A psycopg connection that speaks the ``?`` placeholders of the SQLite code (sessions, access)."""

    FOR_SHARE = " FOR SHARE"     # row locks for the session-active check (SQLite: its one write lock)
    FOR_UPDATE = " FOR UPDATE"

    def __init__(self, raw: Any):
        self.raw = raw

    def execute(self, sql: str, params: Any = None) -> Any:
        if params is None or len(params) == 0:
            return self.raw.execute(sql)
        return self.raw.execute(_pg_sql(sql), params)

    def executemany(self, sql: str, rows: Any) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(_pg_sql(sql), rows)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != _driver().pq.TransactionStatus.IDLE


def _describe(dsn: str) -> str:
    """``postgresql://user@host:port/db`` without the password (for messages and ``repr``)."""
    try:
        d = _driver().conninfo.conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - a malformed DSN is reported by connect()
        return "postgresql://(unparsable dsn)"
    return f"postgresql://{d.get('user', '')}@{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')}"


class PgDatabase(PerThreadConnections):
    """The team's memory database: a connection per thread (autocommit; :meth:`transaction` for writes).

    Same surface as the ``SQLiteDatabase`` the memory layer uses (``conn``, ``query``, ``execute``,
    ``transaction``, shared in :class:`~agentstack_lab.store.per_thread.PerThreadConnections`), with
    ``?`` placeholders, so :mod:`agentstack_lab.memory.sessions` runs unchanged. A transaction is
    READ COMMITTED; nested use joins the outer one, as in SQLite.
    """

    dialect = "postgres"

    def __init__(self, dsn: str, *, connect_timeout: float = 10.0, migrate: bool = True):
        _driver()
        super().__init__()
        self._dsn = dsn
        self._timeout = connect_timeout
        self.path = _describe(dsn)
        if migrate:
            from agentstack_lab.memory.backends.pg_schema import migrate as run_migrations

            run_migrations(self.conn.raw)

    def _open(self) -> _Conn:
        driver = _driver()
        try:
            raw = driver.connect(self._dsn, autocommit=True, connect_timeout=max(1, int(self._timeout)))
        except driver.Error as exc:
            msg = " ".join(str(exc).split())
            raise PostgresUnavailableError(f"postgres memory at {self.path}: cannot connect: {msg}") from None
        return _Conn(raw)

    def _usable(self, conn: _Conn) -> bool:
        return not conn.raw.closed

    def _begin(self, conn: _Conn) -> Any:
        return conn.raw.transaction()

    def _close_one(self, conn: _Conn) -> None:
        conn.raw.close()

    # closed at once, every thread's: psycopg runs each operation of a connection under the connection's
    # own lock, and an open psycopg connection that is only dropped warns (ResourceWarning)
    closes_across_threads = True


def vector_text(v: np.ndarray) -> str:
    """The text form pgvector reads for ``v`` (bound as a parameter and cast with ``::vector``)."""
    return "[" + ",".join(map(repr, np.asarray(v, dtype=np.float32).tolist())) + "]"


def _vec_copy(rids: list[int], vecs: np.ndarray) -> bytes:
    """``COPY memory_vec (rid, embedding) FROM STDIN (FORMAT BINARY)`` payload, built in one numpy pass."""
    n, d = vecs.shape
    dt = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("rid", ">i8"), ("l2", ">i4"), ("dim", ">i2"), ("unused", ">i2"),
                   ("v", ">f4", (d,))])
    a = np.empty(n, dtype=dt)
    a["nf"], a["l1"], a["rid"], a["l2"], a["dim"], a["unused"] = 2, 8, rids, 4 + 4 * d, d, 0
    a["v"] = vecs
    return b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0) + a.tobytes() + struct.pack(">h", -1)


def _check_text(items: list[Item]) -> None:
    for i, it in enumerate(items):
        fields = [it.key, it.content, it.namespace, it.agent_id or "", *(it.tags or [])]
        if any("\x00" in f for f in fields) or (it.meta_json and "\\u0000" in it.meta_json):
            raise MemoryValidationError(f"item {i}: {it.key!r} contains a NUL character, which PostgreSQL"
                                        " text cannot hold")


class PostgresBackend(RowReads[PgDatabase]):
    """The memory tables of a :class:`PgDatabase` (see the module docstring for the semantics)."""

    cols = _COLS

    dialect = "postgres"

    def __init__(self, db: PgDatabase, *, dimensions: int, config: Any):
        self.db = db
        self.dimensions = dimensions
        self.index_kind = config.postgres.index
        self.ef_search = config.postgres.ef_search
        self.mismatch: EmbedderMismatchError | None = None   # set by ensure(): another embedder made the vectors
        self._identity: tuple[str, str, int] | None = None    # (embedder, model, dimensions) this process embeds with
        self._stored: tuple[str, str, int] | None = None      # the same of the stored vectors, as last read

    def ensure(self, embedder_name: str, model: str) -> None:
        """Make ``memory_vec`` for this dimension, or record (in ``mismatch``) that another embedder made it."""
        d = self.dimensions
        self._identity = (embedder_name, model, d)
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (VECTOR_LOCK,))
            row = conn.execute("SELECT embedder, model, dimensions FROM vector_index WHERE id = 1").fetchone()
            if row is None:
                conn.execute(f"CREATE TABLE memory_vec (rid BIGINT PRIMARY KEY REFERENCES memory (rid)"
                             f" ON DELETE CASCADE, embedding vector({d}) NOT NULL)")
                conn.execute("INSERT INTO vector_index (id, embedder, model, dimensions, created_at)"
                             " VALUES (1, ?, ?, ?, ?)", (embedder_name, model, d, time.time()))
                row = (embedder_name, model, d)
            if self.index_kind == "hnsw" and tuple(row) == (embedder_name, model, d):
                conn.execute("CREATE INDEX IF NOT EXISTS memory_vec_hnsw ON memory_vec"
                             " USING hnsw (embedding vector_cosine_ops)")
        self._set_stored((row[0], row[1], int(row[2])))

    def _set_stored(self, stored: tuple[str, str, int]) -> None:
        assert self._identity is not None, "ensure() runs before any read or write"
        self._stored = stored
        self.mismatch = None if stored == self._identity else mismatch_error(self.db.path, stored, self._identity)

    def _reread(self, conn: Any) -> bool:
        """Read ``vector_index`` on ``conn`` into ``mismatch``; True when the stored vectors are this embedder's."""
        row = conn.execute("SELECT embedder, model, dimensions FROM vector_index WHERE id = 1").fetchone()
        if row is not None and (row[0], row[1], int(row[2])) != self._stored:
            self._set_stored((row[0], row[1], int(row[2])))
        return self.mismatch is None

    def refresh(self) -> None:
        """Follow a re-embedding finished by any process (``memory reembed``): one read of ``vector_index``."""
        if self._identity is not None:
            self._reread(self.db.conn)

    # --- writes -------------------------------------------------------------------------------------
    @staticmethod
    def _existing(conn: Any, items: list[Item]) -> dict[tuple[str, str], tuple]:
        found: dict[tuple[str, str], tuple] = {}
        by_ns: dict[str, list[str]] = {}
        for it in items:
            by_ns.setdefault(it.namespace, []).append(it.key)
        for ns, keys in by_ns.items():
            rows = conn.execute("SELECT key, rid, content_hash, agent_id FROM memory WHERE namespace = ?"
                                " AND key = ANY(?)", (ns, keys)).fetchall()
            found.update({(ns, r[0]): (r[1], r[2], r[3]) for r in rows})
        return found

    @staticmethod
    def _lock_namespaces(conn: Any, namespaces: set[str]) -> None:
        for ns in sorted(namespaces):   # one order everywhere: no deadlock between two writers
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (ns,))

    def write(self, items: list[Item], embed: Embed, owner: OwnerCheck, in_process: bool) -> int:
        if not items:
            return 0
        _check_text(items)
        existing = self._existing(self.db.conn, items)      # outside the transaction: embed before locking
        vectors = embed([it for it in items if stale(it, existing)])
        now = time.time()
        namespaces = {it.namespace for it in items}
        with self.db.transaction() as conn:
            check_sessions_active(conn, namespaces)        # FOR SHARE: Sessions.end waits for this commit
            # shared: a re-embedding replaces memory_vec under the exclusive lock, so it is either before
            # this write (and seen just below) or after it (and embeds what this writes)
            conn.execute("SELECT pg_advisory_xact_lock_shared(?)", (VECTOR_LOCK,))
            if not self._reread(conn):
                raise EmbedderMismatchError(f"{self.db.path}: the memory was re-embedded by another process during"
                                            " this write; nothing was written, write again")
            self._lock_namespaces(conn, namespaces)
            existing = self._existing(conn, items)
            new = [it for it in items if (it.namespace, it.key) not in existing]
            old = [it for it in items if (it.namespace, it.key) in existing]
            vectors.update(embed([it for it in items if id(it) not in vectors and stale(it, existing)]))
            tag_rows = self._insert_rows(conn, new, vectors, now)
            for it in old:
                tag_rows += self._update_row(conn, it, existing[(it.namespace, it.key)], vectors, now, owner)
            if tag_rows:
                conn.executemany("INSERT INTO memory_tags (memory_rid, tag) VALUES (?, ?) ON CONFLICT DO NOTHING",
                                 tag_rows)
        return len(items)

    def _insert_rows(self, conn: Any, new: list[Item], vectors: dict, now: float) -> list[tuple[int, str]]:
        if not new:
            return []
        rids = [r[0] for r in conn.execute("SELECT nextval('memory_rid_seq') FROM generate_series(1, ?)",
                                           (len(new),)).fetchall()]
        base = f"{time.time_ns() // 1000:013x}{secrets.token_hex(3)}"
        with conn.raw.cursor() as cur:
            with cur.copy("COPY memory (rid, id, key, namespace, content, content_hash, metadata, agent_id,"
                          " created_at, updated_at) FROM STDIN") as cp:
                for i, (rid, it) in enumerate(zip(rids, new, strict=True)):
                    cp.write_row((rid, f"{base}{i:07x}", it.key, it.namespace, it.content, it.hash,
                                  it.meta_json or "{}", it.agent_id, now, now))
            with cur.copy("COPY memory_vec (rid, embedding) FROM STDIN (FORMAT BINARY)") as cp:
                cp.write(_vec_copy(rids, np.stack([vectors[id(it)] for it in new])))
        return [(rid, t) for rid, it in zip(rids, new, strict=True) for t in (it.tags or [])]

    def _update_row(self, conn: Any, it: Item, found: tuple, vectors: dict, now: float,
                    owner: OwnerCheck) -> list[tuple[int, str]]:
        rid, old_hash, old_agent = found
        owner(it.key, old_agent)
        agent = it.agent_id if it.agent_id is not None else old_agent
        changed = old_hash != it.hash
        conn.execute("UPDATE memory SET content = ?, content_hash = ?, metadata = coalesce(?::jsonb, metadata),"
                     " agent_id = ?, version = version + ?, updated_at = ? WHERE rid = ?",
                     (it.content, it.hash, it.meta_json, agent, 1 if changed else 0, now, rid))
        if changed:
            conn.execute("INSERT INTO memory_vec (rid, embedding) VALUES (?, ?::vector) ON CONFLICT (rid)"
                         " DO UPDATE SET embedding = EXCLUDED.embedding", (rid, vector_text(vectors[id(it)])))
        if it.tags is None:
            return []
        conn.execute("DELETE FROM memory_tags WHERE memory_rid = ?", (rid,))
        return [(rid, t) for t in it.tags]

    def delete(self, namespace: str, key: str, owner: OwnerCheck) -> bool:
        with self.db.transaction() as conn:
            self._lock_namespaces(conn, {namespace})
            row = conn.execute("SELECT rid, agent_id FROM memory WHERE namespace = ? AND key = ?",
                               (namespace, key)).fetchone()
            if row is None:
                return False
            owner(key, row[1])
            conn.execute("DELETE FROM memory WHERE rid = ?", (row[0],))   # vectors, tags, versions: cascade
        return True

    def purge(self, conn: Any, namespace: str, agent_id: str | None = None) -> int:
        self._lock_namespaces(conn, {namespace})
        if agent_id is None:
            cur = conn.execute("DELETE FROM memory WHERE namespace = ?", (namespace,))
        else:
            cur = conn.execute("DELETE FROM memory WHERE namespace = ? AND (agent_id IS NULL OR agent_id = ?)",
                               (namespace, agent_id))
        return cur.rowcount

    # --- reads --------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        row = self.db.query("SELECT count(*), count(tsv), (SELECT count(*) FROM memory_vec) FROM memory")[0]
        return {"memory": row[0], "fts": row[1], "vector": row[2]}

    # --- search -------------------------------------------------------------------------------------
    @staticmethod
    def _tsquery(terms: list[str], op: str) -> tuple[str, list[str]]:
        """A tsquery expression over bound parameters for FTS5-style quoted ``terms`` (see fts_terms)."""
        parts, params = [], []
        for t in terms:
            star = t.endswith("*")
            body = t.rstrip("*")[1:-1]
            if " " in body:
                parts.append("phraseto_tsquery('english', ?)")
                params.append(body)
            elif star:
                parts.append("to_tsquery('english', ?)")
                params.append(body + ":*")
            else:
                parts.append("plainto_tsquery('english', ?)")
                params.append(body)
        return f" {op} ".join(parts), params

    def _ranked(self, expr: str, qparams: list[str], where: str, params: list[Any], limit: int) -> list[Any]:
        return self.db.query(f"SELECT m.rid, ts_rank(m.tsv, x.q, 1) AS r FROM memory m, (SELECT {expr} AS q) x"
                             f" WHERE m.tsv @@ x.q AND {where} ORDER BY r DESC, m.rid LIMIT ?",
                             [*qparams, *params, limit])

    def fts(self, query: str, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
        """Every-term hits first, then any-term hits (as :func:`~agentstack_lab.memory.fts.fts_search`)."""
        terms = content_terms(query)
        if not terms or limit <= 0:
            return []
        rows = self._ranked(*self._tsquery(terms, "&&"), where, params, limit)
        complete = len(rows)
        if len(rows) < limit and len(terms) > 1:
            seen = {r[0] for r in rows}
            more = self._ranked(*self._tsquery(terms, "||"), where, params, limit + len(seen))
            rows += [r for r in more if r[0] not in seen][:limit - len(rows)]
        if not rows:
            return []
        contents = dict(self.db.query("SELECT rid, content FROM memory WHERE rid = ANY(?)", ([r[0] for r in rows],)))
        hit_words = self._matching_words(terms, {w.lower() for c in contents.values()
                                                 for w in _WORD.findall(c[:_SNIPPET_SCAN])})
        hits = [{"rid": r[0], "raw": -float(r[1]), "snippet": mark_snippet(_snippet(contents.get(r[0], ""), hit_words))}
                for r in rows]
        entries = int(self.db.query("SELECT coalesce(max(rid), 0) FROM memory")[0][0])
        dfs: dict[str, int] = {}
        if complete < len(hits):   # term weights matter only for the hits with some of the terms
            cap = common_cap(entries)
            for t in terms:
                expr, qparams = self._tsquery([t], "||")
                dfs[t] = int(self.db.query(f"SELECT count(*) FROM (SELECT 1 FROM memory WHERE tsv @@ ({expr})"
                                           " LIMIT ?) x", [*qparams, cap + 1])[0][0])

        def matches(term: str, rids: list[int]) -> list[int]:
            expr, qparams = self._tsquery([term], "||")
            return [r[0] for r in self.db.query(f"SELECT rid FROM memory WHERE rid = ANY(?) AND tsv @@ ({expr})",
                                                [rids, *qparams])]

        keyword_scores(hits, terms, dfs, entries, matches, complete)
        return hits

    def _matching_words(self, terms: list[str], words: set[str]) -> set[str]:
        """Which of ``words`` the query matches, by PostgreSQL's own stemming (phrases count word by word)."""
        if not words:
            return set()
        single = [f'"{w}"' + ("*" if t.endswith("*") else "") for t in terms for w in t.rstrip("*")[1:-1].split()]
        expr, qparams = self._tsquery(single, "||")
        return {r[0] for r in self.db.query(f"SELECT w FROM unnest(?::text[]) w WHERE to_tsvector('english', w)"
                                            f" @@ ({expr})", [sorted(words), *qparams])}

    def vector(self, query: np.ndarray, flt: Any, where: str, params: list[Any], k: int) -> list[tuple[int, float]]:
        q = vector_text(query)
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock_shared(?)", (VECTOR_LOCK,))   # see write()
            if not self._reread(conn):   # re-embedded since refresh()
                assert self.mismatch is not None
                raise self.mismatch
            if self.index_kind == "hnsw":
                conn.execute("SELECT set_config('hnsw.ef_search', ?, true),"
                             " set_config('hnsw.iterative_scan', 'strict_order', true)", (str(self.ef_search),))
            rows = conn.execute(f"SELECT m.rid, 1 - (v.embedding <=> ?::vector) FROM memory_vec v JOIN memory m"
                                f" ON m.rid = v.rid WHERE {where} ORDER BY v.embedding <=> ?::vector LIMIT ?",
                                [q, *params, q, k]).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def rows(self, rids: list[int]) -> dict[int, Any]:
        return {r[0]: r for r in self.db.query("SELECT rid, key, namespace, content, agent_id, metadata::text"
                                               " FROM memory WHERE rid = ANY(?)", (rids,))}
