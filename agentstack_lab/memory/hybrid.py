"""Hybrid ranking: weighted reciprocal rank fusion (RRF) of several ranked lists."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["rrf_fuse"]

_Id = TypeVar("_Id", bound=Hashable)   # the ids come back as they went in (row ids: ints)


def rrf_fuse(ranked: Mapping[str, Sequence[_Id]], weights: Mapping[str, float], *,
             k: int = 60) -> list[tuple[_Id, float]]:
    """Fuse ranked id lists: ``score(id) = sum_i w_i / (k + rank_i)``, de-duplicated by id.

    Scores are divided by the best possible score (rank 1 in every list), so they fall in 0..1.
    Ties keep the order of first appearance.
    """
    scores: dict[_Id, float] = {}
    for name, ids in ranked.items():
        w = float(weights.get(name, 1.0))
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    best = sum(float(weights.get(name, 1.0)) for name in ranked) / (k + 1)
    if best <= 0:
        return [(item, 0.0) for item in scores]
    return sorted(((item, s / best) for item, s in scores.items()), key=lambda t: -t[1])
