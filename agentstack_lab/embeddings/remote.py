"""Shared shape checks for embedders backed by a provider's HTTP API."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["as_unit_rows", "check_texts"]


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, refusing a bare string (a common slip) and non-strings."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not a single string")
    out = list(texts)
    bad = next((t for t in out if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"embed() takes strings, got {type(bad).__name__}")
    return out


def as_unit_rows(vectors: list[list[float]], n: int, dimensions: int, where: str) -> np.ndarray:
    """An ``(n, dimensions)`` float32 array with L2-normalised rows; a size mismatch is a clear error."""
    arr = np.asarray(vectors, dtype=np.float32)
    if n == 0:
        return np.empty((0, dimensions), dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ValueError(f"{where}: expected {n} vectors, got an array of shape {arr.shape}")
    if arr.shape[1] != dimensions:
        raise ValueError(f"{where} returns {arr.shape[1]}-dimensional vectors but {dimensions} are configured; "
                         f"set memory.vector.dimensions = {arr.shape[1]} (on a fresh database) or pick another model")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms == 0, 1.0, norms)
