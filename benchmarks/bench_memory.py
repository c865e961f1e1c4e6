"""Memory benchmark: insert rate, FTS / vector / hybrid latency and vector recall, with peers in the same run.

Peers, all over the same vectors in the same run: numpy exact brute force (one BLAS thread), faiss
flat (the exact-scan limit), faiss HNSW and usearch HNSW (the ANN indexes a user would pick, with their
recall; each built within ``--ann-budget`` seconds or reported "not built" with the reason), sqlite-vec's
own KNN (``memory.vector.cache = false``), the exact in-process matrix (``memory.vector.index =
"exact"``) and, at 10k only, the design seed's algorithm (load every row, cosine in a Python loop).
Fresh processes: two at once open the memory and search; first search time and the peak resident
memory (RSS and PSS from ``/proc/self/smaps_rollup``) each added over its state before searching.

    .venv/bin/python benchmarks/bench_memory.py --sizes 100000,1000000
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):   # one BLAS thread, before numpy
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from agentstack_lab.config import Config  # noqa: E402
from agentstack_lab.workspace import Workspace  # noqa: E402

BATCH = 10_000   # entries per store_many call
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF = 32, 40, (64, 256)   # faiss HNSW peer: graph degree, build and search beam
USEARCH_DTYPE, USEARCH_M, USEARCH_EF_ADD = "f16", 16, 64       # usearch peer (f16 built 2.5x faster than i8 here)


def corpus(n: int, seed: int = 0) -> list[str]:
    """Synthetic notes: 20-30 words from a Zipf-distributed 30k-word vocabulary (deterministic)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(30_000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    words = rng.choice(len(vocab), size=(n, 30), p=p)
    lens = rng.integers(20, 31, size=n)
    return [" ".join(vocab[w] for w in row[:k]) for row, k in zip(words, lens, strict=True)]


def queries(docs: list[str], n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(docs), size=n, replace=False):
        words = docs[i].split()
        start = rng.integers(0, max(1, len(words) - 3))
        out.append(" ".join(words[start:start + 3]))
    return out


def pct(times: list[float]) -> tuple[float, float]:
    a = np.array(times) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def timed(fn, qs) -> tuple[list[float], list]:
    times, outs = [], []
    for q in qs:
        t = time.perf_counter()
        outs.append(fn(q))
        times.append(time.perf_counter() - t)
    return times, outs


def seed_algorithm(ws: Workspace, qvec: np.ndarray, k: int = 10) -> list[int]:
    """The design seed's vector search: load all rows with embeddings, cosine in a loop, sort."""
    rows = ws.db.query("SELECT rid, embedding FROM memory_vec")
    q = [float(x) for x in qvec]
    scored = []
    for rid, blob in rows:
        v = np.frombuffer(blob, dtype=np.float32).tolist()
        dot = na = nb = 0.0
        for a, b in zip(q, v, strict=True):
            dot += a * b
            na += a * a
            nb += b * b
        scored.append((dot / (math.sqrt(na) * math.sqrt(nb) or 1.0), rid))
    scored.sort(reverse=True)
    return [rid for _, rid in scored[:k]]


def step(what: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {what}", flush=True)


def bench(n: int, n_queries: int, folder: Path, ann: bool, budget: float) -> dict:
    docs = corpus(n)
    qs = queries(docs, n_queries)
    res: dict = {"n": n}
    with Workspace.open(folder, announce=False) as ws:
        mem = ws.memory
        items = [{"key": f"doc-{i}", "content": d} for i, d in enumerate(docs)]
        step("store_many")
        t, cpu = time.perf_counter(), time.thread_time()
        last = (t, 0)
        for i in range(0, n, BATCH):   # BATCH entries per store_many call (one transaction each)
            if i >= n - max(BATCH, n // 10) and last[1] == 0:
                last = (time.perf_counter(), i)
            mem.store_many(items[i:i + BATCH])
        res["insert_s"] = time.perf_counter() - t
        res["insert_rate"] = n / res["insert_s"]
        res["insert_last_rate"] = (n - last[1]) / (time.perf_counter() - last[0])   # the last 10% of the entries
        res["insert_main_cpu_rate"] = n / (time.thread_time() - cpu)   # the calling thread's CPU only
        sample = docs[:min(n, 100_000)]
        t = time.perf_counter()
        for i in range(0, len(sample), 10_000):
            mem.embedder.embed(sample[i:i + 10_000])
        res["embed_rate"] = len(sample) / (time.perf_counter() - t)
        assert mem.stats() == {"memory": n, "fts": n, "vector": n}
        del items, docs

        step("index build")
        t = time.perf_counter()
        mem.search(qs[0], "vector")                       # builds the shared index files (once per database)
        res["index_build_s"] = time.perf_counter() - t
        for mode in ("fts", "vector", "hybrid"):
            mem.search(qs[1], mode)                       # warm
            times, _ = timed(lambda q, m=mode: mem.search(q, m, limit=10), qs)
            res[mode] = pct(times)

        step("peers")
        # exact reference: numpy over the very same vectors (one BLAS thread)
        rids, mat, _ = mem.index._read_all(ws.db.conn)
        qvecs = mem.embedder.embed(qs)

        def exact(i):
            s = mat @ qvecs[i]
            top = np.argpartition(-s, 9)[:10]
            return rids[top[np.argsort(-s[top])]].tolist()

        times, truth = timed(exact, range(len(qs)))
        res["numpy"] = pct(times)
        times, ours = timed(lambda i: [rid for rid, _ in mem.index.search(qvecs[i], _all(), 10)], range(len(qs)))
        res["index"] = pct(times)
        res["recall"] = _recall(ours, truth)
        res.update(faiss_peers(mat, rids, qvecs, truth, ann, budget))

        # peer: sqlite-vec in SQL (cache = false: vec_distance_cosine over the table, ORDER BY ... LIMIT k);
        # 10 queries from 500k on (~1 s each)
        few = range(min(len(qs), 10 if n >= 500_000 else len(qs)))
        plain = Config.from_dict({"memory": {"vector": {"cache": False}}})
        with Workspace.open(folder, config=plain, announce=False) as ws2:
            idx = ws2.memory.index
            times, knn = timed(lambda i: [r for r, _ in idx.search(qvecs[i], _all(), 10)], few)
            res["sqlite_vec"] = pct(times)
            res["sqlite_vec_recall"] = _recall(knn, [truth[i] for i in few])
        if n <= 10_000:
            few = range(min(5, len(qs)))
            times, seeded = timed(lambda i: seed_algorithm(ws, qvecs[i]), few)
            res["seed"] = pct(times)
            res["seed_recall"] = _recall(seeded, [truth[i] for i in few])
    step("fresh processes")
    # fresh processes: first search, and resident memory added with two processes searching at once
    for kind in ("shared", "exact"):
        res[f"procs_{kind}"] = two_processes(folder, kind, qs[:50])
    return res


def _budgeted(add, n: int, budget: float, chunk: int = 50_000) -> tuple[float | None, str | None]:
    """Build an ANN index chunk by chunk; stop when the rate so far projects past ``budget`` seconds.

    Returns (build seconds, None) or (None, "not built: <reason>").
    """
    t = time.perf_counter()
    for i in range(0, n, chunk):
        add(i, min(n, i + chunk))
        spent = time.perf_counter() - t
        done = min(n, i + chunk)
        if done < n and spent * n / done > budget:   # insertion only gets slower as the graph grows
            return None, (f"not built: {done:,} rows took {spent:.0f} s, {n:,} would take > {spent * n / done / 60:.0f}"
                          f" min (budget {budget / 60:.0f} min)")
    return time.perf_counter() - t, None


def faiss_peers(mat: np.ndarray, rids: np.ndarray, qvecs: np.ndarray, truth: list, ann: bool,
                budget: float) -> dict:
    """faiss flat (the exact-scan limit), faiss HNSW and usearch HNSW (the ANN a user would pick), same vectors.

    Searches on one thread; builds on every core, each within ``budget`` seconds or reported as not built.
    """
    import faiss

    out: dict = {}
    faiss.omp_set_num_threads(1)
    flat = faiss.IndexFlatIP(mat.shape[1])
    flat.add(mat)
    qs = range(len(qvecs))
    times, got = timed(lambda i: rids[flat.search(qvecs[i:i + 1], 10)[1][0]].tolist(), qs)
    out["faiss_flat"], out["faiss_flat_recall"] = pct(times), _recall(got, truth)
    flat.reset()
    cores = os.cpu_count() or 1
    if ann:
        faiss.omp_set_num_threads(cores)    # the build may use every core
        step("faiss HNSW build")
        hnsw = faiss.IndexHNSWFlat(mat.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        out["hnsw_build_s"], out["hnsw_not_built"] = _budgeted(lambda a, b: hnsw.add(mat[a:b]), len(mat), budget)
        faiss.omp_set_num_threads(1)
        if out["hnsw_not_built"] is None:
            for ef in HNSW_EF:
                hnsw.hnsw.efSearch = ef
                times, got = timed(lambda i: rids[hnsw.search(qvecs[i:i + 1], 10)[1][0]].tolist(), qs)
                out[f"hnsw_{ef}"], out[f"hnsw_{ef}_recall"] = pct(times), _recall(got, truth)
        hnsw.reset()
    else:
        out["hnsw_not_built"] = "not built: above --ann-max (its build is the slowest step: see the 100k row)"
    step("usearch build")
    try:
        from usearch.index import Index
    except ImportError:
        out["usearch_not_built"] = "not built: usearch is not installed (pip install 'agentstack-lab[bench]')"
        return out
    idx = Index(ndim=mat.shape[1], metric="ip", dtype=USEARCH_DTYPE, connectivity=USEARCH_M,
                expansion_add=USEARCH_EF_ADD)
    keys = np.arange(len(mat), dtype=np.uint64)
    out["usearch_build_s"], out["usearch_not_built"] = _budgeted(
        lambda a, b: idx.add(keys[a:b], mat[a:b], threads=cores), len(mat), budget)
    if out["usearch_not_built"] is None:
        for ef in HNSW_EF:
            idx.expansion_search = ef
            times, got = timed(lambda i: rids[idx.search(qvecs[i], 10, threads=1).keys.astype(np.int64)].tolist(), qs)
            out[f"usearch_{ef}"], out[f"usearch_{ef}_recall"] = pct(times), _recall(got, truth)
    return out


_CHILD = """
import json, os, sys, time
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[v] = "1"
from agentstack_lab.config import Config
from agentstack_lab.workspace import Workspace

def mem_kb():
    out = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if parts[0] in ("Rss:", "Pss:"):
            out[parts[0][:-1]] = int(parts[1])
    return out

folder, kind, go = sys.argv[1], sys.argv[2], sys.argv[3]
qs = json.loads(sys.stdin.read())
cfg = Config.from_dict({"memory": {"vector": {"index": kind}}})
with Workspace.open(folder, config=cfg, announce=False) as ws:
    ws.memory.embedder.embed(["warm up"])
    import faiss, numpy  # noqa: F401 - imported by the search anyway: count the libraries as baseline
    before = mem_kb()
    while not os.path.exists(go):
        time.sleep(0.01)
    t = time.perf_counter()
    ws.memory.search(qs[0], "vector")
    first = time.perf_counter() - t
    peak = mem_kb()
    times = []
    for q in qs:
        t = time.perf_counter()
        ws.memory.search(q, "vector")
        times.append(time.perf_counter() - t)
        m = mem_kb()
        peak = {k: max(peak[k], m[k]) for k in m}
    print(json.dumps({"first_s": first, "rss_mb": (peak["Rss"] - before["Rss"]) / 1024,
                      "pss_mb": (peak["Pss"] - before["Pss"]) / 1024, "p50_ms": sorted(times)[len(times) // 2] * 1000}))
"""


def two_processes(folder: Path, kind: str, qs: list[str]) -> dict:
    """Two fresh processes open the memory and search at once: first search time, peak RSS/PSS added."""
    import json
    import subprocess
    import sys

    go = folder / f"go-{kind}"
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(folder), kind, str(go)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.stdin.write(json.dumps(qs))
        p.stdin.close()
    time.sleep(3)   # both imported and opened (the baseline is taken before the go file appears)
    go.touch()
    outs = [json.loads(p.stdout.read()) for p in procs]
    for p in procs:
        p.wait()
    go.unlink()
    return {key: max(o[key] for o in outs) for key in outs[0]}


def _all():
    from agentstack_lab.memory.vectors import VectorFilter

    return VectorFilter()


def _recall(got: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True)]))


def report(results: list[dict]) -> str:
    def f(r, key):
        return f"{r[key][0]:.2f} / {r[key][1]:.2f}" if key in r else "—"

    out = ["End to end through `Memory.search` (shared index, the default):", "",
           "| entries | store_many entries/s (main-thread CPU) | last 10% entries/s | embedding alone entries/s |"
           " index build s | FTS p50/p95 ms | vector p50/p95 ms | hybrid p50/p95 ms | recall@10 |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        out.append(f"| {r['n']:,} | {r['insert_rate']:,.0f} ({r['insert_main_cpu_rate']:,.0f}) |"
                   f" {r['insert_last_rate']:,.0f} | {r['embed_rate']:,.0f} | {r['index_build_s']:.1f} |"
                   f" {f(r, 'fts')} | {f(r, 'vector')} | {f(r, 'hybrid')} | {r['recall']:.3f} |")
    out += ["", "Bare top-10 over pre-embedded queries, one thread (ratio = p50 / shared index p50):", "",
            "| entries | peer | p50 / p95 ms | × shared index | recall@10 |", "|---:|---|---:|---:|---:|"]
    for r in results:
        base = r["index"][0]
        rows = [("shared index (PQ + rescoring)", "index", r["recall"]), ("numpy exact", "numpy", 1.0),
                ("faiss flat", "faiss_flat", r.get("faiss_flat_recall"))]
        rows += [(f"faiss HNSW M={HNSW_M} ef={ef}", f"hnsw_{ef}", r.get(f"hnsw_{ef}_recall")) for ef in HNSW_EF]
        rows += [(f"usearch HNSW {USEARCH_DTYPE} M={USEARCH_M} ef={ef}", f"usearch_{ef}", r.get(f"usearch_{ef}_recall"))
                 for ef in HNSW_EF]
        rows += [("sqlite-vec in SQL (cache = false)", "sqlite_vec", r["sqlite_vec_recall"]), ("seed algorithm", "seed", r.get("seed_recall"))]
        for name, key, rec in rows:
            if key in r:
                out.append(f"| {r['n']:,} | {name} | {f(r, key)} | {r[key][0] / base:.2f}x |"
                           f" {rec if rec is None else format(rec, '.3f')} |")
        for name, key in (("faiss HNSW", "hnsw"), ("usearch HNSW", "usearch")):
            if r.get(f"{key}_build_s") is not None:
                out.append(f"| {r['n']:,} | ({name} build, all cores, ms) | {r[f'{key}_build_s'] * 1000:,.0f} | | |")
            elif r.get(f"{key}_not_built"):
                out.append(f"| {r['n']:,} | {name} | {r[f'{key}_not_built']} | | |")
    out += ["", "Two fresh processes searching at once (50 vector searches each; worst of the two):", "",
            "| entries | path | first search s | vector p50 ms | RSS added MB | PSS added MB |",
            "|---:|---|---:|---:|---:|---:|"]
    for r in results:
        for kind in ("shared", "exact"):
            p = r[f"procs_{kind}"]
            out.append(f"| {r['n']:,} | {kind} | {p['first_s']:.2f} | {p['p50_ms']:.1f} | {p['rss_mb']:,.0f} |"
                       f" {p['pss_mb']:,.0f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated entry counts")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ann-max", type=int, default=200_000,
                        help="largest size at which the faiss HNSW peer is built (its build is the slowest step)")
    parser.add_argument("--ann-budget", type=float, default=900,
                        help="seconds an ANN peer's build may take (projected from its first rows); else 'not built'")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs; load average at start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}", flush=True)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix=f"bench-memory-{n}-"))
        try:
            print(f"building {n:,} entries ...", flush=True)
            results.append(bench(n, min(args.queries, n), folder, n <= args.ann_max, args.ann_budget))
            print(report(results[-1:]), flush=True)   # each size as soon as it is done
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"\n{os.cpu_count()} CPUs; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)")
    print(report(results))
    print("\nstore_many: wall-clock rate over"
          f" calls of {BATCH:,} entries each (one transaction per call, fresh keys);"
          " in brackets the rate the calling thread's CPU time allows (the embedder runs in a second thread).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
