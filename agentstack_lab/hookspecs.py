"""The plugin hook specifications and the ``hookimpl`` marker (as in llm's ``hookspecs.py``).

A module of its own so that the built-in plugin (``default_plugins.py``) and the loader
(``plugins.py``) both import it without importing each other: no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

__all__ = ["PROJECT", "HookSpecs", "hookimpl", "hookspec"]

PROJECT = "agentstack_lab"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class HookSpecs:
    """The registration hooks (each receives a ``register`` callback) and the lifecycle hooks."""

    @hookspec
    def register_providers(self, register: Callable[..., None]) -> None:
        """Register provider factories: ``register(name, factory)``."""

    @hookspec
    def register_embedders(self, register: Callable[..., None]) -> None:
        """Register embedder factories: ``register(name, factory)``."""

    @hookspec
    def register_agent_types(self, register: Callable[..., None]) -> None:
        """Register custom agent types: ``register(definition)`` (an ``AgentDefinition`` or a dict)."""

    @hookspec
    def register_workflow_triggers(self, register: Callable[..., None]) -> None:
        """Register workflow triggers (docs/tasks.md): ``register(WorkflowTrigger(...))`` (see ``hooks.py``)."""

    # --- lifecycle hooks (docs/tasks.md; fired by ``hooks.py``): each receives a ``hooks.HookContext``.
    # A raising implementation is logged with its traceback and skipped; the run goes on.
    @hookspec
    def session_start(self, context: Any) -> None:
        """A run's session started (before its root agent)."""

    @hookspec
    def session_end(self, context: Any) -> None:
        """A run's session ended (after every agent finished; ``context.status`` is the root's)."""

    @hookspec
    def pre_task(self, context: Any) -> None:
        """An agent (a task) is about to start."""

    @hookspec
    def post_task(self, context: Any) -> None:
        """An agent finished: completed, failed or stopped (``context.status``)."""

    @hookspec
    def workflow(self, context: Any) -> None:
        """A workflow trigger matched and its workflow was started (``context.metadata['trigger']``)."""
