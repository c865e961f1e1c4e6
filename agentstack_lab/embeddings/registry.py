"""The embedder registry, filled through the ``register_embedders`` plugin hook.

A factory is called as ``factory(dimensions=..., config=...)`` and returns an
:class:`Embedder`. Built-ins register exactly as an outside plugin would. A workspace builds
its :class:`EmbedderRegistry` (``ws.embedders``) from the hook; this module never imports the
plugin machinery, so there is no import cycle between the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentstack_lab.errors import AgentstackError
from agentstack_lab.factories import FactoryRegistry

if TYPE_CHECKING:
    import numpy as np

    from agentstack_lab.config import Config

__all__ = ["Embedder", "EmbedderFactory", "EmbedderRegistry", "EmbedderRegistryError", "UnknownEmbedderError",
           "get_embedder", "list_embedders", "register_builtin_embedders"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dimensions)`` float32 array of L2-normalised rows."""

    name: str        # the registry name, e.g. "hash"
    model: str       # the model id recorded in the database, e.g. "hash-ngram-v1"
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


EmbedderFactory = Callable[..., Embedder]


class EmbedderRegistryError(AgentstackError, ValueError):
    """An embedder cannot be registered (the message says why)."""


class UnknownEmbedderError(AgentstackError, LookupError):
    """No embedder is registered under that name."""


def _hash_factory(*, dimensions: int = 384, config: Config | None = None, model: str | None = None,
                  **_: Any) -> Embedder:
    from agentstack_lab.embeddings.hashing import HashEmbedder

    if model not in (None, HashEmbedder.model):
        from agentstack_lab.config import ConfigError

        raise ConfigError(f"memory.embedder_model: the hash embedder has one model, {HashEmbedder.model!r};"
                          f" got {model!r} (pick embedder openai, ollama or local for other models)")
    return HashEmbedder(dimensions=dimensions)


def register_builtin_embedders(register: Callable[..., None]) -> None:
    """Register the built-in embedders (called through the plugin hook)."""
    register("hash", _hash_factory)
    # Remote and local-model embedders: these modules are light; SDKs and models load on first use.
    from agentstack_lab.embeddings.local import factory as local_factory
    from agentstack_lab.embeddings.ollama import factory as ollama_factory
    from agentstack_lab.embeddings.openai import factory as openai_factory

    register("openai", openai_factory)
    register("ollama", ollama_factory)
    register("local", local_factory)


class EmbedderRegistry(FactoryRegistry[EmbedderFactory]):
    """Embedder factories by name; a workspace fills one from the ``register_embedders`` hook.

    The first registration of a name wins (built-ins load first); a later one is refused.
    """

    kind = "embedder"
    error = EmbedderRegistryError

    @classmethod
    def builtin(cls) -> EmbedderRegistry:
        """A registry holding only the built-in embedders (no plugins)."""
        registry = cls()
        register_builtin_embedders(registry.register)
        return registry

    def build(self, name: str = "hash", *, dimensions: int = 384, config: Config | None = None,
              **overrides: Any) -> Embedder:
        """Build the embedder registered as ``name``; unknown names raise with the valid ones listed."""
        factory = self.factory(name)
        if factory is None:
            raise UnknownEmbedderError(f"unknown embedder {name!r}; registered: {', '.join(self.names())}")
        return factory(dimensions=dimensions, config=config, **overrides)


def list_embedders() -> list[str]:
    """Names of the built-in embedders (a workspace's ``ws.embedders.names()`` adds its plugins')."""
    return EmbedderRegistry.builtin().names()


def get_embedder(name: str = "hash", *, dimensions: int = 384, config: Config | None = None,
                 **overrides: Any) -> Embedder:
    """Build a built-in embedder without a workspace; plugin embedders are a workspace's (``ws.embedders``)."""
    return EmbedderRegistry.builtin().build(name, dimensions=dimensions, config=config, **overrides)
