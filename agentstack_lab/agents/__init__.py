"""Agent services: type registry, spawner with persisted statuses, identities (docs/notebook.md)."""

from agentstack_lab.agents.identity import IdentityService
from agentstack_lab.agents.registry import (
           CORE_AGENT_TYPES,
           AgentDefinition,
           AgentRegistry,
           UnknownAgentTypeError,
)
from agentstack_lab.agents.spawner import InvalidTransitionError, Spawner

__all__ = ["AgentDefinition", "AgentRegistry", "CORE_AGENT_TYPES", "UnknownAgentTypeError", "Spawner",
           "InvalidTransitionError", "IdentityService"]
