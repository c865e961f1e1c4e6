"""The plugin hook specifications and the ``hookimpl`` marker (as in llm's ``hookspecs.py``).

A module of its own so that the built-in plugin (``default_plugins.py``) and the loader
(``plugins.py``) both import it without importing each other: no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

__all__ = ["PROJECT", "HookSpecs", "hookimpl", "hookspec"]

PROJECT = "agentstack_lab"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class HookSpecs:
    """The three hooks; each receives a ``register`` callback and calls it once per item."""

    @hookspec
    def register_providers(self, register: Callable[..., None]) -> None:
        """Register provider factories: ``register(name, factory)``."""

    @hookspec
    def register_embedders(self, register: Callable[..., None]) -> None:
        """Register embedder factories: ``register(name, factory)``."""

    @hookspec
    def register_agent_types(self, register: Callable[..., None]) -> None:
        """Register custom agent types: ``register(definition)`` (an ``AgentDefinition`` or a dict)."""
