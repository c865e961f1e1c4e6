"""The approval rules on the corpus in ``tests/approval_corpus/``: what the default rules decide, per class.

Not a speed benchmark first: it prints, for the read-only and the adversarial corpus, how many cells the
default rules allow, ask about and deny, broken down by the classes the classifier found (a cell counts
once under each of its classes), and the two percentages the issue sets (read-only allowed >= 80%,
adversarial allowed = 0%). Then the classifier's cost per cell against ``ast.parse`` alone (its peer: the
classifier parses once and walks the tree), as a ratio.

    .venv/bin/python benchmarks/bench_approval.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from agentstack_lab.approval import ApprovalPolicy, classify

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "approval_corpus"


def decide_all(policy: ApprovalPolicy, cells: list[str], cwd: str) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    per_class: Counter[tuple[str, str]] = Counter()
    totals: Counter[str] = Counter()
    for code in cells:
        verdict = policy.decide(code, cwd=cwd)
        totals[verdict.action] += 1
        for kind in verdict.classification.classes:
            per_class[(kind, verdict.action)] += 1
    return per_class, totals


def per_cell_us(fn, cells: list[str], repeat: int) -> float:
    """Median over ``repeat`` passes of the mean microseconds per cell."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for code in cells:
            fn(code)
        runs.append((time.perf_counter() - t0) / len(cells) * 1e6)
    return statistics.median(runs)


def _parse(code: str) -> None:
    try:
        ast.parse(code)
    except SyntaxError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20, help="timing passes over the whole corpus")
    args = ap.parse_args(argv)
    corpora = {name: json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
               for name in ("readonly", "adversarial")}
    policy = ApprovalPolicy()
    with tempfile.TemporaryDirectory(prefix="bench-approval-") as cwd:
        print("default rules (allow-read-only + the built-in deny list), per class of the cells")
        print(f"{'corpus':<12} {'class':<14} {'cells':>6} {'allowed':>8} {'asked':>6} {'denied':>7}")
        shares = {}
        for name, cells in corpora.items():
            per_class, totals = decide_all(policy, cells, cwd)
            for kind in sorted({k for k, _ in per_class}):
                a, q, d = (per_class[(kind, x)] for x in ("allow", "ask", "deny"))
                print(f"{name:<12} {kind:<14} {a + q + d:>6} {a:>8} {q:>6} {d:>7}")
            print(f"{name:<12} {'(all cells)':<14} {len(cells):>6} {totals['allow']:>8} {totals['ask']:>6} "
                  f"{totals['deny']:>7}")
            shares[name] = totals["allow"] / len(cells)
        print(f"\nread-only cells allowed:   {shares['readonly']:.1%} (target >= 80%)")
        print(f"adversarial cells allowed: {shares['adversarial']:.1%} (target 0%)")
        cells = [c for group in corpora.values() for c in group]
        classify_us = per_cell_us(lambda c: classify(c, cwd), cells, args.repeat)
        parse_us = per_cell_us(_parse, cells, args.repeat)
        decide_us = per_cell_us(lambda c: policy.decide(c, cwd=cwd), cells, args.repeat)
    print(f"\ncost per cell over {len(cells)} cells (median of {args.repeat} passes)")
    print(f"{'step':<26} {'us/cell':>9} {'x ast.parse':>12}")
    for label, us in (("ast.parse alone (peer)", parse_us), ("classify", classify_us),
                      ("classify + rules", decide_us)):
        print(f"{label:<26} {us:>9.1f} {us / parse_us:>12.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
