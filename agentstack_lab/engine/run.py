"""An agent run: the tree of agents, its event stream, budgets, queries and interventions.

Each agent is an asyncio task; children run concurrently. The steps and tools see the run only
through :class:`~agentstack_lab.engine.context.AgentContext`, which :class:`AgentRun` implements
(the "used by the steps and tools" section below); this module imports them, never the reverse (nor does
engine/coordinate.py, which runs a queued child as ``type(run)``). Every outbound event goes through
:meth:`AgentRun.emit` on the run's loop, in one total order: kept in ``run.events``, handed to
subscribers, and appended to the ``events`` table by the :class:`~agentstack_lab.engine.log.EventLog`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.cassettes import provider_for, run_secrets
from agentstack_lab.engine.executors import ExecContext, Executor, make_executor
from agentstack_lab.engine.followup import RunStillGoingError, Turn, thread_of
from agentstack_lab.engine.gate import RunControl
from agentstack_lab.engine.inbound import InboundMixin
from agentstack_lab.engine.lifecycle import LifecycleMixin
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
from agentstack_lab.errors import AgentstackError, UsageError
from agentstack_lab.events import (
    UNFINISHED,
    AgentCompleted,
    AgentState,
    ErrorEvent,
    OutboundEvent,
    UserQuery,
)
from agentstack_lab.providers.base import Usage

if TYPE_CHECKING:
    from agentstack_lab.agents.identity import AgentIdentity
    from agentstack_lab.agents.registry import AgentRegistry
    from agentstack_lab.workspace import Workspace

__all__ = ["AgentRun", "RunOptions", "run_agent", "HeadlessQueryError", "BudgetExceededError", "AgentRunError",
           "AgentFailedError", "RunStillGoingError"]

log = logging.getLogger(__name__)


class AgentRun(InboundMixin, LifecycleMixin):
    """A recursive agent run; ``await run`` for the result, ``run.tree`` for a snapshot."""

    HeadlessQueryError = HeadlessQueryError
    owns_session: bool = False  # True once _begin started a session for this run: it ends with the run
    BudgetExceededError = BudgetExceededError

    def __init__(self, prompt: str, *, workspace: Workspace, provider: Any = None, agent_type: str | None = None,
                 options: RunOptions | dict[str, Any] | None = None, model: str | None = None,
                 session_id: str | None = None, executor: Executor | str | None = None,
                 origin: str | None = None, attach: Attachment | None = None, follows: AgentRun | None = None):
        if not isinstance(prompt, str) or not prompt.strip():
            raise UsageError("prompt must be a non-empty string")
        # a follow-up (engine/followup.py): the thread so far, checked before anything starts
        self.thread: tuple[Turn, ...] = thread_of(follows) if follows is not None else ()
        self.continues: str | None = follows.id if follows is not None else None
        config = workspace.config
        self.options = RunOptions.coerce(options, config)
        self.registry: AgentRegistry = workspace.agent_types
        self.default_type = config.agents.default_type or "researcher"
        agent_type = agent_type or self.default_type
        self.registry.get(agent_type)  # unknown type: clear error before anything starts
        self.workspace = workspace
        # the identity this run acts as: unknown or retired is a clear error before anything starts
        self.identity: AgentIdentity | None = (
            workspace.identities.require_can_spawn(self.options.identity) if self.options.identity else None)
        self.model = model
        # record/replay wrap the provider the whole tree shares; strict replay builds no real provider (no key)
        self.provider = provider_for(self.options, workspace, lambda: self._resolve_provider(provider, workspace, model))
        self.executor = make_executor(executor if executor is not None else self.options.executor)
        journal = getattr(self.executor, "journal", None)
        if journal is not None:  # the live kernel's undo snapshots are bounded by the workspace's config
            journal.max_bytes = config.engine.undo.max_snapshot_bytes
        self.prompt = prompt
        self.agent_type = agent_type
        self.origin = origin or default_origin()
        self.attach = attach  # a subtask run by a worker, placed in its coordinator's tree
        self.id = attach.agent_id if attach else str(uuid.uuid4())
        self.run_id = attach.run_id if attach else self.id  # the run whose log and rows hold this tree
        self.coordination: Any = None  # engine/coordinate.py, when options.coordinate queues subquestions
        if follows is not None:
            session_id = _follow_session(workspace, follows, session_id)
        if session_id is not None:  # "" is an error (SessionError), never "no session"
            from agentstack_lab.memory.access import check_session_id  # here: the memory package loads numpy

            check_session_id(session_id)
        self.session_id = session_id
        self.nodes: dict[str, AgentNode] = {}
        self.error: str | None = None
        self._failure: BaseException | None = None
        self._events: list[OutboundEvent] = []
        self._subscribers: list[Callable[[OutboundEvent], Any]] = []
        # query id -> (query, future, validator); the future is None when the query is a persisted decision
        self.open_queries: dict[str, tuple[UserQuery, asyncio.Future[Any] | None, Callable[[Any], Any] | None]] = {}
        self.decision_store: Any = None  # the workspace's Decisions when it has a database
        self._resume: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._log: EventLog | None = None
        self._tokens = 0
        self._tokens_unenforceable = False
        self.control = RunControl(self)  # tasks' drift checks and consensus checkpoints (engine/gate.py)
        self.monitor: Any = None  # the resource-exhaustion monitor (monitoring/resources.py), set at _begin
        self.hooks: Any = None  # lifecycle hooks (hooks.py), set at _begin

    @staticmethod
    def _resolve_provider(provider: Any, workspace: Workspace, model: str | None) -> Any:
        if provider is not None and not isinstance(provider, str):
            if not callable(getattr(provider, "stream", None)):
                raise TypeError(f"provider must be a name or have a stream() method, got {type(provider).__name__}")
            return provider
        return workspace.get_provider(provider, model=model)

    # --- public surface -------------------------------------------------------------------

    @property
    def root_id(self) -> str:
        return self.id

    @property
    def status(self) -> str:
        root = self.nodes.get(self.id)
        return root.status if root else "pending"

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    @property
    def result(self) -> str | None:
        root = self.nodes.get(self.id)
        return root.result if root else None

    @property
    def tree(self) -> dict[str, Any]:
        return snapshot_tree(self.nodes, self.id)

    @property
    def events(self) -> list[OutboundEvent]:
        return list(self._events)

    @property
    def pending_queries(self) -> list[UserQuery]:
        return [q for q, fut, _ in self.open_queries.values() if fut is None or not fut.done()]

    def start(self) -> AgentRun:
        """Schedule the run on the running loop and return at once.

        The root agent (status ``pending``) is already in ``run.tree`` and, with a database, in the
        ``agents`` table when this returns, so another process can find the run right away.
        """
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._begin()
            self._task = self._loop.create_task(self._main(), name=f"agentstack-run-{self.id[:8]}")
        return self

    def __await__(self):
        return self.wait().__await__()

    async def wait(self, *, raise_on_error: bool = True) -> str | None:
        """Wait for the end; raise the failure (headless, budget, root failure) unless told not to."""
        self.start()
        assert self._task is not None
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            self.stop(reason="the awaiting code was cancelled")
            raise
        if raise_on_error and self._failure is not None:
            raise self._failure
        return self.result

    def __aiter__(self) -> AsyncIterator[OutboundEvent]:
        return self.stream()

    async def stream(self) -> AsyncIterator[OutboundEvent]:
        """All events of the run, from the first, until it ends (starts it if needed)."""
        queue: asyncio.Queue[OutboundEvent] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait, replay=True)
        self.start()
        assert self._task is not None
        getter: asyncio.Future[OutboundEvent] | None = None
        try:
            while True:
                if queue.empty() and self._task.done():
                    return
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                else:
                    getter.cancel()
        finally:
            if getter is not None:
                getter.cancel()  # the consumer was cancelled while waiting: no getter left pending
            unsubscribe()
            if not self._task.done():
                self.stop(reason="the event consumer went away")

    def provenance(self) -> Any:
        """What this run did to kernel variables (and what undoing it put back), as a pandas DataFrame."""
        return self.workspace.provenance(run_id=self.run_id)

    def undo(self) -> list[Any]:
        """Put back the kernel variables this run created, changed or deleted (see ``engine/provenance.py``).

        Raises:
            UndoRefusedError: A name was changed since (named), was too big to snapshot, or the run
                was undone already; nothing was restored.
        """
        from agentstack_lab.engine.history import undo_run

        return undo_run(self.executor, self.workspace.db, self.run_id, secrets=self.secrets())

    def subscribe(self, callback: Callable[[OutboundEvent], Any], replay: bool = True) -> Callable[[], None]:
        """Call ``callback(event)`` for every outbound event, in order; returns an unsubscribe function."""
        if replay:
            for ev in list(self._events):
                self._deliver(callback, ev)
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    async def checkpoint(self, node: AgentNode) -> None:
        """Between steps and tool calls: the resource monitor's verdict, then wait while paused.

        An agent held by its own pause or an ancestor's shows ``paused`` until it is resumed.
        """
        if self.monitor is not None:
            from agentstack_lab.monitoring.resources import Terminated

            try:
                await self.monitor.enforce(node)
            except Terminated as exc:
                self._stop_subtree(node, str(exc), below=f"stopped because its parent {node.name} was stopped")
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
            await self._resume.setdefault(held.id, asyncio.Event()).wait()

    def _lineage(self, node: AgentNode) -> list[AgentNode]:
        out = [node]
        while out[-1].parent_id and out[-1].parent_id in self.nodes:
            out.append(self.nodes[out[-1].parent_id])
        return out

    def stop(self, agent_id: str | None = None, *, reason: str = "stopped by the user") -> None:
        """Stop the whole run (no id) or one agent and its subtree."""
        node = self._node(agent_id or self.id) if agent_id or self.nodes else None
        if node is None:  # not started yet
            if self._task is not None:
                self._on_loop(self._task.cancel)
            return
        self._on_loop(lambda: self._stop_subtree(node, reason))

    # --- used by the steps and tools ------------------------------------------------------------

    def emit(self, event: OutboundEvent, *, log: bool = True) -> None:
        """Announce ``event`` to subscribers; ``log=False`` when another process already logged it."""
        self._events.append(event)
        if self._log is not None and log:
            self._log.append(event)
        for cb in list(self._subscribers):
            self._deliver(cb, event)

    def emit_state(self, node: AgentNode, *, with_content: bool = False, log: bool = True) -> None:
        """Announce ``node``'s snapshot (and write its agents row); ``log=False``: another run logged it."""
        self.emit(AgentState(agent_id=node.id, state=node.state(with_content=with_content)), log=log)
        if self._log is not None:
            self._log.agent_row(node.row(self.run_id, self.session_id))

    async def flush_log(self) -> None:
        """Write the buffered events now (before another process is told to log after them)."""
        if self._log is not None:
            await self._log.flush()

    def note(self, node: AgentNode, text: str) -> None:
        """Record a notice (budget, fallback) in the agent's metadata."""
        node.metadata.setdefault("notes", []).append(text)
        self.emit_state(node)

    def charge(self, node: AgentNode, usage: Usage, *, log: bool = True) -> None:
        """Add a model call's usage; hitting ``max_tokens`` stops the whole run (``log``: as in :meth:`emit_state`)."""
        node.usage.add(usage)
        self._tokens += usage.input_tokens + usage.output_tokens
        limit = self.options.max_tokens
        if usage.basis == "unknown" and limit is not None and not self._tokens_unenforceable:
            self._tokens_unenforceable = True  # said once per run, on the root
            provider = getattr(self.provider, "name", "this provider")
            self.note(self.nodes.get(self.id, node), f"max_tokens={limit} cannot be enforced: {provider} reports no "
                      "token usage (the tree's figures are unknown)")
        if self.monitor is not None:
            self.monitor.api_call(node, usage.input_tokens + usage.output_tokens)
        self.emit_state(node, log=log)
        if limit is not None and self._tokens > limit:
            reason = f"budget exceeded: max_tokens={limit} (the tree used {self._tokens} tokens)"
            self._budget_stop(reason)
            raise asyncio.CancelledError(reason)

    def ask(self, prompt: str, *, options: RunOptions | dict[str, Any] | None = None, provider: Any = None,
            agent_type: str | None = None, model: str | None = None) -> AgentRun:
        """Ask a follow-up in this run's conversation: a new run whose root sees this thread's questions and answers.

        It keeps this run's session, provider, model, type, executor and budgets (``options`` overrides
        fields; ``auto_approve``, ``on_query``, ``answers`` and cassettes are not carried over) and records
        ``continues: <this run's id>`` in its root's metadata. Started at once when a loop is running
        (in a notebook cell), else when awaited.

        Raises:
            RunStillGoingError: This run has not ended yet (one line; a follow-up needs its answer).
        """
        from agentstack_lab.engine.followup import base_provider, follow_options

        run = AgentRun(prompt, workspace=self.workspace, provider=provider if provider is not None else base_provider(self),
                       agent_type=agent_type or self.agent_type, options=follow_options(self.options, options),
                       model=model if model is not None else self.model, executor=self.executor, origin=self.origin,
                       follows=self)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no running loop: `await run` starts it
            return run
        return run.start()

    async def ask_user(self, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None = None, *,
                       validate: Callable[[Any], Any] | None = None, optional: bool = False,
                       opened: Callable[[str], Any] | None = None, waiting: str = "waiting_user") -> Any:
        """Ask the person: a persisted decision any surface answers (see :mod:`agentstack_lab.engine.queries`)."""
        from agentstack_lab.engine.queries import ask

        return await ask(self, node, kind, prompt, options, validate=validate, optional=optional, opened=opened,
                         waiting=waiting)

    def record_answer(self, node: AgentNode, kind: str, prompt: str, answer: Any, source: str, *,
                      query_id: str | None = None, by: str | None = None) -> None:
        """Keep a query's answer in the agent's metadata (the tree shows the Q&A trace from it)."""
        shown = answer if kind != "approval" or not isinstance(answer, dict) else {"approved": answer.get("approved")}
        node.metadata.setdefault("answers", []).append({"kind": kind, "question": prompt, "answer": shown,
                                                        "source": source, "queryId": query_id, "by": by})
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
        body = self._agent(child)
        if opts.coordinate and parent.id == self.id and origin == "subquestion":
            from agentstack_lab.engine.coordinate import queued_agent  # lazy: only coordinated runs need it

            body.close()
            body = queued_agent(self, child, priority=max(1, 8 - len(parent.subagents) + 1))
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
                          ", ".join(r["name"] for r in rows), self.id, exc)

    def secrets(self) -> list[str]:
        """Secret values to hide from tool results: secret-looking env vars, configured API keys, the provider's."""
        return run_secrets(self.workspace, self.provider)

    def memory(self, node: AgentNode) -> Any:
        """The workspace memory acting for this run's session and ``node``."""
        return self.workspace.memory.scoped(self.session_id, agent_id=node.id)

    @property
    def namespace(self) -> str:
        """This run's memory namespace, ``session:<session id>``."""
        return f"session:{self.session_id}"

    # --- internals ------------------------------------------------------------------------------

    def _node(self, agent_id: str) -> AgentNode:
        node = self.nodes.get(agent_id)
        if node is None:
            raise KeyError(f"no agent {agent_id!r} in run {self.id}")
        return node

    def _on_loop(self, fn: Callable[[], Any]) -> None:
        loop = self._loop
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

    def _deliver(self, callback: Callable[[OutboundEvent], Any], event: OutboundEvent) -> None:
        try:
            callback(event)
        except Exception:  # a broken subscriber must not break the run
            log.exception("agentstack-lab: event subscriber %r failed", callback)

    def _subtree(self, node: AgentNode) -> list[AgentNode]:
        out = [node]
        for c in node.subagents:
            out.extend(self._subtree(self.nodes[c]))
        return out

    def _stop_subtree(self, node: AgentNode, reason: str, *, below: str | None = None) -> None:
        """Stop ``node`` with ``reason`` and its subtree (with ``below`` when given, their own reason)."""
        for n in self._subtree(node):
            if n.terminal:
                continue
            n.stop_reason = n.stop_reason or (reason if n is node or below is None else below)
            if n.task is not None and n.task is asyncio.current_task():
                continue  # the caller raises CancelledError itself
            if n.task is not None and not n.task.done():
                n.task.cancel(reason)
            elif n.status in UNFINISHED:
                self.finish_agent(n, "stopped", error=n.stop_reason)

    def _budget_stop(self, reason: str) -> None:
        if self._failure is None:
            self._failure = BudgetExceededError(reason)
            self.error = reason
        root = self.nodes.get(self.id)
        if root is not None:
            self._stop_subtree(root, reason)

    def finish(self, node: AgentNode, status: str, *, result: str | None = None, error: str | None = None,
               logged: bool = False) -> None:
        """End an agent whose work ran elsewhere (a queued subtask): completed with its result, or failed/stopped.

        ``logged``: the process that ran it already logged its ``agent-completed`` or ``error`` (announced,
        not logged again: one terminal event per agent in the log).
        """
        self.finish_agent(node, status, result=result, error=error, logged=logged)

    def finish_agent(self, node: AgentNode, status: str, *, result: str | None = None, error: str | None = None,
                     logged: bool = False) -> None:
        """End one agent with ``status`` (and its result or error), announcing the change."""
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

    async def _agent(self, node: AgentNode) -> None:
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
            await self._settle_children(node, reason)
            if not node.terminal:
                self.finish_agent(node, "stopped", error=reason)
            return
        except HeadlessQueryError as exc:
            if self._failure is None:
                self._failure, self.error = exc, str(exc)
            root = self.nodes[self.id]
            if root is not node:
                self._stop_subtree(root, f"run failed: {exc}")
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
            self._stop_subtree(k, reason)
        tasks = [k.task for k in kids if k.task is not None and not k.task.done()]
        if tasks:
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)
        for k in kids:  # a child cancelled before its first step never ran its own handler
            for n in self._subtree(k):
                if not n.terminal:
                    self.finish_agent(n, "stopped", error=n.stop_reason or reason)



async def run_agent(prompt: str, **kwargs: Any) -> AsyncIterator[OutboundEvent]:
    """Run an agent and yield its events as they happen (same keyword arguments as :class:`AgentRun`)."""
    run = AgentRun(prompt, **kwargs)
    async for ev in run.stream():
        yield ev


def _follow_session(workspace: Workspace, follows: AgentRun, session_id: str | None) -> str | None:
    """A follow-up's session: its predecessor's when a caller gave it one (it must still be open).

    ``session_id`` as given when the predecessor started its own session, which ended with it.
    """
    if follows.workspace is not workspace:
        raise UsageError(f"run {follows.id[:8]} belongs to another workspace; a follow-up continues in the same one")
    if follows.owns_session:
        return session_id
    if session_id is not None and session_id != follows.session_id:
        raise UsageError(f"a follow-up keeps run {follows.id[:8]}'s session ({follows.session_id}); "
                         f"leave the session out (got {session_id!r})")
    session = workspace.sessions.get(follows.session_id) if follows.session_id else None
    if session is not None and session.status != "active":
        raise UsageError(f"the session of run {follows.id[:8]} ({follows.session_id}) has ended; "
                         "start a new run instead of a follow-up")
    return follows.session_id


def default_origin() -> str:
    """Where a run was started, for the lab panel: ``notebook:PATH`` in a Jupyter kernel, else ``python``.

    Jupyter Server gives each kernel the notebook's path in ``JPY_SESSION_NAME``; surfaces that know
    better (the CLI says ``terminal``, MCP ``mcp``, the lab panel ``lab``) pass ``origin=`` themselves.
    """
    import os

    session = os.environ.get("JPY_SESSION_NAME")
    return f"notebook:{session}" if session else "python"
