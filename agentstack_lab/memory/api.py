"""The memory API: store, get, delete, list and search entries of the workspace database.

``Memory`` is bound to an :class:`~agentstack_lab.memory.access.AccessContext`
(unscoped for the user; :meth:`Memory.scoped` gives a session/agent view). Every
operation checks the namespace it touches; search filters by namespace, session and
agent inside the FTS and vector queries, never after them.

Where the rows live is the backend's business (:mod:`agentstack_lab.memory.backends`): the
workspace's SQLite file, or a team's PostgreSQL + pgvector (``memory.backend = "postgres"``).
Validation, access control and the search pipeline are this one class over both, so both
refuse the same input with the same one-line errors.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from agentstack_lab.errors import NotFoundError
from agentstack_lab.memory.access import (
    AccessContext,
    MemoryValidationError,
    SessionError,
    can_access_entry,
    derive_namespace,
    validate_access,
)
from agentstack_lab.memory.backends import open_backend
from agentstack_lab.memory.backends.base import Entry, content_hash
from agentstack_lab.memory.backends.base import Item as _Item
from agentstack_lab.memory.search import (
    EmbedderHealth,
    SearchHits,
    SearchMode,
    SearchResult,
    search,
    search_df,
)

if TYPE_CHECKING:
    from agentstack_lab.config import MemoryConfig
    from agentstack_lab.embeddings.registry import Embedder
    from agentstack_lab.store.protocol import Database

__all__ = ["Memory", "Entry", "SearchResult", "SearchHits", "MemoryValidationError", "SearchMode", "content_hash"]

MAX_KEY = 1024
_FIELDS = frozenset({"key", "content", "namespace", "agent_id", "tags", "metadata"})


def _at(index: int | None) -> str:
    """``"item 3: "`` for errors about one item of a ``store_many`` batch."""
    return "" if index is None else f"item {index}: "


def _utf8_len(text: str) -> int:
    """UTF-8 size of ``text`` without encoding it whole (bounded extra memory for a huge entry)."""
    step = 1 << 20
    return sum(len(text[i:i + step].encode("utf-8", "surrogatepass")) for i in range(0, len(text), step))


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for one ``store_many`` call.

    A batch allocates tens of thousands of short-lived containers (items, tuples, rows), none of them in
    cycles; each 700 allocations start a collection, and in a process holding millions of objects (a kernel
    with a DataFrame, the benchmark's 1M-entry corpus) the older generations' passes cost ~3% of the call
    (``gc_collect_main`` + ``visit_*`` in a perf profile of 10k-entry batches). Reference counting still
    frees everything; the collector resumes afterwards if it was on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class Memory:
    """Store and search memory entries (SQLite file or PostgreSQL, see :mod:`agentstack_lab.memory.backends`).

    ``db`` is the workspace's ``SQLiteDatabase`` or a
    :class:`~agentstack_lab.memory.backends.postgres.PgDatabase`; the backend follows from it.
    """

    def __init__(self, db: Database, *, embedder: Embedder, config: MemoryConfig | None = None,
                 context: AccessContext | None = None, _backend: Any = None,
                 _health: EmbedderHealth | None = None):
        from agentstack_lab.config import MemoryConfig

        self.db = db
        self.embedder = embedder
        self.config = config or MemoryConfig()
        self.context = context
        if _backend is None:
            _backend = open_backend(db, dimensions=embedder.dimensions, embedder_name=embedder.name,
                                    model=embedder.model, config=self.config)
        self.backend = _backend
        self._health = _health or EmbedderHealth()   # shared by scoped views: a failing embedder is logged once
        self._ns_ok: dict[str | None, str] = {}   # namespaces already validated for writing by this view

    def scoped(self, session_id: str | None = None, *, agent_id: str | None = None,
               include_shared: bool = True) -> Memory:
        """A view of the same memory acting for a session (and optionally an agent within it).

        ``session_id=None`` means no session; an empty id raises
        :class:`~agentstack_lab.memory.access.SessionError` (it never means "no session").
        """
        ctx = AccessContext(session_id=session_id, agent_id=agent_id, include_shared=include_shared)
        return Memory(self.db, embedder=self.embedder, config=self.config, context=ctx, _backend=self.backend,
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
        if not content:
            raise MemoryValidationError(f"{_at(index)}content of {key!r} is empty; an entry needs some text "
                                        "(to remove an entry, delete it)")
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
        if got is None:  # removed between the write's commit and this read: only another process can do that
            if item.namespace.startswith("session:"):
                raise SessionError(f"session {item.namespace.removeprefix('session:')} ended right after entry "
                                   f"{item.key!r} was written; the entry went with the session")
            raise NotFoundError(f"entry {item.key!r} in namespace {item.namespace!r} was deleted by another process "
                           "right after it was written")
        return got

    def store_many(self, items: Iterable[Any], *, namespace: str | None = None,
                   agent_id: str | None = None) -> int:
        """Store many entries in one transaction with batched embedding; returns how many were written.

        Each item is a mapping with ``key``, ``content`` and optional ``namespace``, ``agent_id``,
        ``tags``, ``metadata``, or a ``(key, content)`` pair. All items are validated before anything
        is written; a later duplicate of the same ``(namespace, key)`` wins.
        """
        with _collector_paused():
            return self._store_many(items, namespace, agent_id)

    def _store_many(self, items: Iterable[Any], namespace: str | None, agent_id: str | None) -> int:
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

    def _embed(self, items: builtins.list[_Item]) -> dict[int, np.ndarray]:
        """``id(item) -> float32 vector`` for ``items`` (one batched embedder call)."""
        if not items:
            return {}
        vecs = np.asarray(self.embedder.embed([it.content for it in items]), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(items), self.backend.dimensions):
            raise MemoryValidationError(f"embedder {self.embedder.name!r} returned shape {vecs.shape}, expected"
                                        f" ({len(items)}, {self.backend.dimensions})")
        return {id(it): vecs[i] for i, it in enumerate(items)}

    def _owner(self, key: str, stored_agent: str | None) -> None:
        """Raise when an agent view touches an entry another agent owns."""
        if self.context is not None and self.context.agent_id and stored_agent not in (None, self.context.agent_id):
            raise MemoryValidationError(f"entry {key!r} belongs to agent {stored_agent!r}")

    def _write(self, items: builtins.list[_Item]) -> int:
        if items:
            self.backend.refresh()   # a re-embedding finished since, in any process: write the new vectors
            if self.backend.mismatch is not None:   # new vectors would not fit the stored ones: nothing is written
                raise self.backend.mismatch
        return self.backend.write(items, self._embed, self._owner, bool(getattr(self.embedder, "in_process", False)))

    def delete(self, key: str, *, namespace: str | None = None) -> bool:
        """Delete one entry (with its FTS, vector, tag and version rows); ``False`` if it did not exist."""
        ns = self._namespace(namespace, "delete")
        return self.backend.delete(ns, key, self._owner)

    def delete_namespace(self, namespace: str) -> int:
        """Delete every entry of ``namespace`` (and everything hanging off them); returns the count."""
        ns = self._namespace(namespace, "delete")
        agent = self.context.agent_id if self.context is not None else None
        with self.db.transaction() as conn:
            return self._purge(conn, ns, agent)

    def _purge(self, conn: Any, namespace: str, agent_id: str | None = None) -> int:
        """Delete the entries of ``namespace`` (only ``agent_id``'s and shared ones when given)."""
        return self.backend.purge(conn, namespace, agent_id)

    # --- reads --------------------------------------------------------------------------------------
    def _get(self, namespace: str, key: str) -> Entry | None:
        return self.backend.get(namespace, key)

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
        return self.backend.list(where, params, tag, limit, offset)

    def count(self, *, namespace: str | None = None) -> int:
        namespace, agent_id, include_shared = self._filters(namespace, None, None)
        where, params = self._where(namespace, agent_id, include_shared)
        return self.backend.count(where, params)

    def history(self, key: str, *, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        """Previous versions of an entry (oldest first), kept when its content changed."""
        ns = self._namespace(namespace, "read")
        if self.get(key, namespace=ns) is None:   # absent, or another agent's entry (see get())
            return []
        return self.backend.history(ns, key)

    def search(self, query: str, mode: SearchMode = "hybrid", *, namespace: str | None = None,
               agent_id: str | None = None, include_shared: bool | None = None, limit: int = 10,
               threshold: float | None = None) -> SearchHits:
        """Search by keywords (FTS5/BM25), by meaning (vectors) or both fused with reciprocal rank fusion.

        ``namespace=None`` searches every namespace this memory may see. ``threshold`` drops hits whose
        score is below it; scores are absolute, 0..1 in each mode (:mod:`~agentstack_lab.memory.scores`).
        Any text is a valid query. Stop words alone and vector hits below the embedder's calibrated floor
        never count, so a query for something absent finds nothing. When the embedder fails, or the
        memory was embedded by another embedder (:meth:`reembed`), hybrid search answers from keywords
        and sets ``degraded`` on the hits and the returned list; ``mode="vector"`` raises
        :class:`~agentstack_lab.memory.search.EmbedderFailedError` or
        :class:`~agentstack_lab.memory.vectors.EmbedderMismatchError`.
        """
        return search(self, query, mode, namespace=namespace, agent_id=agent_id, include_shared=include_shared,
                      limit=limit, threshold=threshold)

    def reembed(self, *, batch_size: int = 256, progress: Any = None, stop: Any = None) -> Any:
        """Re-embed every entry with the configured embedder (see :func:`.reembed.reembed`); resumable."""
        from agentstack_lab.memory.reembed import reembed

        return reembed(self, batch_size=batch_size, progress=progress, stop=stop)

    # --- helpers ------------------------------------------------------------------------------------
    @property
    def index(self) -> Any:
        """The SQLite backend's :class:`~agentstack_lab.memory.vectors.VectorIndex` (``None`` on PostgreSQL)."""
        return getattr(self.backend, "index", None)

    def stats(self) -> dict[str, int]:
        """Row counts of the memory table and its FTS and vector indexes (equal when consistent)."""
        return self.backend.stats()

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

