"""Measure the cosine similarity of unrelated and related (query, note) pairs for an embedder.

The vector score floors in :mod:`agentstack_lab.memory.scores` come from this script:

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/calibrate_scores.py --embedder local --seeds 1 2 3

Corpus: the standard library's docstrings split into sentences of 40-400 characters. A *related* pair
is a note and 1-3 (or 4-8) of its own 4+ letter words; an *unrelated* pair is a note and words of
another sentence sharing none of its 4+ letter words. Prints one Markdown table row per (pairs, seed).
"""

from __future__ import annotations

import argparse
import pkgutil
import random
import re
import sys
from collections.abc import Iterator
from importlib import import_module

import numpy as np

WORD = re.compile(r"[A-Za-z]{4,}")


def sentences() -> Iterator[str]:
    seen: set[str] = set()
    for info in sorted(pkgutil.iter_modules(), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in {"antigravity", "this", "idlelib", "tkinter", "turtle"}:
            continue
        if not getattr(info.module_finder, "path", "").startswith(sys.base_prefix):
            continue
        try:
            mod = import_module(info.name)
        except Exception:  # noqa: BLE001, S112 - any module that does not import is skipped
            continue
        for obj in [mod, *vars(mod).values()]:
            doc = getattr(obj, "__doc__", None)
            if not isinstance(doc, str):
                continue
            for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                if 40 <= len(s) <= 400 and s not in seen:
                    seen.add(s)
                    yield s


def pairs(notes: list[str], rng: random.Random, lo: int, hi: int, n: int) -> tuple[list, list]:
    related, unrelated = [], []
    words = [sorted(set(w.lower() for w in WORD.findall(s))) for s in notes]
    while len(related) < n or len(unrelated) < n:
        i, j = rng.randrange(len(notes)), rng.randrange(len(notes))
        k = rng.randint(lo, hi)
        if len(words[i]) >= k and len(related) < n:
            related.append((" ".join(rng.sample(words[i], k)), notes[i]))
        if len(words[j]) >= k and not set(words[j]) & set(words[i]) and len(unrelated) < n:
            unrelated.append((" ".join(rng.sample(words[j], k)), notes[i]))
    return related, unrelated


def cosines(emb, pairs_: list[tuple[str, str]]) -> np.ndarray:
    q = emb.embed([p[0] for p in pairs_])
    d = emb.embed([p[1] for p in pairs_])
    return np.einsum("ij,ij->i", q, d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--pairs", type=int, default=1500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--words", nargs="+", default=["1-3", "4-8"], help="query lengths, e.g. 1-3 4-8")
    args = ap.parse_args()
    from agentstack_lab.embeddings import get_embedder

    emb = get_embedder(args.embedder, dimensions=384)
    notes = list(sentences())
    print(f"embedder {args.embedder} ({emb.model}), {len(notes)} sentences\n")
    print("| query words | seed | unrelated p99 | unrelated max | related p5 | related p50 |")
    print("|---|---|---|---|---|---|")
    floors: list[float] = []
    for lo, hi in (tuple(int(x) for x in w.split("-")) for w in args.words):
        for seed in args.seeds:
            rel, unrel = pairs(notes, random.Random(seed), lo, hi, args.pairs)
            r, u = cosines(emb, rel), cosines(emb, unrel)
            print(f"| {lo}-{hi} | {seed} | {np.percentile(u, 99):.3f} | {u.max():.3f} | {np.percentile(r, 5):.3f}"
                  f" | {np.percentile(r, 50):.3f} |", flush=True)
            floors.append(float(np.percentile(u, 99)))
    print(f"\nsuggested floor (memory.hybrid.min_vector_score): {np.ceil(max(floors) * 20) / 20:.2f}"
          " (the highest unrelated p99, rounded up to 0.05)")


if __name__ == "__main__":
    main()
