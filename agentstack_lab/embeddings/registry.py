"""The embedder registry, filled through the ``register_embedders`` plugin hook.

A factory is called as ``factory(dimensions=..., config=...)`` and returns an
:class:`Embedder`. Built-ins register here exactly as an outside plugin would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentstack_lab.errors import AgentstackError

if TYPE_CHECKING:
    import numpy as np

    from agentstack_lab.config import Config

__all__ = ["Embedder", "EmbedderFactory", "UnknownEmbedderError", "get_embedder", "list_embedders",
           "register_builtin_embedders"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dimensions)`` float32 array of L2-normalised rows."""

    name: str        # the registry name, e.g. "hash"
    model: str       # the model id recorded in the database, e.g. "hash-ngram-v1"
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


EmbedderFactory = Callable[..., Embedder]


class UnknownEmbedderError(AgentstackError, LookupError):
    """No embedder is registered under that name."""


def _hash_factory(*, dimensions: int = 384, config: Config | None = None, **_: Any) -> Embedder:
    from agentstack_lab.embeddings.hashing import HashEmbedder

    return HashEmbedder(dimensions=dimensions)


def register_builtin_embedders(register: Callable[..., None]) -> None:
    """Register the built-in embedders (called through the plugin hook)."""
    register("hash", _hash_factory)
    # Remote and local-model embedders: their SDKs and models load on first use.
    from agentstack_lab.embeddings import local, ollama, openai  # light: SDKs and models load on first use

    register("openai", openai.factory)
    register("ollama", ollama.factory)
    register("local", local.factory)


def _factories() -> dict[str, EmbedderFactory]:
    from agentstack_lab.plugins import collect

    found: dict[str, EmbedderFactory] = {}
    for args, kwargs in collect("register_embedders"):
        name = args[0] if args else kwargs["name"]
        factory = args[1] if len(args) > 1 else kwargs["factory"]
        found.setdefault(name, factory)
    return found


def list_embedders() -> list[str]:
    """Names of every registered embedder."""
    return sorted(_factories())


def get_embedder(name: str = "hash", *, dimensions: int = 384, config: Config | None = None,
                 **overrides: Any) -> Embedder:
    """Build the embedder registered as ``name``; unknown names raise with the valid ones listed."""
    factories = _factories()
    if name not in factories:
        raise UnknownEmbedderError(f"unknown embedder {name!r}; registered: {', '.join(sorted(factories))}")
    return factories[name](dimensions=dimensions, config=config, **overrides)
