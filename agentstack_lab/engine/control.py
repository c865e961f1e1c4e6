"""Interventions from other processes: the owning run applies what the CLI or MCP queued for it.

``agentstack-lab agent comment|pause|resume|stop ID`` and the MCP intervention tools write a row of
``interventions`` (see :mod:`agentstack_lab.decisions.interventions`); :func:`follow_interventions`
runs beside the run, looks at ``PRAGMA data_version`` every :data:`POLL_S` (100 ms; a read of the
WAL index, no disk I/O), and applies new rows through the run's ``intervene`` / ``stop``,
exactly as the widget does. Pause is a flag the agent honours between steps and tool calls
(the run core's ``checkpoint``).

Its reads run in a worker thread. When the run ends it cancels this loop, and whoever started the run
may close the workspace right after; a cancelled ``asyncio.to_thread`` returns at once while its thread
goes on reading. So a read under way is waited for (:func:`~agentstack_lab.engine.threads.thread_call`):
nothing of the loop touches the database after it was cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.threads import thread_call
from agentstack_lab.events import surface_label

if TYPE_CHECKING:
    from agentstack_lab.engine.context import InterventionTarget
    from agentstack_lab.store.protocol import Database

__all__ = ["follow_interventions", "apply_intervention", "POLL_S"]

log = logging.getLogger(__name__)

POLL_S = 0.1
"""Seconds between looks for new interventions."""

def apply_intervention(run: InterventionTarget, item: Any) -> None:
    """Apply one queued intervention to ``run`` (raises a ValueError/KeyError when it cannot)."""
    where = surface_label(item.surface) if item.surface else "another process"
    if item.action == "comment":
        run.intervene(item.agent_id, user_comment=item.text)
    elif item.action == "content":
        run.intervene(item.agent_id, user_content=item.text)
    elif item.action == "pause":
        run.intervene(item.agent_id, status="paused")
    elif item.action == "resume":  # also answers the resource monitor's intervention decision, if one is open
        run.intervene(item.agent_id, status="running", surface=item.surface or "python", by=item.created_by)
    elif item.action == "stop":
        run.stop(item.agent_id, reason=f"stopped by the user from {where}")
    else:
        raise ValueError(f"unknown intervention {item.action!r}")


def _worked_here(run: InterventionTarget, item: Any) -> bool:
    """Whether this process applies ``item``: its agent is in ``run.nodes`` and not a queued child.

    Interventions are filed under the run id (the coordinator's, for a subtask a worker runs); the
    coordinator leaves a queued child's to the worker running it, except ``stop``, which it applies by
    cancelling the queue row; a worker's attached run skips the agents of the rest of the tree.
    """
    def queued(node: Any) -> bool:
        return node.id != run.root_id and "queue" in node.metadata and not node.terminal

    node = run.nodes.get(item.agent_id) if item.agent_id else run.nodes.get(run.root_id)
    if node is None:  # the coordinator refuses an unknown agent's, unless a worker may hold that agent
        return run.attach is None and not any(queued(n) for n in run.nodes.values())
    return not queued(node) or item.action == "stop"


async def follow_interventions(run: InterventionTarget, db: Database) -> None:
    """Apply this run's queued interventions until cancelled."""
    from agentstack_lab.decisions import Interventions

    interventions = Interventions(db)
    conn = db.conn
    seen, polls = None, 0
    while True:
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            polls += 1
            if version != seen or polls % 10 == 0:  # every second anyway: writes on this connection
                seen = version
                for item in await thread_call(interventions.pending, run.run_id):
                    if not _worked_here(run, item):
                        continue  # another process's run of the same tree applies it
                    error = None
                    try:
                        apply_intervention(run, item)
                    except (ValueError, KeyError, TypeError) as exc:
                        error = str(exc)
                    await thread_call(interventions.mark_applied, item.id, error)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed look is retried; the run goes on
            log.debug("agentstack-lab: could not read interventions of run %s: %s", run.run_id, exc)
        await asyncio.sleep(POLL_S)
