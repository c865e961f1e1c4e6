"""Ollama embeddings over HTTP (``/api/embed``; ``all-minilm`` = 384 dimensions by default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agentstack_lab.embeddings.remote import as_unit_rows, check_texts
from agentstack_lab.providers.support import run_sync

__all__ = ["OllamaEmbedder", "factory"]


class OllamaEmbedder:
    """Embeds with a local Ollama server; the model's size must match ``dimensions``."""

    name = "ollama"

    def __init__(self, *, dimensions: int = 384, model: str | None = None, batch_size: int = 256,
                 **provider_settings: Any) -> None:
        from agentstack_lab.providers.ollama import DEFAULT_EMBEDDING_MODEL, OllamaProvider

        provider_settings.pop("model", None)  # providers.ollama.model is the chat model
        self.model = model or DEFAULT_EMBEDDING_MODEL
        self.dimensions = int(dimensions)
        self.batch_size = batch_size
        self._provider = OllamaProvider(embedding_model=self.model, **provider_settings)

    def __repr__(self) -> str:
        return f"OllamaEmbedder(model={self.model!r}, dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dimensions)`` float32 array with unit rows."""
        items = check_texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            vectors += run_sync(self._provider.embed(items[start:start + self.batch_size]))
        return as_unit_rows(vectors, len(items), self.dimensions, f"ollama (model {self.model!r})")


def factory(*, dimensions: int = 384, config: Any = None, **overrides: Any) -> OllamaEmbedder:
    """Registry factory: ``providers.ollama`` settings (key, base URL, timeout, retries) plus overrides."""
    from agentstack_lab.providers.registry import provider_settings

    settings = provider_settings(config, "ollama")
    settings.pop("model", None)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return OllamaEmbedder(dimensions=dimensions, **settings)
