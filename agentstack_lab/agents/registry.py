"""Agent types: the 11 core types (prompts kept as package data) plus custom types.

Core types cannot be overridden or unregistered; custom ones are added with
:meth:`AgentRegistry.register` and can be unregistered. A workspace owns one registry
(``ws.agent_types``) and fills it from the ``register_agent_types`` plugin hook
(``register(AgentDefinition(...))`` or a dict); this module never imports the plugin machinery.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["AgentDefinition", "AgentRegistry", "CORE_AGENT_TYPES", "UnknownAgentTypeError", "AgentTypeError"]

CORE_AGENT_TYPES: tuple[str, ...] = (
    "coder", "researcher", "tester", "reviewer", "adversarial", "architect",
    "coordinator", "analyst", "devops", "documentation", "security-auditor",
)
_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


class AgentTypeError(AgentstackError, ValueError):
    """An agent type cannot be registered or removed (the message says why)."""


class UnknownAgentTypeError(AgentTypeError, KeyError):
    """No agent type of that name (the message lists the known ones)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """One agent type: display name, purpose, system prompt and declared capabilities."""

    type: str
    name: str
    description: str
    system_prompt: str
    capabilities: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def coerce(cls, value: Any) -> AgentDefinition:
        """Accept an ``AgentDefinition`` or a dict with the same fields (``systemPrompt`` also accepted)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            data = dict(value)
            if "systemPrompt" in data:
                data["system_prompt"] = data.pop("systemPrompt")
            missing = [k for k in ("type", "system_prompt") if not data.get(k)]
            if missing:
                raise AgentTypeError(f"agent definition is missing {', '.join(missing)}: {value!r}")
            data.setdefault("name", data["type"])
            data.setdefault("description", "")
            data["capabilities"] = tuple(data.get("capabilities") or ())
            unknown = set(data) - {"type", "name", "description", "system_prompt", "capabilities"}
            if unknown:
                raise AgentTypeError(f"agent definition has unknown fields {sorted(unknown)}")
            return cls(**data)
        raise AgentTypeError(f"an agent definition must be an AgentDefinition or dict, got {type(value).__name__}")


def _parse_prompt_file(agent_type: str, text: str) -> AgentDefinition:
    meta: dict[str, str] = {}
    body = text
    if text.startswith("---"):
        _, head, body = text.split("---", 2)
        for line in head.strip().splitlines():
            key, _, val = line.partition(":")
            meta[key.strip()] = val.strip()
    caps = tuple(c.strip() for c in meta.get("capabilities", "").split(",") if c.strip())
    return AgentDefinition(type=agent_type, name=meta.get("name", agent_type), description=meta.get("description", ""),
                           system_prompt=body.strip(), capabilities=caps)


# A process-wide cache, on purpose: the 11 prompt files are package data that cannot change while
# the process runs, and every workspace's registry reads them. The mapping is read-only and the
# definitions frozen, so nothing cached here can be changed by anyone.
@functools.cache
def core_definitions() -> Mapping[str, AgentDefinition]:
    """The core agent types, read once from ``agentstack_lab/agents/prompts/*.md`` (read-only)."""
    folder = resources.files("agentstack_lab.agents") / "prompts"
    return MappingProxyType({t: _parse_prompt_file(t, (folder / f"{t}.md").read_text(encoding="utf-8"))
                             for t in CORE_AGENT_TYPES})


class AgentRegistry:
    """Agent type definitions: the core types plus custom ones."""

    def __init__(self) -> None:
        self._core = core_definitions()
        self._custom: dict[str, AgentDefinition] = {}

    def register(self, definition: AgentDefinition | dict[str, Any]) -> AgentDefinition:
        """Add a custom type; core types and duplicate names are refused with a clear error."""
        d = AgentDefinition.coerce(definition)
        if not _TYPE_NAME.match(d.type):
            raise AgentTypeError(f"agent type {d.type!r} must be lowercase letters, digits, '-' or '_'")
        if d.type in self._core:
            raise AgentTypeError(f"agent type {d.type!r} is a core type and cannot be overridden")
        if d.type in self._custom:
            raise AgentTypeError(f"agent type {d.type!r} is already registered; unregister it first")
        self._custom[d.type] = d
        return d

    def unregister(self, agent_type: str) -> bool:
        """Remove a custom type (True if it existed); core types cannot be removed."""
        if agent_type in self._core:
            raise AgentTypeError(f"agent type {agent_type!r} is a core type and cannot be unregistered")
        return self._custom.pop(agent_type, None) is not None

    def get(self, agent_type: str) -> AgentDefinition:
        """The definition of ``agent_type``; unknown names raise :class:`UnknownAgentTypeError`."""
        d = self._core.get(agent_type) or self._custom.get(agent_type)
        if d is None:
            raise UnknownAgentTypeError(f"unknown agent type {agent_type!r}; known types: {', '.join(self.list())}")
        return d

    def has(self, agent_type: str) -> bool:
        return agent_type in self._core or agent_type in self._custom

    def list(self) -> list[str]:
        """All type names: core first (in the seed's order), then custom ones sorted."""
        return [*self._core, *sorted(self._custom)]

    def is_core(self, agent_type: str) -> bool:
        return agent_type in self._core
