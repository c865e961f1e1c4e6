"""The default offline embedder: hashed word and character n-grams, numpy only.

Deterministic across processes and machines (fixed 64-bit integer hashing, no
Python ``hash``), no model download, any dimension. Each text becomes a
signed bag of hashed features: whole words (weight 1) and character 3- and
4-grams of the word-normalised text (so typos and word forms still overlap),
then the row is L2-normalised. A batch is embedded with a handful of numpy
calls, which is what lets ``Memory.store_many`` index tens of thousands of
entries per second.

Bounded memory: the vectorised pass needs ~205 bytes of RAM per character (int64/uint64
arrays of the code points, hashes, document ids and weights), so embedding one 10 MB entry in
one pass peaked at 2,046 MB (tracemalloc, 8.2 s). Batches are therefore cut at
:data:`WINDOW` characters, and a longer text is embedded window by window (cut at whitespace)
with its hashed counts summed before the one normalisation: peak ~54 MB for any size (10 MB
entry: 53.9 MB, 6.4 s; 50 MB: 53.9 MB). Only the n-grams spanning a cut are left out (3 per cut among
~500k per window): the vector agrees with the one-pass vector to cosine > 0.99999.

Calibrated floor: unrelated texts share hashed n-grams ("the", "ion", bucket collisions), so
their cosine is not 0. Measured over the stdlib's docstrings split into sentences (1,500
(query, note) pairs per seed, seeds 1-3; ``note`` a 40-400 character sentence, ``query``
sharing none of its 4+ letter words):

=============================  =================  ============  =============
pairs                          unrelated p99      unrelated max related p5
=============================  =================  ============  =============
query of 1-3 words vs note     0.146-0.161        0.22-0.25     0.18-0.19
query of 4-8 words vs note     0.277-0.307        0.40-0.44     0.44
note vs note                   0.290-0.306        0.40-0.51     n/a
=============================  =================  ============  =============

So :meth:`HashEmbedder.similarity_floor` is 0.2 for queries of up to 3 words and 0.35 for
longer ones (above the unrelated p99 of each, below the related p5 for phrases; a 1-3 word
query loses ~6% of its related notes in vector-only search, which hybrid search recovers by
keywords).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np

from agentstack_lab.embeddings.stopwords import content_words

__all__ = ["HashEmbedder", "WINDOW"]

WINDOW = 1 << 18    # characters embedded in one vectorised pass (~205 B/char: ~50 MB peak)
_QUERY_WORD = re.compile(r"\w+")
_MIX = np.uint64(0x9E3779B97F4A7C15)
_NGRAMS = (3, 4)
_CHAR_WEIGHT = 0.35


class HashEmbedder:
    """Hashed word + char n-gram embedder (``model = "hash-ngram-v1"``)."""

    name = "hash"
    model = "hash-ngram-v1"
    in_process = True   # cheap and local: Memory.store_many may embed while it holds the write lock
    min_similarity = 0.2          # floor for a 1-3 word query (module docstring: unrelated p99 0.15-0.16)
    min_similarity_phrase = 0.35  # floor for a longer query (unrelated p99 0.28-0.31)

    def __init__(self, dimensions: int = 384, *, batch_size: int = 256):
        if not isinstance(dimensions, int) or dimensions < 8:
            raise ValueError(f"dimensions must be an int >= 8, got {dimensions!r}")
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._pows = (np.empty(0, dtype=np.uint64),) * 2   # see _powers (one tuple: threads swap it whole)

    def __repr__(self) -> str:
        return f"HashEmbedder(dimensions={self.dimensions})"

    def similarity_floor(self, query: str) -> float:
        """Least cosine similarity that marks a stored text as related to ``query`` (see the module docstring).

        Counts the words :meth:`embed_query` embeds (the content words, when there are some).
        """
        words = content_words(query) or _QUERY_WORD.findall(query)
        return self.min_similarity if len(words) <= 3 else self.min_similarity_phrase

    def embed_query(self, query: str) -> np.ndarray:
        """A search query's vector: its content words only, when it has some.

        Stop words are hashed like any word, so "is the kubernetes cluster healthy" shared "the" and "is"
        with every English note (cosine 0.25-0.29 with unrelated notes, 0.44 with one about a car); the
        calibration above measured queries of content words.
        """
        words = content_words(query)
        return self.embed([" ".join(words) if words else query])[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dimensions)`` float32 array with unit rows."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        start = 0
        while start < len(texts):   # batches of at most batch_size texts and WINDOW characters
            end = min(start + self.batch_size, len(texts))
            size = sum(map(len, texts[start:end]))
            if size > WINDOW:   # too many characters for one pass: take texts while they fit (at least one)
                end, size = start, 0
                while end < len(texts) and end - start < self.batch_size and (end == start or size + len(texts[end]) <= WINDOW):
                    size += len(texts[end])
                    end += 1
            if end == start + 1 and size > WINDOW:   # one long text: sum its windows' counts
                acc = np.zeros(self.dimensions, dtype=np.float64)
                for window in _windows(texts[start]):
                    acc += self._counts([window])[0]
                out[start] = _unit_rows(acc[None, :])[0]
            else:
                out[start:end] = _unit_rows(self._counts(texts[start:end]))
            start = end
        return out

    def _counts(self, texts: Sequence[str]) -> np.ndarray:
        """Signed hashed feature counts, ``(n, dimensions)`` float64, not normalised.

        The arithmetic runs in place where it can (and the prefix hash's powers come from
        :meth:`_powers`): the same values as one new array per step, in ~0.7x the time (13 against
        19 us a 175-character note, one core; ``tests/test_hash_embedder_golden.py`` holds the values).
        """
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
        doc = np.cumsum(sep, dtype=np.int64)
        docs: list[np.ndarray] = []
        hashes: list[np.ndarray] = []
        # whole words: polynomial prefix hash, start/end found with numpy
        w = (y != 0) & (y != 32)
        if w.any():
            m = len(y)
            powers, inv_powers = self._powers(m)
            prefix = np.multiply(y, powers)
            prefix[~w] = 0
            np.cumsum(prefix, out=prefix)
            starts = np.flatnonzero(w & ~np.concatenate(([False], w[:-1])))
            ends = np.flatnonzero(w & ~np.concatenate((w[1:], [False])))
            before = np.where(starts > 0, prefix[np.maximum(starts - 1, 0)], np.uint64(0))
            word = prefix[ends]
            word -= before
            word *= inv_powers[starts]
            docs.append(doc[starts])
            hashes.append(word)
        words = len(hashes[0]) if hashes else 0   # whole-word features come first (weight 1.0)
        # character n-grams (3 then 4, the 4-gram hash extends the 3-gram one), never across documents
        h = y.copy()
        bad = sep.copy()
        for size in range(2, _NGRAMS[-1] + 1):
            m = len(y) - size + 1
            if m <= 0:
                break
            h = h[:m] ^ (y[size - 1:] << np.uint64(size * 7))
            h *= _MIX
            bad = bad[:m] | sep[size - 1:]
            if size in _NGRAMS:
                good = ~bad
                docs.append(doc[:m][good])
                hashes.append(h[good])
        if not docs:
            return np.zeros((n, d), dtype=np.float64)
        hh = np.concatenate(hashes)
        tmp = hh >> np.uint64(31)                              # _mix, in place
        hh ^= tmp
        hh *= _MIX
        np.right_shift(hh, np.uint64(29), out=tmp)
        hh ^= tmp
        np.right_shift(hh, np.uint64(32), out=tmp)             # bucket = (high 32 bits * d) >> 32
        tmp *= np.uint64(d)
        tmp >>= np.uint64(32)
        index = np.concatenate(docs)
        index *= d
        index += tmp.view(np.int64)                           # buckets are < d: the same value as int64
        weight = np.full(len(hh), _CHAR_WEIGHT)
        weight[:words] = 1.0
        np.bitwise_and(hh, np.uint64(1 << 31), out=tmp)       # hash bit 31 set: -1.0 * weight, which for a
        tmp <<= np.uint64(32)                                 # positive float64 is its sign bit (bit 63) set
        weight.view(np.uint64)[:] |= tmp
        return np.bincount(index, weights=weight, minlength=n * d).reshape(n, d)

    def _powers(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """``P**1 .. P**m`` and ``P**-1 .. P**-m`` (mod 2**64), cumulative products kept for the next batch."""
        pows = self._pows
        if len(pows[0]) < m:
            size = max(m, 2 * len(pows[0]), 1024)
            pows = self._pows = (np.cumprod(np.full(size, _P, dtype=np.uint64)),
                                 np.cumprod(np.full(size, _P_INV, dtype=np.uint64)))
        return pows[0][:m], pows[1][:m]


def _unit_rows(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1)
    empty = norms == 0
    if empty.any():  # an empty text still gets a valid unit vector (a fixed direction)
        vecs[empty, 0] = 1.0
        norms[empty] = 1.0
    return (vecs / norms[:, None]).astype(np.float32)


def _windows(text: str) -> Iterator[str]:
    """``text`` in pieces of at most :data:`WINDOW` characters, cut at whitespace where there is some."""
    start, n = 0, len(text)
    while start < n:
        end = min(start + WINDOW, n)
        if end < n:
            cut = max(text.rfind(" ", start + WINDOW // 2, end), text.rfind("\n", start + WINDOW // 2, end))
            if cut > start:
                end = cut
        yield text[start:end]
        start = end + 1 if end < n and text[end] in " \n" else end


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
