"""20 runs of a small parameterised notebook: papermill (its own engine and ours) vs ours, one at a time and pooled.

Run: .venv/bin/python benchmarks/bench_workflows.py [--runs 20] [--parallel 2]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import tempfile
import time
import warnings
from pathlib import Path

import nbformat


def make_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("n = 10\nlabel = 'x'")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("total = sum(i * i for i in range(n))"),
                nbformat.v4.new_code_cell("print(label, total)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def bench_papermill(nb: Path, out: Path, runs: int, engine: str | None = None) -> float:
    import papermill

    for i in range(runs):
        papermill.execute_notebook(str(nb), str(out / f"pm-{engine}-{i}.ipynb"),
                                   parameters={"n": i, "label": f"r{i}"}, progress_bar=False,
                                   kernel_name="python3", log_output=False, engine_name=engine)
    return 0.0


async def bench_ours_serial(nb: Path, out: Path, runs: int) -> None:
    from agentstack_lab.workflows.execute import run_notebook

    for i in range(runs):
        res = await run_notebook(nb, parameters={"n": i, "label": f"r{i}"}, output=out / f"ours-{i}.ipynb")
        assert res.exit_code == 0, res.message


async def bench_ours_pooled(nb: Path, out: Path, runs: int, parallel: int, fork: bool) -> None:
    from agentstack_lab.workflows.batch import RunSpec, run_batch

    tag = "fork" if fork else "plain"
    specs = [RunSpec(nb, {"n": i, "label": f"r{i}"}, out / f"{tag}-{i}.ipynb", None) for i in range(runs)]
    results = await run_batch(specs, parallel=parallel, fork=fork)
    bad = [r.message for r in results if r.exit_code != 0]
    assert not bad, bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        nb = make_notebook(tmpdir / "small.ipynb")
        rows = []
        for name, fn in [
            ("papermill, one at a time", lambda: bench_papermill(nb, tmpdir, args.runs)),
            ("papermill --engine agentstack, one at a time",
             lambda: bench_papermill(nb, tmpdir, args.runs, engine="agentstack")),
            ("ours, one at a time", lambda: asyncio.run(bench_ours_serial(nb, tmpdir, args.runs))),
            (f"ours, pool of {args.parallel} ordinary kernels",
             lambda: asyncio.run(bench_ours_pooled(nb, tmpdir, args.runs, args.parallel, False))),
            (f"ours, pool of {args.parallel} forked kernels (zygote)",
             lambda: asyncio.run(bench_ours_pooled(nb, tmpdir, args.runs, args.parallel, True))),
        ]:
            c0, t0 = cpu(), time.perf_counter()
            fn()
            rows.append((name, time.perf_counter() - t0, cpu() - c0))
    base = rows[0][1]
    print(f"\n{args.runs} runs of a 3-cell parameterised notebook, {os.cpu_count()} CPUs\n")
    print(f"| {'method':<44} | total s | per run s | CPU s | speed-up vs papermill |")
    print(f"|{'-' * 46}|---------|-----------|-------|-----------------------|")
    for name, wall, used in rows:
        print(f"| {name:<44} | {wall:7.2f} | {wall / args.runs:9.3f} | {used:5.1f} | {base / wall:20.2f}x |")


if __name__ == "__main__":
    main()
