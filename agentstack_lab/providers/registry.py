"""Provider registry: built-ins register through the same plugin hook an outside package uses.

A :class:`ProviderRegistry` maps names to factories. A workspace builds one (``ws.providers``) from
the ``register_providers`` hook; this module never imports the plugin machinery, so the registry
sits below it with no import cycle. ``ws.providers.build("anthropic", config=ws.config, model=...)``
builds a provider from the ``providers.<name>`` section of the config, with keyword overrides on top.
A plugin registers ``register(name, factory)`` where ``factory(config=None, **overrides)`` returns a
provider. ``get_provider``/``list_providers`` cover the 7 built-ins for code without a workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentstack_lab.factories import FactoryRegistry
from agentstack_lab.providers.base import Provider, ProviderError

__all__ = [
    "BUILTIN_PROVIDERS",
    "ProviderRegistry",
    "UnknownProviderError",
    "register_builtin_providers",
    "get_provider",
    "list_providers",
    "provider_settings",
]

BUILTIN_PROVIDERS = ("scripted", "anthropic", "openai", "ollama", "claude-code", "gemini-cli", "codex", "acp")

Factory = Callable[..., Provider]


class UnknownProviderError(ProviderError, KeyError):
    """No provider is registered under the requested name (the message lists the valid ones)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def provider_settings(config: Any, section: str) -> dict[str, Any]:
    """The ``providers.<section>`` settings of ``config`` as a dict (empty when absent).

    Accepts a full ``Config``, its ``providers`` section, or a plain mapping, so the
    providers work before and without a workspace.
    """
    if config is None:
        return {}
    providers = getattr(config, "providers", config)
    if isinstance(providers, dict):
        value = providers.get(section)
    else:
        value = getattr(providers, section.replace("-", "_"), None)
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if hasattr(value, "model_dump"):
        return {k: getattr(value, k) for k in value.model_dump()}  # keep SecretStr wrapped
    return dict(vars(value))


def _settings(config: Any, section: str, overrides: dict[str, Any]) -> dict[str, Any]:
    merged = provider_settings(config, section)
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return merged


def _scripted(config: Any = None, **overrides: Any) -> Provider:
    from agentstack_lab.providers.scripted import ScriptedProvider

    # The scripted provider has no model; a model name passed by a caller is ignored.
    kwargs = {k: v for k, v in overrides.items() if v is not None and k != "model"}
    return ScriptedProvider(**kwargs)


def _anthropic(config: Any = None, **overrides: Any) -> Provider:
    from agentstack_lab.providers.anthropic import AnthropicProvider

    return AnthropicProvider(**_settings(config, "anthropic", overrides))


def _openai(config: Any = None, **overrides: Any) -> Provider:
    from agentstack_lab.providers.openai import OpenAIProvider

    return OpenAIProvider(**_settings(config, "openai", overrides))


def _ollama(config: Any = None, **overrides: Any) -> Provider:
    from agentstack_lab.providers.ollama import OllamaProvider

    return OllamaProvider(**_settings(config, "ollama", overrides))


def _acp(config: Any = None, **overrides: Any) -> Provider:
    from agentstack_lab.providers.acp import AcpProvider

    settings = _settings(config, "acp", overrides)
    settings.pop("model", None)   # the ACP agent chooses its own model
    return AcpProvider(**settings)


def _cli(kind: str) -> Factory:
    def factory(config: Any = None, **overrides: Any) -> Provider:
        from agentstack_lab.providers.cli import cli_provider

        return cli_provider(kind, **_settings(config, "cli", overrides))

    factory.__name__ = f"_cli_{kind.replace('-', '_')}"
    return factory


def register_builtin_providers(register: Callable[..., None]) -> None:
    """Register the built-in providers (called from the default plugin's hook)."""
    register("scripted", _scripted)
    register("anthropic", _anthropic)
    register("openai", _openai)
    register("ollama", _ollama)
    for kind in ("claude-code", "gemini-cli", "codex"):
        register(kind, _cli(kind))
    register("acp", _acp)


class ProviderRegistry(FactoryRegistry[Factory]):
    """Provider factories by name; a workspace fills one from the ``register_providers`` hook.

    ``register`` refuses a taken name (the first registration wins: built-ins load first), so a
    plugin cannot silently replace a built-in.
    """

    kind = "provider"
    error = ProviderError

    @classmethod
    def builtin(cls) -> ProviderRegistry:
        """A registry holding only the built-in providers (no plugins)."""
        registry = cls()
        register_builtin_providers(registry.register)
        return registry

    def build(self, name: str | None = None, *, config: Any = None, **overrides: Any) -> Provider:
        """Build the provider registered as ``name``.

        Args:
            name: A registered name; ``None`` uses ``config.providers.default`` or ``"scripted"``.
            config: A workspace ``Config`` (or its ``providers`` section); ``None`` means env vars only.
            **overrides: Settings that win over the config, e.g. ``model=``, ``api_key=``, ``base_url=``.

        Raises:
            UnknownProviderError: ``name`` is not registered; the message lists the valid names.
            MissingKeyError: The provider needs an API key that is not set.
        """
        if name is None:
            providers = getattr(config, "providers", None)
            default: str = getattr(providers, "default", None) or "scripted"
            name = default
        factory = self.factory(name)
        if factory is None:
            raise UnknownProviderError(f"unknown provider {name!r}; valid providers: {', '.join(self.names())}")
        return factory(config=config, **overrides)


def list_providers() -> list[str]:
    """Names of the built-in providers (a workspace's ``ws.providers.names()`` adds its plugins')."""
    return ProviderRegistry.builtin().names()


def get_provider(name: str | None = None, config: Any = None, **overrides: Any) -> Provider:
    """Build a built-in provider without a workspace (see :meth:`ProviderRegistry.build`).

    Plugin providers are a workspace's: use ``ws.get_provider(name)`` or ``ws.providers.build(name)``.
    """
    return ProviderRegistry.builtin().build(name, config=config, **overrides)
