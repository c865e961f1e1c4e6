"""Plugins: one-line hooks that receive a ``register`` callback (specs in ``hookspecs.py``).

Built-in providers, embedders and agent types register through the same hooks an outside
package uses (entry point group ``agentstack_lab``). A plugin that fails to import or whose hook
raises logs a warning naming it; the rest still load. Nothing happens at import time and nothing
is cached here: each :class:`~agentstack_lab.workspace.Workspace` calls :func:`load_plugins` once
and builds its registries from :func:`collect` (the registries themselves never import this module).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import pluggy

from agentstack_lab.hookspecs import PROJECT, HookSpecs, hookimpl, hookspec

__all__ = ["ENTRY_POINT_GROUP", "HookCall", "collect", "hookimpl", "hookspec", "implementations", "load_plugins",
           "new_manager"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agentstack_lab"


@dataclass(frozen=True, kw_only=True)
class HookCall:
    """One ``register(...)`` call a plugin made from a hook, with the plugin's name for warnings."""

    plugin: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def new_manager() -> pluggy.PluginManager:
    """An empty plugin manager that knows the hook specifications."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(HookSpecs)
    return pm


def load_plugins(pm: pluggy.PluginManager | None = None, *, disabled: Any = ()) -> pluggy.PluginManager:
    """Load the built-ins and every entry-point plugin into ``pm`` (a new manager by default).

    A plugin that fails to import is skipped with a warning naming it and its package; the entry
    points named in ``disabled`` (the config's ``plugins.disabled``) are not loaded at all.
    """
    pm = pm or new_manager()
    skip = set(disabled or ()) - {"default"}
    import agentstack_lab.default_plugins as default_plugins

    if not pm.is_registered(default_plugins):
        pm.register(default_plugins, name="default")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == "default" or ep.name in skip or pm.get_plugin(ep.name) is not None:
            continue
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:  # one broken plugin must not stop the others
            dist = getattr(ep, "dist", None)
            log.warning("agentstack-lab plugin %r (%s) failed to load: %s", ep.name,
                        getattr(dist, "name", "unknown package"), exc)
    return pm


def implementations(hook_name: str, pm: pluggy.PluginManager, disabled: Any = ()) -> list[Any]:
    """The hook's implementations in registration order (built-ins first), without those named in ``disabled``.

    ``disabled`` is the config's ``plugins.disabled``: it also covers plugins registered on the
    manager by hand (``ws.plugins.register(obj, name=...)``); the built-ins (``default``) stay.
    """
    skip = set(disabled or ()) - {"default"}
    return [i for i in getattr(pm.hook, hook_name).get_hookimpls() if i.plugin_name not in skip]


def collect(hook_name: str, pm: pluggy.PluginManager, disabled: Any = ()) -> list[HookCall]:
    """Call one hook on every plugin of ``pm``, returning the ``register(...)`` calls it made.

    Calls come in registration order, so the built-ins (loaded first) come first. A plugin
    whose hook raises is skipped whole with a warning naming it; ``disabled`` ones are not called.
    """
    calls: list[HookCall] = []
    for impl in implementations(hook_name, pm, disabled):
        local: list[HookCall] = []

        def register(*args: Any, _into: list[HookCall] = local, _name: str = impl.plugin_name, **kwargs: Any) -> None:
            _into.append(HookCall(plugin=_name, args=args, kwargs=kwargs))

        try:
            impl.function(register=register)
        except Exception as exc:
            log.warning("agentstack-lab plugin %r failed in %s: %s", impl.plugin_name, hook_name, exc)
            continue
        calls.extend(local)
    return calls
