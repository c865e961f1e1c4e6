"""The public run handle: start it, await it, read its tree and events, answer it, stop it, undo it.

:class:`AgentRun` is thin (as pydantic-ai's ``AgentRun`` over its graph state): what a caller may do with
a run, and nothing of how it works. The machinery is the run core (:mod:`agentstack_lab.engine.core`),
which the steps, tools, queries, gate, coordination and monitor reach through the narrow contexts of
:mod:`agentstack_lab.engine.context`; the handle holds it privately.

Two ids, one concept each: :attr:`AgentRun.run_id` (also :attr:`~AgentRun.id`) names the run -- its events,
decisions, interventions and provenance -- and :attr:`AgentRun.root_id` its root agent. They differ only for
a subtask a worker runs for a coordinator (an attached run), whose root is the coordinator's child.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.engine.core import RunCore, deliver
from agentstack_lab.engine.followup import RunStillGoingError, thread_of
from agentstack_lab.engine.inbound import intervene, respond, send
from agentstack_lab.engine.options import (
    AgentFailedError,
    AgentRunError,
    Attachment,
    BudgetExceededError,
    HeadlessQueryError,
    RunOptions,
)
from agentstack_lab.engine.state import AgentNode, snapshot_tree
from agentstack_lab.errors import UsageError
from agentstack_lab.events import OutboundEvent, UserQuery
from agentstack_lab.validation import check_text

if TYPE_CHECKING:
    from agentstack_lab.engine.executors import Executor
    from agentstack_lab.engine.sandbox import DryRunResult
    from agentstack_lab.workspace import Workspace

__all__ = ["AgentRun", "RunOptions", "run_agent", "HeadlessQueryError", "BudgetExceededError", "AgentRunError",
           "AgentFailedError", "RunStillGoingError", "default_origin"]


class AgentRun:
    """A recursive agent run; ``await run`` for the result, ``run.tree`` for a snapshot.

    Args:
        prompt: what the root agent is asked.
        workspace: the workspace (config, database, memory, agent types) the run belongs to.
        provider: a provider name or object (default: the workspace's).
        agent_type: the root's agent type (default: the config's ``agents.default_type``).
        options: :class:`RunOptions` or a dict of its fields; a field the caller did not set comes from
            the config's ``agents`` section (:func:`~agentstack_lab.engine.options.run_options`).
        model: the model name for the provider.
        session_id: the memory session to act in (default: a session of the run's own, ended with it).
        executor: where python tool calls run (an :class:`Executor` or its name).
        origin: where the run was started, for the panel (default: the notebook's path, or ``python``).
        attach: where the root sits in a coordinator's tree (a subtask a worker runs).
        follows: an earlier run whose conversation this one continues (see :meth:`ask`).
        cell_id: the notebook cell that started the run (``%agent``); the Agents panel links to it.
    """

    def __init__(self, prompt: str, *, workspace: Workspace, provider: Any = None, agent_type: str | None = None,
                 options: RunOptions | dict[str, Any] | None = None, model: str | None = None,
                 session_id: str | None = None, executor: Executor | str | None = None,
                 origin: str | None = None, attach: Attachment | None = None, follows: AgentRun | None = None,
                 cell_id: str | None = None):
        if not isinstance(cast(object, prompt), str) or not prompt.strip():   # Python callers pass anything
            raise UsageError("prompt must be a non-empty string")
        check_text("the prompt", prompt)
        # a follow-up (engine/followup.py): the thread so far, checked before anything starts
        thread = thread_of(follows._core) if follows is not None else ()
        config = workspace.config
        limit = config.agents.max_prompt_chars
        if len(prompt) > limit:
            raise UsageError(f"the prompt is {len(prompt):,} characters, over the limit of {limit:,} "
                             "(config agents.max_prompt_chars)")
        agent_type = agent_type or config.agents.default_type or "researcher"
        workspace.agent_types.get(agent_type)  # unknown type: clear error before anything starts
        if follows is not None:
            session_id = _follow_session(workspace, follows, session_id)
        if session_id is not None:  # "" is an error (SessionError), never "no session"
            from agentstack_lab.memory.access import check_session_id  # here: the memory package loads numpy

            check_session_id(session_id)
        self._core = RunCore(prompt, workspace=workspace, options=RunOptions.coerce(options, config),
                             provider=provider, agent_type=agent_type, model=model, session_id=session_id,
                             executor=executor, origin=origin or default_origin(), attach=attach, thread=thread,
                             continues=follows.run_id if follows is not None else None, run_factory=AgentRun)
        if cell_id is not None and not isinstance(cast(object, cell_id), str):
            raise UsageError(f"cell_id must be a string, got {type(cell_id).__name__}")
        self._core.cell_id = cell_id

    # --- who and what -------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run's id: its events, decisions, interventions and provenance are filed under it."""
        return self._core.run_id

    @property
    def id(self) -> str:
        """The run's id (the same as :attr:`run_id`)."""
        return self._core.run_id

    @property
    def root_id(self) -> str:
        """The root agent's id (equal to :attr:`run_id` except for a subtask a worker runs)."""
        return self._core.root_id

    @property
    def prompt(self) -> str:
        return self._core.prompt

    @property
    def agent_type(self) -> str:
        return self._core.agent_type

    @property
    def options(self) -> RunOptions:
        """The effective options (``options.sources`` says where each value came from)."""
        return self._core.options

    @property
    def workspace(self) -> Workspace:
        return self._core.workspace

    @property
    def session_id(self) -> str | None:
        """The memory session the run acts in (set when it starts, if the caller gave none)."""
        return self._core.session_id

    @property
    def provider(self) -> Any:
        return self._core.provider

    @property
    def executor(self) -> Executor:
        return self._core.executor

    @property
    def model(self) -> str | None:
        return self._core.model

    @property
    def origin(self) -> str:
        return self._core.origin

    @property
    def continues(self) -> str | None:
        """The id of the run whose conversation this one continues (a follow-up), else ``None``."""
        return self._core.continues

    # --- how it went --------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        """The root agent's status (``pending`` before it starts)."""
        return self._core.status

    @property
    def done(self) -> bool:
        return self._core.done

    @property
    def result(self) -> str | None:
        return self._core.result

    @property
    def error(self) -> str | None:
        """Why the run failed (a budget, a headless question, the root's error), or ``None``."""
        return self._core.error

    @property
    def failure(self) -> BaseException | None:
        """The exception ``await run`` raises, or ``None``."""
        return self._core.failure

    @property
    def tree(self) -> dict[str, Any]:
        """A snapshot of the agent tree (plain data)."""
        return snapshot_tree(self._core.nodes, self._core.root_id)

    @property
    def agents(self) -> Mapping[str, AgentNode]:
        """The run's agents by id, read-only (the tree's nodes; :attr:`tree` is their snapshot)."""
        return MappingProxyType(self._core.nodes)

    @property
    def events(self) -> list[OutboundEvent]:
        """Every outbound event so far, in order."""
        return list(self._core.events)

    @property
    def pending_queries(self) -> list[UserQuery]:
        """The questions and approvals the run waits on."""
        return self._core.pending_queries

    # --- running --------------------------------------------------------------------------------------

    def start(self) -> AgentRun:
        """Schedule the run on the running loop and return at once.

        The root agent (status ``pending``) is already in ``run.tree`` and, with a database, in the
        ``agents`` table when this returns, so another process can find the run right away.
        """
        self._core.start()
        return self

    def __await__(self) -> Generator[Any, None, str | None]:
        return self.wait().__await__()

    async def wait(self, *, raise_on_error: bool = True) -> str | None:
        """Wait for the end; raise the failure (headless, budget, root failure) unless told not to."""
        self.start()
        task = self._core.task
        assert task is not None
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            self.stop(reason="the awaiting code was cancelled")
            raise
        if raise_on_error and self._core.failure is not None:
            raise self._core.failure
        return self.result

    def add_done_callback(self, callback: Callable[[AgentRun], object]) -> None:
        """Call ``callback(run)`` on the loop once the run has ended (soon, if it has already).

        A run not started yet calls it once the run it starts has ended.
        """

        def done(_task: asyncio.Task[None]) -> None:
            callback(self)

        task = self._core.task
        if task is None:
            self._core.done_callbacks.append(done)
        else:
            task.add_done_callback(done)

    def __aiter__(self) -> AsyncIterator[OutboundEvent]:
        return self.stream()

    async def stream(self) -> AsyncIterator[OutboundEvent]:
        """All events of the run, from the first, until it ends (starts it if needed)."""
        queue: asyncio.Queue[OutboundEvent] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait, replay=True)
        self.start()
        task = self._core.task
        assert task is not None
        getter: asyncio.Future[OutboundEvent] | None = None
        try:
            while True:
                if queue.empty() and task.done():
                    return
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                else:
                    getter.cancel()
        finally:
            if getter is not None:
                getter.cancel()  # the consumer was cancelled while waiting: no getter left pending
            unsubscribe()
            if not task.done():
                self.stop(reason="the event consumer went away")

    def subscribe(self, callback: Callable[[OutboundEvent], Any], replay: bool = True) -> Callable[[], None]:
        """Call ``callback(event)`` for every outbound event, in order; returns an unsubscribe function."""
        subscribers = self._core.subscribers
        if replay:
            for ev in list(self._core.events):
                deliver(callback, ev)
        subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                subscribers.remove(callback)

        return unsubscribe

    # --- acting on it ---------------------------------------------------------------------------------

    def stop(self, agent_id: str | None = None, *, reason: str = "stopped by the user") -> None:
        """Stop the whole run (no id) or one agent and its subtree (its children say whose stop it was)."""
        self._core.stop(agent_id, reason=reason)

    def send(self, event: Any) -> Any:
        """Handle an inbound event (dataclass or wire dict); ``get-agent-tree`` returns the tree."""
        return send(self._core, event)

    def respond(self, query_id: str, response: Any, *, surface: str = "widget", by: str | None = None) -> None:
        """Answer a pending ``user-query``; an invalid answer raises and leaves the query pending."""
        respond(self._core, query_id, response, surface=surface, by=by)

    async def try_first(self, query_id: str) -> DryRunResult:
        """"Try it first" on a pending python approval: the code's dry run in a sandboxed fork of the kernel.

        The report (names created / changed / deleted, output, error, files opened, calls refused and the
        active protections) is also attached to the decision (``metadata["dryRun"]``) and to the agent's
        metadata, so every surface can show it; the approval stays pending.
        """
        return await self._core.try_first(query_id)

    def intervene(self, agent_id: str, *, user_comment: str | None = None, user_content: str | None = None,
                  status: str | None = None, surface: str = "widget", by: str | None = None) -> None:
        """A comment for the agent's next model call, replaced content, or a status (stop, pause, resume)."""
        intervene(self._core, agent_id, user_comment=user_comment, user_content=user_content, status=status,
                  surface=surface, by=by)

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

        core = self._core
        run = AgentRun(prompt, workspace=core.workspace,
                       provider=provider if provider is not None else base_provider(core),
                       agent_type=agent_type or core.agent_type, options=follow_options(core.options, options),
                       model=model if model is not None else core.model, executor=core.executor,
                       origin=core.origin, follows=self)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no running loop: `await run` starts it
            return run
        return run.start()

    # --- what it did ----------------------------------------------------------------------------------

    def provenance(self) -> Any:
        """What this run did to kernel variables (and what undoing it put back), as a pandas DataFrame."""
        return self._core.workspace.provenance(run_id=self.run_id)

    def undo(self) -> list[Any]:
        """Put back the kernel variables this run created, changed or deleted (see ``engine/provenance.py``).

        Raises:
            UndoRefusedError: A name was changed since (named), was too big to snapshot, or the run
                was undone already; nothing was restored.
        """
        from agentstack_lab.engine.history import undo_run

        core = self._core
        return undo_run(core.executor, core.workspace.db, self.run_id, secrets=core.secrets())

    def events_frame(self, full: bool = False) -> Any:
        """The run's events as a pandas DataFrame: compact for a first look, ``full=True`` for every field."""
        from agentstack_lab.engine.frames import events_frame

        return events_frame(self, full=full)

    def __repr__(self) -> str:
        return f"<AgentRun {self.run_id[:8]} {self.status}: {self.prompt[:40]!r}>"


async def run_agent(prompt: str, **kwargs: Any) -> AsyncIterator[OutboundEvent]:
    """Run an agent and yield its events as they happen (same keyword arguments as :class:`AgentRun`)."""
    run = AgentRun(prompt, **kwargs)
    async for ev in run.stream():
        yield ev


def _follow_session(workspace: Workspace, follows: AgentRun, session_id: str | None) -> str | None:
    """A follow-up's session: its predecessor's when a caller gave it one (it must still be open).

    ``session_id`` as given when the predecessor started its own session, which ended with it.
    """
    prior = follows._core  # pyright: ignore[reportPrivateUsage] - a follow-up reads its predecessor's core
    if prior.workspace is not workspace:
        raise UsageError(f"run {prior.run_id[:8]} belongs to another workspace; a follow-up continues in the same one")
    if prior.owns_session:
        return session_id
    if session_id is not None and session_id != prior.session_id:
        raise UsageError(f"a follow-up keeps run {prior.run_id[:8]}'s session ({prior.session_id}); "
                         f"leave the session out (got {session_id!r})")
    session = workspace.sessions.get(prior.session_id) if prior.session_id else None
    if session is not None and session.status != "active":
        raise UsageError(f"the session of run {prior.run_id[:8]} ({prior.session_id}) has ended; "
                         "start a new run instead of a follow-up")
    return prior.session_id


def default_origin() -> str:
    """Where a run was started, for the lab panel: ``notebook:PATH`` in a Jupyter kernel, else ``python``.

    Jupyter Server gives each kernel the notebook's path in ``JPY_SESSION_NAME``; surfaces that know
    better (the CLI says ``terminal``, MCP ``mcp``, the lab panel ``lab``) pass ``origin=`` themselves.
    """
    import os

    session = os.environ.get("JPY_SESSION_NAME")
    return f"notebook:{session}" if session else "python"
