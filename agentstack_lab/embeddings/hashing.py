"""The default offline embedder: hashed word and character n-grams, numpy only.

Deterministic across processes and machines (fixed 64-bit integer hashing, no
Python ``hash``), no model download, any dimension. Each text becomes a
signed bag of hashed features: whole words (weight 1) and character 3- and
4-grams of the word-normalised text (so typos and word forms still overlap),
then the row is L2-normalised. A batch is embedded with a handful of numpy
calls, which is what lets ``Memory.store_many`` index tens of thousands of
entries per second.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["HashEmbedder"]

_MIX = np.uint64(0x9E3779B97F4A7C15)
_NGRAMS = (3, 4)
_CHAR_WEIGHT = 0.35


class HashEmbedder:
    """Hashed word + char n-gram embedder (``model = "hash-ngram-v1"``)."""

    name = "hash"
    model = "hash-ngram-v1"
    in_process = True   # cheap and local: Memory.store_many may embed while it holds the write lock

    def __init__(self, dimensions: int = 384, *, batch_size: int = 256):
        if not isinstance(dimensions, int) or dimensions < 8:
            raise ValueError(f"dimensions must be an int >= 8, got {dimensions!r}")
        self.dimensions = dimensions
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"HashEmbedder(dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dimensions)`` float32 array with unit rows."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start:start + self.batch_size]
            out[start:start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        d, n = self.dimensions, len(texts)
        text = (" " + " \0 ".join(texts) + " ").lower()
        if text.count("\0") != n - 1:  # a NUL inside a text would split it: treat it as a space
            text = (" " + " \0 ".join(t.replace("\0", " ") for t in texts) + " ").lower()
        x = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        is_word = _is_word(x)
        x = np.where(is_word | (x == 0), x, 32)              # punctuation and spaces -> one space
        keep = np.ones(len(x), dtype=bool)
        keep[1:] = ~((x[1:] == 32) & (x[:-1] == 32))        # collapse runs of spaces
        y = x[keep].astype(np.uint64)
        sep = y == 0
        doc = np.cumsum(sep).astype(np.int64)
        docs: list[np.ndarray] = []
        hashes: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        # whole words: polynomial prefix hash, start/end found with numpy
        w = (y != 0) & (y != 32)
        if w.any():
            m = len(y)
            powers = np.cumprod(np.full(m, _P, dtype=np.uint64))
            inv_powers = np.cumprod(np.full(m, _P_INV, dtype=np.uint64))
            prefix = np.cumsum(np.where(w, y * powers, np.uint64(0)))
            starts = np.flatnonzero(w & ~np.concatenate(([False], w[:-1])))
            ends = np.flatnonzero(w & ~np.concatenate((w[1:], [False])))
            before = np.where(starts > 0, prefix[np.maximum(starts - 1, 0)], np.uint64(0))
            docs.append(doc[starts])
            hashes.append((prefix[ends] - before) * inv_powers[starts])
            weights.append(np.full(len(starts), 1.0))
        # character n-grams (3 then 4, the 4-gram hash extends the 3-gram one), never across documents
        h = y.copy()
        bad = sep.copy()
        for size in range(2, _NGRAMS[-1] + 1):
            m = len(y) - size + 1
            if m <= 0:
                break
            h = (h[:m] ^ (y[size - 1:] << np.uint64(size * 7))) * _MIX
            bad = bad[:m] | sep[size - 1:]
            if size in _NGRAMS:
                good = ~bad
                docs.append(doc[:m][good])
                hashes.append(h[good])
                weights.append(np.full(len(hashes[-1]), _CHAR_WEIGHT))
        acc = np.zeros(n * d, dtype=np.float64)
        if docs:
            hh = _mix(np.concatenate(hashes))
            bucket = ((hh >> np.uint64(32)) * np.uint64(d)) >> np.uint64(32)
            sign = np.where(hh & np.uint64(1 << 31), -1.0, 1.0) * np.concatenate(weights)
            acc = np.bincount(np.concatenate(docs) * d + bucket.astype(np.int64), weights=sign, minlength=n * d)
        vecs = acc.reshape(n, d)
        norms = np.linalg.norm(vecs, axis=1)
        empty = norms == 0
        if empty.any():  # an empty text still gets a valid unit vector (a fixed direction)
            vecs[empty, 0] = 1.0
            norms[empty] = 1.0
        return (vecs / norms[:, None]).astype(np.float32)


_P = np.uint64(1_000_003)
_P_INV = np.uint64(pow(1_000_003, -1, 2**64))
_ASCII_WORD = np.array([chr(i).isalnum() or chr(i) == "_" for i in range(128)], dtype=bool)
_PUNCT_RANGES = ((0x80, 0xBF), (0xD7, 0xD7), (0xF7, 0xF7), (0x2000, 0x2BFF), (0x3000, 0x303F),
                 (0xFE30, 0xFE4F), (0xFF00, 0xFF0F), (0x1F000, 0x1FAFF))


def _is_word(x: np.ndarray) -> np.ndarray:
    """Word characters: ASCII alphanumerics and ``_``, and non-ASCII outside punctuation/symbol blocks."""
    if len(x) == 0 or x.max() < 128:   # plain ASCII (the common case): one table lookup
        return _ASCII_WORD[x]
    out = x >= 128
    out[~out] = _ASCII_WORD[x[~out]]
    for lo, hi in _PUNCT_RANGES:
        out &= ~((x >= lo) & (x <= hi))
    return out


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(31))
    h = h * _MIX
    return h ^ (h >> np.uint64(29))
