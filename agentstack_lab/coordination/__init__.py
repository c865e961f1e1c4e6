"""Coordination (docs/tasks.md): the durable task queue, the message bus, workers and the coordinator.

Services layer: imports only the foundation. Everything lives in the workspace database, so a worker
in another process (``agentstack-lab worker``), a kernel and the CLI share one queue and one bus, and
a killed worker loses only its lease. Running a task *as an agent* is the engine's job: it hands a
runner to :class:`Worker` (``agentstack_lab.engine.coordinate.Worker`` is the ready-made one).

    queue = TaskQueue(ws.db)
    task = queue.enqueue("coder", "write the parser", priority=8)
    claimed = queue.claim("me", "coder")          # a lease
    queue.complete(claimed, {"text": "done"})     # refused if the lease was lost
"""

from agentstack_lab.coordination.bus import Message, MessageBus
from agentstack_lab.coordination.coordinator import Coordinator
from agentstack_lab.coordination.queue import (
    LEASE_S,
    QUEUE_STATES,
    LeaseLostError,
    QueuedTask,
    QueuedTaskNotFoundError,
    QueueError,
    TaskQueue,
    worker_name,
)
from agentstack_lab.coordination.worker import Runner, TaskFailure, Worker

__all__ = ["TaskQueue", "QueuedTask", "QueueError", "LeaseLostError", "QueuedTaskNotFoundError", "LEASE_S",
           "QUEUE_STATES", "worker_name", "MessageBus", "Message", "Worker", "Runner", "TaskFailure", "Coordinator"]
