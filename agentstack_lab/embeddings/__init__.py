"""Embedders: text to L2-normalised float32 vectors. See :mod:`agentstack_lab.embeddings.registry`."""

from agentstack_lab.embeddings.registry import (
    Embedder,
    EmbedderRegistry,
    UnknownEmbedderError,
    get_embedder,
    list_embedders,
)
from agentstack_lab.embeddings.remote import EmbedderDimensionError

__all__ = ["Embedder", "EmbedderDimensionError", "EmbedderRegistry", "UnknownEmbedderError", "get_embedder", "list_embedders"]
