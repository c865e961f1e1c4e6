"""The engine side of coordination: running a queued task as an agent, and queuing a run's subquestions.

With ``RunOptions(coordinate=True)`` the root's subquestions are not run as in-process asyncio
tasks: each becomes a row of the durable queue (``agentstack_lab/coordination/``), priority 8 for
the first subquestion the model listed, 7 for the second, and so on (the model lists the most
important first). In-process workers are spawned on demand, up to ``max_workers``, and any
``agentstack-lab worker`` process of the workspace takes tasks too. The child agent keeps its id: the
worker runs it as an :class:`~agentstack_lab.engine.run.AgentRun` *attached* to the coordinator's
tree (same run id, parent and depth), so its events and agent rows land in the coordinator's run and
``rebuild_tree`` shows the same tree whether it ran here or in a worker. The worker completes the
task with the result and a snapshot of the subtree, which the coordinator merges into ``run.tree``
and announces (one ``agent-state`` per agent, content included) to its own subscribers. The worker's
run logged the child's terminal event (``agent-completed``, or ``error`` for a child that failed: the
worker then fails the row with the subtree as its result, a ``TaskFailure``); the coordinator announces
it to its subscribers without logging it again, so the events table holds one per child
(tests/test_coordinate_engine.py: one subagent's provider raises; one ``error`` event for it).
Snapshots likewise: the coordinator logs the child's "queued" one and, after the merge, one that says
where it ran (``metadata.queue``); the worker's run logs the rest, and the adopted subtree is announced,
not logged again (before, each queued child's pending snapshot was logged twice and each snapshot of
the subtree again after the merge: a completed child went back to "running" in the log for a moment).

A worker that dies mid-task loses its lease; another worker reruns the child under the same id, and
its first ``agent-state`` (logged on a retry only) resets the text, so the rebuilt tree shows the rerun only.

With ``RunOptions(cluster=...)`` (a Dask scheduler address, ``"local"``, or a ``distributed.Client``;
config ``agents.cluster``) the coordinator spawns no in-process worker: each queued child is also a
Dask task (:class:`~agentstack_lab.coordination.dask.DaskPlacement`) that runs
:func:`run_task_on_dask` on a Dask worker: it opens the same workspace (its database file on a
filesystem the workers share) and works that one queue row as any worker would, so events, agent
rows and the result come back through the database exactly as from ``agentstack-lab worker``.
A Dask worker killed mid-subagent: Dask reruns the Dask task on another worker, which sees (from the
scheduler) that the row's holder left the cluster and takes the row over at once rather than after
its 30 s lease; the coordinator then notes on the child, logs, and keeps in ``metadata.queue.lost``
which Dask worker was lost and where the retry ran (tests/test_coordinate_dask.py: 2 workers, one
SIGKILLed while both run a subagent; the run completes in ~14 s, each child completed once).

This module sits below the run core: the core imports :func:`queued_agent`, and this module sees a run
only as a :class:`~agentstack_lab.engine.context.CoordinationContext` (a queued child is itself a run, so
what builds it is passed down: the coordinator's ``run_factory`` for its children, ``run_factory`` for a
:class:`Worker`, whose one maker outside the engine is ``agentstack-lab worker``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.coordination import Coordinator, QueuedTask, TaskFailure, TaskQueue, worker_name
from agentstack_lab.coordination import Worker as QueueWorker
from agentstack_lab.engine.options import Attachment
from agentstack_lab.engine.state import AgentNode
from agentstack_lab.errors import UsageError
from agentstack_lab.providers.base import Usage
from agentstack_lab.validation import as_dict, as_dicts

if TYPE_CHECKING:
    from agentstack_lab.engine.context import CoordinationContext, RunFactory

__all__ = ["Worker", "run_queued", "queued_agent", "connect_first", "RunCoordination", "run_task_on_dask"]

log = logging.getLogger(__name__)

_PASSED_OPTIONS = ("max_depth", "max_children", "max_agents", "max_turns", "auto_approve", "subagents", "on_query",
                   "decision_timeout",
                   "answers", "executor")


async def run_queued(workspace: Any, task: QueuedTask, *, run_factory: RunFactory, provider: Any = None,
                     executor: Any = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one queued task as an agent; returns ``{"text", "status", "runId", "agentId", "tree"}``.

    A task queued by a coordinated run (``payload.runId``) runs attached to that run's tree; any other
    task is a headless run of its own (``interactive=False``): its options are the config's ``agents``, then the
    worker's ``options`` (``agentstack-lab worker --auto-approve``, ...), then the task's ``payload.options``.
    Raises the run's failure, so the worker fails the task; for an attached run as a
    :class:`~agentstack_lab.coordination.TaskFailure` whose result carries the subtree (the run
    logged the child's ``error`` already: the coordinator announces it, it does not log it again).
    ``run_factory`` builds the run (the :class:`~agentstack_lab.engine.run.AgentRun` class), passed in so
    that this module does not import the run that imports it.
    """
    payload = task.payload or {}
    from agentstack_lab.engine.options import run_options

    effective = run_options(workspace.config, surface="worker",
                            given={**(options or {}), **(payload.get("options") or {})})
    attach = None
    if payload.get("runId") and payload.get("parentId"):
        attach = Attachment(run_id=payload["runId"], parent_id=payload["parentId"], agent_id=task.id,
                            depth=int(payload.get("depth", 1)), retry=task.attempts > 1)
    run = run_factory(task.input, workspace=workspace, provider=provider or payload.get("provider"),
                  agent_type=task.agent_type, options=effective, session_id=payload.get("sessionId"),
                  executor=executor, attach=attach)
    try:
        await run
    except Exception as exc:
        if attach is None:
            raise
        raise TaskFailure(f"{type(exc).__name__}: {exc}", {"text": run.result, "status": run.status, "runId": run.run_id,
                                                           "agentId": run.root_id, "tree": run.tree}) from exc
    return {"text": run.result, "status": run.status, "runId": run.run_id, "agentId": run.root_id,
            "tree": run.tree if attach else None, "options": run.options.to_dict()}


class Worker(QueueWorker):
    """A queue worker that runs each task as an agent: ``await Worker(ws, run_factory=AgentRun, types=["coder"]).run()``.

    Args:
        workspace: the workspace whose queue it serves.
        run_factory: what builds each task's run (:class:`~agentstack_lab.engine.run.AgentRun`).
        types: agent types it takes (all when ``None``).
        concurrency: tasks at once.
        lease_s: lease per claim (a heartbeat renews it every third of it).
        provider: provider name or object for the agents (default: the workspace's).
        options: run options of its tasks over the config's (a task's own ``payload.options`` win).
    """

    def __init__(self, workspace: Any, *, run_factory: RunFactory, types: list[str] | tuple[str, ...] | None = None,
                 concurrency: int = 1, lease_s: float | None = None, provider: Any = None, worker_id: str | None = None,
                 idle_poll: float = 0.5, extra: dict[str, Any] | None = None, options: dict[str, Any] | None = None):
        queue = TaskQueue(workspace.db) if lease_s is None else TaskQueue(workspace.db, lease_s=lease_s)

        async def runner(task: QueuedTask) -> dict[str, Any]:  # ``extra``: read when the task ends
            try:
                done = await run_queued(workspace, task, run_factory=run_factory, provider=provider, options=options)
            except TaskFailure as exc:
                exc.result.update(extra or {})
                raise
            return {**done, **(extra or {})}

        super().__init__(queue, runner, types=types, concurrency=concurrency, worker_id=worker_id,
                         idle_poll=idle_poll)
        self.workspace = workspace


def run_task_on_dask(task_id: str, root: str, db_path: str, config: Any, lease_s: float,
                     run_factory: RunFactory) -> dict[str, Any]:
    """A Dask task: open the workspace at ``root`` and run queued task ``task_id`` as an agent (one-task worker).

    A retry after its Dask worker was lost takes the task over at once (the scheduler says the holder
    left the cluster) and puts ``lost`` (``[{"worker", "daskWorker"}]``) and ``daskWorker`` in the
    result, which the coordinator reports. Never raises: an error is returned (Dask would log a failed
    task's arguments, and ``config`` may hold a DSN); the queued task itself fails or is taken over
    through the queue, as with any worker. ``run_factory`` (the coordinator's run class) travels by
    reference, as Dask pickles a class: the Dask worker imports it from its module.
    """
    from agentstack_lab.coordination.dask import announce_attempt, lost_dask_worker
    from agentstack_lab.workspace import Workspace

    worker_id = worker_name("dask")
    where = announce_attempt(task_id, worker_id)
    extra: dict[str, Any] = {"daskWorker": where}

    def is_lost(task: QueuedTask) -> bool:  # on this Dask task's thread (asyncio.run below), as get_client needs
        gone = lost_dask_worker(task.worker_id) if where is not None and task.worker_id else None
        if gone:
            extra.setdefault("lost", []).append({"worker": task.worker_id, "daskWorker": gone})
        return gone is not None

    try:
        with Workspace(Path(root), config, Path(db_path), announce=False) as ws:
            worker = Worker(ws, run_factory=run_factory, lease_s=lease_s, worker_id=worker_id, extra=extra)
            done = asyncio.run(worker.run_one(task_id, is_lost=is_lost))
    except Exception as exc:  # noqa: BLE001 - reported to the caller; the queue row says what happened
        return {"taskId": task_id, "error": f"{type(exc).__name__}: {exc}", "daskWorker": where}
    return {"taskId": task_id, "state": done.state, "workerId": done.worker_id, "daskWorker": where}


class RunCoordination:
    """One coordinated run's queue group and its workers: in-process ones, or Dask tasks (``options.cluster``)."""

    def __init__(self, run: CoordinationContext):
        self.run = run
        self.queue = TaskQueue(run.workspace.db)
        self.placement: Any = None
        cluster = run.options.cluster
        if cluster is not None:
            from agentstack_lab.coordination.dask import DaskPlacement

            ws = run.workspace
            db_path = ws.db.path
            if str(db_path) == ":memory:":
                raise UsageError("a coordinated run on a Dask cluster needs a workspace database file the "
                                 "workers can open (not an in-memory one)")
            self.placement = DaskPlacement(cluster, run_task_on_dask,
                                           (str(ws.root), str(Path(db_path).resolve()), ws.config, self.queue.lease_s,
                                            run.run_factory))

        async def runner(task: QueuedTask) -> dict[str, Any]:  # in-process workers share the run's provider
            return await run_queued(run.workspace, task, run_factory=run.run_factory, provider=run.provider,
                                    executor=run.executor)

        self.coordinator = Coordinator(self.queue, runner, max_workers=0 if self.placement else run.options.max_workers,
                                       group_id=run.run_id, placement=self.placement)
        self._connected: asyncio.Future[Any] | None = None

    async def ready(self) -> None:
        """Connect to the Dask cluster (or start the LocalCluster) once, off the event loop."""
        if self.placement is None:
            return
        if self._connected is None:
            self._connected = asyncio.ensure_future(asyncio.to_thread(self.placement.connect))
        await asyncio.shield(self._connected)

    async def shutdown(self) -> None:
        await self.coordinator.shutdown(reason=f"run {self.run.run_id} ended")


def _payload(run: CoordinationContext, node: AgentNode) -> dict[str, Any]:
    opts = run.options
    options = {k: getattr(opts, k) for k in _PASSED_OPTIONS}
    provider = getattr(run.provider, "name", None)
    return {"runId": run.run_id, "parentId": node.parent_id, "depth": node.depth, "sessionId": run.session_id,
            "options": options, **({"provider": provider} if isinstance(provider, str) else {})}


async def connect_first(run: CoordinationContext) -> None:
    """Connect a coordinated run to its Dask cluster before its tree starts.

    Raises :class:`~agentstack_lab.coordination.dask.ClusterError` when the scheduler cannot be reached
    within the connect timeout (dask config ``distributed.comm.timeouts.connect``), so the run fails
    with that one line instead of completing with subagents that never ran.
    """
    if run.coordination is None:
        run.coordination = RunCoordination(run)
    await run.coordination.ready()


async def queued_agent(run: CoordinationContext, node: AgentNode, *, priority: int) -> None:
    """Stand-in for the run core's ``agent_body(node)``: queue the child, follow it, and take its result back."""
    if run.coordination is None:
        run.coordination = RunCoordination(run)
    coord: RunCoordination = run.coordination
    try:
        await coord.ready()
        await run.flush_log()  # the child's "queued" snapshot is in the log before a worker logs anything of it
        coord.coordinator.submit(node.type, node.prompt, priority=priority, payload=_payload(run, node),
                                 task_id=node.id)
        node.metadata["queue"] = {"priority": priority}
        if coord.placement is not None:
            node.metadata["queue"]["cluster"] = coord.placement.address
        while True:
            try:
                task = await coord.queue.wait(node.id, timeout=0.5)
                break
            except TimeoutError:
                current = coord.queue.get(node.id)
                if current.state == "claimed" and node.status == "pending":
                    node.set_status("running")
                    node.metadata["queue"] = {**node.metadata["queue"], "worker": current.worker_id}
                    run.emit_state(node, log=False)  # the worker's run logs its own "running"
    except asyncio.CancelledError as exc:
        current_task = asyncio.current_task()
        if current_task is not None:
            current_task.uncancel()
        reason = node.stop_reason or (exc.args[0] if exc.args else None) or "stopped"
        await asyncio.to_thread(coord.queue.cancel, node.id, reason)
        if not node.terminal:
            run.finish_agent(node, "stopped", error=reason)
        return
    _merge(run, node, task)


def _merge(run: CoordinationContext, node: AgentNode, task: QueuedTask) -> None:
    """Take a finished task's subtree into ``run.nodes`` and finish the child as the worker did."""
    node.metadata["queue"] = {**node.metadata.get("queue", {}), "worker": task.worker_id, "attempts": task.attempts}
    if node.status == "pending":
        node.set_status("running")
    result = as_dict(task.result)
    tree = as_dict(result.get("tree"))
    if tree:
        _adopt(run, node, tree)
    queue_meta: dict[str, Any] = node.metadata["queue"]
    for lost in as_dicts(result.get("lost")):   # a Dask worker died mid-task: say so, where the user looks
        text = (f"Dask worker {lost.get('daskWorker')} was lost while running this subagent; Dask retried it on "
                f"{result.get('daskWorker')} (attempt {task.attempts})")
        queue_meta.setdefault("lost", []).append(lost.get("daskWorker"))
        log.warning("agentstack-lab: subagent %s: %s", node.id, text)
        run.note(node, text)
    # with a tree, the worker's run logged the child's agent-completed or error already: announce it here,
    # do not log it twice (without one the run never got that far, e.g. a cancelled task: log it here)
    if task.state == "completed" and result.get("status", "completed") == "completed":
        run.finish_agent(node, "completed", result=result.get("text") or "", logged=bool(tree))
    else:
        status = "stopped" if task.state == "cancelled" or result.get("status") == "stopped" else "failed"
        run.finish_agent(node, status, error=tree.get("error") or task.error or f"queued task {task.state}",
                   logged=bool(tree))


def _adopt(run: CoordinationContext, node: AgentNode, tree: dict[str, Any]) -> None:
    """Copy a worker's snapshot (the child and its descendants) into the coordinator's nodes.

    The worker's run logged these snapshots already: they are announced to the coordinator's
    subscribers, not logged again (the log would show a completed child "running" once more).
    """
    node.usage = Usage()
    run.charge(node, _usage(tree.get("ownUsage")), log=False)  # counts against max_tokens like local work
    node.content = tree.get("content") or ""
    node.metadata.update({k: v for k, v in as_dict(tree.get("metadata")).items() if k not in ("queue",)})
    node.subagents = [c["id"] for c in as_dicts(tree.get("children"))]
    node.started_at = tree.get("startedAt") or node.started_at
    for child in as_dicts(tree.get("children")):
        _adopt_descendant(run, child)
    run.emit_state(node, with_content=True, log=False)


def _usage(data: Any) -> Usage:
    """Usage from a snapshot's ``ownUsage``/``usage`` (camelCase on the wire, snake_case before)."""
    data = as_dict(data)
    return Usage(input_tokens=int(data.get("inputTokens", data.get("input_tokens", 0)) or 0),
                 output_tokens=int(data.get("outputTokens", data.get("output_tokens", 0)) or 0),
                 basis=str(data.get("basis") or "none"), cache_read_tokens=int(data.get("cacheReadTokens") or 0),
                 cache_write_tokens=int(data.get("cacheWriteTokens") or 0))


def _adopt_descendant(run: CoordinationContext, snap: dict[str, Any]) -> None:
    sub = AgentNode(id=snap["id"], type=snap.get("type", "agent"), prompt=snap.get("prompt", ""),
                    depth=int(snap.get("depth", 0)), parent_id=snap.get("parentId"), name=snap.get("name", ""),
                    status=snap.get("status", "completed"), content=snap.get("content") or "",
                    result=snap.get("result"), error=snap.get("error"), metadata=dict(snap.get("metadata") or {}),
                    usage=Usage(),
                    created_at=snap.get("createdAt") or time.time(), started_at=snap.get("startedAt"),
                    ended_at=snap.get("endedAt"), subagents=[c["id"] for c in as_dicts(snap.get("children"))])
    run.nodes[sub.id] = sub
    run.charge(sub, _usage(snap.get("ownUsage")), log=False)
    for child in as_dicts(snap.get("children")):
        _adopt_descendant(run, child)
    run.emit_state(sub, with_content=True, log=False)
