"""Absolute search scores: what ``SearchResult.score`` means, the same for every query.

A score is never relative to the best hit of its search, so ``threshold`` filters across queries:

* **keyword** (``fts``): the share of the query's content words an entry contains, each word weighted
  by its rarity in the memory (BM25's IDF, ``log(1 + (N - df + 0.5) / (df + 0.5))``). 1.0: every
  content word is in the entry; 0.5: words carrying half the query's weight are. Stop words ("the",
  "is", ...) are not content words: a query's stop words never make a hit on their own (a quoted
  phrase keeps them). BM25 orders hits of equal score.
* **vector**: how far the cosine similarity lies above the embedder's calibrated floor (the cosine that
  unrelated texts reach, :func:`vector_floor`): ``(cosine - floor) / (1 - floor)``. 0 at the floor,
  1.0 for an identical text; below the floor an entry is not a hit. The raw cosine stays in
  ``scores["vector"]``.
* **hybrid**: the two combined as independent evidence, ``1 - (1 - keyword)^a (1 - vector)^b`` with
  ``a``, ``b`` the configured ``fts_weight`` / ``vector_weight`` divided by the larger of them; equal
  scores keep reciprocal-rank-fusion order. An entry found by one index keeps that index's score.

Floors per embedder and model, from ``benchmarks/calibrate_scores.py`` (stdlib docstring sentences as
notes; a query of 1-3 or 4-8 words of 4+ letters, from another sentence sharing none of the note's
such words for an *unrelated* pair, from the note itself for a *related* one; hash: 1,500 pairs per
seed, seeds 1-3; MiniLM: 500 pairs per seed, seeds 1-3). The floor sits above every seed's unrelated
p99 (and for MiniLM's 4-8 words below the related p5). A query is counted by its content words (no stop words),
and the hash embedder embeds only those (:meth:`~agentstack_lab.embeddings.hashing.HashEmbedder.embed_query`):

==========================  ===========  =============  =============  ==========  =====
embedder (model)            query words  unrelated p99  unrelated max  related p5  floor
==========================  ===========  =============  =============  ==========  =====
hash (hash-ngram-v1)        1-3          0.156-0.166    0.23-0.29      0.164-0.167 0.20
hash (hash-ngram-v1)        4-8          0.147-0.165    0.22-0.28      0.339-0.354 0.35
local / ollama (MiniLM-L6)  1-3          0.259-0.293    0.41-0.56      0.04-0.07   0.30
local / ollama (MiniLM-L6)  4-8          0.287-0.303    0.31-0.46      0.351-0.376 0.32
==========================  ===========  =============  =============  ==========  =====

(The hash embedder's 0.35 dates from queries that kept their stop words, unrelated p99 0.28-0.31:
:mod:`agentstack_lab.embeddings.hashing`.) A 1-3 word query of random words of a note is a weak
"related" query, hence MiniLM's low related p5 there; real short queries name a topic.

Other models (OpenAI's, other Ollama models) are not calibrated here: their floor is
:data:`DEFAULT_FLOOR` unless ``memory.hybrid.min_vector_score`` sets one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentstack_lab.embeddings.stopwords import STOP_WORDS, content_words

__all__ = ["STOP_WORDS", "DEFAULT_FLOOR", "MODEL_FLOORS", "is_stop_term", "idf", "keyword_scores",
           "vector_floor", "vector_score", "fuse"]

DEFAULT_FLOOR = 0.3   # an embedder and model measured by nobody: MiniLM's floor (unrelated p99 0.25-0.27)
_MINILM = (0.30, 0.32)
MODEL_FLOORS: dict[str, tuple[float, float]] = {   # model -> (floor for 1-3 content words, for more)
    "all-MiniLM-L6-v2": _MINILM,
    "sentence-transformers/all-MiniLM-L6-v2": _MINILM,
    "all-minilm": _MINILM,          # Ollama's name of the same model
    "all-minilm:l6-v2": _MINILM,
    "all-minilm:latest": _MINILM,
}
_QUERY_WORD = re.compile(r"\w+")

def is_stop_term(term: str) -> bool:
    """Whether a quoted FTS term (``'"the"'``) is a bare stop word; phrases and prefixes never are."""
    body = term[1:-1] if term.startswith('"') and term.endswith('"') else None
    return body is not None and " " not in body and body.lower() in STOP_WORDS


def idf(df: int, entries: int) -> float:
    """BM25's inverse document frequency, kept positive (a term in every entry still weighs a little)."""
    n = max(entries, df, 1)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def keyword_scores(hits: list[dict[str, Any]], terms: list[str], dfs: Mapping[str, int], entries: int,
                   matches: Callable[[str, list[int]], Iterable[int]], complete: int) -> None:
    """Set ``score`` on each hit (see the module docstring) and order the hits by it, BM25 breaking ties.

    The first ``complete`` hits contain every term (score 1.0); ``matches(term, rids)`` says which of the
    other hits' rowids contain ``term``.
    """
    weights = {t: idf(dfs.get(t, 0), entries) for t in terms}
    total = sum(weights.values()) or 1.0
    for h in hits[:complete]:
        h["score"] = 1.0
    rest = hits[complete:]
    if rest:
        found: dict[int, float] = {}
        rids = [h["rid"] for h in rest]
        for t in terms:
            for rid in matches(t, rids):
                found[rid] = found.get(rid, 0.0) + weights[t]
        for h in rest:
            h["score"] = min(1.0, found.get(h["rid"], 0.0) / total)
        rest.sort(key=lambda h: (-h["score"], h["raw"]))
        hits[complete:] = rest


def vector_floor(embedder: Any, query: str, configured: float | None = None) -> float:
    """The least cosine similarity a vector hit needs to count for ``query``.

    ``configured`` (``memory.hybrid.min_vector_score``) wins; else the embedder's own
    ``similarity_floor(query)`` or ``min_similarity``; else the measured floor of its model
    (:data:`MODEL_FLOORS`); else :data:`DEFAULT_FLOOR`.
    """
    if configured is not None:
        return float(configured)
    floor: Callable[[str], float] | None = getattr(embedder, "similarity_floor", None)
    if callable(floor):
        return float(floor(query))
    if getattr(embedder, "min_similarity", None) is not None:
        return float(embedder.min_similarity)
    short, long = MODEL_FLOORS.get(str(getattr(embedder, "model", "")), (DEFAULT_FLOOR, DEFAULT_FLOOR))
    return short if len(content_words(query) or _QUERY_WORD.findall(query)) <= 3 else long


def vector_score(cosine: float, floor: float) -> float:
    """``(cosine - floor) / (1 - floor)`` in 0..1 (0 below the floor)."""
    if floor >= 1.0:
        return 1.0 if cosine >= 1.0 else 0.0
    return min(1.0, max(0.0, (cosine - floor) / (1.0 - floor)))


def fuse(keyword: Mapping[int, float], vector: Mapping[int, float], order: list[int],
         fts_weight: float, vector_weight: float) -> list[tuple[int, float]]:
    """Hybrid ``(rid, score)`` best first: ``1 - (1 - k)^a (1 - v)^b``; ties keep ``order`` (RRF)."""
    top = max(fts_weight, vector_weight)
    a, b = (fts_weight / top, vector_weight / top) if top > 0 else (1.0, 1.0)
    rank = {rid: i for i, rid in enumerate(order)}
    out = []
    for rid in order:
        miss = 1.0
        if rid in keyword and a > 0:
            miss *= (1.0 - keyword[rid]) ** a
        if rid in vector and b > 0:
            miss *= (1.0 - vector[rid]) ** b
        score = 1.0 - miss
        if score > 0:
            out.append((rid, score))
    out.sort(key=lambda t: (-round(t[1], 9), rank[t[0]]))
    return out
