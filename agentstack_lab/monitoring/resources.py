"""The resource-exhaustion monitor (docs/tasks.md): runaway agents are warned, paused, then stopped.

Per agent it counts model calls, tokens, subtasks spawned, files the ``python`` tool read, wrote and
modified (audit hooks in the executors), deliverables, and the time since the last deliverable. Each
count against its limit (``monitoring`` config; the seed's defaults: 100 calls, 500k tokens, 20
subtasks, 50 files, 30 min) is a ratio; the largest ratio sets the phase, which only goes up:

    normal → warning (≥ 0.8) → intervention (≥ 1.0) → termination (≥ 1.5)

Every phase change is a row of ``monitor_phase_changes`` (the metrics' counters read it) and the
agent's ``metadata.resources`` (its row in ``agents`` and its ``agent-state`` events, so the tree and
the event log show it). :class:`RunMonitor` is the run-facing side: the engine reports usage to it and
calls :meth:`RunMonitor.enforce` at its checkpoints (before each model call and tool call), where an
intervention asks the run's person a decision of kind ``intervention`` ("resume or stop?") under the
run's ``on_query`` policy, like any other decision: a headless ``fail`` run fails closed, ``auto``
resumes, ``wait`` pauses the agent until any surface answers (``agent resume`` from any process
answers it too). Termination stops the agent (and its subtree) with the reason.

Services layer: the run is a :class:`MonitoredRun` (``run_id``, ``emit_state``, ``intervene``, ``ask_user``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["PHASES", "AgentResources", "ResourceMonitor", "RunMonitor", "MonitoredRun", "Terminated", "LIMITS"]

log = logging.getLogger(__name__)

PHASES = ("normal", "warning", "intervention", "termination")

LIMITS = {  # count -> config field of its limit
    "apiCalls": "max_api_calls",
    "tokens": "max_tokens_consumed",
    "subtasks": "max_subtasks_spawned",
    "filesAccessed": "max_files_accessed",
    "idleSeconds": "max_time_without_deliverable_s",
}

_LABELS = {"apiCalls": "API calls", "tokens": "tokens", "subtasks": "subtasks spawned",
           "filesAccessed": "files accessed", "idleSeconds": "seconds without a deliverable"}


class Terminated(Exception):  # noqa: N818 - reads as what happened to the agent
    """The monitor terminated an agent (the engine turns it into a stop with this reason)."""


@dataclass(kw_only=True)
class AgentResources:
    """What one agent has used so far (mutable: the monitor updates it in place)."""

    agent_id: str
    agent_type: str = ""
    api_calls: int = 0
    tokens: int = 0
    subtasks: int = 0
    files_read: int = 0
    files_written: int = 0
    files_modified: int = 0
    deliverables: int = 0
    started_at: float = field(default_factory=time.time)
    last_deliverable_at: float | None = None
    phase: str = "normal"
    reason: str | None = None
    paused_at: float | None = None
    decision_id: str | None = None

    @property
    def files_accessed(self) -> int:
        return self.files_read + self.files_written + self.files_modified

    def idle_seconds(self, now: float) -> float:
        return now - (self.last_deliverable_at or self.started_at)

    def counts(self, now: float) -> dict[str, float]:
        return {"apiCalls": self.api_calls, "tokens": self.tokens, "subtasks": self.subtasks,
                "filesAccessed": self.files_accessed, "idleSeconds": self.idle_seconds(now)}

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """The ``metadata.resources`` form (camelCase, like the rest of the agent state)."""
        return {"apiCalls": self.api_calls, "tokens": self.tokens, "subtasks": self.subtasks,
                "filesRead": self.files_read, "filesWritten": self.files_written,
                "filesModified": self.files_modified, "deliverables": self.deliverables,
                "lastDeliverableAt": self.last_deliverable_at, "phase": self.phase, "reason": self.reason,
                "pausedAt": self.paused_at, "decisionId": self.decision_id}


class ResourceMonitor:
    """Counts and phases for the agents of one process (the seed's service), with the phase log in ``db``."""

    def __init__(self, config: Any, *, db: Database | None = None, run_id: str | None = None, clock: Any = time.time):
        self.config = config
        self.db = db
        self.run_id = run_id
        self.clock = clock
        self.agents: dict[str, AgentResources] = {}

    @property
    def enabled(self) -> bool:
        return bool(getattr(self.config, "enabled", False))

    def track(self, agent_id: str, agent_type: str = "") -> AgentResources:
        """Start tracking an agent (idempotent)."""
        if agent_id not in self.agents:
            self.agents[agent_id] = AgentResources(agent_id=agent_id, agent_type=agent_type, started_at=self.clock())
        return self.agents[agent_id]

    # --- recording (each returns the new phase when it changed) -----------------------------------
    def record_api_call(self, agent_id: str, tokens: int = 0) -> str | None:
        r = self.track(agent_id)
        r.api_calls += 1
        r.tokens += max(0, int(tokens))
        return self.evaluate(agent_id)

    def record_files(self, agent_id: str, *, read: int = 0, written: int = 0, modified: int = 0) -> str | None:
        r = self.track(agent_id)
        r.files_read += read
        r.files_written += written
        r.files_modified += modified
        return self.evaluate(agent_id)

    def record_subtask(self, agent_id: str) -> str | None:
        self.track(agent_id).subtasks += 1
        return self.evaluate(agent_id)

    def record_deliverable(self, agent_id: str, kind: str = "result") -> None:
        r = self.track(agent_id)
        r.deliverables += 1
        r.last_deliverable_at = self.clock()

    # --- phases -------------------------------------------------------------------------------------
    def worst(self, agent_id: str) -> tuple[float, str]:
        """The largest use/limit ratio of an agent and a sentence naming it."""
        r = self.agents[agent_id]
        best, why = 0.0, ""
        for key, value in r.counts(self.clock()).items():
            limit = float(getattr(self.config, LIMITS[key]))
            ratio = value / limit
            if ratio > best:
                shown = f"{value:.0f}" if key == "idleSeconds" else f"{int(value)}"
                best, why = ratio, f"{_LABELS[key]} {shown}/{limit:g}"
        return best, why

    def evaluate(self, agent_id: str) -> str | None:
        """Move the agent's phase up to what its ratios say; returns the new phase when it changed."""
        if not self.enabled or agent_id not in self.agents:
            return None
        r = self.agents[agent_id]
        ratio, why = self.worst(agent_id)
        cfg = self.config
        target = ("termination" if ratio >= cfg.termination_at else "intervention" if ratio >= cfg.intervention_at
                  else "warning" if ratio >= cfg.warning_at else "normal")
        if PHASES.index(target) <= PHASES.index(r.phase):
            return None
        r.phase, r.reason = target, why
        self._log_change(r)
        return target

    def _log_change(self, r: AgentResources) -> None:
        if self.db is None:
            return
        try:
            with self.db.transaction() as conn:
                conn.execute("INSERT INTO monitor_phase_changes (run_id, agent_id, agent_type, phase, reason, usage,"
                             " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (self.run_id, r.agent_id, r.agent_type, r.phase, r.reason,
                              json.dumps(r.to_dict()), self.clock()))
        except Exception:  # the phase still applies in-process; the log is for metrics
            log.exception("agentstack-lab: could not record the monitor's phase change for %s", r.agent_id)


class MonitoredRun(Protocol):
    """What the monitor uses of a run (the engine's run core satisfies it): its id, snapshots, pause, ask."""

    run_id: str

    def emit_state(self, node: Any, *, with_content: bool = False, log: bool = True) -> None: ...

    def intervene(self, agent_id: str, *, user_comment: str | None = None, user_content: str | None = None,
                  status: str | None = None, surface: str = "widget", by: str | None = None) -> None: ...

    async def ask_user(self, node: Any, kind: str, prompt: str, options: dict[str, Any] | None = None, *,
                       validate: Any = None, optional: bool = False, opened: Any = None,
                       waiting: str = "waiting_user") -> Any: ...


class RunMonitor:
    """The monitor as one run sees it: usage in, pause/decision/stop out (see the module docstring)."""

    def __init__(self, run: MonitoredRun, config: Any, *, db: Database | None = None):
        self.run = run
        self.monitor = ResourceMonitor(config, db=db, run_id=run.run_id)

    @property
    def enabled(self) -> bool:
        return self.monitor.enabled

    def _publish(self, node: Any, changed: str | None) -> None:
        r = self.monitor.agents.get(node.id)
        if r is None:
            return
        node.metadata["resources"] = r.to_dict()
        if changed is not None:
            log.warning("agentstack-lab: agent %s (%s) entered the %s phase: %s", node.id[:8], node.type, changed,
                        r.reason)
        self.run.emit_state(node)

    def started(self, node: Any) -> None:
        if self.enabled:
            self.monitor.track(node.id, node.type)

    def api_call(self, node: Any, tokens: int) -> None:
        """A model call; the caller emits the node's state right after, so nothing is emitted here."""
        if self.enabled:
            changed = self.monitor.record_api_call(node.id, tokens)
            node.metadata["resources"] = self.monitor.agents[node.id].to_dict()
            if changed:
                log.warning("agentstack-lab: agent %s (%s) entered the %s phase: %s", node.id[:8], node.type,
                            changed, self.monitor.agents[node.id].reason)

    def files(self, node: Any, counts: dict[str, int] | None) -> None:
        if self.enabled and counts and any(counts.values()):
            self._publish(node, self.monitor.record_files(
                node.id, read=int(counts.get("read", 0)), written=int(counts.get("written", 0)),
                modified=int(counts.get("modified", 0))))

    def subtask(self, parent: Any) -> None:
        if self.enabled:
            self._publish(parent, self.monitor.record_subtask(parent.id))

    def deliverable(self, node: Any, kind: str) -> None:
        if self.enabled:
            self.monitor.record_deliverable(node.id, kind)
            self._publish(node, None)

    async def enforce(self, node: Any) -> None:
        """At a checkpoint: stop a terminated agent, ask about one that reached intervention (once)."""
        if not self.enabled or node.id not in self.monitor.agents:
            return
        r = self.monitor.agents[node.id]
        changed = self.monitor.evaluate(node.id)  # the time without a deliverable grows on its own
        if changed:
            self._publish(node, changed)
        if r.phase == "termination":
            raise Terminated(f"terminated by the resource monitor: {r.reason}")
        if r.phase == "intervention" and r.paused_at is None:
            await self._intervene(node, r)

    async def _intervene(self, node: Any, r: AgentResources) -> None:
        """Pause the agent on an ``intervention`` decision, asked as the run asks anything (its ``on_query``).

        ``fail`` raises the run's headless error, ``auto`` resumes; ``wait`` holds the agent (and its
        subagents, at their next checkpoint) until a surface answers ``resume`` or ``stop``.
        """
        r.paused_at = time.time()
        prompt = (f"The resource monitor paused agent {node.type} ({node.id[:8]}): {r.reason}. "
                  "Resume it or stop it?")

        def opened(decision_id: str) -> None:
            r.decision_id = decision_id
            node.metadata["resources"] = r.to_dict()
            self.run.intervene(node.id, status="paused")

        try:
            answer = await self.run.ask_user(node, "intervention", prompt,
                                             {"choices": ["resume", "stop"], "reason": r.reason}, opened=opened,
                                             waiting="paused")
        finally:
            r.decision_id = None
            node.metadata["resources"] = r.to_dict()
        if answer == "stop":
            raise Terminated(f"stopped at the resource monitor's intervention ({r.reason})")
        self.run.intervene(node.id, status="running")

