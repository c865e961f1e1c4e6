"""OpenAI embeddings (``text-embedding-3-small`` by default) through the official SDK."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agentstack_lab.embeddings.remote import as_unit_rows, check_texts
from agentstack_lab.providers.support import run_sync

__all__ = ["OpenAIEmbedder", "factory"]


class OpenAIEmbedder:
    """Embeds with the OpenAI (or a compatible) embeddings endpoint.

    ``text-embedding-3-*`` models are asked for exactly ``dimensions`` (they support shortening);
    other models must natively return that many, or ``embed`` raises naming both numbers.
    Key, base URL, timeout and retries come from ``providers.openai`` / ``OPENAI_API_KEY``.
    """

    name = "openai"

    def __init__(self, *, dimensions: int = 384, model: str | None = None, batch_size: int = 512,
                 **provider_settings: Any) -> None:
        from agentstack_lab.providers.openai import DEFAULT_EMBEDDING_MODEL, OpenAIProvider

        provider_settings.pop("model", None)  # providers.openai.model is the chat model
        self.model = model or DEFAULT_EMBEDDING_MODEL
        self.dimensions = int(dimensions)
        self.batch_size = batch_size
        self._provider = OpenAIProvider(embedding_model=self.model, **provider_settings)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dimensions)`` float32 array with unit rows."""
        items = check_texts(texts)
        shorten = self.dimensions if self.model.startswith("text-embedding-3") else None
        vectors: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            vectors += run_sync(self._provider.embed(batch, dimensions=shorten))
        return as_unit_rows(vectors, len(items), self.dimensions, f"openai (model {self.model!r})")


def factory(*, dimensions: int = 384, config: Any = None, **overrides: Any) -> OpenAIEmbedder:
    """Registry factory: ``providers.openai`` settings (key, base URL, timeout, retries) plus overrides."""
    from agentstack_lab.providers.registry import provider_settings

    settings = provider_settings(config, "openai")
    settings.pop("model", None)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return OpenAIEmbedder(dimensions=dimensions, **settings)
