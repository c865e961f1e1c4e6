"""The hash embedder's vectors stay what they were: entries stored by an older version are searched with
query vectors made by this one, so a change of the arithmetic (e.g. for speed) must not move them.

``tests/golden/hash_embedder_v1.npz`` was written by the embedder as it was before its in-place rewrite
(``tests/golden/README.md`` says how); the texts cover NULs, empty and whitespace-only texts, non-ASCII
case folding, a text longer than one window and batches cut by :data:`WINDOW`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agentstack_lab.embeddings.hashing import WINDOW, HashEmbedder

GOLDEN = Path(__file__).parent / "golden" / "hash_embedder_v1.npz"
WORDS = ("alpha", "Beta", "gamma-ray", "naïve", "café", "İstanbul", "straße", "日本語", "😀", "x_y", "3.14",
         "don't", "e-mail", "Ⅻ", "the", "of", "and", "quarterly", "budget", "\t", "\n", "  ", "...")


def golden_texts() -> list[str]:
    return ["", " ", "\0", "a\0b", "a", "x" * (WINDOW + 1000), "word " * (WINDOW // 4)] + [
        " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(i % 40)) for i in range(600)]


def test_vectors_match_the_ones_stored_by_earlier_versions():
    golden = np.load(GOLDEN)
    texts = golden_texts()
    for dims in (8, 384):
        got = HashEmbedder(dims).embed(texts)
        want = golden[f"d{dims}"]
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_batch_size_does_not_change_a_vector():
    texts = golden_texts()[:200]
    np.testing.assert_array_equal(HashEmbedder(batch_size=1).embed(texts), HashEmbedder(batch_size=256).embed(texts))
