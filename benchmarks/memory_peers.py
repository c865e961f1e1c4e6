"""The embedded vector stores a user would pick instead of our memory, measured on bench_memory.py's data.

LanceDB (an IVF-PQ index over a Lance table, and its hybrid search: that index plus its own full-text index,
fused by reciprocal rank) and Chroma (its HNSW, ``PersistentClient`` in a folder). Each is handed the very
vectors, texts, queries and exact top-10 that ``bench_memory.py`` measures ours with, and gives back:

- its bulk load and index build time (Chroma builds its HNSW while ``add`` writes: one number);
- the first search in the loading process, right after the build;
- per search setting, the p50 / p95 of a bare top-10 over pre-embedded queries and recall@10 against exact;
- a fresh process: import, open the store, one search (``first search in a fresh process``).

Extra ``bench`` (``pip install 'agentstack-lab[bench]'``). Run by ``bench_memory.py --peers lancedb,chroma``; the
peers use their own thread pools (ours searches on one thread), which on this 2-core machine is at most 2x.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

PEERS = ("lancedb", "chroma")
K = 10
LANCE_SUB_VECTORS = 48                 # 8 dimensions a sub-vector at 384 dims: 48-byte PQ codes (ours: 96 bytes)
LANCE_SEARCH = ((20, None), (20, 10), (64, 10))   # (nprobes, refine_factor); (20, None) is LanceDB's default
CHROMA_M, CHROMA_EF_CONSTRUCTION, CHROMA_EF = 16, 100, (100, 256)   # Chroma's defaults, and a wider beam


def parse_peers(text: str) -> list[str]:
    """``"lancedb,chroma"`` -> the peer names, or ValueError naming an unknown one."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in PEERS]
    if unknown:
        raise ValueError(f"--peers: unknown peer {', '.join(unknown)!r} (known: {', '.join(PEERS)})")
    return names


def lance_partitions(n: int) -> int:
    """IVF partitions: sqrt(n), LanceDB's rule, but at least 256 rows each (its k-means trains no more)."""
    return max(1, min(round(math.sqrt(n)), n // 256))


def _pct(times: list[float]) -> tuple[float, float]:
    a = np.array(times) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def _recall(got: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True)]))


def _timed(fn: Callable[[int], list[int]], n: int) -> tuple[list[float], list[list[int]]]:
    times, outs = [], []
    for i in range(n):
        t = time.perf_counter()
        outs.append(fn(i))
        times.append(time.perf_counter() - t)
    return times, outs


def _step(what: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {what}", flush=True)


def _quiet_lance() -> None:
    os.environ.setdefault("LANCEDB_LOG", "error")   # its Rust log warns on every search that projects no score


_LANCE_BUILD = """
import os, sys, time
os.environ.setdefault("LANCEDB_LOG", "error")
import lancedb
from lancedb.index import IvfPq
table = lancedb.connect(sys.argv[1]).open_table("notes")
t = time.perf_counter()
table.create_index("vector", config=IvfPq(distance_type="cosine", num_partitions=int(sys.argv[2]),
                                          num_sub_vectors=int(sys.argv[3])))
print(time.perf_counter() - t)
"""


def _lance_ivf_pq(folder: Path, parts: int, budget: float) -> tuple[float | None, str | None]:
    """Build the IVF-PQ index in a child process, stopped after ``budget`` s: (build s, None) or (None, reason).

    LanceDB trains and writes the index in one call that cannot be interrupted; a child can be.
    """
    try:
        proc = subprocess.run([sys.executable, "-c", _LANCE_BUILD, str(folder / "lance"), str(parts),
                               str(LANCE_SUB_VECTORS)], capture_output=True, text=True, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        return None, f"not built: the IVF-PQ build ran past the budget ({budget / 60:.0f} min)"
    if proc.returncode != 0:
        raise RuntimeError(f"LanceDB IVF-PQ build failed: {proc.stderr.strip().splitlines()[-1:]}")
    return float(proc.stdout.strip().splitlines()[-1]), None


def lancedb_peer(folder: Path, mat: np.ndarray, ids: np.ndarray, texts: Sequence[str], qvecs: np.ndarray,
                 qtexts: Sequence[str], truth: list[list[int]], budget: float) -> dict:
    _quiet_lance()
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    n, dims = mat.shape
    out: dict = {"name": "LanceDB", "searches": []}
    db = lancedb.connect(str(folder / "lance"))
    data = pa.table({"id": pa.array(ids, pa.int64()), "text": pa.array(list(texts), pa.string()),
                     "vector": pa.FixedSizeListArray.from_arrays(pa.array(mat.reshape(-1), pa.float32()), dims)})
    _step("LanceDB bulk load")
    t = time.perf_counter()
    table = db.create_table("notes", data)
    out["load_s"] = time.perf_counter() - t
    del data
    parts = lance_partitions(n)
    _step(f"LanceDB IVF-PQ build ({parts} partitions, {LANCE_SUB_VECTORS} sub-vectors; budget {budget / 60:.0f} min)")
    out["index_s"], not_built = _lance_ivf_pq(folder, parts, budget)
    out["settings"] = f"IVF-PQ {parts} partitions, {LANCE_SUB_VECTORS}x8-bit sub-vectors, cosine"
    if not_built:
        out["not_built"] = not_built
        return out
    table = db.open_table("notes")   # with the index the child committed
    t = time.perf_counter()
    table.create_index("text", config=FTS())
    out["fts_index_s"] = time.perf_counter() - t

    def search(nprobes: int, refine: int | None) -> Callable[[int], list[int]]:
        def one(i: int) -> list[int]:
            q = table.search(qvecs[i]).nprobes(nprobes)
            if refine is not None:
                q = q.refine_factor(refine)
            return q.limit(K).select(["id"]).to_arrow()["id"].to_pylist()
        return one

    t = time.perf_counter()
    search(*LANCE_SEARCH[1])(0)
    out["first_load_s"] = time.perf_counter() - t
    for nprobes, refine in LANCE_SEARCH:
        times, got = _timed(search(nprobes, refine), len(qvecs))
        out["searches"].append({"name": f"LanceDB IVF-PQ nprobes={nprobes}"
                                        f"{f' refine={refine}' if refine else ' (default)'}",
                                "p": _pct(times), "recall": _recall(got, truth)})
    nprobes, refine = LANCE_SEARCH[1]

    def hybrid(i: int) -> list[int]:
        q = table.search(query_type="hybrid").vector(qvecs[i]).text(qtexts[i]).nprobes(nprobes)
        return q.refine_factor(refine).limit(K).select(["id"]).to_arrow()["id"].to_pylist()

    hybrid(0)
    times, _ = _timed(hybrid, len(qvecs))
    out["searches"].append({"name": f"LanceDB hybrid (vector nprobes={nprobes} refine={refine} + FTS, RRF)",
                            "p": _pct(times), "recall": None})
    out["fresh"] = fresh_process("lancedb", folder, qvecs[0], qtexts[0])
    return out


def chroma_peer(folder: Path, mat: np.ndarray, ids: np.ndarray, texts: Sequence[str], qvecs: np.ndarray,
                truth: list[list[int]], budget: float) -> dict:
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.config import Settings

    n = len(mat)
    out: dict = {"name": "Chroma", "searches": [],
                 "settings": f"HNSW M={CHROMA_M} ef_construction={CHROMA_EF_CONSTRUCTION}, inner product"}
    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=str(folder / "chroma"), settings=settings)
    col = client.create_collection("notes", embedding_function=None, configuration={"hnsw": {
        "space": "ip", "max_neighbors": CHROMA_M, "ef_construction": CHROMA_EF_CONSTRUCTION,
        "ef_search": CHROMA_EF[0]}})
    batch = client.get_max_batch_size()   # add() refuses more rows than this in one call (5,461 here)
    _step(f"Chroma add (HNSW built as it goes; {batch:,} rows a call)")
    t = time.perf_counter()
    for a in range(0, n, batch):
        b = min(n, a + batch)
        col.add(ids=[str(i) for i in ids[a:b]], embeddings=mat[a:b], documents=list(texts[a:b]))
        spent = time.perf_counter() - t
        if b < n and spent * n / b > budget:   # an HNSW insert only gets slower as the graph grows
            out["not_built"] = (f"not built: {b:,} rows took {spent:.0f} s, {n:,} would take"
                                f" > {spent * n / b / 60:.0f} min (budget {budget / 60:.0f} min)")
            client.delete_collection("notes")
            return out
    out["load_s"], out["index_s"] = time.perf_counter() - t, None
    opened = {"col": col}
    del col, client

    def search(i: int) -> list[int]:
        hits = opened["col"].query(query_embeddings=qvecs[i:i + 1], n_results=K, include=[])
        return [int(x) for x in hits["ids"][0]]

    t = time.perf_counter()
    search(0)
    out["first_load_s"] = time.perf_counter() - t
    for ef in CHROMA_EF:
        if ef != CHROMA_EF[0]:
            # an open collection keeps the ef it was loaded with: modify, drop the client's cache, open again
            opened["col"].modify(configuration={"hnsw": {"ef_search": ef}})
            opened.clear()
            SharedSystemClient.clear_system_cache()
            client = chromadb.PersistentClient(path=str(folder / "chroma"), settings=settings)
            opened["col"] = client.get_collection("notes")
            del client
            search(0)
        times, got = _timed(search, len(qvecs))
        out["searches"].append({"name": f"Chroma HNSW M={CHROMA_M} ef={ef}{' (default)' if ef == 100 else ''}",
                                "p": _pct(times), "recall": _recall(got, truth)})
        if ef == CHROMA_EF[0]:
            out["fresh"] = fresh_process("chroma", folder, qvecs[0], "")
    opened.clear()
    SharedSystemClient.clear_system_cache()   # let the in-process HNSW go before the next measurement
    return out


_CHILD = """
import json, os, sys, time
kind, folder, setting = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
q = json.loads(sys.stdin.read())
t = time.perf_counter()
if kind == "lancedb":
    os.environ.setdefault("LANCEDB_LOG", "error")
    import lancedb
else:
    import chromadb
    from chromadb.config import Settings
imported = time.perf_counter()
if kind == "lancedb":
    table = lancedb.connect(os.path.join(folder, "lance")).open_table("notes")
    search = lambda: table.search(q["vector"]).nprobes(setting[0]).refine_factor(setting[1]).limit(10).select(["id"]).to_list()
else:
    client = chromadb.PersistentClient(path=os.path.join(folder, "chroma"), settings=Settings(anonymized_telemetry=False))
    col = client.get_collection("notes")
    search = lambda: col.query(query_embeddings=[q["vector"]], n_results=10, include=[])
opened = time.perf_counter()
hits = search()
done = time.perf_counter()
print(json.dumps({"import_s": imported - t, "open_s": opened - imported, "first_s": done - opened,
                  "rss_mb": int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:"))) / 1024}))
"""


def fresh_process(kind: str, folder: Path, qvec: np.ndarray, qtext: str) -> dict:
    """A new interpreter imports the peer, opens the store it finds in ``folder`` and runs one search.

    Its peak RSS is ``VmHWM`` (this process's own pages): ``ru_maxrss`` would carry the parent's peak over the fork.
    """
    setting = list(LANCE_SEARCH[1]) if kind == "lancedb" else []
    proc = subprocess.run([sys.executable, "-c", _CHILD, kind, str(folder), json.dumps(setting)],
                          input=json.dumps({"vector": qvec.tolist(), "text": qtext}), capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} fresh-process search failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_peers(names: Sequence[str], folder: Path, mat: np.ndarray, ids: np.ndarray, texts: Sequence[str],
              qvecs: np.ndarray, qtexts: Sequence[str], truth: list[list[int]], budget: float) -> list[dict]:
    """Each named peer over the same rows (``ids``/``texts`` aligned with ``mat``), queries and exact top-10.

    A peer whose library is missing comes back as ``{"name", "not_built": reason}``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        try:
            if name == "lancedb":
                out.append(lancedb_peer(folder, mat, ids, texts, qvecs, qtexts, truth, budget))
            else:
                out.append(chroma_peer(folder, mat, ids, texts, qvecs, truth, budget))
        except ImportError as exc:
            out.append({"name": name, "not_built": f"not built: {exc.name} is not installed"
                                                   " (pip install 'agentstack-lab[bench]')", "searches": []})
    return out


def bare_rows(n: int, peers: list[dict], base_ms: float) -> list[str]:
    """Rows of bench_memory's bare top-10 table: | entries | peer | p50 / p95 ms | x shared index | recall@10 |."""
    rows = []
    for peer in peers:
        if peer.get("not_built"):
            rows.append(f"| {n:,} | {peer['name']} | {peer['not_built']} | | |")
        for s in peer["searches"]:
            rec = "—" if s["recall"] is None else f"{s['recall']:.3f}"
            rows.append(f"| {n:,} | {s['name']} | {s['p'][0]:.2f} / {s['p'][1]:.2f} | {s['p'][0] / base_ms:.2f}x | {rec} |")
    return rows


def cost_table(results: list[dict]) -> list[str]:
    """Bulk load, index build and first-search costs of ours and each peer, one row each (seconds)."""
    out = ["", "After a bulk load: build and first search, seconds (ours: store_many, then the shared index built by"
           " the first vector search; fresh process: import, open, one search, and its peak RSS):", "",
           "| entries | store | index | bulk load s | index build s | first search, loading process s |"
           " fresh process: import / open / first search s | fresh RSS MB |",
           "|---:|---|---|---:|---:|---:|---:|---:|"]

    def f(x):
        return "—" if x is None else f"{x:.2f}"

    for r in results:
        if "peers" not in r:
            continue
        n = r["n"]
        shared = r.get("procs_shared", {})
        # no build step: store_many's background indexer keeps the files in step (bench_memory.first_search)
        first = r.get("first_fresh_s", shared.get("first_s"))
        out.append(f"| {n:,} | ours | shared index (PQ, 8-bit, exact rescoring) | {f(r.get('insert_s'))} |"
                   f" kept in step by store_many | {f(r.get('first_loading_s'))} | — / — / {f(first)} | — |")
        for p in r["peers"]:
            if p.get("not_built"):   # LanceDB's bulk load precedes its index build: shown when it ran
                out.append(f"| {n:,} | {p['name']} | {p['not_built']} | {f(p.get('load_s'))} | | | | |")
                continue
            index = "built by add" if p["index_s"] is None else f"{p['index_s']:.2f}"
            if p.get("fts_index_s") is not None:
                index += f" (+ FTS {p['fts_index_s']:.2f})"
            fr = p["fresh"]
            out.append(f"| {n:,} | {p['name']} | {p['settings']} | {p['load_s']:.2f} | {index} | {p['first_load_s']:.2f} |"
                       f" {fr['import_s']:.2f} / {fr['open_s']:.2f} / {fr['first_s']:.2f} | {fr['rss_mb']:,.0f} |")
    return out
