"""The run core: one run's tree, event stream, budgets, queries and its lifecycle.

:class:`RunCore` is the machinery behind the public :class:`~agentstack_lab.engine.run.AgentRun`
handle. Each agent is an asyncio task; children run concurrently. Every outbound event goes through
:meth:`RunCore.emit` on the run's loop, in one total order: kept in ``events``, handed to subscribers,
and appended to the ``events`` table by the :class:`~agentstack_lab.engine.log.EventLog`.

The modules that act on a run take a narrow context from :mod:`~agentstack_lab.engine.context`, which
this class satisfies: the steps and tools (``AgentContext``), queries (``AskContext``), drift and
consensus (``GateContext``), coordination (``CoordinationContext``), interventions
(``InterventionTarget``) and the resource monitor (``MonitoredRun``). None of them imports this module.

Two ids, never one for the other: ``run_id`` names the run (its log, its decisions, its interventions)
and ``root_id`` its root agent. They differ for a subtask a worker runs for a coordinator: the root is
the coordinator's child and ``run_id`` the coordinator's run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.engine.cassettes import provider_for, run_secrets
from agentstack_lab.engine.context import RunFactory
from agentstack_lab.engine.executors import ExecContext, Executor, make_executor
from agentstack_lab.engine.followup import Turn
from agentstack_lab.engine.gate import RunControl
from agentstack_lab.engine.log import EventLog
from agentstack_lab.engine.options import (
    AgentFailedError,
    AgentRunError,
    Attachment,
    BudgetExceededError,
    HeadlessQueryError,
    RunOptions,
)
from agentstack_lab.engine.state import AgentNode, snapshot_tree
from agentstack_lab.engine.steps import run_steps
from agentstack_lab.engine.threads import fork_from_thread, thread_call, wait_from_thread
from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import (
    UNFINISHED,
    AgentCompleted,
    AgentState,
    ErrorEvent,
    OutboundEvent,
    UserQuery,
    from_wire,
    to_wire,
)
from agentstack_lab.providers.base import Usage
from agentstack_lab.redaction import redact
from agentstack_lab.validation import as_dict

if TYPE_CHECKING:
    from agentstack_lab.agents.identity import AgentIdentity
    from agentstack_lab.agents.registry import AgentRegistry
    from agentstack_lab.approval.rules import Verdict
    from agentstack_lab.decisions.store import Decisions
    from agentstack_lab.engine.sandbox import DryRunResult
    from agentstack_lab.workspace import Workspace

__all__ = ["RunCore", "OpenQuery"]

log = logging.getLogger(__name__)

OpenQuery = tuple[UserQuery, "asyncio.Future[Any] | None", "Callable[[Any], Any] | None"]
"""A query the run waits on: the event, its in-process future (``None``: a persisted decision), its validator."""


class RunCore:
    """The state and machinery of one run (see the module docstring); reached through narrow contexts."""

    def __init__(self, prompt: str, *, workspace: Workspace, options: RunOptions, provider: Any,
                 agent_type: str, model: str | None, session_id: str | None, executor: Executor | str | None,
                 origin: str, attach: Attachment | None, thread: tuple[Turn, ...], continues: str | None,
                 run_factory: RunFactory):
        config = workspace.config
        self.workspace = workspace
        self.options = options
        self.registry: AgentRegistry = workspace.agent_types
        self.default_type = config.agents.default_type or "researcher"
        self.prompt = prompt
        self.agent_type = agent_type
        self.model = model
        self.origin = origin
        self.cell_id: str | None = None  # the notebook cell that started it (the lab panel links there)
        self.attach = attach  # a subtask run by a worker, placed in its coordinator's tree
        self.thread = thread  # a follow-up's conversation so far (engine/followup.py)
        self.continues = continues
        self.run_factory = run_factory  # how coordination builds the run of a queued subtask
        self.root_id = attach.agent_id if attach else str(uuid.uuid4())
        self.run_id = attach.run_id if attach else self.root_id
        # the identity this run acts as: unknown or retired is a clear error before anything starts
        self.identity: AgentIdentity | None = (
            workspace.identities.require_can_spawn(options.identity) if options.identity else None)
        # record/replay wrap the provider the whole tree shares; strict replay builds no real provider (no key)
        self.provider = provider_for(options, workspace, lambda: _resolve_provider(provider, workspace, model))
        self.executor = make_executor(executor if executor is not None else options.executor)
        journal = getattr(self.executor, "journal", None)
        if journal is not None:  # the live kernel's undo snapshots are bounded by the workspace's config
            journal.max_bytes = config.engine.undo.max_snapshot_bytes
        if self.executor.supports_dry_run:  # approval cards show a dry run first (config approval.dry_run)
            self.executor.dry_run_first = config.approval.dry_run
        self.session_id = session_id
        self.owns_session = False  # True once begin() started a session for this run: it ends with the run
        self.nodes: dict[str, AgentNode] = {}
        self.error: str | None = None
        self.failure: BaseException | None = None
        self.events: list[OutboundEvent] = []
        self.subscribers: list[Callable[[OutboundEvent], Any]] = []
        self.open_queries: dict[str, OpenQuery] = {}
        self.decision_store: Decisions | None = None  # the workspace's Decisions when it has a database
        self.resume_events: dict[str, asyncio.Event] = {}
        self.task: asyncio.Task[None] | None = None
        self.done_callbacks: list[Callable[[asyncio.Task[None]], object]] = []  # attached to the task at start
        self.loop: asyncio.AbstractEventLoop | None = None
        self.coordination: Any = None  # engine/coordinate.py, when options.coordinate queues subquestions
        self.monitor: Any = None  # the resource-exhaustion monitor (monitoring/resources.py), set at begin
        self.hooks: Any = None  # lifecycle hooks (hooks.py), set at begin
        self._log: EventLog | None = None
        self._prompted: set[str] = set()   # agents whose prompt an agent-state event carried already
        self._hidden_values: list[str] | None = None
        self._tokens = 0
        self._tokens_unenforceable = False
        self.control = RunControl(self)  # drift checks and consensus checkpoints (engine/gate.py)

    # --- state read by the handle ---------------------------------------------------------------

    @property
    def root(self) -> AgentNode | None:
        return self.nodes.get(self.root_id)

    @property
    def status(self) -> str:
        root = self.root
        return root.status if root else "pending"

    @property
    def result(self) -> str | None:
        root = self.root
        return root.result if root else None

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    @property
    def pending_queries(self) -> list[UserQuery]:
        return [q for q, fut, _ in self.open_queries.values() if fut is None or not fut.done()]

    @property
    def tree(self) -> dict[str, Any]:
        return snapshot_tree(self.nodes, self.root_id)

    def node(self, agent_id: str) -> AgentNode:
        node = self.nodes.get(agent_id)
        if node is None:
            raise KeyError(f"no agent {agent_id!r} in run {self.run_id}")
        return node

    # --- events (EventSink) -----------------------------------------------------------------------

    def emit(self, event: OutboundEvent, *, log: bool = True) -> None:
        """Announce ``event`` to subscribers; ``log=False`` when another process already logged it.

        Secret values (:meth:`secrets`) in it are replaced by ``***`` first: what the log stores and every
        surface shows is the redacted event (a secret split across two text deltas is not caught).
        """
        event = self._redacted(event)
        self.events.append(event)
        if self._log is not None and log:
            self._log.append(event)
        for cb in list(self.subscribers):
            deliver(cb, event)

    def emit_state(self, node: AgentNode, *, with_content: bool = False, log: bool = True) -> None:
        """Announce ``node``'s snapshot (and write its agents row); ``log=False``: another run logged it."""
        first = node.id not in self._prompted
        self._prompted.add(node.id)
        self.emit(AgentState(agent_id=node.id, state=node.state(with_content=with_content,
                                                                with_prompt=first or with_content)), log=log)
        if self._log is not None:
            hidden = self._hidden()
            row = node.row(self.run_id, self.session_id)
            self._log.agent_row(redact(row, hidden) if hidden else row)

    def _hidden(self) -> list[str]:
        """:meth:`secrets`, worked out once per run (events are many)."""
        if self._hidden_values is None:
            self._hidden_values = self.secrets()
        return self._hidden_values

    def _redacted(self, event: OutboundEvent) -> OutboundEvent:
        hidden = self._hidden()
        if not hidden:
            return event
        wire = to_wire(event)
        clean = redact(wire, hidden)
        return event if clean == wire else cast("OutboundEvent", from_wire(clean))

    async def flush_log(self) -> None:
        """Write the buffered events now (before another process is told to log after them)."""
        if self._log is not None:
            await self._log.flush()

    def note(self, node: AgentNode, text: str) -> None:
        """Record a notice (budget, fallback) in the agent's metadata."""
        node.metadata.setdefault("notes", []).append(text)
        self.emit_state(node)

    def on_loop(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the run's loop: now when called there (or no loop runs), else soon, thread-safely."""
        loop = self.loop
        if loop is None or loop.is_closed():
            fn()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or not loop.is_running():
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    # --- used by the steps and tools (AgentContext) ----------------------------------------------

    def charge(self, node: AgentNode, usage: Usage, *, log: bool = True) -> None:
        """Add a model call's usage; hitting ``max_tokens`` stops the whole run (``log``: as in :meth:`emit_state`)."""
        node.usage.add(usage)
        self._tokens += usage.input_tokens + usage.output_tokens
        limit = self.options.max_tokens
        if usage.basis == "unknown" and limit is not None and not self._tokens_unenforceable:
            self._tokens_unenforceable = True  # said once per run, on the root
            provider = getattr(self.provider, "name", "this provider")
            self.note(self.nodes.get(self.root_id, node), f"max_tokens={limit} cannot be enforced: {provider} "
                      "reports no token usage (the tree's figures are unknown)")
        if self.monitor is not None:
            self.monitor.api_call(node, usage.input_tokens + usage.output_tokens)
        self.emit_state(node, log=log)
        if limit is not None and self._tokens > limit:
            reason = f"budget exceeded: max_tokens={limit} (the tree used {self._tokens} tokens)"
            self.budget_stop(reason)
            raise asyncio.CancelledError(reason)

    async def checkpoint(self, node: AgentNode) -> None:
        """Between steps and tool calls: the resource monitor's verdict, then wait while paused.

        An agent held by its own pause or an ancestor's shows ``paused`` until it is resumed.
        """
        if self.monitor is not None:
            from agentstack_lab.monitoring.resources import Terminated

            try:
                await self.monitor.enforce(node)
            except Terminated as exc:
                self.stop_subtree(node, str(exc), below=f"stopped because its parent {node.name} was stopped")
                raise asyncio.CancelledError(str(exc)) from None
        while True:
            held = next((n for n in self._lineage(node) if n.metadata.get("paused")), None)
            if held is None:
                if node.status == "paused":
                    node.set_status("running")
                    self.emit_state(node)
                return
            if node.status == "running":
                node.set_status("paused")
                self.emit_state(node)
            await self.resume_events.setdefault(held.id, asyncio.Event()).wait()

    async def ask_user(self, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None = None, *,
                       validate: Callable[[Any], Any] | None = None, optional: bool = False,
                       opened: Callable[[str], Any] | None = None, waiting: str = "waiting_user") -> Any:
        """Ask the person: a persisted decision any surface answers (see :mod:`agentstack_lab.engine.queries`)."""
        from agentstack_lab.engine.queries import ask

        return await ask(self, node, kind, prompt, options, validate=validate, optional=optional, opened=opened,
                         waiting=waiting)

    def record_answer(self, node: AgentNode, kind: str, prompt: str, answer: Any, source: str, *,
                      query_id: str | None = None, by: str | None = None, state: str = "answered",
                      reason: str | None = None) -> None:
        """Keep a query's answer in the agent's metadata (the tree shows the Q&A trace from it).

        ``state="cancelled"`` (with ``reason``): the agent stopped while it waited; the trace lists the query as such.
        """
        verdict = as_dict(answer).get("approved")
        shown: Any = {"approved": verdict} if kind == "approval" and isinstance(answer, dict) else answer
        entry: dict[str, Any] = {"kind": kind, "question": prompt, "answer": shown, "source": source,
                                 "queryId": query_id, "by": by}
        if state != "answered":
            entry.update(state=state, reason=reason)
        node.metadata.setdefault("answers", []).append(entry)
        self.emit_state(node)

    async def gate(self, parent: AgentNode, subtasks: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
        """Consensus on a parent's planned subtasks (see :mod:`agentstack_lab.engine.gate`)."""
        return await self.control.gate(parent, subtasks)

    def spawn_child(self, parent: AgentNode, prompt: str, agent_type: str | None = None, *,
                    origin: str = "fork", agent_id: str | None = None) -> AgentNode:
        """Create and start a child agent, within the depth, breadth and agent-count budgets.

        With drift detection on, a child whose prompt repeats an ancestor's is started with a warning
        or, under ``prevent``, not started (``DriftPreventedError``; the parent gets a note).
        """
        agent_type = agent_type or self.default_type
        self.registry.get(agent_type)
        opts = self.options
        if parent.depth + 1 > opts.max_depth:
            raise BudgetExceededError(f"max_depth={opts.max_depth} reached: agent {parent.name} at depth "
                                      f"{parent.depth} cannot start a subagent")
        if len(parent.subagents) >= opts.max_children:
            raise BudgetExceededError(f"max_children={opts.max_children} reached for agent {parent.name}")
        if len(self.nodes) >= opts.max_agents:
            raise BudgetExceededError(f"max_agents={opts.max_agents} reached for this run")
        if parent.terminal:
            raise AgentRunError(f"agent {parent.name} is {parent.status} and cannot start subagents")
        child_id = agent_id or str(uuid.uuid4())
        flags, vector = self.control.check_spawn(parent, prompt, agent_type, child_id)
        child = AgentNode(id=child_id, type=agent_type, prompt=prompt, depth=parent.depth + 1,
                          parent_id=parent.id, identity_id=parent.identity_id, metadata={"origin": origin, **flags})
        self.nodes[child.id] = child
        self.control.spawned(child, vector)
        parent.subagents.append(child.id)
        self.emit_state(child)
        if self.monitor is not None:
            self.monitor.subtask(parent)
        self.emit_state(parent)
        if opts.coordinate and parent.id == self.root_id and origin == "subquestion":
            from agentstack_lab.engine.coordinate import queued_agent  # lazy: only coordinated runs need it

            body = queued_agent(self, child, priority=max(1, 8 - len(parent.subagents) + 1))
        else:
            body = self.agent_body(child)
        child.task = asyncio.get_running_loop().create_task(body, name=f"agentstack-{child.name}")
        return child

    def children(self, node: AgentNode) -> list[AgentNode]:
        """``node``'s child agents, in the order they were started."""
        return [self.nodes[c] for c in node.subagents]

    def exec_context(self, node: AgentNode, call_id: str | None = None) -> ExecContext:
        """What code ``node`` runs gets: ``fork``/``wait`` into this run, the secrets to redact, provenance ids."""
        loop = asyncio.get_running_loop()
        return ExecContext(agent_id=node.id, run_id=self.run_id, call_id=call_id, secrets=tuple(self.secrets()),
                           fork=fork_from_thread(loop, lambda prompt, kind: self.spawn_child(node, prompt, kind).id),
                           wait=wait_from_thread(loop, self.nodes))

    async def record_changes(self, node: AgentNode, call_id: str | None, changes: list[dict[str, str]]) -> None:
        """Persist the kernel variables a python call of ``node`` touched as ``provenance`` rows."""
        if changes:
            from agentstack_lab.engine.history import change_rows
            from agentstack_lab.store import provenance

            rows = change_rows(changes, run_id=self.run_id, agent_id=node.id, call_id=call_id, secrets=self.secrets())
            try:
                await thread_call(provenance.write, self.workspace.db, rows)
            except Exception as exc:  # the code ran: its result still reaches the model; the log says what was lost
                log.error("agentstack-lab: could not record provenance of %s (run %s): %s",
                          ", ".join(r["name"] for r in rows), self.run_id, exc)

    def approval_verdict(self, code: str) -> Verdict:
        """The approval rules' verdict on ``code`` (writes judged against the kernel's working folder).

        The saved rules are read at every call, so one saved a moment ago (here or from another
        process) decides the next call.
        """
        from agentstack_lab.approval import ApprovalPolicy, SavedRules

        saved = SavedRules(self.decision_store.db).rules(self.session_id) if self.decision_store is not None else []
        policy = ApprovalPolicy.from_config(self.workspace.config.approval, session_id=self.session_id, saved=saved)
        return policy.decide(code, cwd=os.getcwd())

    def save_always_rule(self, node: AgentNode, query_id: str | None, code: str, classes: list[str],
                         scope: str) -> dict[str, Any]:
        """A person answered "Always allow code like this": save the rule and note it on the decision.

        Returns what the decision records as ``savedRule``: the rule's id, scope and description, or
        ``refused`` saying why none was saved (a built-in deny covers the code, a secret in it, no database).
        """
        from agentstack_lab.approval import SavedRules, always_rule
        from agentstack_lab.approval.saved import SavedRuleError
        from agentstack_lab.decisions import DecisionError

        store = self.decision_store
        rule = always_rule(classes, code)
        note: dict[str, Any]
        if store is None:
            note = {"refused": "no workspace database to save the rule in"}
        elif rule.code is not None and redact(code, self.secrets()) != code:
            note = {"refused": "the code holds a secret, and the rule would keep its exact text"}
        else:
            by = store.get(query_id).answered_by if query_id is not None else None
            try:
                saved = SavedRules(store.db).add(rule, scope=scope, session_id=self.session_id, created_by=by,
                                                 decision_id=query_id)
                note = {"id": saved.id, "scope": saved.scope, "description": saved.description}
            except SavedRuleError as exc:
                note = {"refused": str(exc)}
        if store is not None and query_id is not None:
            with contextlib.suppress(DecisionError):
                store.annotate(query_id, answered=True, savedRule=note)
        self.note(node, f"saved approval rule {note['id']} ({note['scope']}): {note['description']}" if "id" in note
                  else f"no approval rule saved: {note['refused']}")
        return note

    def record_rule_decision(self, node: AgentNode, prompt: str, code: str, verdict: dict[str, Any]) -> None:
        """A rule decided an approval: an answered decision row (by ``rule:<id>``) and the agent's answer trace."""
        rule = str(verdict.get("rule"))
        answer: dict[str, Any] = {"approved": verdict.get("action") == "allow"}
        if not answer["approved"]:
            answer["reason"] = f"denied by approval rule {rule}"
        query_id = None
        store = self.decision_store
        if store is not None:
            decision = store.create(kind="approval", prompt=prompt, run_id=self.run_id, agent_id=node.id,
                                    options={"code": code, "verdict": verdict}, code=code,
                                    metadata={"rule": rule, "verdict": verdict})
            store.answer(decision.id, answer, by=f"rule:{rule}", surface="rule")
            query_id = decision.id
        self.record_answer(node, "approval", prompt, answer, "rule", query_id=query_id, by=f"rule:{rule}")

    def secrets(self) -> list[str]:
        """Secret values to hide from tool results: secret-looking env vars, configured API keys, the provider's."""
        return run_secrets(self.workspace, self.provider)

    async def try_first(self, query_id: str) -> DryRunResult:
        """"Try it first": dry-run a pending python approval's code, attach the report to its decision."""
        entry = self.open_queries.get(query_id)
        query, fut = (entry[0], entry[1]) if entry is not None else (None, None)
        code = query.options.get("code") if query is not None and query.kind == "approval" else None
        if query is None or not isinstance(code, str) or (fut is not None and fut.done()):
            raise ValueError(f"no pending python approval {query_id} in run {self.run_id}")
        hidden = self.secrets()
        result = await self.executor.dry_run(code, secrets=hidden)
        report = redact(result.to_dict(), hidden)
        node = self.nodes.get(query.agent_id)
        if node is not None:   # the tree shows it too
            node.metadata.setdefault("dryRuns", {})[query_id] = report
            self.emit_state(node)
        if self.decision_store is not None:
            from agentstack_lab.decisions import DecisionClosedError

            with contextlib.suppress(DecisionClosedError):  # answered meanwhile: the report is still returned
                self.decision_store.annotate(query_id, dryRun=report)
        return result

    def memory(self, node: AgentNode) -> Any:
        """The workspace memory acting for this run's session and ``node``."""
        return self.workspace.memory.scoped(self.session_id, agent_id=node.id)

    @property
    def namespace(self) -> str:
        """This run's memory namespace, ``session:<session id>``."""
        return f"session:{self.session_id}"

    # --- interventions and stopping ---------------------------------------------------------------

    def intervene(self, agent_id: str, *, user_comment: str | None = None, user_content: str | None = None,
                  status: str | None = None, surface: str = "widget", by: str | None = None) -> None:
        """A comment, replaced content, or a status change for one agent (see :mod:`.inbound`)."""
        from agentstack_lab.engine.inbound import intervene

        intervene(self, agent_id, user_comment=user_comment, user_content=user_content, status=status,
                  surface=surface, by=by)

    def _lineage(self, node: AgentNode) -> list[AgentNode]:
        out = [node]
        while out[-1].parent_id and out[-1].parent_id in self.nodes:
            out.append(self.nodes[out[-1].parent_id])
        return out

    def subtree(self, node: AgentNode) -> list[AgentNode]:
        """``node`` and every agent below it."""
        out = [node]
        for c in node.subagents:
            out.extend(self.subtree(self.nodes[c]))
        return out

    def stop(self, agent_id: str | None = None, *, reason: str = "stopped by the user") -> None:
        """Stop the whole run (no id) or one agent and its subtree; its children say whose stop it was."""
        node = self.node(agent_id or self.root_id) if agent_id or self.nodes else None
        if node is None:  # not started yet
            if self.task is not None:
                self.on_loop(self.task.cancel)
            return
        def act() -> None:
            self.stop_subtree(node, reason, below=f"stopped because its parent {node.name} was stopped ({reason})")

        try:
            current = asyncio.current_task()
        except RuntimeError:  # no loop runs in this thread
            current = None
        if current is not None and self.loop is not None and any(n.task is current for n in self.subtree(node)):
            # called from inside an agent it stops (a subscriber of that agent's events): the agent's task is
            # cancelled once it yields, instead of being skipped as one that raises its own CancelledError
            self.loop.call_soon(act)
            return
        self.on_loop(act)

    def stop_subtree(self, node: AgentNode, reason: str, *, below: str | None = None) -> None:
        """Stop ``node`` with ``reason`` and its subtree (with ``below`` when given, their own reason)."""
        for n in self.subtree(node):
            if n.terminal:
                continue
            n.stop_reason = n.stop_reason or (reason if n is node or below is None else below)
            if n.task is not None and n.task is asyncio.current_task():
                continue  # the caller raises CancelledError itself
            if n.task is not None and not n.task.done():
                n.task.cancel(reason)
            elif n.status in UNFINISHED:
                self.finish_agent(n, "stopped", error=n.stop_reason)

    def budget_stop(self, reason: str) -> None:
        """A run-wide budget ran out: the run fails with ``reason``; every agent says it was the run's budget."""
        if self.failure is None:
            self.failure = BudgetExceededError(reason)
            self.error = reason
        root = self.root
        if root is not None:
            self.stop_subtree(root, reason, below=f"stopped: the run's {reason}")

    def log_outage(self, exc: AgentstackError) -> None:
        """The event log could not be written for ``engine.event_log_retry_s``: the run stops, failed, saying why."""
        if self.failure is None:
            self.failure, self.error = exc, str(exc)
        root = self.root
        if root is not None and not root.terminal:
            self.stop_subtree(root, str(exc), below="stopped: the run's event log could not be written")

    def finish_agent(self, node: AgentNode, status: str, *, result: str | None = None, error: str | None = None,
                     logged: bool = False) -> None:
        """End one agent with ``status`` (and its result or error), announcing the change.

        ``logged``: the process that ran it (a worker, for a queued subtask) already logged its
        ``agent-completed`` or ``error``: announced, not logged again (one terminal event per agent).
        """
        node.set_status(status)
        if status == "completed":
            node.result = result
            self.emit_state(node)
            self.emit(AgentCompleted(agent_id=node.id, result=result or ""), log=not logged)
            parent = self.nodes.get(node.parent_id) if node.parent_id else None
            if self.monitor is not None and parent is not None:
                self.monitor.deliverable(parent, "subagent result")
        else:
            node.error = error
            self.emit_state(node)
            self.emit(ErrorEvent(agent_id=node.id, error=error or status), log=not logged)
        if self.hooks is not None:
            self.hooks.post_task(node)

    # --- an agent's body --------------------------------------------------------------------------

    async def agent_body(self, node: AgentNode) -> None:
        """Run ``node``'s steps to its end: completed, stopped (with why) or failed (its subtree stopped)."""
        try:
            if self.monitor is not None:
                self.monitor.started(node)
            if self.hooks is not None:
                self.hooks.pre_task(node)
            node.set_status("running")
            self.emit_state(node)
            result = await run_steps(self, node)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            reason = node.stop_reason or (exc.args[0] if exc.args else None) or "stopped"
            await self._settle_children(node, f"stopped because its parent {node.name} was stopped ({reason})")
            if not node.terminal:
                self.finish_agent(node, "stopped", error=reason)
            return
        except HeadlessQueryError as exc:
            if self.failure is None:
                self.failure, self.error = exc, str(exc)
            root = self.nodes[self.root_id]
            if root is not node:
                self.stop_subtree(root, f"run failed: {exc}")
            await self._settle_children(node, f"run failed: {exc}")
            self.finish_agent(node, "failed", error=str(exc))
            return
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, AgentstackError):  # a bug, not a refusal: keep its traceback
                log.exception("agentstack-lab: agent %s failed with an unexpected error", node.name)
            await self._settle_children(node, f"parent {node.name} failed")
            self.finish_agent(node, "failed", error=error)
            return
        if node.terminal:
            return
        self.finish_agent(node, "completed", result=result)

    async def _settle_children(self, node: AgentNode, reason: str) -> None:
        """Stop a failing or stopped agent's subtree and let the children record it."""
        kids = [self.nodes[c] for c in node.subagents]
        for k in kids:
            self.stop_subtree(k, reason)
        tasks = [k.task for k in kids if k.task is not None and not k.task.done()]
        if tasks:
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)
        for k in kids:  # a child cancelled before its first step never ran its own handler
            for n in self.subtree(k):
                if not n.terminal:
                    self.finish_agent(n, "stopped", error=n.stop_reason or reason)

    # --- beginning and end ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin on the running loop and schedule the run's task (the root's row is written before this returns)."""
        if self.task is None:
            self.loop = asyncio.get_running_loop()
            self._begin()
            self.task = self.loop.create_task(self._main(), name=f"agentstack-run-{self.run_id[:8]}")
            for callback in self.done_callbacks:
                self.task.add_done_callback(callback)
            self.done_callbacks.clear()

    def _start_session(self) -> None:
        if self.session_id is not None:
            return
        try:
            self.session_id = self.workspace.sessions.start(name=f"agent run {self.run_id[:8]}").id
            self.owns_session = True
            return
        except Exception as exc:  # noqa: BLE001 - fall back to the run's own namespace
            log.warning("agentstack-lab: could not start a session for run %s: %s", self.run_id, exc)
        self.session_id = self.run_id

    def _begin(self) -> None:
        """Record the identity's spawn, open the event log and the session, write the root agent's row now."""
        if self.identity is not None:
            # checked again inside the audit's write transaction: retired since __init__ means no spawn row
            self.identity = self.workspace.identities.record_spawn(self.identity.agent_id, self.root_id)
        self._start_session()
        db = self.workspace.db
        from agentstack_lab.engine.liveness import reap_orphans

        reap_orphans(db)  # agents of runs whose process died are failed, not left "running"
        self._log = EventLog(db, self.run_id, owner=self.attach is None,
                             session_exists=self.workspace.session_lookup,
                             retry_s=self.workspace.config.engine.event_log_retry_s,
                             on_outage=lambda exc: self.on_loop(lambda: self.log_outage(exc)))
        self._log.start()
        from agentstack_lab.decisions import decisions_for

        self.decision_store = decisions_for(self.workspace)
        if self.workspace.config.monitoring.enabled:
            from agentstack_lab.monitoring.resources import RunMonitor

            self.monitor = RunMonitor(self, self.workspace.config.monitoring, db=db)
        from agentstack_lab.hooks import RunHooks

        self.hooks = RunHooks(self.workspace, run_id=self.run_id, session_id=self.session_id)
        self.hooks.session_start(prompt=self.prompt, agent_type=self.agent_type)
        at = self.attach
        root = AgentNode(id=self.root_id, type=self.agent_type, prompt=self.prompt, parent_id=at and at.parent_id,
                         depth=at.depth if at else 0, identity_id=self.identity.agent_id if self.identity else None,
                         metadata={"provider": getattr(self.provider, "name", "?"),
                                   "executor": self.executor.name, "sessionId": self.session_id,
                                   "origin": self.origin})
        model = self.model or getattr(self.provider, "model", None)
        if isinstance(model, str) and model:  # what its calls are priced by (providers/prices.py)
            root.metadata["model"] = model
        if at is None:  # the effective options, in the agents row: another process (REST) reads them there
            root.row_only["options"] = self.options.to_dict()
        if self.identity is not None:
            root.metadata["identityId"] = self.identity.agent_id
        if self.cell_id:
            root.metadata["cellId"] = self.cell_id
        if self.continues is not None:  # a follow-up: the thread so far goes before its request
            from agentstack_lab.engine.followup import transcript

            root.metadata["continues"] = self.continues
            root.metadata["continuesPrompt"] = self.thread[-1].prompt[:200] if self.thread else ""
            root.history = transcript(self.thread)
        self.nodes[root.id] = root
        # a retried subtask starts from empty text; a first attempt's snapshot is the coordinator's "queued" one
        self.emit_state(root, with_content=at is not None, log=at is None or at.retry)
        self._log.write_now()
        self.control.begin(root)

    async def _main(self) -> None:
        watchdog = control = None
        root = self.nodes[self.root_id]
        try:
            if root.terminal:  # stopped before it began
                return
            if self.options.coordinate and self.options.cluster is not None:
                from agentstack_lab.engine.coordinate import connect_first

                try:  # an unreachable cluster fails the run before any subagent is queued
                    await connect_first(self)
                except AgentstackError as exc:
                    self.failure, self.error = exc, str(exc)
                    self.finish_agent(root, "failed", error=str(exc))
                    return
            if self.options.timeout_s is not None:
                watchdog = asyncio.get_running_loop().call_later(
                    self.options.timeout_s, self.budget_stop,
                    f"budget exceeded: timeout_s={self.options.timeout_s:g} (wall clock)")
            root.task = asyncio.get_running_loop().create_task(self.agent_body(root), name=f"agentstack-{root.name}")
            if self.decision_store is not None:
                from agentstack_lab.engine.control import follow_interventions

                control = asyncio.get_running_loop().create_task(
                    follow_interventions(self, self.decision_store.db), name=f"agentstack-control-{self.run_id[:8]}")
            try:
                await asyncio.shield(root.task)
            except asyncio.CancelledError:
                self.stop_subtree(root, root.stop_reason or "stopped by the user")
                with contextlib.suppress(BaseException):
                    await root.task
            leftovers = [n.task for n in self.nodes.values() if n.task is not None and not n.task.done()]
            for n in self.nodes.values():
                if not n.terminal:
                    self.stop_subtree(n, "the run ended")
            if leftovers:
                await asyncio.gather(*leftovers, return_exceptions=True)
            if self.failure is None and root.status == "failed":
                self.failure = AgentFailedError(root.error or "the root agent failed")
                self.error = root.error
        finally:
            await self._end(root, watchdog, control)

    async def _end(self, root: AgentNode, watchdog: asyncio.TimerHandle | None,
                   control: asyncio.Task[None] | None) -> None:
        """Tear down: the one place that guarantees nothing outlives the run.

        No pending decision or query, no unflushed log batch, no session the run started itself (a
        session the caller passed stays open).
        """
        if watchdog is not None:
            watchdog.cancel()
        if self.hooks is not None:
            self.hooks.session_end(status=root.status, result=root.result, error=root.error)
        if control is not None:
            control.cancel()
            with contextlib.suppress(BaseException):
                await control
        for _q, fut, _v in list(self.open_queries.values()):
            if fut is not None:
                fut.cancel()
        if self.decision_store is not None:  # nothing may stay pending for a run that is over
            with contextlib.suppress(Exception):
                self.decision_store.cancel_for_run(self.run_id, f"the run ended ({root.status})",
                                                    agent_ids=list(self.nodes) if self.attach else None)
        if self.coordination is not None:
            await self.coordination.shutdown()
        if self._log is not None:
            try:
                await self._log.close()
            except AgentstackError as exc:  # events not stored: the run did not complete, whatever it did
                self.log_outage(exc)
                self.failure, self.error = exc, str(exc)
                root.status, root.error = "failed", str(exc)   # in memory: the log cannot say it any more
        if self.owns_session and self.session_id is not None:
            try:
                self.workspace.sessions.end(self.session_id)
            except Exception as exc:  # noqa: BLE001 - the run's outcome stands; the session is listed as active
                log.warning("agentstack-lab: could not end session %s of run %s: %s", self.session_id,
                            self.run_id, exc)


def deliver(callback: Callable[[OutboundEvent], Any], event: OutboundEvent) -> None:
    """Hand ``event`` to one subscriber; a broken subscriber must not break the run."""
    try:
        callback(event)
    except Exception:
        log.exception("agentstack-lab: event subscriber %r failed", callback)


def _resolve_provider(provider: Any, workspace: Workspace, model: str | None) -> Any:
    if provider is not None and not isinstance(provider, str):
        if not callable(getattr(provider, "stream", None)):
            raise TypeError(f"provider must be a name or have a stream() method, got {type(provider).__name__}")
        return provider
    return workspace.get_provider(provider, model=model)
