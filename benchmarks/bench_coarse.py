"""Recall@10 of the shared vector index against the number of PQ candidates it rescores exactly.

The shared index (``agentstack_lab/memory/index.py``) ranks every row by PQ distance and rescores the best
``coarse(n, k)`` exactly. This runs the index's own classes (``SharedIndex`` built through its ``sync``,
searched through its ``search``) over vectors saved by ``bench_memory.py --save-vectors DIR`` (so a slow
embedder such as MiniLM is not run again), with ``coarse`` replaced by each candidate count in turn, and
prints recall@10 against numpy exact over the same vectors, with the search's p50 on one thread.

    .venv/bin/python benchmarks/bench_memory.py --embedder local --sizes 100000 --save-vectors /tmp/vecs
    .venv/bin/python benchmarks/bench_coarse.py /tmp/vecs/local-zipf-100000 --counts 1000,2000,4000,8000
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):   # one BLAS thread, before numpy
    os.environ[_var] = "1"

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from agentstack_lab.memory import index as index_module  # noqa: E402
from agentstack_lab.memory.index import SharedIndex, coarse  # noqa: E402


def exact_top(mat: np.ndarray, qvecs: np.ndarray, k: int = 10) -> list[list[int]]:
    out = []
    for q in qvecs:
        s = mat @ q
        top = np.argpartition(-s, k - 1)[:k]
        out.append(top[np.argsort(-s[top])].tolist())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix", help="saved vectors: PREFIX-rows.npy and PREFIX-queries.npy")
    parser.add_argument("--counts", default="1000,2000,4000,6000,8000,12000,16000,24000",
                        help="comma-separated candidate counts to rescore")
    args = parser.parse_args(argv)
    mat = np.load(f"{args.prefix}-rows.npy")
    sets = {"in-corpus": np.load(f"{args.prefix}-queries.npy")}
    if Path(f"{args.prefix}-queries-ooc.npy").exists():   # out-of-corpus queries (bench_memory.ooc_queries)
        sets["out-of-corpus"] = np.load(f"{args.prefix}-queries-ooc.npy")
    n, dims = mat.shape
    rids = np.arange(n, dtype=np.int64)   # row i is rid i: the truth below is in rows
    truths = {name: exact_top(mat, q) for name, q in sets.items()}
    qvecs = sets["in-corpus"]
    load = os.getloadavg()
    print(f"{Path(args.prefix).name}: {n:,} rows x {dims} dims, {len(qvecs)} queries; {os.cpu_count()} CPUs,"
          f" load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-coarse-") as tmp:
        idx = SharedIndex(Path(tmp), dims, db_id="bench")
        meta = [("default", "", "")] * n
        t = time.perf_counter()
        idx.sync(1, lambda after: ([], False), lambda r: (rids[r], mat[r], [meta[0]] * len(r)),
                 lambda: (rids, mat, meta))
        assert idx.refresh()
        print(f"index built in {time.perf_counter() - t:.1f} s (PQ: {idx._pq is not None});"
              f" the current coarse({n:,}, 10) = {coarse(n, 10):,} candidates", flush=True)
        print("\n| entries | queries | coarse(n, 10) (unfiltered: that + 10 PQ candidates rescored) | recall@10 |"
              " min recall of a query | p50 / p95 ms |")
        print("|---:|---|---:|---:|---:|---:|")
        counts = sorted({*(int(c) for c in args.counts.split(",")), coarse(n, 10)})
        try:
            for count in counts:
                index_module.coarse = lambda _n, _k, c=count: min(_n, c)   # what search() calls
                for name, qs in sets.items():
                    times, per_query = [], []
                    for q, want in zip(qs, truths[name], strict=True):
                        t = time.perf_counter()
                        got = [rid for rid, _ in idx.search(q, 10)]
                        times.append(time.perf_counter() - t)
                        per_query.append(len(set(got) & set(want)) / len(want))
                    ms = np.array(times) * 1000
                    mark = " (current)" if count == coarse(n, 10) else ""
                    print(f"| {n:,} | {name} | {count:,}{mark} | {np.mean(per_query):.3f} | {min(per_query):.1f} |"
                          f" {np.percentile(ms, 50):.2f} / {np.percentile(ms, 95):.2f} |", flush=True)
        finally:
            index_module.coarse = coarse
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
