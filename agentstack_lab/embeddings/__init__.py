"""Embedders: text to L2-normalised float32 vectors. See :mod:`agentstack_lab.embeddings.registry`."""

from agentstack_lab.embeddings.registry import (
    Embedder,
    EmbedderRegistry,
    UnknownEmbedderError,
    get_embedder,
    list_embedders,
)

__all__ = ["Embedder", "EmbedderRegistry", "UnknownEmbedderError", "get_embedder", "list_embedders"]
