"""Tasks, relationships, drift detection and consensus checkpoints (docs/tasks.md).

Services layer: imports only the foundation. Every engine agent is a task (same id); tasks can also
be created directly. The consensus decision queue is passed in by the caller (a surface or the engine).

    svc = TaskService.of(ws)
    root = svc.create("researcher", "summarise the churn report")["task"]
    svc.create("researcher", "summarise the churn report", parent_id=root["id"])  # drift: warned/prevented
"""

from agentstack_lab.tasks.consensus import (
    Checkpoint,
    CheckpointNotFoundError,
    Consensus,
    ConsensusError,
    ProposedSubtask,
    estimate_risk,
    requires_consensus,
)
from agentstack_lab.tasks.drift import DriftDetector, DriftPreventedError, DriftResult
from agentstack_lab.tasks.service import TaskService
from agentstack_lab.tasks.store import (
    RELATIONSHIP_TYPES,
    TASK_STATUSES,
    Task,
    TaskError,
    TaskNotFoundError,
    TaskRelationship,
    TaskStore,
)

__all__ = ["Task", "TaskRelationship", "TaskStore", "TaskError", "TaskNotFoundError", "TASK_STATUSES",
           "RELATIONSHIP_TYPES", "DriftDetector", "DriftResult", "DriftPreventedError", "Consensus", "Checkpoint",
           "ProposedSubtask", "ConsensusError", "CheckpointNotFoundError", "estimate_risk", "requires_consensus",
           "TaskService"]
