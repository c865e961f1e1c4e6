"""Shared shape checks for embedders backed by a provider's HTTP API."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agentstack_lab.errors import UsageError
from agentstack_lab.providers.base import ProviderError

__all__ = ["as_unit_rows", "check_texts", "EmbedderDimensionError", "dimension_error"]


class EmbedderDimensionError(UsageError):
    """The embedder's vectors have another dimension than ``memory.vector.dimensions``."""


def dimension_error(embedder: str, got: int, configured: int) -> EmbedderDimensionError:
    """One line naming the embedder, both dimensions and the fix."""
    return EmbedderDimensionError(
        f"embedder {embedder} returned vectors of dimension {got}, config says {configured}; "
        f"set memory.vector.dimensions = {got} (on a fresh database) or pick another model")


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
    """An ``(n, dimensions)`` float32 array with L2-normalised rows; a size mismatch is a one-line error.

    ``where`` names the embedder, e.g. ``"ollama (model 'all-minilm')"``.
    """
    if n == 0:
        return np.empty((0, dimensions), dtype=np.float32)
    arr: np.ndarray   # any shape until checked below
    try:
        arr = np.asarray(vectors, dtype=np.float32)
    except ValueError:  # ragged rows
        arr = np.empty((0,), dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ProviderError(f"embedder {where}: expected {n} vectors, got an array of shape {arr.shape}")
    if arr.shape[1] != dimensions:
        raise dimension_error(where, arr.shape[1], dimensions)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms == 0, 1.0, norms)
