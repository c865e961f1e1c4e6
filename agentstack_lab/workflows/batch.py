"""Several notebook runs at once, each on a fresh kernel taken from a pool started ahead of time."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentstack_lab.workflows.execute import RunResult, run_notebook
from agentstack_lab.workflows.params import ParameterError

__all__ = ["RunSpec", "expand_grid", "plan_runs", "run_batch"]


@dataclass
class RunSpec:
    """One run of a batch: which notebook, with what parameters, written where."""

    notebook: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    output: Path | None = None
    report: Path | None = None


def expand_grid(grid: dict[str, Any]) -> list[dict[str, Any]]:
    """Cartesian product of a ``name: [values]`` mapping (a scalar counts as a one-value list)."""
    if not isinstance(grid, dict):
        raise ParameterError(f"a parameter grid must be a mapping of name: [values], got {type(grid).__name__}")
    names = list(grid)
    axes = [v if isinstance(v, list) else [v] for v in grid.values()]
    for name, axis in zip(names, axes, strict=True):
        if not axis:
            raise ParameterError(f"parameter grid entry {name!r} has no values")
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]


def _slug(params: dict[str, Any]) -> str:
    text = "-".join(f"{k}={v}" for k, v in params.items())
    return re.sub(r"[^A-Za-z0-9=._-]+", "_", text)[:80]


def plan_runs(notebooks: list[Path], base: dict[str, Any], grid: list[dict[str, Any]] | None,
              out_dir: Path) -> list[RunSpec]:
    """One :class:`RunSpec` per notebook × grid point, with distinct output and report paths."""
    specs: list[RunSpec] = []
    points = grid or [{}]
    for nb in notebooks:
        for i, point in enumerate(points):
            suffix = f"-{i + 1:03d}-{_slug(point)}" if len(points) > 1 else ""
            stem = f"{nb.stem}{suffix}"
            specs.append(RunSpec(notebook=nb, parameters={**base, **point},
                                 output=out_dir / f"{stem}.ipynb", report=out_dir / f"{stem}.report.json"))
    stems = [s.output for s in specs]
    if len(set(stems)) != len(stems):  # same notebook name from two folders
        for k, spec in enumerate(specs):
            assert spec.output is not None and spec.report is not None   # both set just above
            spec.output = out_dir / f"{k + 1:03d}-{spec.output.name}"
            spec.report = out_dir / f"{k + 1:03d}-{spec.report.name}"
    return specs


def notebook_kernel(path: Path) -> str | None:
    import json

    try:
        return json.loads(path.read_text("utf-8"))["metadata"]["kernelspec"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def run_batch(specs: list[RunSpec], *, parallel: int = 2, kernel_name: str | None = None,
                    fork: bool = True, cwd: str | None = None, cell_timeout: float | None = None,
                    timeout: float | None = None,
                    on_done: Callable[[RunSpec, RunResult], None] | None = None) -> list[RunResult]:
    """Run ``specs`` at most ``parallel`` at a time on pooled, never-reused kernels; results in order.

    The pool runs ``kernel_name`` (default: the first notebook's kernelspec); a notebook needing
    another kernel gets its own, started for it.
    """
    from agentstack_lab.workflows.pool import KernelPool

    if parallel < 1:
        raise ValueError(f"--parallel must be >= 1, got {parallel}")
    results: list[RunResult | None] = [None] * len(specs)
    gate = asyncio.Semaphore(parallel)
    # keep a couple of kernels starting ahead of the runs, so a finished run never waits for a start
    pooled = kernel_name or (notebook_kernel(specs[0].notebook) if specs else None) or "python3"
    async with KernelPool(min(parallel + 2, len(specs)) or 1, pooled, cwd=cwd, fork=fork,
                          total=len(specs)) as pool:

        async def one(i: int, spec: RunSpec) -> None:
            async with gate:
                res = await run_notebook(spec.notebook, parameters=spec.parameters, output=spec.output,
                                         report_path=spec.report, kernel_name=kernel_name, cwd=cwd,
                                         cell_timeout=cell_timeout, timeout=timeout, pool=pool)
            results[i] = res
            if on_done is not None:
                on_done(spec, res)

        await asyncio.gather(*(one(i, s) for i, s in enumerate(specs)))
    return [r for r in results if r is not None]
