r"""FTS5 search over ``memory_fts``: safe query building, BM25 normalised to 0..1, snippets.

Any user text becomes a valid FTS5 query: it is split into words (``\w+``), each
word is quoted (so ``AND``, ``NEAR``, ``-``, ``:``, ``^``, ``(`` lose their operator
meaning), ``word*`` keeps a prefix search and ``"two words"`` a phrase. Terms are
OR-ed so a natural-language question still finds entries; BM25 ranks entries that
match more (and rarer) terms first.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["build_fts_query", "normalise_bm25", "fts_search", "MAX_TERMS"]

MAX_TERMS = 64  # FTS5 limits expression depth; a 10,000-character query keeps its first 64 distinct terms
_PHRASE = re.compile(r'"([^"]*)"')
_TERM = re.compile(r"(\w+)(\*?)")
_WORD = re.compile(r"\w+")


def build_fts_query(text: str) -> str | None:
    """Turn arbitrary text into a safe FTS5 expression (``None`` when it has no searchable word)."""
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
        if len(words) > 1:
            add('"' + " ".join(words) + '"')
        elif words:
            add(f'"{words[0]}"')
        pos = m.end()
    _add_terms(text[pos:], add)
    return " OR ".join(parts) if parts else None


def _add_terms(segment: str, add) -> None:
    for word, star in _TERM.findall(segment):
        add(f'"{word}"' + ("*" if star else ""))


def normalise_bm25(raw: float) -> float:
    """Map FTS5's BM25 (negative, lower is better) to 0..1, higher is better: ``x / (1 + x)``, ``x = -raw``."""
    x = max(0.0, -float(raw))
    return x / (1.0 + x)


def fts_search(conn: Any, text: str, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
    """Run a ranked FTS query; ``where``/``params`` filter the joined ``memory m`` rows inside the query."""
    expr = build_fts_query(text)
    if expr is None or limit <= 0:
        return []
    sql = (
        "SELECT m.rid, bm25(memory_fts, 2.0, 1.0) AS raw,"
        " snippet(memory_fts, 1, '<mark>', '</mark>', '…', 24) AS snip"
        " FROM memory_fts JOIN memory m ON m.rid = memory_fts.rowid"
        f" WHERE memory_fts MATCH ? AND {where} ORDER BY raw LIMIT ?"
    )
    rows = conn.execute(sql, [expr, *params, limit]).fetchall()
    return [{"rid": r[0], "score": normalise_bm25(r[1]), "snippet": r[2]} for r in rows]
