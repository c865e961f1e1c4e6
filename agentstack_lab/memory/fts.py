r"""FTS5 search over ``memory_fts``: safe query building, BM25 scaled to 0..1, snippets.

Any user text becomes a valid FTS5 query: it is split into words (``\w+``), each
word is quoted (so ``AND``, ``NEAR``, ``-``, ``:``, ``^``, ``(`` lose their operator
meaning), ``word*`` keeps a prefix search and ``"two words"`` a phrase. Entries with
every term rank first; then entries with some of the selective terms, so a
natural-language question still finds entries (see :func:`fts_search`).
"""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["build_fts_query", "fts_terms", "relative_scores", "fts_search", "mark_snippet", "MAX_TERMS"]

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


def relative_scores(raw: list[float]) -> list[float]:
    """FTS5 BM25 values (negative, lower is better) as 0..1 scores relative to the best hit (1.0).

    Relative, because FTS5's IDF is floored near zero for a term in half the entries or more, so
    absolute BM25 values of a small memory are all ~1e-6. Scores never increase down the list
    (entries with every term are listed first even when an any-term hit scores higher).
    """
    best = max((-r for r in raw), default=0.0)
    out, prev = [], 1.0
    for r in raw:
        prev = min(prev, -r / best) if best > 0 else 1.0
        out.append(max(0.0, prev))
    return out


def fts_search(conn: Any, text: str, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
    """Ranked FTS hits; ``where``/``params`` filter the joined ``memory m`` rows inside the query.

    Entries containing every term come first (an ``AND`` query, cheap because it matches few rows).
    If they are fewer than ``limit``, an ``OR`` query over the *selective* terms fills up the list:
    terms found in more than 5% of the entries (and over 2,000 of them) are left out of that second
    pass, as they barely move BM25 yet make it score most of the table (90 ms at 100k entries here).
    """
    terms = fts_terms(text)
    if not terms or limit <= 0:
        return []
    hits = _ranked(conn, " AND ".join(terms), where, params, limit)
    if len(hits) < limit and len(terms) > 1:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory'").fetchone()
        cap = max(2000, (row[0] if row else 0) // 20)
        dfs = [(conn.execute("SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)",
                             (t, cap + 1)).fetchone()[0], t) for t in terms]
        keep = [t for df, t in dfs if df <= cap] or [min(dfs)[1]]
        seen = {h["rid"] for h in hits}
        more = _ranked(conn, " OR ".join(keep), where, params, limit + len(seen))
        hits += [h for h in more if h["rid"] not in seen][:limit - len(hits)]
    for h, score in zip(hits, relative_scores([h["raw"] for h in hits]), strict=True):
        h["score"] = score
    return hits


def _ranked(conn: Any, expr: str, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
    sql = (
        "SELECT m.rid, bm25(memory_fts, 2.0, 1.0) AS raw,"
        " snippet(memory_fts, 1, char(2), char(3), '…', 24) AS snip"
        " FROM memory_fts JOIN memory m ON m.rid = memory_fts.rowid"
        f" WHERE memory_fts MATCH ? AND {where} ORDER BY raw LIMIT ?"
    )
    rows = conn.execute(sql, [expr, *params, limit]).fetchall()
    return [{"rid": r[0], "raw": float(r[1]), "snippet": mark_snippet(r[2])} for r in rows]


def mark_snippet(text: str | None) -> str:
    r"""An HTML fragment: the text escaped, the matches (``\x02``…``\x03`` from FTS5) in ``<mark>``."""
    return html.escape(text or "").replace("\x02", "<mark>").replace("\x03", "</mark>")
