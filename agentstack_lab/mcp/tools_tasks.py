"""The ``task_*`` and ``consensus_*`` MCP tools (docs/mcp.md task tools, docs/tasks.md consensus tools).

Plain methods over one workspace, registered by ``server.py`` like :class:`~agentstack_lab.mcp.tools.Toolbox`;
each signature is its input schema and each returns a JSON-able dict. Everything is read from and
written to the workspace database, so tasks of runs in other processes show, and a checkpoint a run
in another process waits on is answered here (the run sees it within a fraction of a second).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import Field

from agentstack_lab.events import AgentStatus, camel_keys
from agentstack_lab.mcp.privacy import Privacy

__all__ = ["TaskTools", "TASK_TOOL_NAMES"]

TASK_TOOL_NAMES = (
    "task_create", "task_assign", "task_complete", "task_list", "task_get", "task_get_relationships",
    "task_check_drift", "task_drift_metrics",
    "consensus_check", "consensus_list_pending", "consensus_get", "consensus_approve", "consensus_reject",
)

TaskId = Annotated[str, Field(min_length=1, description="Task id (engine agents: the agent id).")]
SessionId = Annotated[str | None, Field(min_length=1, description="Act as this session (a private one needs "
                                                            "session_token).")]
SessionToken = Annotated[str | None, Field(max_length=200, description="The secret session_start returned.")]
CheckpointId = Annotated[str, Field(min_length=1, description="Consensus checkpoint id (or a unique prefix).")]
Status = AgentStatus  # the tasks of engine agents share their statuses (minus idle, refused by the store)
Risk = Literal["low", "medium", "high"]


def _since(value: str | float | None) -> float | None:
    if value is None or isinstance(value, int | float):
        return value
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ValueError(f"since: expected an ISO date or unix seconds, got {value!r}") from None


class TaskTools:
    """Task, drift and consensus tools of one workspace."""

    def __init__(self, workspace: Any):
        self.ws = workspace
        self._svc: Any = None
        self.privacy = Privacy(workspace)

    def _task(self, task_id: str, session_id: str | None, token: str | None) -> Any:
        """The task, if the caller may see it (a private session's task needs its token)."""
        task = self.svc.store.get(task_id)
        self.privacy.require(self.privacy.caller(session_id, token), f"task {task.id}", run_id=task.run_id,
                             session_id=task.session_id)
        return task

    @property
    def svc(self) -> Any:
        if self._svc is None:
            from agentstack_lab.tasks import TaskService

            self._svc = TaskService.of(self.ws)
        return self._svc

    # --- tasks -------------------------------------------------------------------------------------------
    def task_create(
        self,
        agent_type: Annotated[str, Field(min_length=1, description="Agent type for this task.")],
        input: Annotated[str | None, Field(description="What the task is (compared with its ancestors).")] = None,  # noqa: A002
        session_id: SessionId = None,
        session_token: SessionToken = None,
        parent_task_id: Annotated[str | None, Field(description="Parent task: drift and consensus are checked "
                                                                "against it.")] = None,
        risk_level: Annotated[Risk | None, Field(description="Override the estimated risk level.")] = None,
    ) -> dict[str, Any]:
        """Create a task; with a parent, drift is checked (prevent refuses) and consensus may hold it."""
        caller = self.privacy.caller(session_id, session_token) if session_token is not None else None
        if session_id is not None:
            self.privacy.require(caller, "this task's session", session_id=session_id)
        if parent_task_id is not None:
            self._task(parent_task_id, session_id if caller else None, session_token)
        return self.svc.create(agent_type, input, parent_id=parent_task_id, session_id=session_id,
                               risk_level=risk_level)

    def task_assign(self, task_id: TaskId,
                    agent_id: Annotated[str, Field(min_length=1, description="The agent taking the task.")],
                    session_id: SessionId = None, session_token: SessionToken = None) -> dict[str, Any]:
        """Assign a pending task to an agent (it becomes running)."""
        self._task(task_id, session_id, session_token)
        return self.svc.store.assign(task_id, agent_id).to_dict()

    def task_complete(self, task_id: TaskId, output: str | None = None,
                      status: Literal["completed", "failed"] = "completed", session_id: SessionId = None,
                      session_token: SessionToken = None) -> dict[str, Any]:
        """Finish a task with its output (or its error, when status is failed)."""
        self._task(task_id, session_id, session_token)
        return self.svc.store.complete(task_id, output, status=status).to_dict()

    def task_list(self, session_id: SessionId = None, status: Status | None = None, run_id: str | None = None,
                  parent_task_id: str | None = None,
                  limit: Annotated[int, Field(ge=1, le=1000)] = 100,
                  session_token: SessionToken = None) -> dict[str, Any]:
        """Tasks, oldest first, filtered by session, status, run or parent (a private session's need its token)."""
        caller = self.privacy.caller(session_id, session_token) if session_token is not None else None
        tasks = self.svc.store.list(session_id=session_id, status=status, run_id=run_id, parent_id=parent_task_id,
                                    limit=100_000)
        rows = self.privacy.filter(caller, [t.to_dict() for t in tasks])[:limit]
        return {"count": len(rows), "tasks": rows}

    def task_get(self, task_id: TaskId, session_id: SessionId = None,
                 session_token: SessionToken = None) -> dict[str, Any]:
        """One task: type, input, status, output, session, parent, run."""
        return self._task(task_id, session_id, session_token).to_dict()

    def task_get_relationships(self, task_id: TaskId,
                               direction: Literal["outgoing", "incoming", "both"] = "both",
                               session_id: SessionId = None, session_token: SessionToken = None) -> dict[str, Any]:
        """A task's relationships (parent_of, derived_from, depends_on, supersedes), newest first."""
        self._task(task_id, session_id, session_token)
        rels = self.svc.store.relationships(task_id, direction)
        return {"count": len(rels), "relationships": [r.to_dict() for r in rels]}

    def task_check_drift(
        self,
        task_input: Annotated[str, Field(min_length=1, description="The would-be task's input.")],
        task_type: Annotated[str, Field(min_length=1)],
        parent_task_id: str | None = None,
    ) -> dict[str, Any]:
        """Would this input trigger drift detection against the parent's ancestors (records nothing)."""
        result, _ = self.svc.drift.check(task_input, task_type, parent_task_id, record=False)
        cfg = self.ws.config.drift
        # "result" is opaque to the wire converter (an agent's result is model data): this one is ours, cased here
        return {"result": camel_keys(result.to_dict()), "config": {"enabled": cfg.enabled, "threshold": cfg.threshold,
                                                       "warning_threshold": cfg.warning_threshold,
                                                       "behavior": cfg.behavior}}

    def task_drift_metrics(
        self,
        since: Annotated[str | float | None, Field(description="ISO date or unix seconds.")] = None,
        recent: Annotated[int, Field(ge=0, le=500)] = 10,
    ) -> dict[str, Any]:
        """Drift detection counts (allowed, warned, prevented), average similarity, and the latest events."""
        return {"metrics": self.svc.drift.metrics(_since(since)), "recent_events": self.svc.drift.recent(recent)}

    # --- consensus ---------------------------------------------------------------------------------------
    def consensus_check(self, agent_type: Annotated[str, Field(min_length=1)], input: str | None = None,  # noqa: A002
                        parent_task_id: str | None = None, risk_level: Risk | None = None) -> dict[str, Any]:
        """Would creating this task need a consensus checkpoint? Risk is estimated as the seed does."""
        consensus = self.svc.require_consensus()
        depth = self.svc.store.get(parent_task_id).depth + 1 if parent_task_id else 0
        return consensus.check(agent_type, input, depth, parent_task_id, risk_level)

    def consensus_list_pending(self, limit: Annotated[int, Field(ge=1, le=500)] = 50,
                               offset: Annotated[int, Field(ge=0)] = 0) -> dict[str, Any]:
        """Checkpoints awaiting review, oldest first."""
        found = self.svc.require_consensus().list_pending(limit, offset)
        return {"count": len(found), "checkpoints": [cp.to_dict() for cp in found]}

    def consensus_get(self, checkpoint_id: CheckpointId) -> dict[str, Any]:
        """One checkpoint: proposed subtasks with their risk, status, decision."""
        return self.svc.require_consensus().get(checkpoint_id).to_dict()

    def consensus_approve(
        self,
        checkpoint_id: CheckpointId,
        rejected_subtask_ids: Annotated[list[str] | None, Field(description="Subtasks to leave out (a partial "
                                                                            "rejection); the rest go ahead.")] = None,
        feedback: Annotated[str | None, Field(description="Shown to the parent agent.")] = None,
        reviewer: str | None = None,
    ) -> dict[str, Any]:
        """Approve a checkpoint's subtasks, optionally rejecting some by id."""
        return self.svc.decide(checkpoint_id, approve=True, subtask_ids=rejected_subtask_ids, feedback=feedback,
                               by=reviewer or "mcp", surface="mcp")

    def consensus_reject(
        self,
        checkpoint_id: CheckpointId,
        subtask_ids: Annotated[list[str] | None, Field(description="Reject only these (the rest go ahead); "
                                                                   "default: all.")] = None,
        feedback: Annotated[str | None, Field(description="Shown to the parent agent.")] = None,
        reviewer: str | None = None,
    ) -> dict[str, Any]:
        """Reject a checkpoint: every subtask, or only the ones named."""
        return self.svc.decide(checkpoint_id, approve=False, subtask_ids=subtask_ids, feedback=feedback,
                               by=reviewer or "mcp", surface="mcp")
