"""MCP tools beyond runs (docs/mcp.md): spawned agents, identities, health and configuration.

Mixed into the Toolbox (``tools.py`` stays under ~600 lines); they need ``self.ws``,
``self._identities()`` and ``self._identity_id()``. ``agent_spawn`` creates an ``idle`` agent row (the
seed's spawner; the engine's agents are created by ``agent_run``), ``agent_update_status`` moves a
spawned agent along its lifecycle; an agent of an engine run is changed through ``agent_stop`` or
``agent_intervene`` (its run owns it). ``system_health`` is the detailed health report (docs/tasks.md);
``system_config`` the configuration in effect with every secret masked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from agentstack_lab.errors import NotFoundError, UsageError
from agentstack_lab.events import SettableStatus as SpawnStatus

__all__ = ["SystemTools", "SYSTEM_TOOL_NAMES"]

SYSTEM_TOOL_NAMES = ("agent_spawn", "agent_update_status", "identity_get", "identity_list", "identity_update",
                     "system_health", "system_config")

IdentityStatus = Literal["created", "active", "dormant", "retired"]


class SystemTools:
    """Mixed into the Toolbox (see the module docstring)."""

    ws: Any
    _identities: Callable[[], Any]        # the Toolbox's (annotations only: the Toolbox defines them)
    _identity_id: Callable[[str], str]

    # --- agents (docs/notebook.md) ------------------------------------------------------------------------
    def _spawner(self) -> Any:
        return self.ws.spawner  # checks agent types against the workspace's registry (plugins included)

    def agent_spawn(self, agent_type: Annotated[str, Field(min_length=1, description="An agent type (agent_types).")],
                    name: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
                    session_id: Annotated[str | None, Field(min_length=1)] = None,
                    metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Create an agent of a type (status `idle`) with an optional unique name; to run one use agent_run."""
        spawner = self._spawner()
        if name is not None and spawner.get_by_name(name) is not None:
            raise UsageError(f"an agent named {name!r} already exists")
        if session_id is not None:
            self.ws.sessions.require_active(session_id)
        return dataclasses.asdict(spawner.spawn(agent_type, name=name, session_id=session_id, metadata=metadata))

    def agent_update_status(self, agent: Annotated[str, Field(min_length=1, description="Agent id or name.")],
                            status: SpawnStatus, error: str | None = None,
                            result: str | None = None) -> dict[str, Any]:
        """Move a spawned agent to a status its lifecycle allows (idle → running → completed, ...)."""
        spawner = self._spawner()
        found = spawner.get(agent) or spawner.get_by_name(agent)
        if found is None:
            raise NotFoundError(f"no agent with id or name {agent!r}")
        if found.run_id is not None:
            raise UsageError(f"agent {found.name} belongs to run {found.run_id}, which owns its status; "
                             "use agent_stop or agent_intervene")
        return dataclasses.asdict(spawner.update_status(found.id, status, error=error, result=result))

    # --- identities (docs/notebook.md) --------------------------------------------------------------------
    def identity_get(self, identity: Annotated[str, Field(min_length=1, description="Id or display name.")]
                     ) -> dict[str, Any]:
        """One persistent identity by id or display name."""
        return dataclasses.asdict(self._identities().resolve(identity))

    def identity_list(self, status: IdentityStatus | None = None, agent_type: str | None = None,
                      limit: Annotated[int, Field(ge=1, le=1000)] = 100) -> dict[str, Any]:
        """Identities, oldest first, filtered by status and agent type."""
        found = self._identities().list(status=status, agent_type=agent_type, limit=limit)
        return {"identities": [dataclasses.asdict(i) for i in found], "count": len(found)}

    def identity_update(self, identity: Annotated[str, Field(min_length=1, description="Id or display name.")],
                        display_name: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
                        description: str | None = None, capabilities: list[str] | None = None,
                        metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Update an identity's name, description, capabilities or metadata (audited; retired ones cannot change)."""
        if display_name is None and description is None and capabilities is None and metadata is None:
            raise UsageError("identity_update needs at least one of display_name, description, capabilities, "
                             "metadata")
        svc, agent_id = self._identities(), self._identity_id(identity)
        other = svc.get_by_name(display_name) if display_name is not None else None
        if other is not None and other.agent_id != agent_id:
            raise UsageError(f"display name {display_name!r} is taken by identity {other.agent_id}")
        return dataclasses.asdict(svc.update(agent_id, actor_id="mcp", display_name=display_name,
                                             description=description, capabilities=capabilities, metadata=metadata))

    # --- system (docs/tasks.md) -----------------------------------------------------------------------
    def system_health(self, kind: Literal["live", "ready", "detailed"] = "detailed") -> dict[str, Any]:
        """Health (healthy, degraded or unhealthy) with each check: database, events, memory backend, embedder, provider, queue, agents."""
        from agentstack_lab.monitoring.health import check

        return check(self.ws, kind)

    def system_config(self) -> dict[str, Any]:
        """The configuration in effect (secrets masked) and the file it came from."""
        source = self.ws.config.source
        return {"config": self.ws.config.to_public_dict(), "source": str(source) if source else None}
