"""Plugins: one-line hooks that receive a ``register`` callback.

Built-in providers, embedders and agent types register through the same hooks
an outside package uses (entry point group ``agentstack_lab``). A plugin that
fails to import or register logs a warning naming it; the rest still load.
Nothing happens at import time: :func:`load_plugins` is called by the registries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import pluggy

__all__ = ["hookimpl", "hookspec", "load_plugins", "get_plugin_manager", "collect"]

log = logging.getLogger(__name__)

hookspec = pluggy.HookspecMarker("agentstack_lab")
hookimpl = pluggy.HookimplMarker("agentstack_lab")

ENTRY_POINT_GROUP = "agentstack_lab"


class HookSpecs:
    @hookspec
    def register_providers(self, register: Callable[..., None]) -> None:
        """Register provider factories: ``register(name, factory)``."""

    @hookspec
    def register_embedders(self, register: Callable[..., None]) -> None:
        """Register embedder factories: ``register(name, factory)``."""

    @hookspec
    def register_agent_types(self, register: Callable[..., None]) -> None:
        """Register custom agent types: ``register(definition)``."""


def _new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("agentstack_lab")
    pm.add_hookspecs(HookSpecs)
    return pm


def load_plugins(pm: pluggy.PluginManager | None = None) -> pluggy.PluginManager:
    """Load the built-ins and every entry-point plugin; a broken one is skipped with a warning."""
    pm = pm or _new_manager()
    from agentstack_lab import default_plugins

    if not pm.is_registered(default_plugins):
        pm.register(default_plugins, name="default")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == "default" or pm.get_plugin(ep.name) is not None:
            continue
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:  # one broken plugin must not stop the others
            dist = getattr(ep, "dist", None)
            log.warning("agentstack-lab plugin %r (%s) failed to load: %s", ep.name,
                        getattr(dist, "name", "unknown package"), exc)
    return pm


_manager: dict[str, pluggy.PluginManager] = {}


def get_plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, loaded on first use."""
    if "pm" not in _manager:
        _manager["pm"] = load_plugins()
    return _manager["pm"]


def collect(hook_name: str, pm: pluggy.PluginManager | None = None) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Call one hook on every plugin, returning the ``register(...)`` calls it made.

    A plugin whose hook raises is skipped with a warning naming it.
    """
    pm = pm or get_plugin_manager()
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for impl in getattr(pm.hook, hook_name).get_hookimpls():
        local: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        try:
            impl.function(register=lambda *a, _into=local, **k: _into.append((a, k)))
        except Exception as exc:
            log.warning("agentstack-lab plugin %r failed in %s: %s", impl.plugin_name, hook_name, exc)
            continue
        calls.extend(local)
    return calls
