"""The task tools' one entry point (docs/mcp.md): create with drift and consensus checks, then act.

The CLI and MCP call :class:`TaskService`; nothing here knows about surfaces. ``create`` follows the
seed's ``task_create``: with a parent, drift is checked first (``prevent`` raises
:class:`~agentstack_lab.tasks.drift.DriftPreventedError`, nothing created); when consensus is
required a checkpoint is created *instead of* the task, and approving it creates the approved task.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import UsageError
from agentstack_lab.redaction import redact, secret_values
from agentstack_lab.tasks.consensus import Checkpoint, Consensus
from agentstack_lab.tasks.drift import DriftDetector, DriftPreventedError
from agentstack_lab.tasks.store import TaskStore

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["TaskService", "RISK_LEVELS"]

RISK_LEVELS = ("low", "medium", "high")


class TaskService:
    """Tasks, relationships, drift and consensus of one workspace.

    Args:
        db: the workspace database.
        embedder: the workspace embedder (drift embeddings).
        config: the whole workspace :class:`~agentstack_lab.config.Config`.
        decisions: the workspace decision queue (consensus checkpoints are decisions); ``None`` when
            the caller only needs tasks and drift.
        session_exists: the memory backend's session lookup when sessions live outside ``db``
            (``Workspace.session_lookup``).
    """

    def __init__(self, db: Database, embedder: Any, config: Any, decisions: Any = None, *, session_exists: Any = None,
                 agent_types: Any = None):
        self.store = TaskStore(db, session_exists=session_exists)
        self.agent_types = agent_types   # the workspace's agent types: an unknown --type is refused up front
        providers = getattr(config, "providers", None)
        self._keys = [getattr(getattr(providers, name, None), "api_key", None) for name in ("anthropic", "openai",
                                                                                             "ollama")]
        self.drift = DriftDetector(db, embedder, config.drift)
        self.consensus = Consensus(db, config.consensus, decisions) if decisions is not None else None

    @classmethod
    def of(cls, workspace: Any) -> TaskService:
        """The service over a :class:`~agentstack_lab.workspace.Workspace` (its db, embedder, config, decisions)."""
        return cls(workspace.db, workspace.embedder, workspace.config, workspace.decisions,
                   session_exists=workspace.session_lookup, agent_types=workspace.agent_types)

    def create(self, agent_type: str, input: str | None = None, *, parent_id: str | None = None,  # noqa: A002
               session_id: str | None = None, risk_level: str | None = None) -> dict[str, Any]:
        """Create a task (or, when consensus is required, a checkpoint for it); see the module doc.

        Raises:
            UsageError: an empty input, an unknown agent type or risk level (nothing is created).
        """
        if input is not None and (not isinstance(input, str) or not input.strip()):
            raise UsageError("the task input is empty; say what the task is")
        if risk_level is not None and risk_level not in RISK_LEVELS:
            raise UsageError(f"unknown risk level {risk_level!r}; expected one of {', '.join(RISK_LEVELS)}")
        if self.agent_types is not None:
            self.agent_types.get(agent_type)   # an unknown type: one line naming the known ones
        if input is not None:   # a key pasted into a task is not stored (nor shown by task list/get)
            input = redact(input, secret_values([k for k in self._keys if k is not None]))
        drift = None
        task_id = str(uuid.uuid4())  # known before the drift check, so its event row names the task
        if parent_id is not None:
            parent = self.store.get(parent_id)  # unknown parent: a clear error before anything else
            if input:
                drift, vector = self.drift.check(input, agent_type, parent_id, task_id=task_id)
                if drift.action == "prevented":
                    raise DriftPreventedError(f"task not created: its input repeats ancestor task "
                                              f"{drift.most_similar_task_id} (similarity "
                                              f"{drift.highest_similarity:.3f} >= {drift.threshold:g})", drift)
        else:
            parent = None
        if self.consensus is not None and self.consensus.enabled:
            depth = parent.depth + 1 if parent is not None else 0
            check = self.consensus.check(agent_type, input, depth, parent_id, risk_level)
            if check["requires_consensus"]:
                [sub] = self.consensus.propose([(agent_type, input or "")])
                sub = type(sub)(id=sub.id, agent_type=sub.agent_type, input=sub.input, risk_level=check["risk_level"])
                cp = self.consensus.create(parent_id or sub.id, [sub], parent_task_id=parent_id,
                                           parent_input=parent.input if parent else None, origin="task_create")
                return {"created": False, "consensus_required": True, "reason": check["reason"],
                        "checkpoint": cp.to_dict(), "drift": drift.to_dict() if drift else None}
        task = self.store.create(agent_type, input, parent_id=parent_id, session_id=session_id, task_id=task_id,
                                 risk_level=risk_level or (self.consensus.estimate(agent_type, input)
                                                           if self.consensus is not None else None))
        self.drift.index(task.id, input)
        return {"created": True, "task": task.to_dict(), "drift": drift.to_dict() if drift else None}

    def materialise(self, cp: Checkpoint) -> list[str]:
        """Create the approved subtasks of a checkpoint made by :meth:`create` (engine checkpoints spawn agents)."""
        made = []
        for sub in cp.approved_subtasks:
            if self.store.find(sub.id) is None:
                self.store.create(sub.agent_type, sub.input, parent_id=cp.parent_task_id, task_id=sub.id,
                                  risk_level=sub.risk_level)
                self.drift.index(sub.id, sub.input)
                made.append(sub.id)
        return made

    def require_consensus(self) -> Consensus:
        if self.consensus is None:
            raise RuntimeError("this TaskService was built without a decision queue")
        return self.consensus

    def decide(self, checkpoint_id: str, *, approve: bool, subtask_ids: list[str] | None = None,
               feedback: str | None = None, by: str | None = None, surface: str = "python") -> dict[str, Any]:
        """Approve (``subtask_ids`` rejected) or reject (all, or only ``subtask_ids``) a checkpoint."""
        consensus = self.require_consensus()
        if approve:
            cp = consensus.approve(checkpoint_id, rejected_subtask_ids=subtask_ids, feedback=feedback, by=by,
                                   surface=surface)
        else:
            cp = consensus.reject(checkpoint_id, subtask_ids=subtask_ids, feedback=feedback, by=by, surface=surface)
        created = self.materialise(cp) if cp.run_id is None else []
        return {"checkpoint": cp.to_dict(), "created_task_ids": created}
