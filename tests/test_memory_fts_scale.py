"""FTS at scale (issue 15): common terms match but are not scored, common-only queries rank their first
matches, ranking runs before the filter join (with a joined fallback), snippets only for returned hits."""

import json

import pytest

from agentstack_lab.memory import fts
from agentstack_lab.workspace import Workspace

N = 2400   # "alpha" is in every entry: above common_cap(N) = 2,000


def _note(i: int) -> str:
    words = ["alpha", "filler"] + (["beta"] if i % 2 == 0 else []) + ([f"rare{i % 40}"] * (1 + i % 3))
    return " ".join(words + ["pad"] * (i % 7))


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fts")
    with Workspace.open(folder, announce=False) as w:
        w.memory.store_many([{"key": f"k{i}", "content": _note(i), "namespace": "small" if i % 100 == 8 else "big"}
                             for i in range(N)])
        yield w


def _fts(w, sql: str, params=()) -> list:
    """A query on the full-text index's connection (its file, with the workspace's attached)."""
    w.memory.backend.fts_index.catch_up()
    return w.memory.backend.fts_index.query(sql, params)


def _matches(w, expr: str) -> set[str]:
    return {r[0] for r in _fts(w, "SELECT m.key FROM memory_fts JOIN memory m ON m.rid = memory_fts.rowid"
                                     " WHERE memory_fts MATCH ?", (expr,))}


def test_a_common_term_must_match_but_the_selective_one_ranks(ws):
    assert fts.common_cap(N) == 2000 and len(_matches(ws, '"alpha"')) == N > fts.common_cap(N)
    hits = ws.memory.search("rare3 alpha", "fts", limit=100)
    keys = [h.key for h in hits]
    assert set(keys) == _matches(ws, '"rare3" AND "alpha"') and len(keys) == N // 40   # every-term matches only
    want = [r[0] for r in _fts(ws,
        "SELECT m.key FROM memory_fts JOIN memory m ON m.rid = memory_fts.rowid WHERE memory_fts MATCH '\"rare3\"'"
        " ORDER BY bm25(memory_fts, 2.0, 1.0), m.rid")]
    assert keys == want                                    # BM25 of the selective term decides the order
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and hits[0].score == 1.0
    assert all("<mark>rare3</mark>" in h.snippet and "<mark>alpha</mark>" in h.snippet for h in hits)


def test_a_query_of_common_terms_only_ranks_its_first_matches(ws, monkeypatch):
    monkeypatch.setattr(fts, "FIRST_N", 300)
    both = _matches(ws, '"alpha" AND "filler"')
    hits = ws.memory.search("alpha filler", "fts", limit=20)
    assert len(hits) == 20 and {h.key for h in hits} <= both
    firsts = {r[0] for r in ws.db.query("SELECT key FROM memory ORDER BY rid LIMIT 300")}
    assert {h.key for h in hits} <= firsts                  # ranked among the first 300 matches
    lengths = [len(h.content.split()) for h in hits]
    assert lengths[0] == min(len(_note(i).split()) for i in range(300))   # shortest note first (same tf)
    assert ws.memory.search("alpha zzzmissing", "fts") == []


def test_filters_keep_exactly_k_hits_when_the_best_matches_are_filtered_out(ws):
    # "small" holds 24 of the 2,400 entries: of the best 2 limit + 16 "beta" matches fewer than 5 are
    # there, so the ranking falls back to the joined query and still returns exactly the filtered top 5
    def bm25(where=""):
        return w_query("SELECT m.key, bm25(memory_fts, 2.0, 1.0) FROM memory_fts JOIN memory m ON"
                       f" m.rid = memory_fts.rowid WHERE memory_fts MATCH '\"beta\"' {where} ORDER BY 2")

    def w_query(sql):
        return _fts(ws, sql)
    overall = bm25()
    assert sum(1 for k, _ in overall[:26] if int(k[1:]) % 100 == 8) < 5
    small = bm25("AND m.namespace = 'small'")
    hits = ws.memory.search("beta", "fts", namespace="small", limit=5)
    assert len(hits) == 5 and all(h.namespace == "small" for h in hits)
    score = dict(small)
    assert sorted(score[h.key] for h in hits) == [s for _, s in small[:5]]   # the filtered top 5 (ties aside)
    assert ws.memory.search("beta", "fts", namespace="nowhere", limit=5) == []


def test_snippets_only_for_the_hits_returned(ws, monkeypatch):
    asked: list[list[int]] = []
    real = fts.fts_snippets

    def spy(conn, text, rids):
        asked.append(list(rids))
        return real(conn, text, rids)

    monkeypatch.setattr("agentstack_lab.memory.backends.sqlite.fts_snippets", spy)
    hits = ws.memory.search("rare5 beta", "hybrid", limit=3)
    assert len(hits) == 3 and asked and all(len(a) <= 3 for a in asked)
    for h in hits:
        if "fts" in h.matched:
            assert "<mark>" in h.snippet
    raw = json.dumps([h.to_dict() for h in hits])
    assert "\x02" not in raw and "\x03" not in raw
