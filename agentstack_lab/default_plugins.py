"""The built-in providers, embedders and agent types, registered like any plugin."""

from __future__ import annotations

from agentstack_lab.hookspecs import hookimpl


@hookimpl
def register_providers(register):
    from agentstack_lab.providers.registry import register_builtin_providers

    register_builtin_providers(register)


@hookimpl
def register_embedders(register):
    from agentstack_lab.embeddings.registry import register_builtin_embedders

    register_builtin_embedders(register)


@hookimpl
def register_agent_types(register):
    # The 11 core types are built into AgentRegistry (they cannot be overridden); this hook adds none.
    return None

