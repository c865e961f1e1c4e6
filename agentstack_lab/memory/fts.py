r"""FTS5 search over ``memory_fts``: safe query building, BM25 ranking, absolute scores, snippets.

Any user text becomes a valid FTS5 query: it is split into words (``\w+``), each
word is quoted (so ``AND``, ``NEAR``, ``-``, ``:``, ``^``, ``(`` lose their operator
meaning), ``word*`` keeps a prefix search and ``"two words"`` a phrase. Entries with
every content term rank first; then entries with some of the selective terms, so a
natural-language question still finds entries (see :func:`fts_search`). Stop words are left out of
the search (:func:`content_terms`), and scores are absolute (:mod:`agentstack_lab.memory.scores`).
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

from agentstack_lab.memory.scores import is_stop_term, keyword_scores

__all__ = ["build_fts_query", "fts_terms", "content_terms", "fts_search", "fts_snippets", "mark_snippet",
           "common_cap", "MAX_TERMS"]

MAX_TERMS = 64  # FTS5 limits expression depth; a 10,000-character query keeps its first 64 distinct terms
_PHRASE = re.compile(r'"([^"]*)"')
_TERM = re.compile(r"(\w+)(\*?)")
_WORD = re.compile(r"\w+")


def fts_terms(text: str) -> list[str]:
    """The quoted FTS5 terms and phrases of arbitrary text (at most :data:`MAX_TERMS`, de-duplicated)."""
    parts: list[str] = []
    seen: set[str] = set()

    def add(expr: str) -> None:
        if expr not in seen and len(parts) < MAX_TERMS:
            seen.add(expr)
            parts.append(expr)

    pos = 0
    for m in _PHRASE.finditer(text):
        _add_terms(text[pos:m.start()], add)
        words = _WORD.findall(m.group(1))
        if words:
            add('"' + " ".join(words) + '"')
        pos = m.end()
    _add_terms(text[pos:], add)
    return parts


def build_fts_query(text: str, op: str = "OR") -> str | None:
    """Turn arbitrary text into a safe FTS5 expression (``None`` when it has no searchable word)."""
    parts = fts_terms(text)
    return f" {op} ".join(parts) if parts else None


def _add_terms(segment: str, add) -> None:
    for word, star in _TERM.findall(segment):
        add(f'"{word}"' + ("*" if star else ""))


def content_terms(text: str) -> list[str]:
    """:func:`fts_terms` without bare stop words (a hit on those alone is no hit; see :mod:`.scores`)."""
    return [t for t in fts_terms(text) if not is_stop_term(t)]


SCORE_CAP = 20_000   # a term in more entries than max(2,000, min(this, 5% of them)) is "common"
FIRST_N = 500        # a query of common terms only ranks this many of its first matches


def common_cap(entries: int) -> int:
    """Entries a term may occur in and still be scored by BM25 (see :func:`fts_search`)."""
    return max(2000, min(SCORE_CAP, entries // 20))


def fts_search(conn: Any, text: str, where: str, params: list[Any], limit: int,
               df_cache: dict[str, tuple[int, int]] | None = None) -> list[dict[str, Any]]:
    """Ranked FTS hits (``rid``, ``raw``, ``score`` as :func:`~.scores.keyword_scores`; no snippet: see :func:`fts_snippets`).

    ``where``/``params`` filter the joined ``memory m`` rows inside the query.

    Entries containing every term come first; if they are fewer than ``limit``, entries with any of
    the *selective* terms fill up the list. Why the split: FTS5's ``bm25()`` counts, once per query,
    every entry containing each term of the expression (its IDF), ~70 ns an entry here: a term in
    95% of 1M entries costs ~65 ms before any hit is ranked (FTS p50 405 ms at 1M under load). So
    only terms in at most :func:`common_cap` entries (2,000-20,000) are scored; a *common* term still
    has to match (``+rowid IN`` its every-term match, which FTS5 answers by seeking, not counting),
    it just adds nothing to BM25, as its IDF is small anyway (0 from 50% of entries up). A query of
    common terms only ranks its first :data:`FIRST_N` every-term matches (rowid order) by a BM25
    computed here from their text, with the counts ``df_cache`` remembers per term.
    """
    terms = content_terms(text)
    if not terms or limit <= 0:
        return []
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory'").fetchone()
    entries = int(row[0]) if row else 0
    cap = common_cap(entries)
    dfs = {t: _df(conn, t, cap, entries, df_cache) for t in terms}
    scored = [t for t in terms if dfs[t] <= cap]
    every = " AND ".join(terms)
    if len(scored) == len(terms):
        hits = _ranked(conn, every, None, where, params, limit)
    elif scored:
        hits = _ranked(conn, " AND ".join(scored), every, where, params, limit)
    else:
        hits = _first_matches(conn, every, terms, dfs, entries, where, params, limit)
    complete = len(hits)
    if len(hits) < limit and len(terms) > 1:
        seen = {h["rid"] for h in hits}
        if scored:
            more = _ranked(conn, " OR ".join(scored), None, where, params, limit + len(seen))
        else:
            rare = min(terms, key=lambda t: dfs[t])
            more = _first_matches(conn, rare, [rare], dfs, entries, where, params, limit + len(seen))
        hits += [h for h in more if h["rid"] not in seen][:limit - len(hits)]

    def matches(term: str, rids: list[int]) -> list[int]:
        return [r[0] for r in conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? AND rowid IN"
                                           " (SELECT value FROM json_each(?))", (term, json.dumps(rids)))]

    keyword_scores(hits, terms, dfs, entries, matches, complete)
    return hits


def _df(conn: Any, term: str, cap: int, entries: int, cache: dict[str, tuple[int, int]] | None) -> int:
    """Entries containing ``term``, counted up to ``cap + 1`` (cached until the memory grows by a tenth)."""
    if cache is not None:
        got = cache.get(term)
        if got is not None and entries <= got[1] * 1.1 + 100:
            return got[0]
    df = conn.execute("SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)",
                      (term, cap + 1)).fetchone()[0]
    if cache is not None:
        if len(cache) > 50_000:
            cache.clear()
        cache[term] = (df, entries)
    return df


def _ranked(conn: Any, expr: str, must: str | None, where: str, params: list[Any],
            limit: int) -> list[dict[str, Any]]:
    """BM25 over ``expr``; ``must``: an expression every hit must also match (not scored).

    Ranked in FTS5 alone first, then the best ``2 limit + 16`` checked against ``where``: joining
    ``memory`` for every match before ``ORDER BY ... LIMIT`` cost ~6x the ranking (p50 9.4 vs 1.4 ms for
    the any-term pass at 100k). A filter that leaves too few of them gets the joined query.
    """
    also, extra = "", []
    if must is not None:   # "+": a filter on the hits, not a rowid constraint FTS5 would loop over
        also, extra = " AND +memory_fts.rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)", [must]
    first = 2 * limit + 16
    rows = conn.execute(f"SELECT rowid, bm25(memory_fts, 2.0, 1.0) AS raw FROM memory_fts WHERE memory_fts MATCH ?"
                        f"{also} ORDER BY raw LIMIT ?", [expr, *extra, first]).fetchall()
    ok = {r[0] for r in conn.execute(f"SELECT m.rid FROM memory m WHERE m.rid IN (SELECT value FROM json_each(?))"
                                     f" AND {where}", [json.dumps([r[0] for r in rows]), *params])} if rows else set()
    hits = [r for r in rows if r[0] in ok]
    if len(hits) < limit and len(rows) == first:
        hits = conn.execute(
            "SELECT m.rid, bm25(memory_fts, 2.0, 1.0) AS raw FROM memory_fts JOIN memory m ON m.rid = memory_fts.rowid"
            f" WHERE memory_fts MATCH ?{also} AND {where} ORDER BY raw LIMIT ?", [expr, *extra, *params, limit]).fetchall()
    return [{"rid": r[0], "raw": float(r[1])} for r in hits[:limit]]


def _first_matches(conn: Any, expr: str, terms: list[str], dfs: dict[str, int], entries: int, where: str,
                   params: list[Any], limit: int) -> list[dict[str, Any]]:
    """The first :data:`FIRST_N` matches of ``expr``, ranked by a BM25 computed from their text.

    k1 1.2, b 0.75, key weight 2 (as ``bm25(memory_fts, 2.0, 1.0)``); term frequencies count the word
    between spaces (a stemmed or prefixed form FTS5 matched counts once), the capped counts as document
    frequencies.
    """
    rows = conn.execute(
        "SELECT m.rid, m.key, m.content FROM (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?) f"
        f" JOIN memory m ON m.rid = f.rowid WHERE {where}", [expr, FIRST_N, *params]).fetchall()
    if not rows:
        return []
    words = [" " + (_WORD.findall(t) or [""])[0].lower() + " " for t in terms]   # a phrase: its first word
    idf = [max(1e-6, math.log((entries - dfs[t] + 0.5) / (dfs[t] + 0.5))) for t in terms]
    texts = [(f" {key.lower()} ", f" {content.lower()} ") for _, key, content in rows]
    lengths = [2.0 * k.count(" ") + c.count(" ") for k, c in texts]   # words (+3: the padding)
    avg = sum(lengths) / len(lengths) or 1.0
    out = []
    for (rid, _, _), (k, c), dl in zip(rows, texts, lengths, strict=True):
        norm = 1.2 * (0.25 + 0.75 * dl / avg)
        raw = 0.0
        for w, i in zip(words, idf, strict=True):
            tf = max(1.0, 2.0 * k.count(w) + c.count(w))   # FTS5 matched it: at least once (stems, prefixes)
            raw -= i * tf * 2.2 / (tf + norm)
        out.append({"rid": rid, "raw": raw})
    out.sort(key=lambda h: h["raw"])
    return out[:limit]


def fts_snippets(snippet: Any, text: str, rids: list[int]) -> dict[int, str]:
    r"""``rid -> snippet`` (HTML, matches of any query term in ``<mark>``) for the hits actually shown.

    ``snippet(expr, rids)`` answers FTS5's ``snippet()`` (``\x02``/``\x03`` around matches) of the hits
    matching ``expr`` (see ``FtsFile.snippets``). Computed after ranking, for the few hits a search
    returns: ``snippet()`` in the ranking query ran for every match before ``ORDER BY ... LIMIT``.
    """
    terms = content_terms(text)
    expr = " OR ".join(terms) if terms else None
    if expr is None or not rids:
        return {}
    return {rid: mark_snippet(snip) for rid, snip in snippet(expr, rids).items()}


def mark_snippet(text: str | None) -> str:
    r"""An HTML fragment: the text escaped, the matches (``\x02``…``\x03`` from FTS5) in ``<mark>``."""
    return html.escape(text or "").replace("\x02", "<mark>").replace("\x03", "</mark>")
