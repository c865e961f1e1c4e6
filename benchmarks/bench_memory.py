"""Memory benchmark: insert rate, FTS / vector / hybrid latency and vector recall, with peers in the same run.

Peers: numpy exact brute force (one BLAS thread) over the same vectors, sqlite-vec's own KNN
(``memory.vector.cache = false``) and, at 10k only, the design seed's algorithm (load every row,
cosine in a Python loop).

    .venv/bin/python benchmarks/bench_memory.py --sizes 10000,100000
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


def bench(n: int, n_queries: int, folder: Path) -> dict:
    docs = corpus(n)
    qs = queries(docs, n_queries)
    res: dict = {"n": n}
    with Workspace.open(folder, announce=False) as ws:
        mem = ws.memory
        items = [{"key": f"doc-{i}", "content": d} for i, d in enumerate(docs)]
        t, cpu = time.perf_counter(), time.thread_time()
        for i in range(0, n, BATCH):   # BATCH entries per store_many call (one transaction each)
            mem.store_many(items[i:i + BATCH])
        res["insert_s"] = time.perf_counter() - t
        res["insert_rate"] = n / res["insert_s"]
        res["insert_main_cpu_rate"] = n / (time.thread_time() - cpu)   # the calling thread's CPU only
        t = time.perf_counter()
        for i in range(0, n, 10_000):
            mem.embedder.embed(docs[i:i + 10_000])
        res["embed_rate"] = n / (time.perf_counter() - t)
        assert mem.stats() == {"memory": n, "fts": n, "vector": n}

        t = time.perf_counter()
        mem.search(qs[0], "vector")                       # loads the exact matrix (once per process)
        res["matrix_load_s"] = time.perf_counter() - t
        for mode in ("fts", "vector", "hybrid"):
            mem.search(qs[1], mode)                       # warm
            times, _ = timed(lambda q, m=mode: mem.search(q, m, limit=10), qs)
            res[mode] = pct(times)

        # exact reference: numpy over the very same vectors (one BLAS thread)
        m = mem.index._matrix
        mat, rids = m.mat[:m.n].copy(), m.rids[:m.n].copy()
        qvecs = mem.embedder.embed(qs)

        def exact(i):
            s = mat @ qvecs[i]
            top = np.argpartition(-s, 9)[:10]
            return rids[top[np.argsort(-s[top])]].tolist()

        times, truth = timed(exact, range(len(qs)))
        res["numpy"] = pct(times)
        ours = [[rid for rid, _ in mem.index.search(qvecs[i], _all(), 10)] for i in range(len(qs))]
        res["recall"] = _recall(ours, truth)

        # peer: sqlite-vec KNN (no in-memory matrix)
        plain = Config.from_dict({"memory": {"vector": {"cache": False}}})
        with Workspace.open(folder, config=plain, announce=False) as ws2:
            idx = ws2.memory.index
            times, knn = timed(lambda i: [r for r, _ in idx.search(qvecs[i], _all(), 10)], range(len(qs)))
            res["sqlite_vec"] = pct(times)
            res["sqlite_vec_recall"] = _recall(knn, truth)

        if n <= 10_000:
            few = range(min(5, len(qs)))
            times, seeded = timed(lambda i: seed_algorithm(ws, qvecs[i]), few)
            res["seed"] = pct(times)
            res["seed_recall"] = _recall(seeded, [truth[i] for i in few])
    return res


def _all():
    from agentstack_lab.memory.vectors import VectorFilter

    return VectorFilter()


def _recall(got: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True)]))


def report(results: list[dict]) -> str:
    lines = ["| entries | store_many entries/s (main-thread CPU) | embedding alone entries/s | FTS p50/p95 ms | vector p50/p95 ms | hybrid p50/p95 ms |"
             " numpy exact p50/p95 ms | vector / numpy (p50) | recall@10 | sqlite-vec KNN p50/p95 ms |"
             " sqlite-vec recall@10 | seed algorithm p50 ms | matrix load s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        f = lambda key, r=r: f"{r[key][0]:.2f} / {r[key][1]:.2f}"  # noqa: E731
        seed = f"{r['seed'][0]:.0f}" if "seed" in r else "—"
        lines.append(f"| {r['n']:,} | {r['insert_rate']:,.0f} ({r['insert_main_cpu_rate']:,.0f}) |"
                     f" {r['embed_rate']:,.0f} | {f('fts')} | {f('vector')} | {f('hybrid')} |"
                     f" {f('numpy')} | {r['vector'][0] / r['numpy'][0]:.2f}x | {r['recall']:.3f} |"
                     f" {f('sqlite_vec')} | {r['sqlite_vec_recall']:.3f} | {seed} | {r['matrix_load_s']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated entry counts")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix=f"bench-memory-{n}-"))
        try:
            print(f"building {n:,} entries ...", flush=True)
            results.append(bench(n, min(args.queries, n), folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"\n{os.cpu_count()} CPUs; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)")
    print(report(results))
    print("\nvector/hybrid/FTS times are end to end through Memory.search (query embedding, filters, row fetch);"
          " numpy and sqlite-vec times are the bare top-10 over pre-embedded queries. store_many: wall-clock rate over"
          f" calls of {BATCH:,} entries each (one transaction per call, fresh keys);"
          " in brackets the rate the calling thread's CPU time allows (the embedder runs in a second thread).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
