"""The memory API: store, get, delete, list and search entries of the workspace database.

``Memory`` is bound to an :class:`~agentstack_lab.memory.access.AccessContext`
(unscoped for the user; :meth:`Memory.scoped` gives a session/agent view). Every
operation checks the namespace it touches; search filters by namespace, session and
agent inside the FTS and vector queries, never after them.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from agentstack_lab.memory.access import (
    AccessContext,
    MemoryValidationError,
    can_access_entry,
    check_sessions_active,
    derive_namespace,
    validate_access,
)
from agentstack_lab.memory.search import (
    EmbedderHealth,
    SearchHits,
    SearchMode,
    SearchResult,
    search,
    search_df,
)
from agentstack_lab.memory.vectors import VectorIndex, vec_metadata

if TYPE_CHECKING:
    from agentstack_lab.config import MemoryConfig
    from agentstack_lab.embeddings.registry import Embedder

__all__ = ["Memory", "Entry", "SearchResult", "SearchHits", "MemoryValidationError", "SearchMode"]

MAX_KEY = 1024
_FIELDS = frozenset({"key", "content", "namespace", "agent_id", "tags", "metadata"})
BULK_ROWS = 64   # from this many new rows on, store_many indexes FTS in one statement
_COLS = "m.rid, m.id, m.key, m.namespace, m.content, m.content_hash, m.metadata, m.agent_id, m.version," \
        " m.created_at, m.updated_at, (SELECT json_group_array(tag) FROM memory_tags t WHERE t.memory_rid = m.rid)"


@dataclass(frozen=True)
class Entry:
    """One stored memory entry."""

    id: str
    key: str
    namespace: str
    content: str
    agent_id: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "namespace": self.namespace, "content": self.content,
                "agent_id": self.agent_id, "tags": list(self.tags), "metadata": dict(self.metadata),
                "version": self.version, "created_at": self.created_at, "updated_at": self.updated_at}


def _at(index: int | None) -> str:
    """``"item 3: "`` for errors about one item of a ``store_many`` batch."""
    return "" if index is None else f"item {index}: "


def _utf8_len(text: str) -> int:
    """UTF-8 size of ``text`` without encoding it whole (bounded extra memory for a huge entry)."""
    step = 1 << 20
    return sum(len(text[i:i + step].encode("utf-8", "surrogatepass")) for i in range(0, len(text), step))


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _entry(row: Any) -> Entry:
    return Entry(id=row[1], key=row[2], namespace=row[3], content=row[4], content_hash=row[5],
                 metadata=json.loads(row[6]), agent_id=row[7], version=row[8], created_at=row[9],
                 updated_at=row[10], tags=sorted(json.loads(row[11])) if row[11] else [])


@dataclass
class _Item:
    key: str
    content: str
    namespace: str
    agent_id: str | None
    tags: list[str] | None
    meta_json: str | None   # None: keep the stored metadata on update
    hash: str = ""


class _Background:
    """Run ``fn(*args)`` in a thread; :meth:`result` joins it and returns (or re-raises)."""

    def __init__(self, fn: Any, *args: Any):
        self._out: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True, name="memory-embed")
        self._thread.start()

    def _run(self, fn: Any, args: tuple) -> None:
        try:
            self._out.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller in result()
            self._out.append((False, exc))

    def result(self) -> Any:
        self._thread.join()
        ok, value = self._out[0]
        if not ok:
            raise value
        return value


def _stale(it: _Item, found: dict) -> bool:
    """True when ``it`` is new or its content changed (so it needs embedding)."""
    old = found.get((it.namespace, it.key))
    return old is None or old[1] != it.hash


class _InsertTriggers:
    """The per-row AFTER INSERT triggers on ``memory`` (FTS and vector log), as stored in the schema.

    A batch of new rows drops them, inserts, indexes the whole rowid range with two ``INSERT ...
    SELECT`` and re-creates them from their stored SQL, all inside the writer's transaction, so no
    other connection ever sees the schema without them, and a crash rolls everything back. Even
    when their ``WHEN`` clause skips the body, invoking them costs ~6 µs per row (a third of the
    ``memory`` insert), which is what this saves.
    """

    NAMES = ("memory_ai", "memory_vlog_ai")

    def get(self, conn: Any) -> list[tuple[str, str]]:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memory'"
                            f" AND name IN ({', '.join('?' * len(self.NAMES))})", self.NAMES).fetchall()
        return [(r[0], r[1]) for r in rows]


_INSERT_TRIGGERS = _InsertTriggers()


class Memory:
    """Store and search the workspace's memory (one SQLite file: ``memory``, ``memory_fts``, ``memory_vec``)."""

    def __init__(self, db: Any, *, embedder: Embedder, config: MemoryConfig | None = None,
                 context: AccessContext | None = None, _index: VectorIndex | None = None,
                 _health: EmbedderHealth | None = None):
        from agentstack_lab.config import MemoryConfig

        self.db = db
        self.embedder = embedder
        self.config = config or MemoryConfig()
        self.context = context
        if _index is None:
            _index = VectorIndex(db, dimensions=embedder.dimensions, use_cache=self.config.vector.cache)
            _index.ensure(embedder.name, embedder.model)
        self.index = _index
        self._health = _health or EmbedderHealth()   # shared by scoped views: a failing embedder is logged once
        self._ns_ok: dict[str | None, str] = {}   # namespaces already validated for writing by this view

    def scoped(self, session_id: str | None = None, *, agent_id: str | None = None,
               include_shared: bool = True) -> Memory:
        """A view of the same memory acting for a session (and optionally an agent within it).

        ``session_id=None`` means no session; an empty id raises
        :class:`~agentstack_lab.memory.access.SessionError` (it never means "no session").
        """
        ctx = AccessContext(session_id=session_id, agent_id=agent_id, include_shared=include_shared)
        return Memory(self.db, embedder=self.embedder, config=self.config, context=ctx, _index=self.index,
                      _health=self._health)

    def __repr__(self) -> str:
        return f"Memory({self.db!r}, context={self.context!r})"

    # --- validation ---------------------------------------------------------------------------------
    def _namespace(self, namespace: str | None, operation: str) -> str:
        ns = derive_namespace(self.context, namespace)
        if not isinstance(ns, str) or not ns.strip() or ns != ns.strip():
            raise MemoryValidationError(f"namespace must be a non-empty string without surrounding spaces, got {ns!r}")
        validate_access(self.context, ns, operation)
        return ns

    def _item(self, key: Any, content: Any, namespace: str | None, agent_id: Any, tags: Any,
              metadata: Any, index: int | None = None) -> _Item:
        if not isinstance(key, str) or not key.strip():
            raise MemoryValidationError(f"{_at(index)}key must be a non-empty string, got {key!r}")
        if len(key) > MAX_KEY:
            raise MemoryValidationError(f"{_at(index)}key is {len(key)} characters; the limit is {MAX_KEY}")
        if not isinstance(content, str):
            raise MemoryValidationError(f"{_at(index)}content must be a string, got {type(content).__name__}")
        limit = self.config.max_entry_bytes
        if len(content) * 4 > limit and (size := _utf8_len(content)) > limit:   # 4 bytes/char at most
            raise MemoryValidationError(f"{_at(index)}content of {key!r} is {size:,} bytes; the limit is {limit:,}"
                                        " (memory.max_entry_bytes)")
        if agent_id is None and self.context is not None:
            agent_id = self.context.agent_id
        if agent_id is not None and (not isinstance(agent_id, str) or not agent_id):
            raise MemoryValidationError(f"{_at(index)}agent_id must be a non-empty string or None, got {agent_id!r}")
        if tags is not None:
            if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
                raise MemoryValidationError(f"{_at(index)}tags must be a list of non-empty strings, got {tags!r}")
            tags = sorted(set(tags))
        meta_json = None
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise MemoryValidationError(f"{_at(index)}metadata must be a dict, got {type(metadata).__name__}")
            try:
                meta_json = json.dumps(dict(metadata))
            except (TypeError, ValueError) as exc:
                raise MemoryValidationError(f"{_at(index)}metadata is not JSON-serialisable: {exc}") from None
        ns = self._ns_ok.get(namespace)
        if ns is None:
            ns = self._namespace(namespace, "write")
            if len(self._ns_ok) < 256:
                self._ns_ok[namespace] = ns
        if self.context is not None and self.context.agent_id and agent_id != self.context.agent_id:
            raise MemoryValidationError(f"{_at(index)}agent {self.context.agent_id!r} cannot write as agent {agent_id!r}")
        return _Item(key, content, ns, agent_id, tags, meta_json, content_hash(content))

    # --- writes -------------------------------------------------------------------------------------
    def store(self, key: str, content: str, *, namespace: str | None = None, agent_id: str | None = None,
              tags: list[str] | None = None, metadata: dict[str, Any] | None = None) -> Entry:
        """Insert or update the entry ``(namespace, key)``; unchanged content is not re-embedded.

        On update, ``tags``/``metadata``/``agent_id`` left as ``None`` keep their stored values.
        """
        item = self._item(key, content, namespace, agent_id, tags, metadata)
        self._write([item])
        got = self._get(item.namespace, item.key)
        assert got is not None
        return got

    def store_many(self, items: Iterable[Any], *, namespace: str | None = None,
                   agent_id: str | None = None) -> int:
        """Store many entries in one transaction with batched embedding; returns how many were written.

        Each item is a mapping with ``key``, ``content`` and optional ``namespace``, ``agent_id``,
        ``tags``, ``metadata``, or a ``(key, content)`` pair. All items are validated before anything
        is written; a later duplicate of the same ``(namespace, key)`` wins.
        """
        parsed: dict[tuple[str, str], _Item] = {}
        for i, raw in enumerate(items):
            if isinstance(raw, Mapping):
                if not _FIELDS.issuperset(raw):
                    raise MemoryValidationError(f"item {i}: unknown field(s) {sorted(set(raw) - _FIELDS)}")
                get = raw.get
                it = self._item(get("key"), get("content"), get("namespace", namespace), get("agent_id", agent_id),
                                get("tags"), get("metadata"), i)
            elif isinstance(raw, (tuple, list)) and len(raw) == 2:
                it = self._item(raw[0], raw[1], namespace, agent_id, None, None, i)
            else:
                raise MemoryValidationError(f"item {i}: expected a dict or a (key, content) pair, got {raw!r:.80}")
            parsed[(it.namespace, it.key)] = it
        return self._write(list(parsed.values()))

    def _existing(self, conn: Any, items: list[_Item]) -> dict[tuple[str, str], tuple]:
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

    def _embed(self, items: list[_Item]) -> dict[int, np.ndarray]:
        """``id(item) -> float32 vector`` for ``items`` (one batched embedder call)."""
        if not items:
            return {}
        vecs = np.asarray(self.embedder.embed([it.content for it in items]), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(items), self.index.dimensions):
            raise MemoryValidationError(f"embedder {self.embedder.name!r} returned shape {vecs.shape}, expected"
                                        f" ({len(items)}, {self.index.dimensions})")
        return {id(it): vecs[i] for i, it in enumerate(items)}

    def _write(self, items: list[_Item]) -> int:
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

        todo = [it for it in items if _stale(it, existing)]
        pending = _Background(self._embed, todo) if (
            len(todo) >= BULK_ROWS and getattr(self.embedder, "in_process", False)) else None
        vectors = self._embed(todo) if pending is None else {}
        now = time.time()
        with self.db.transaction() as conn:
            # under the write lock: a session ended by another process after our caller checked it is seen here
            check_sessions_active(conn, {it.namespace for it in items})
            if self._log_mark(conn) != mark:   # another writer changed memory meanwhile: look again
                existing = self._existing(conn, items)
            new = [it for it in items if (it.namespace, it.key) not in existing]
            old = [it for it in items if (it.namespace, it.key) in existing]
            first = self._insert_rows(conn, new, now)
            if pending is not None:
                vectors = pending.result()
            vectors.update(self._embed([it for it in items if id(it) not in vectors and _stale(it, existing)]))
            if new:
                meta = {k: vec_metadata(*k) for k in {(it.namespace, it.agent_id) for it in new}}
                self.index.add_block(conn, first, np.stack([vectors[id(it)] for it in new]),
                                     [meta[(it.namespace, it.agent_id)] for it in new])
            tag_rows = [(first + i, t) for i, it in enumerate(new) for t in (it.tags or [])]
            tag_rows += self._update_rows(conn, old, existing, vectors, now)
            if tag_rows:
                conn.executemany("INSERT OR IGNORE INTO memory_tags (memory_rid, tag) VALUES (?, ?)", tag_rows)
            if len(items) > 100 or (new and (first + len(new) - 1) % 1000 == 0):
                self.index.prune_log(conn)
        return len(items)

    def _insert_rows(self, conn: Any, new: list[_Item], now: float) -> int:
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
        # one statement over a JSON array rather than executemany: SQLite then works without the GIL
        # while the embedder thread runs, instead of taking it back for every row's parameters
        payload = json.dumps([(it.key, it.namespace, it.content, it.hash, it.meta_json or "{}", it.agent_id)
                              for it in new], ensure_ascii=False)
        conn.execute("INSERT INTO memory (rid, id, key, namespace, content, content_hash, metadata, agent_id,"
                     " created_at, updated_at) SELECT ?1 + j.key, ?2 || printf('%07x', j.key), j.value ->> 0,"
                     " j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, ?3, ?3"
                     " FROM json_each(?4) j", (first, base, now, payload))
        if bulk:
            last = first + len(new) - 1
            conn.execute("INSERT INTO memory_fts (rowid, key, content) SELECT rid, key, content FROM memory"
                         " WHERE rid BETWEEN ? AND ?", (first, last))
            conn.execute("INSERT INTO memory_vec_log (rid) SELECT rid FROM memory WHERE rid BETWEEN ? AND ?",
                         (first, last))
        for _, sql in triggers:
            conn.execute(sql)
        return first

    def _update_rows(self, conn: Any, old: list[_Item], existing: dict, vectors: dict[int, np.ndarray],
                     now: float) -> list[tuple[int, str]]:
        """Update stored items: content (re-embedded only if its hash changed), metadata/tags/agent when given."""
        tag_rows: list[tuple[int, str]] = []
        for it in old:
            rid, old_hash, old_agent = existing[(it.namespace, it.key)]
            if self.context is not None and self.context.agent_id and old_agent not in (None, self.context.agent_id):
                raise MemoryValidationError(f"entry {it.key!r} belongs to agent {old_agent!r}")
            agent = it.agent_id if it.agent_id is not None else old_agent
            changed = old_hash != it.hash
            conn.execute(
                "UPDATE memory SET content = ?, content_hash = ?, metadata = coalesce(?, metadata),"
                " agent_id = ?, version = version + ?, updated_at = ? WHERE rid = ?",
                (it.content, it.hash, it.meta_json, agent, 1 if changed else 0, now, rid))
            if changed or (agent != old_agent and self.index.meta_cols(conn)):   # lean vec0: no agent column
                vec = vectors.get(id(it))
                blob = vec.tobytes() if vec is not None else conn.execute(
                    "SELECT embedding FROM memory_vec WHERE rid = ?", (rid,)).fetchone()[0]
                self.index.remove(conn, [rid])
                self.index.add(conn, [(rid, blob, *vec_metadata(it.namespace, agent))])
            if it.tags is not None:
                conn.execute("DELETE FROM memory_tags WHERE memory_rid = ?", (rid,))
                tag_rows += [(rid, t) for t in it.tags]
        return tag_rows

    def delete(self, key: str, *, namespace: str | None = None) -> bool:
        """Delete one entry (with its FTS, vector, tag and version rows); ``False`` if it did not exist."""
        ns = self._namespace(namespace, "delete")
        with self.db.transaction() as conn:
            row = conn.execute("SELECT rid, agent_id FROM memory WHERE namespace = ? AND key = ?", (ns, key)).fetchone()
            if row is None:
                return False
            if self.context is not None and self.context.agent_id and row[1] not in (None, self.context.agent_id):
                raise MemoryValidationError(f"entry {key!r} belongs to agent {row[1]!r}")
            self.index.remove(conn, [row[0]])
            conn.execute("DELETE FROM memory WHERE rid = ?", (row[0],))
        return True

    def delete_namespace(self, namespace: str) -> int:
        """Delete every entry of ``namespace`` (and everything hanging off them); returns the count."""
        ns = self._namespace(namespace, "delete")
        agent = self.context.agent_id if self.context is not None else None
        with self.db.transaction() as conn:
            return self._purge(conn, ns, agent)

    def _purge(self, conn: Any, namespace: str, agent_id: str | None = None) -> int:
        """Delete the entries of ``namespace`` (only ``agent_id``'s and shared ones when given)."""
        where, params = "namespace = ?", [namespace]
        if agent_id is not None:   # an agent view deletes what delete() would let it delete, no more
            where, params = where + " AND (agent_id IS NULL OR agent_id = ?)", [namespace, agent_id]
        rids = [r[0] for r in conn.execute(f"SELECT rid FROM memory WHERE {where}", params)]
        self.index.remove(conn, rids)
        conn.execute(f"DELETE FROM memory WHERE {where}", params)
        return len(rids)

    # --- reads --------------------------------------------------------------------------------------
    def _get(self, namespace: str, key: str) -> Entry | None:
        row = self.db.conn.execute(f"SELECT {_COLS} FROM memory m WHERE m.namespace = ? AND m.key = ?",
                                   (namespace, key)).fetchone()
        return _entry(row) if row else None

    def get(self, key: str, *, namespace: str | None = None) -> Entry | None:
        """The entry ``(namespace, key)``, or ``None``; another agent's entry is not visible to an agent."""
        ns = self._namespace(namespace, "read")
        entry = self._get(ns, key)
        if entry is not None and not can_access_entry(self.context, entry.namespace, entry.agent_id):
            return None
        return entry

    def _where(self, namespace: str | None, agent_id: str | None, include_shared: bool) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if namespace is not None:
            clauses.append("m.namespace = ?")
            params.append(self._namespace(namespace, "read"))
        else:
            session = self.context.session_id if self.context else None
            if session:
                clauses.append("(substr(m.namespace, 1, 8) != 'session:' OR m.namespace = ?)")
                params.append(f"session:{session}")
            else:
                clauses.append("substr(m.namespace, 1, 8) != 'session:'")
        if agent_id is not None:
            clauses.append("(m.agent_id = ? OR m.agent_id IS NULL)" if include_shared else "m.agent_id = ?")
            params.append(agent_id)
        return " AND ".join(clauses), params

    def _filters(self, namespace: str | None, agent_id: str | None,
                 include_shared: bool | None) -> tuple[str | None, str | None, bool]:
        ctx = self.context
        if ctx is not None and ctx.agent_id is not None:
            if agent_id is not None and agent_id != ctx.agent_id:
                raise MemoryValidationError(f"agent {ctx.agent_id!r} cannot read agent {agent_id!r}'s entries")
            agent_id = ctx.agent_id
        if include_shared is None:
            include_shared = ctx.include_shared if ctx else True
        if namespace is not None:
            namespace = self._namespace(namespace, "read")
        return namespace, agent_id, include_shared

    def list(self, *, namespace: str | None = None, agent_id: str | None = None, include_shared: bool | None = None,
             tag: str | None = None, limit: int = 50, offset: int = 0) -> builtins.list[Entry]:
        """Entries newest first (by ``updated_at``), paginated with ``limit``/``offset``."""
        if limit < 0 or offset < 0:
            raise MemoryValidationError("limit and offset must be >= 0")
        namespace, agent_id, include_shared = self._filters(namespace, agent_id, include_shared)
        where, params = self._where(namespace, agent_id, include_shared)
        if tag is not None:
            where += " AND EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_rid = m.rid AND t.tag = ?)"
            params.append(tag)
        rows = self.db.query(f"SELECT {_COLS} FROM memory m WHERE {where} ORDER BY m.updated_at DESC, m.rid DESC"
                             " LIMIT ? OFFSET ?", [*params, limit, offset])
        return [_entry(r) for r in rows]

    def count(self, *, namespace: str | None = None) -> int:
        namespace, agent_id, include_shared = self._filters(namespace, None, None)
        where, params = self._where(namespace, agent_id, include_shared)
        return self.db.query(f"SELECT count(*) FROM memory m WHERE {where}", params)[0][0]

    def history(self, key: str, *, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        """Previous versions of an entry (oldest first), kept when its content changed."""
        ns = self._namespace(namespace, "read")
        if self.get(key, namespace=ns) is None:   # absent, or another agent's entry (see get())
            return []
        rows = self.db.query("SELECT v.version, v.content, v.updated_at FROM memory_versions v JOIN memory m"
                             " ON m.rid = v.memory_rid WHERE m.namespace = ? AND m.key = ? ORDER BY v.version",
                             (ns, key))
        return [{"version": r[0], "content": r[1], "updated_at": r[2]} for r in rows]

    def search(self, query: str, mode: SearchMode = "hybrid", *, namespace: str | None = None,
               agent_id: str | None = None, include_shared: bool | None = None, limit: int = 10,
               threshold: float | None = None) -> SearchHits:
        """Search by keywords (FTS5/BM25), by meaning (vectors) or both fused with reciprocal rank fusion.

        ``namespace=None`` searches every namespace this memory may see. ``threshold`` drops hits whose
        score (0..1 in each mode) is below it. Any text is a valid query. Vector hits below the
        embedder's calibrated floor never count, so a query for something absent finds nothing. When
        the embedder fails, hybrid search answers from keywords and sets ``degraded`` on the hits and
        the returned list; ``mode="vector"`` raises :class:`~agentstack_lab.memory.search.EmbedderFailedError`.
        """
        return search(self, query, mode, namespace=namespace, agent_id=agent_id, include_shared=include_shared,
                      limit=limit, threshold=threshold)

    # --- helpers ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Row counts of the memory table and its FTS and vector indexes (equal when consistent)."""
        q = self.db.query
        return {"memory": q("SELECT count(*) FROM memory")[0][0],
                "fts": q("SELECT count(*) FROM memory_fts_docsize")[0][0],
                "vector": q("SELECT count(*) FROM memory_vec_rowids")[0][0]}

    def search_df(self, query: str, mode: SearchMode = "hybrid", **kwargs: Any):
        """:meth:`search` as a pandas DataFrame (pandas imported on first use; see :func:`.search.search_df`)."""
        return search_df(self, query, mode, **kwargs)

    def list_df(self, **kwargs: Any):
        """:meth:`list` as a pandas DataFrame (pandas imported on first use)."""
        import pandas as pd

        cols = ["key", "namespace", "content", "agent_id", "tags", "version", "created_at", "updated_at"]
        df = pd.DataFrame([e.to_dict() for e in self.list(**kwargs)], columns=[*cols, "id", "metadata"])
        for c in ("created_at", "updated_at"):
            df[c] = pd.to_datetime(df[c], unit="s")
        return df[cols]

