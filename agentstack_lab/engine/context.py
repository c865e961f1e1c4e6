"""What each part of the engine may use of a run: narrow protocols, not the whole run.

:class:`~agentstack_lab.engine.core.RunCore` satisfies every protocol here; the public
:class:`~agentstack_lab.engine.run.AgentRun` handle satisfies :class:`RunHandle`. The modules that act on
a run import only this module (never ``core`` or ``run``), so the engine has no import circle and none of
them can reach what it was not given:

* the steps and tools: :class:`AgentContext` (``tests/test_engine_context.py`` checks every ``ctx.<name>``
  they use is declared here);
* asking a person (``engine/queries.py``): :class:`AskContext`;
* drift and consensus (``engine/gate.py``): :class:`GateContext`;
* coordination (``engine/coordinate.py``): :class:`CoordinationContext`, building subtask runs with a
  :class:`RunFactory`;
* interventions from other processes (``engine/control.py``): :class:`InterventionTarget`;
* what arrives from the person (``engine/inbound.py``): :class:`InboundContext`;
* follow-ups (``engine/followup.py``): :class:`FinishedRun`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentstack_lab.approval.rules import Verdict
    from agentstack_lab.decisions.store import Decisions
    from agentstack_lab.engine.executors import ExecContext, Executor
    from agentstack_lab.engine.options import Attachment, RunOptions
    from agentstack_lab.engine.state import AgentNode
    from agentstack_lab.events import OutboundEvent, QueryKind, UserQuery
    from agentstack_lab.providers.base import Provider, Usage
    from agentstack_lab.workspace import Workspace

__all__ = ["AgentContext", "AgentTypes", "EventSink", "AskContext", "GateContext", "CoordinationContext",
           "InterventionTarget", "InboundContext", "FinishedRun", "RunHandle", "RunFactory"]


class AgentTypes(Protocol):
    """The agent types a run may start: ``get`` raises on an unknown name, ``has`` does not."""

    def get(self, name: str, /) -> Any:
        """The definition of ``name`` (with a ``system_prompt``)."""
        ...

    def has(self, name: str, /) -> bool:
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
    @property
    def registry(self) -> AgentTypes: ...
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
                  validate: Callable[[Any], Any] | None = None, optional: bool = False,
                  opened: Callable[[str], Any] | None = None) -> Any:
        """Ask the person a ``user-query`` and return the answer (headless: fails closed or skips).

        ``opened(query_id)`` is called once the query is open.
        """
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

    def approval_verdict(self, code: str) -> Verdict:
        """What the approval rules (``approval/``) say about running ``code``: allow, ask or deny, and which rule."""
        ...

    def record_rule_decision(self, node: AgentNode, prompt: str, code: str, verdict: dict[str, Any]) -> None:
        """Persist an approval a rule decided (``verdict``: the redacted :meth:`Verdict.to_dict`)."""
        ...

    def save_always_rule(self, node: AgentNode, query_id: str | None, code: str, classes: list[str],
                         scope: str) -> dict[str, Any]:
        """A person answered "Always allow code like this": save the rule, note it on the decision; what was saved."""
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


class EventSink(Protocol):
    """Announcing what happened: events, agent snapshots, notices."""

    def emit(self, event: OutboundEvent, *, log: bool = True) -> None:
        """Publish an outbound event (kept, delivered to subscribers, logged unless ``log=False``)."""
        ...

    def emit_state(self, node: AgentNode, *, with_content: bool = False, log: bool = True) -> None:
        """Publish ``node``'s current state as an ``agent-state`` event (and write its agents row)."""
        ...

    def note(self, node: AgentNode, text: str) -> None:
        """Record a notice in the agent's metadata."""
        ...


class AskContext(EventSink, Protocol):
    """What asking a person needs: the run's id and policy, its decision store and its open queries."""

    run_id: str
    options: RunOptions
    decision_store: Decisions | None
    open_queries: dict[str, tuple[UserQuery, asyncio.Future[Any] | None, Callable[[Any], Any] | None]]

    def record_answer(self, node: AgentNode, kind: str, prompt: str, answer: Any, source: str, *,
                      query_id: str | None = None, by: str | None = None, state: str = "answered",
                      reason: str | None = None) -> None:
        """Keep a query's answer in the agent's metadata (``state="cancelled"`` and why: nobody may answer it now)."""
        ...


class GateContext(AskContext, Protocol):
    """What drift checks and consensus checkpoints need of a run (a checkpoint may ask a person)."""

    workspace: Workspace
    run_id: str
    session_id: str | None
    options: RunOptions
    provider: Any
    model: str | None
    @property
    def registry(self) -> AgentTypes: ...
    default_type: str
    nodes: dict[str, AgentNode]

    def charge(self, node: AgentNode, usage: Usage, *, log: bool = True) -> None:
        """Count a model call's tokens against the run's budget."""
        ...

    def finish_agent(self, node: AgentNode, status: str, *, result: str | None = None, error: str | None = None,
                     logged: bool = False) -> None:
        """End one agent with ``status``."""
        ...

    async def ask_user(self, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None = None, *,
                       validate: Callable[[Any], Any] | None = None, optional: bool = False,
                       opened: Callable[[str], Any] | None = None, waiting: str = "waiting_user") -> Any:
        """Ask the person a decision under the run's ``on_query`` policy."""
        ...


class RunHandle(Protocol):
    """A run as its starter sees it: await it, read its outcome."""

    @property
    def run_id(self) -> str: ...
    @property
    def root_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def result(self) -> str | None: ...
    @property
    def tree(self) -> dict[str, Any]: ...
    @property
    def options(self) -> RunOptions: ...

    async def wait(self, *, raise_on_error: bool = True) -> str | None:
        """Wait for the end (raising the run's failure unless told not to)."""
        ...

    def __await__(self) -> Generator[Any, None, str | None]:
        """``await run``: :meth:`wait`."""
        ...


class RunFactory(Protocol):
    """Builds a run (the :class:`~agentstack_lab.engine.run.AgentRun` class is one)."""

    def __call__(self, prompt: str, *, workspace: Workspace, provider: Any = None, agent_type: str | None = None,
                 options: RunOptions | dict[str, Any] | None = None, session_id: str | None = None,
                 executor: Executor | str | None = None, attach: Attachment | None = None) -> RunHandle: ...


class CoordinationContext(GateContext, Protocol):
    """What queueing subagents to workers needs of a run."""

    executor: Executor
    coordination: Any
    run_factory: RunFactory

    async def flush_log(self) -> None:
        """Write the buffered events now."""
        ...


class InterventionTarget(Protocol):
    """What applying another process's intervention needs of a run."""

    run_id: str
    root_id: str
    attach: Attachment | None
    nodes: dict[str, AgentNode]

    def intervene(self, agent_id: str, *, user_comment: str | None = None, user_content: str | None = None,
                  status: str | None = None, surface: str = "widget", by: str | None = None) -> None:
        """A comment, replaced content, or a status change for one agent."""
        ...

    def stop(self, agent_id: str | None = None, *, reason: str = "stopped by the user") -> None:
        """Stop the run or one agent and its subtree."""
        ...


class InboundContext(EventSink, Protocol):
    """What answers and interventions from the person need of a run."""

    run_id: str
    open_queries: dict[str, tuple[UserQuery, asyncio.Future[Any] | None, Callable[[Any], Any] | None]]
    decision_store: Decisions | None
    resume_events: dict[str, asyncio.Event]

    @property
    def pending_queries(self) -> list[UserQuery]: ...
    @property
    def tree(self) -> dict[str, Any]: ...

    def node(self, agent_id: str) -> AgentNode:
        """The agent ``agent_id`` (``KeyError`` naming the run when unknown)."""
        ...

    def on_loop(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the run's loop."""
        ...

    def stop_subtree(self, node: AgentNode, reason: str, *, below: str | None = None) -> None:
        """Stop ``node`` and its subtree."""
        ...


class FinishedRun(Protocol):
    """What a follow-up reads of the run it continues."""

    run_id: str
    root_id: str
    prompt: str
    options: RunOptions
    provider: Any
    session_id: str | None
    owns_session: bool
    workspace: Workspace
    nodes: dict[str, AgentNode]
    error: str | None
    thread: tuple[Any, ...]  # the ``Turn``s it continued itself

    @property
    def status(self) -> str: ...
    @property
    def result(self) -> str | None: ...
    @property
    def done(self) -> bool: ...
