"""Memory search: keywords (FTS), meaning (vectors) or both fused (hybrid, the default), on either backend.

Three rules keep the default mode honest:

* **A score means the same in every search.** ``SearchResult.score`` is absolute, calibrated per
  mode and embedder (:mod:`agentstack_lab.memory.scores`), never relative to the best hit, so a
  ``threshold`` filters the same way whatever the query. Stop words alone never make a keyword hit.

* **Nothing found means nothing returned.** A vector hit enters the results only when its cosine
  similarity passes the embedder's calibrated floor (:func:`vector_floor`): every embedder gives
  unrelated texts some background similarity (the hash embedder: p99 0.15-0.16 for 1-3 word
  queries, 0.28-0.31 for longer ones; see :mod:`agentstack_lab.embeddings.hashing`), and a floor
  below that made ``search("zebra")`` over unrelated notes return hits scored ~0.5.
* **A failing embedder degrades hybrid search, it does not take it down.** When embedding the
  query fails (HTTP 500, timeout, refused connection), hybrid search answers from the keyword
  index alone, marks every hit and the list with ``degraded = "keyword only: embedder ... failed:
  ..."``, and logs a warning once per failure streak (not per call). ``mode="vector"`` has no
  such fallback: it raises :class:`EmbedderFailedError`, one line naming the embedder and the
  failure.
"""

from __future__ import annotations

import builtins
import html
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentstack_lab.embeddings.stopwords import content_words
from agentstack_lab.errors import AgentstackError, message
from agentstack_lab.memory.access import MemoryValidationError, can_access_entry
from agentstack_lab.memory.fts import fts_terms
from agentstack_lab.memory.hybrid import rrf_fuse
from agentstack_lab.memory.scores import DEFAULT_FLOOR, fuse, vector_floor, vector_score
from agentstack_lab.memory.vectors import VectorFilter

__all__ = ["SearchResult", "SearchHits", "SearchMode", "EmbedderFailedError", "EmbedderHealth", "search",
           "vector_floor", "DEFAULT_MIN_SIMILARITY"]

DEFAULT_MIN_SIMILARITY = DEFAULT_FLOOR   # the floor of an embedder nobody calibrated (memory/scores.py)

log = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "fts", "vector"]


class Memory(Protocol):
    """What a search reads of a :class:`~agentstack_lab.memory.api.Memory` (which satisfies it)."""

    embedder: Any
    backend: Any
    config: Any
    context: Any
    _health: Any

    def _filters(self, namespace: str | None, agent_id: str | None,
                 include_shared: bool | None) -> tuple[str | None, str | None, bool]: ...
    def _where(self, namespace: str | None, agent_id: str | None,
               include_shared: bool) -> tuple[str, builtins.list[Any]]: ...


class EmbedderFailedError(AgentstackError, RuntimeError):
    """The embedder could not embed the query (vector search has nothing to fall back to)."""


@dataclass(frozen=True)
class SearchResult:
    """A search hit: absolute ``score`` in 0..1 (:mod:`~.scores`), ``matched`` indexes, ``snippet`` as HTML.

    The snippet marks the keyword matches in ``<mark>``.

    ``degraded`` says why the hit was found by keywords only when the search asked for more
    (``None`` normally).
    """

    key: str
    namespace: str
    content: str
    score: float
    snippet: str
    matched: set[str]
    agent_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)   # per index: "fts" (keyword score), "vector" (cosine)
    degraded: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "namespace": self.namespace, "content": self.content, "score": self.score,
                "snippet": self.snippet, "matched": sorted(self.matched), "agent_id": self.agent_id,
                "metadata": dict(self.metadata), "scores": dict(self.scores), "degraded": self.degraded}


class SearchHits(builtins.list):
    """The hits of one search (a plain list of :class:`SearchResult`), plus ``degraded``.

    ``degraded`` is ``None``, or the one-line reason the search ran on keywords only
    (``"keyword only: embedder 'openai' failed: ..."``), set even when nothing was found.
    """

    degraded: str | None = None

    def __init__(self, hits: Any = (), degraded: str | None = None):
        super().__init__(hits)
        self.degraded = degraded


class EmbedderHealth:
    """Whether the query embedder is failing; logs the first failure of a streak and the recovery.

    Shared by every scoped view of one :class:`~agentstack_lab.memory.api.Memory`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing = False

    def failed(self, embedder: Any, exc: Exception) -> str:
        """Record a failure; returns the one-line reason (logged only when the streak starts)."""
        reason = f"embedder {getattr(embedder, 'name', type(embedder).__name__)!r} failed: {message(exc)}"
        with self._lock:
            first, self._failing = not self._failing, True
        if first:   # a bug in an embedder keeps its traceback in the log; an expected failure is one line
            log.warning("memory search: %s; hybrid search answers from keywords only until it recovers", reason,
                        exc_info=not isinstance(exc, AgentstackError))
        else:
            log.debug("memory search: %s (still failing)", reason)
        return reason

    def ok(self, embedder: Any) -> None:
        with self._lock:
            recovered, self._failing = self._failing, False
        if recovered:
            log.warning("memory search: embedder %r works again; hybrid search uses vectors again",
                        getattr(embedder, "name", type(embedder).__name__))


def _embed_query(memory: Memory, query: str) -> Any:
    """The query's vector: ``embed_query`` where the embedder has one (the hash embedder drops stop words)."""
    own = getattr(memory.embedder, "embed_query", None)
    return own(query) if callable(own) else memory.embedder.embed([query])[0]


def _try_embed(memory: Memory, query: str) -> tuple[Any, Exception | None]:
    """``(vector, None)``, or ``(None, the error)`` of any embedder failure (keywords still answer)."""
    try:
        return _embed_query(memory, query), None
    except Exception as exc:  # noqa: BLE001 - reported by the caller (logged once), never raised from here
        return None, exc


def search(memory: Memory, query: str, mode: SearchMode = "hybrid", *, namespace: str | None = None,
           agent_id: str | None = None, include_shared: bool | None = None, limit: int = 10,
           threshold: float | None = None) -> SearchHits:
    """:meth:`Memory.search <agentstack_lab.memory.api.Memory.search>` (see there)."""
    if mode not in ("hybrid", "fts", "vector"):
        raise MemoryValidationError(f"mode must be 'hybrid', 'fts' or 'vector', got {mode!r}")
    if not isinstance(query, str):
        raise MemoryValidationError(f"query must be a string, got {type(query).__name__}")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise MemoryValidationError(f"limit must be a positive int, got {limit!r}")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)
                                  or not 0.0 <= threshold <= 1.0):  # also refuses nan, which compares false
        raise MemoryValidationError(f"threshold must be a number between 0 and 1 or None, got {threshold!r}")
    namespace, agent_id, include_shared = memory._filters(namespace, agent_id, include_shared)
    session = memory.context.session_id if memory.context else None
    refresh = getattr(memory.backend, "refresh", None)
    if callable(refresh):   # a re-embedding may have finished in another process
        refresh()
    mismatch = getattr(memory.backend, "mismatch", None)
    if mismatch is not None and mode == "vector":
        raise mismatch
    # a query of stop words only ("the", "is it") asks about nothing: no vector finds it either
    meaningful = bool(content_words(query)) or bool(fts_terms(query)) and '"' in query
    wants_vectors = mode in ("vector", "hybrid") and meaningful and mismatch is None
    pool = limit if mode != "hybrid" else max(limit * 3, 30)
    fts_hits: builtins.list[dict[str, Any]] = []
    vec_hits: builtins.list[tuple[int, float]] = []
    floor = 1.0
    degraded: str | None = f"keyword only: {mismatch}" if mismatch is not None and mode == "hybrid" else None
    pending = None
    embedded: Any = None
    if wants_vectors and getattr(memory.embedder, "in_process", False):
        # a cheap in-process embedder runs before the FTS thread starts: both are Python and would take
        # turns at the GIL (the hash embedding, 0.1 ms alone, took 2.5 ms beside the FTS thread at 100k
        # entries); a model or a remote embedder is worth overlapping with FTS
        embedded = _try_embed(memory, query)
    if mode == "hybrid" and query.strip() and hasattr(memory.backend, "fts_async"):   # FTS beside the vectors
        where, params = memory._where(namespace, agent_id, include_shared)
        pending = memory.backend.fts_async(query, where, params, pool)
    if wants_vectors:
        qv, exc = embedded if embedded is not None else _try_embed(memory, query)
        if exc is not None:
            reason = memory._health.failed(memory.embedder, exc)
            if mode == "vector":
                raise EmbedderFailedError(f"vector search: {reason}") from exc
            degraded = f"keyword only: {reason}"
        else:
            memory._health.ok(memory.embedder)
            flt = VectorFilter(namespace=namespace, session_id=session, agent_id=agent_id,
                               include_shared=include_shared)
            floor = vector_floor(memory.embedder, query, memory.config.hybrid.min_vector_score)
            where, params = memory._where(namespace, agent_id, include_shared)
            vec_hits = [(r, s) for r, s in memory.backend.vector(qv, flt, where, params, pool) if s >= floor]
    if pending is not None:
        fts_hits = pending.result()
    elif mode in ("fts", "hybrid"):
        where, params = memory._where(namespace, agent_id, include_shared)
        fts_hits = memory.backend.fts(query, where, params, pool)
    ranked: builtins.list[tuple[int, float]]
    if mode == "fts" or degraded:
        ranked = [(h["rid"], h["score"]) for h in fts_hits]
    elif mode == "vector":
        ranked = [(rid, vector_score(sim, floor)) for rid, sim in vec_hits]
    else:
        h = memory.config.hybrid
        order = [rid for rid, _ in rrf_fuse({"fts": [x["rid"] for x in fts_hits], "vector": [r for r, _ in vec_hits]},
                                            {"fts": h.fts_weight, "vector": h.vector_weight}, k=h.rrf_k)]
        ranked = fuse({x["rid"]: x["score"] for x in fts_hits}, {r: vector_score(s, floor) for r, s in vec_hits},
                      order, h.fts_weight, h.vector_weight)
    if threshold is not None:
        ranked = [(rid, s) for rid, s in ranked if s >= threshold]
    ranked = ranked[:limit]
    fts_by_rid = {h["rid"]: h for h in fts_hits}
    late = [rid for rid, _ in ranked if rid in fts_by_rid and "snippet" not in fts_by_rid[rid]]
    if late:   # snippets only for the hits returned (the SQLite backend ranks without them)
        for rid, snip in memory.backend.snippets(query, late).items():
            fts_by_rid[rid]["snippet"] = snip
    return SearchHits(_results(memory, ranked, fts_by_rid, dict(vec_hits), degraded), degraded)


def _results(memory: Memory, ranked: builtins.list[tuple[int, float]], fts: dict[int, dict[str, Any]],
             vec: dict[int, float], degraded: str | None) -> builtins.list[SearchResult]:
    if not ranked:
        return []
    rids = [r for r, _ in ranked]
    rows = memory.backend.rows(rids)
    out = []
    for rid, score in ranked:
        row = rows.get(rid)
        if row is None or not can_access_entry(memory.context, row[2], row[4]):
            continue
        matched = {name for name, hits in (("fts", fts), ("vector", vec)) if rid in hits}
        scores = {**({"fts": fts[rid]["score"]} if rid in fts else {}), **({"vector": vec[rid]} if rid in vec else {})}
        snippet = fts[rid].get("snippet") if rid in fts else None
        snippet = _excerpt(row[3]) if snippet is None else snippet
        out.append(SearchResult(key=row[1], namespace=row[2], content=row[3], score=float(score),
                                snippet=snippet, matched=matched, agent_id=row[4],
                                metadata=json.loads(row[5]), scores=scores, degraded=degraded))
    return out


def search_df(memory: Memory, query: str, mode: SearchMode = "hybrid", **kwargs: Any) -> Any:
    """:func:`search` as a pandas DataFrame; a degraded search adds a ``degraded`` column and ``df.attrs``."""
    import pandas as pd

    cols = ["key", "namespace", "score", "matched", "snippet", "content", "agent_id"]
    hits = search(memory, query, mode, **kwargs)
    if hits.degraded:
        cols.append("degraded")
    rows = [r.to_dict() for r in hits]
    df = pd.DataFrame(rows, columns=[*cols, "metadata", "scores"])[cols] if rows else pd.DataFrame(columns=cols)
    df.attrs["degraded"] = hits.degraded
    return df


def _excerpt(text: str, size: int = 160) -> str:
    """The start of an entry, HTML-escaped like FTS snippets (for hits found by vector only)."""
    text = " ".join(text.split())
    return html.escape(text if len(text) <= size else text[:size].rsplit(" ", 1)[0] + "…")
