import numpy as np
import pytest

from agentstack_lab.config import Config
from agentstack_lab.embeddings import get_embedder, list_embedders
from agentstack_lab.embeddings.hashing import HashEmbedder
from agentstack_lab.memory import EmbedderMismatchError, MemoryValidationError
from agentstack_lab.memory.fts import build_fts_query
from agentstack_lab.memory.hybrid import rrf_fuse
from agentstack_lab.workspace import Workspace


def fts_keys(ws, query):
    return {r.key for r in ws.memory.search(query, "fts")}


def test_round_trip_and_upsert(ws):
    m = ws.memory
    e1 = m.store("plan", "ship the memory layer", tags=["b", "a"], metadata={"owner": "me"})
    assert (e1.key, e1.namespace, e1.content, e1.tags, e1.metadata, e1.version) == \
        ("plan", "default", "ship the memory layer", ["a", "b"], {"owner": "me"}, 1)
    assert m.get("plan") == e1
    e2 = m.store("plan", "ship the memory layer today")
    assert e2.id == e1.id and e2.version == 2 and e2.content.endswith("today")
    assert e2.tags == ["a", "b"] and e2.metadata == {"owner": "me"}   # None keeps stored values
    assert [v["content"] for v in m.history("plan")] == ["ship the memory layer"]
    assert m.count() == 1 and m.stats() == {"memory": 1, "fts": 1, "vector": 1}
    assert m.delete("plan") is True and m.get("plan") is None and m.delete("plan") is False
    assert m.stats() == {"memory": 0, "fts": 0, "vector": 0}


def test_unchanged_content_is_not_re_embedded(ws, monkeypatch):
    m = ws.memory
    m.store("k", "same text")
    calls = []
    real = m.embedder.embed
    monkeypatch.setattr(m.embedder, "embed", lambda texts: calls.append(list(texts)) or real(texts))
    e = m.store("k", "same text", metadata={"x": 1})
    assert calls == [] and e.version == 1 and e.metadata == {"x": 1}
    m.store("k", "new text")
    assert calls == [["new text"]]


def test_fts_follows_insert_update_delete(ws, backend):
    m = ws.memory
    m.store("a", "the zebra crossing")
    assert fts_keys(ws, "zebra") == {"a"}
    m.store("a", "the giraffe crossing")
    assert fts_keys(ws, "zebra") == set() and fts_keys(ws, "giraffe") == {"a"}
    m.store_many([{"key": f"n{i}", "content": f"giraffe number {i}"} for i in range(100)])   # bulk path
    assert len(ws.memory.search("giraffe", "fts", limit=200)) == 101
    m.delete("a")
    assert "a" not in fts_keys(ws, "giraffe")
    assert m.stats() == {"memory": 100, "fts": 100, "vector": 100}
    if backend == "sqlite":
        rows = m.backend.fts_index.query("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'giraffe'")
        assert rows[0][0] == 100


def test_fts_phrase_prefix_and_snippet(ws):
    m = ws.memory
    m.store("p1", "the quick brown fox")
    m.store("p2", "brown quick dogs")
    assert fts_keys(ws, '"quick brown"') == {"p1"}
    assert fts_keys(ws, "qui*") == {"p1", "p2"}
    assert fts_keys(ws, "qui") == set()
    hit = ws.memory.search("fox", "fts")[0]
    assert "<mark>fox</mark>" in hit.snippet and hit.score == 1.0 and hit.matched == {"fts"}
    m.store("p3", "a fox, another fox and a third fox in a long sentence about many other things entirely")
    scores = [r.score for r in ws.memory.search("fox quick", "fts")]
    assert scores[0] == 1.0 and all(0 < s <= 1 for s in scores) and scores == sorted(scores, reverse=True)
    assert [r.key for r in ws.memory.search("fox quick", "fts", threshold=0.99)] == ["p1"]
    assert build_fts_query('NEAR(a b) AND "x y" c*') == '"NEAR" OR "a" OR "b" OR "AND" OR "x y" OR "c"*'
    m.store("p4", "<b>fox</b> & co")
    assert ws.memory.search("co", "fts")[0].snippet == "&lt;b&gt;fox&lt;/b&gt; &amp; <mark>co</mark>"


def test_hybrid_finds_keyword_only_and_vector_only_entries(ws):
    m = ws.memory
    filler = " ".join(f"word{i}" for i in range(150))
    m.store("keyword-only", f"{filler} kubernetes {filler}")          # FTS hit, low cosine (long text)
    for i in range(12):                                                # misspelt: vector hits, no FTS match
        m.store(f"typo-{i}", f"kuberntes kubernetis clusters note {i}")
    m.store("unrelated", "banana bread with walnuts")
    results = {r.key: r for r in m.search("kubernetes", "hybrid", limit=40)}
    assert results["keyword-only"].matched == {"fts"}
    assert results["typo-0"].matched == {"vector"}
    assert "unrelated" not in results
    assert {r.key for r in m.search("kubernetes", "fts")} == {"keyword-only"}
    assert "keyword-only" not in {r.key for r in m.search("kubernetes", "vector", limit=10)}
    both = m.search("kuberntes cluster", "hybrid", limit=3)
    assert all(0 < r.score <= 1 for r in both)


def test_rrf_fuse_dedupes_and_weights():
    fused = rrf_fuse({"fts": ["a", "b"], "vector": ["b", "c"]}, {"fts": 1.0, "vector": 1.0}, k=60)
    keys = [k for k, _ in fused]
    assert keys[0] == "b" and sorted(keys) == ["a", "b", "c"]
    only_vec = rrf_fuse({"fts": ["a"], "vector": ["c"]}, {"fts": 0.0, "vector": 1.0}, k=60)
    assert only_vec[0][0] == "c"


def test_threshold_limit_and_namespace_filter(ws):
    m = ws.memory
    m.store("x", "alpha beta gamma", namespace="one")
    m.store("y", "alpha beta", namespace="two")
    assert {r.key for r in m.search("alpha", "fts", namespace="one")} == {"x"}
    assert {r.key for r in m.search("alpha", "vector", namespace="two")} == {"y"}
    assert {r.key for r in m.search("alpha", "hybrid")} == {"x", "y"}
    assert len(m.search("alpha", "hybrid", limit=1)) == 1
    assert m.search("alpha beta gamma", "vector", threshold=0.99)[0].key == "x"
    assert len(m.search("alpha beta gamma", "vector", threshold=0.99)) == 1
    assert m.search("", "hybrid") == [] and m.search("   ", "vector") == []


def test_list_newest_first_paginated_agent_filter(ws):
    m = ws.memory
    for i in range(5):
        m.store(f"s{i}", f"shared {i}")
    m.store("a1", "agent one note", agent_id="agent-1")
    m.store("a2", "agent two note", agent_id="agent-2")
    keys = [e.key for e in m.list()]
    assert keys == ["a2", "a1", "s4", "s3", "s2", "s1", "s0"]
    assert [e.key for e in m.list(limit=2, offset=1)] == ["a1", "s4"]
    assert {e.key for e in m.list(agent_id="agent-1")} == {"a1", "s0", "s1", "s2", "s3", "s4"}
    assert [e.key for e in m.list(agent_id="agent-1", include_shared=False)] == ["a1"]
    assert {r.key for r in m.search("note", "hybrid", agent_id="agent-2", include_shared=False)} == {"a2"}
    assert {r.key for r in m.search("note", "vector", agent_id="agent-2")} >= {"a2"}
    assert "a1" not in {r.key for r in m.search("note", "vector", agent_id="agent-2", limit=10)}
    scoped = m.scoped(agent_id="agent-1")
    assert scoped.get("a2") is None and scoped.get("a1").key == "a1"
    with pytest.raises(MemoryValidationError, match="belongs to agent"):
        scoped.store("a2", "overwrite")
    assert m.get("a2").content == "agent two note"


def test_validation_errors_change_nothing(ws):
    m = ws.memory
    bad = [{"key": "ok", "content": "fine"}, {"key": "", "content": "empty key"}]
    with pytest.raises(MemoryValidationError, match="item 1: key must be a non-empty string"):
        m.store_many(bad)
    with pytest.raises(MemoryValidationError, match="metadata is not JSON-serialisable"):
        m.store("k", "v", metadata={"f": object()})
    with pytest.raises(MemoryValidationError, match="mode must be"):
        m.search("x", mode="semantic")
    with pytest.raises(MemoryValidationError, match="unknown field"):
        m.store_many([{"key": "k", "content": "v", "colour": 1}])
    assert m.count() == 0


def test_store_many_dedupes_and_upserts(ws):
    m = ws.memory
    assert m.store_many([("a", "one"), ("b", "two"), ("a", "three")]) == 2
    assert m.get("a").content == "three"
    m.store_many([{"key": "a", "content": "four", "tags": ["t"]}, {"key": "c", "content": "five"}])
    assert m.get("a").content == "four" and m.get("a").tags == ["t"] and m.get("a").version == 2
    assert [e.key for e in m.list(tag="t")] == ["a"]
    assert m.stats() == {"memory": 3, "fts": 3, "vector": 3}


@pytest.mark.sqlite_only
def test_bulk_store_keeps_the_insert_triggers_and_fails_whole(ws, monkeypatch):
    m = ws.memory
    triggers = lambda: {r[0] for r in ws.db.query(  # noqa: E731
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memory'")}
    before = triggers()
    assert "memory_vlog_ai" in before and "memory_ai" not in before   # the change log; FTS follows it
    m.store_many([(f"b{i}", f"bulk giraffe {i}") for i in range(200)])     # bulk path: triggers set aside
    assert triggers() == before and m.stats() == {"memory": 200, "fts": 200, "vector": 200}
    ws.db.execute("INSERT INTO memory (key, id, content, content_hash, created_at, updated_at)"
                  " VALUES ('raw', 'raw-id', 'raw zebra row', 'h', 0, 0)")   # any writer is still indexed
    assert [r.key for r in m.search("zebra", "fts")] == ["raw"]

    def broken(texts):
        raise RuntimeError("embedder exploded")
    monkeypatch.setattr(m.embedder, "embed", broken)
    with pytest.raises(RuntimeError, match="exploded"):
        m.store_many([(f"c{i}", f"never stored {i}") for i in range(200)])
    assert triggers() == before and m.count() == 201 and m.get("c0") is None
    assert m.stats()["fts"] == 201


def test_embedder_mismatch_is_a_clear_error_and_keeps_keyword_search(tmp_path, backend_config):
    with Workspace.open(tmp_path / "w", config=Config.from_dict(backend_config), announce=False) as ws:
        ws.memory.store("k", "the value of v")
    memory = {**backend_config.get("memory", {}), "vector": {"dimensions": 128}}
    cfg = Config.from_dict({**backend_config, "memory": memory})
    with Workspace.open(tmp_path / "w", config=cfg, announce=False) as ws:
        assert ws.memory.count() == 1 and [e.key for e in ws.memory.list()] == ["k"]
        assert [h.key for h in ws.memory.search("value", "fts")] == ["k"]
        hits = ws.memory.search("value")
        assert [h.key for h in hits] == ["k"] and "gives dimension 128" in hits.degraded
        for call in (lambda: ws.memory.search("value", "vector"), lambda: ws.memory.store("k2", "more")):
            with pytest.raises(EmbedderMismatchError, match=r"dimension 384, the configured .* gives dimension 128"):
                call()
        assert ws.memory.delete("k") and ws.memory.count() == 0


def test_hash_embedder_is_deterministic_normalised_and_fuzzy():
    e = HashEmbedder(dimensions=96)
    v = e.embed(["Kubernetes cluster", "kubernets clustr", "banana bread", "", "x\0y"])
    assert v.shape == (5, 96) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v, HashEmbedder(dimensions=96).embed(["Kubernetes cluster", "kubernets clustr",
                                                                  "banana bread", "", "x\0y"]))
    assert v[0] @ v[1] > 0.4 > abs(v[0] @ v[2])
    assert np.array_equal(e.embed(["a b"] * 3)[2], e.embed(["a b"])[0])   # batching does not change rows
    assert "hash" in list_embedders() and get_embedder("hash", dimensions=32).dimensions == 32
    with pytest.raises(LookupError, match="unknown embedder 'nope'; registered: .*hash"):
        get_embedder("nope")


def test_matrix_and_sqlite_vec_paths_agree(tmp_path):
    rng = np.random.default_rng(7)
    vocab = [f"w{j}" for j in range(400)]
    texts = [" ".join(rng.choice(vocab, size=12)) for _ in range(300)]
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([{"key": f"k{i}", "content": t, "namespace": f"ns{i % 2}",
                               "agent_id": None if i % 4 else "ag"} for i, t in enumerate(texts)])
        cached = ws.memory
        plain = Config.from_dict({"memory": {"vector": {"cache": False}}})
        with Workspace.open(tmp_path / "w", config=plain, announce=False) as ws2:
            for kwargs in ({}, {"namespace": "ns1"}, {"agent_id": "ag"}, {"agent_id": "ag", "include_shared": False}):
                query = texts[5][:40]
                a = [(r.key, round(r.score, 4)) for r in cached.search(query, "vector", limit=15, **kwargs)]
                b = [(r.key, round(r.score, 4)) for r in ws2.memory.search(query, "vector", limit=15, **kwargs)]
                assert [s for _, s in a] == [s for _, s in b], kwargs
                ties = {s for _, s in a if [t for _, t in a].count(s) > 1}
                assert [k for k, s in a if s not in ties] == [k for k, s in b if s not in ties], kwargs
            assert cached.index.loaded() and not ws2.memory.index.loaded()


@pytest.mark.parametrize("index", ["exact", "shared"])
def test_matrix_follows_writes_from_another_connection(tmp_path, index):
    cfg = Config.from_dict({"memory": {"vector": {"index": index}}})
    with Workspace.open(tmp_path / "w", config=cfg, announce=False) as ws, \
            Workspace.open(tmp_path / "w", config=cfg, announce=False) as other:
        ws.memory.store("a", "apples and pears")
        assert ws.memory.search("apples", "vector")[0].key == "a"   # matrix loaded now
        other.memory.store("b", "apples apples apples")             # another connection writes
        other.memory.store("a", "completely different text")
        assert ws.memory.search("apples apples apples", "vector")[0].key == "b"
        assert ws.memory.search("completely different text", "vector")[0].key == "a"
        other.memory.delete("b")
        assert "b" not in {r.key for r in ws.memory.search("apples", "vector")}
        other.memory.store_many([(f"k{i}", f"bulk entry {i}") for i in range(3000)])  # many changes: reload
        assert ws.memory.search("bulk entry 2999", "vector")[0].key == "k2999"
        if index == "exact":
            assert len(ws.memory.index._matrix.pos) == 3001
        else:
            assert ws.memory.index._matrix is None and ws.memory.index.shared_index().rows == 3001


def test_dataframe_helpers(ws):
    ws.memory.store("k", "data frames are handy")
    df = ws.memory.search_df("frames")
    assert list(df["key"]) == ["k"] and "score" in df.columns
    assert list(ws.memory.list_df()["key"]) == ["k"]


def test_fts_all_terms_first_then_any_term(ws):
    m = ws.memory
    m.store_many([("both", "alpha beta"), ("one", "alpha alpha alpha"), ("other", "beta gamma"), ("none", "delta")])
    keys = [r.key for r in m.search("alpha beta", "fts")]
    assert keys[0] == "both" and set(keys) == {"both", "one", "other"}
    assert [r.key for r in m.search("alpha beta", "fts", limit=1)] == ["both"]
