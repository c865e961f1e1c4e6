"""A run's beginning and end: session, event log, monitor, hooks, watchdog, and the teardown (half of :class:`AgentRun`).

Split out of ``engine/run.py`` (707 lines, over the ~600 aim). ``_begin`` runs synchronously inside
``AgentRun.start`` so the root's row is in the database before ``start`` returns (another process can
find the run at once); ``_main`` is the run's task, and its ``finally`` is the one place that
guarantees nothing outlives the run: no pending decision, no open query future, no unflushed log
batch, and no session the run started itself (it ends, with its memory namespace; a session the caller
passed stays open). The class is a mixin: it only runs as part of :class:`~agentstack_lab.engine.run.AgentRun`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.log import EventLog
from agentstack_lab.engine.options import AgentFailedError
from agentstack_lab.engine.state import AgentNode
from agentstack_lab.errors import AgentstackError

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = ["LifecycleMixin"]

log = logging.getLogger(__name__)


class LifecycleMixin:
    """``_begin`` and ``_main`` of :class:`~agentstack_lab.engine.run.AgentRun`."""

    workspace: Workspace
    if TYPE_CHECKING:  # state and helpers owned by AgentRun
        def __getattr__(self, name: str) -> Any: ...

    def _start_session(self) -> None:
        if self.session_id is not None:
            return
        try:
            self.session_id = self.workspace.sessions.start(name=f"agent run {self.id[:8]}").id
            self.owns_session = True
            return
        except Exception as exc:  # noqa: BLE001 - fall back to the run's own namespace
            log.warning("agentstack-lab: could not start a session for run %s: %s", self.id, exc)
        self.session_id = self.id

    def _begin(self) -> None:
        """Record the identity's spawn, open the event log and the session, write the root agent's row now."""
        if self.identity is not None:
            # checked again inside the audit's write transaction: retired since __init__ means no spawn row
            self.identity = self.workspace.identities.record_spawn(self.identity.agent_id, self.id)
        self._start_session()
        db = self.workspace.db
        from agentstack_lab.engine.liveness import reap_orphans

        reap_orphans(db)  # agents of runs whose process died are failed, not left "running"
        self._log = EventLog(db, self.run_id, owner=self.attach is None,
                             session_exists=self.workspace.session_lookup)
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
        root = AgentNode(id=self.id, type=self.agent_type, prompt=self.prompt, parent_id=at and at.parent_id,
                         depth=at.depth if at else 0, identity_id=self.identity.agent_id if self.identity else None,
                         metadata={"provider": getattr(self.provider, "name", "?"),
                                   "executor": self.executor.name, "sessionId": self.session_id,
                                   "origin": self.origin})
        if self.identity is not None:
            root.metadata["identityId"] = self.identity.agent_id
        if self.continues is not None:  # a follow-up: the thread so far goes before its request
            from agentstack_lab.engine.followup import transcript

            root.metadata["continues"] = self.continues
            root.metadata["continuesPrompt"] = self.thread[-1].prompt[:200] if self.thread else ""
            root.history = transcript(self.thread)
        self.nodes[root.id] = root
        # a retried subtask starts from empty text; a first attempt's snapshot is the coordinator's "queued" one
        self.emit_state(root, with_content=at is not None, log=at is None or at.retry)
        if self._log is not None:
            self._log.write_now()
            self.control.begin(root)

    async def _main(self) -> None:
        watchdog = control = None
        root = self.nodes[self.id]
        try:
            if root.terminal:  # stopped before it began
                return
            if self.options.coordinate and self.options.cluster is not None:
                from agentstack_lab.engine.coordinate import connect_first

                try:  # an unreachable cluster fails the run before any subagent is queued
                    await connect_first(self)
                except AgentstackError as exc:
                    self._failure, self.error = exc, str(exc)
                    self.finish_agent(root, "failed", error=str(exc))
                    return
            if self.options.timeout_s is not None:
                watchdog = asyncio.get_running_loop().call_later(
                    self.options.timeout_s, self._budget_stop,
                    f"budget exceeded: timeout_s={self.options.timeout_s:g} (wall clock)")
            root.task = asyncio.get_running_loop().create_task(self._agent(root), name=f"agentstack-{root.name}")
            if self.decision_store is not None:
                from agentstack_lab.engine.control import follow_interventions

                control = asyncio.get_running_loop().create_task(
                    follow_interventions(self, self.decision_store.db), name=f"agentstack-control-{self.id[:8]}")
            try:
                await asyncio.shield(root.task)
            except asyncio.CancelledError:
                self._stop_subtree(root, root.stop_reason or "stopped by the user")
                with contextlib.suppress(BaseException):
                    await root.task
            leftovers = [n.task for n in self.nodes.values() if n.task is not None and not n.task.done()]
            for n in self.nodes.values():
                if not n.terminal:
                    self._stop_subtree(n, "the run ended")
            if leftovers:
                await asyncio.gather(*leftovers, return_exceptions=True)
            if self._failure is None and root.status == "failed":
                self._failure = AgentFailedError(root.error or "the root agent failed")
                self.error = root.error
        finally:
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
                await self._log.close()
            self._end_session()

    def _end_session(self) -> None:
        """End the session this run started (its memory namespace goes with it); a caller's session stays open."""
        if not self.owns_session:
            return
        try:
            self.workspace.sessions.end(self.session_id)
        except Exception as exc:  # noqa: BLE001 - the run's outcome stands; the session is listed as active
            log.warning("agentstack-lab: could not end session %s of run %s: %s", self.session_id, self.id, exc)
