"""benchmarks/memory_peers.py (bench_memory.py --peers) runs LanceDB and Chroma over a small corpus."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from agentstack_lab.embeddings import get_embedder

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("memory_peers", ROOT / "benchmarks" / "memory_peers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_peers_names_the_unknown_one():
    peers = _module()
    assert peers.parse_peers(" lancedb,chroma ") == ["lancedb", "chroma"]
    with pytest.raises(ValueError, match="unknown peer 'faiss'"):
        peers.parse_peers("lancedb,faiss")


@pytest.mark.slow
def test_peers_search_the_same_rows_and_report_them(tmp_path):
    pytest.importorskip("lancedb", reason="the memory peers need the bench extra (lancedb)")
    pytest.importorskip("chromadb", reason="the memory peers need the bench extra (chromadb)")
    peers = _module()
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(500)]
    texts = [" ".join(rng.choice(vocab, size=12)) for _ in range(2_000)]
    embedder = get_embedder("hash")
    mat = np.asarray(embedder.embed(texts), dtype=np.float32)
    ids = np.arange(1, len(texts) + 1, dtype=np.int64) * 7   # ids unlike row numbers: the peers must keep them
    picked = rng.choice(len(texts), size=20, replace=False)
    qtexts = [" ".join(texts[i].split()[3:6]) for i in picked]
    qvecs = np.asarray(embedder.embed(qtexts), dtype=np.float32)
    truth = [ids[np.argsort(-(mat @ q))[:10]].tolist() for q in qvecs]

    got = peers.run_peers(("lancedb", "chroma"), tmp_path / "peers", mat, ids, texts, qvecs, qtexts, truth,
                          budget=600)

    assert [p["name"] for p in got] == ["LanceDB", "Chroma"]
    lance, chroma = got
    assert [s["name"] for s in lance["searches"]][-1].startswith("LanceDB hybrid")
    assert len(lance["searches"]) == len(peers.LANCE_SEARCH) + 1 and len(chroma["searches"]) == len(peers.CHROMA_EF)
    for p in got:
        assert "not_built" not in p
        assert set(p["fresh"]) == {"import_s", "open_s", "first_s", "rss_mb"}   # a new process found the store
        for s in p["searches"]:
            assert s["p"][0] <= s["p"][1]
    # the widest setting of each scans (nearly) everything at 2,000 rows: its hits are the exact top-10's ids
    assert lance["searches"][len(peers.LANCE_SEARCH) - 1]["recall"] >= 0.8
    assert chroma["searches"][-1]["recall"] >= 0.9

    rows = peers.bare_rows(2_000, got, base_ms=1.0)
    assert len(rows) == len(lance["searches"]) + len(chroma["searches"])
    table = "\n".join(peers.cost_table([{"n": 2_000, "insert_s": 1.0, "index_build_s": 0.5, "peers": got}]))
    assert "| 2,000 | LanceDB | IVF-PQ 7 partitions" in table and "| 2,000 | Chroma | HNSW M=16" in table
