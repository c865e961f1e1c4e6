"""What an agent's steps and tools may use of their run: a narrow protocol, not the whole ``AgentRun``.

:class:`~agentstack_lab.engine.run.AgentRun` (577 lines: tree state, subscribers, queries, the
event log, stop and budget handling) implements it; :mod:`~agentstack_lab.engine.steps` and
:mod:`~agentstack_lab.engine.tools` import only this module, so the three form no import cycle
and a step cannot reach the run's internals. ``tests/test_engine_context.py`` checks that every
``ctx.<name>`` the steps and tools use is a member declared here (18 of them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentstack_lab.engine.executors import ExecContext, Executor
    from agentstack_lab.engine.options import RunOptions
    from agentstack_lab.engine.state import AgentNode
    from agentstack_lab.events import OutboundEvent, QueryKind
    from agentstack_lab.providers.base import Provider, Usage

__all__ = ["AgentContext", "AgentTypes"]


class AgentTypes(Protocol):
    """The agent types a run may start: ``get`` raises on an unknown name, ``has`` does not."""

    def get(self, name: str) -> Any:
        """The definition of ``name`` (with a ``system_prompt``)."""
        ...

    def has(self, name: str) -> bool:
        """Whether ``name`` is a known type."""
        ...

    def list(self) -> list[str]:
        """The known type names."""
        ...


class AgentContext(Protocol):
    """The run as seen by one agent's steps and tools."""

    options: RunOptions
    provider: Provider
    model: str | None
    executor: Executor
    registry: AgentTypes
    default_type: str
    monitor: Any  # the resource monitor (monitoring/resources.py) or None: ``files``, ``deliverable``

    def emit(self, event: OutboundEvent) -> None:
        """Publish an outbound event (kept, delivered to subscribers, logged)."""
        ...

    def emit_state(self, node: AgentNode, *, with_content: bool = False) -> None:
        """Publish ``node``'s current state as an ``agent-state`` event."""
        ...

    def note(self, node: AgentNode, text: str) -> None:
        """Record a notice (a skipped step, a budget) in the agent's metadata."""
        ...

    def charge(self, node: AgentNode, usage: Usage) -> None:
        """Count a model call's tokens against the tree's budget (raises ``CancelledError`` past it)."""
        ...

    async def checkpoint(self, node: AgentNode) -> None:
        """Wait while this agent or an ancestor is paused (called between steps and tool calls)."""
        ...

    async def ask_user(self, node: AgentNode, kind: QueryKind, prompt: str, options: dict[str, Any] | None = None, *,
                  validate: Callable[[Any], Any] | None = None, optional: bool = False) -> Any:
        """Ask the person a ``user-query`` and return the answer (headless: fails closed or skips)."""
        ...

    def spawn_child(self, parent: AgentNode, prompt: str, agent_type: str | None = None, *,
                    origin: str = "fork", agent_id: str | None = None) -> AgentNode:
        """Start a child agent within the budgets (``BudgetExceededError``; drift may refuse it)."""
        ...

    async def gate(self, parent: AgentNode, subtasks: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
        """The planned ``(question, type)`` subtasks that may run, as ``(child id, question, type)``.

        Consensus (when configured) holds them on a checkpoint and drops the rejected ones.
        """
        ...

    def children(self, node: AgentNode) -> list[AgentNode]:
        """``node``'s child agents, in the order they were started."""
        ...

    def exec_context(self, node: AgentNode, call_id: str | None = None) -> ExecContext:
        """What code ``node`` runs for tool call ``call_id`` gets: ``fork``/``wait``, secrets, provenance ids."""
        ...

    async def record_changes(self, node: AgentNode, call_id: str | None, changes: list[dict[str, str]]) -> None:
        """Persist what a python call did to kernel variables (``ExecResult.changes``) as provenance rows."""
        ...

    def secrets(self) -> list[str]:
        """Secret values to redact from anything a tool returns (longest first)."""
        ...

    def memory(self, node: AgentNode) -> Any:
        """The workspace memory acting for this run's session and ``node``."""
        ...

    @property
    def namespace(self) -> str:
        """The memory namespace of this run's session (``session:<id>``)."""
        ...

    @property
    def owns_session(self) -> bool:
        """Whether the run started its session itself (then it ends, with its memory, when the run ends)."""
        ...
