"""Prometheus metrics of a workspace (docs/tasks.md), computed from its database at scrape time.

A custom collector (:class:`WorkspaceCollector`) queries the tables when scraped, so the work of every
process on the workspace counts (kernels, ``agent run``, workers, the MCP server), survives restarts,
and nothing is counted twice. Exposed by ``agentstack-lab metrics`` and the server extension's
``/agentstack/api/metrics``.

Counters: ``agentstack_monitor_warnings_total``, ``_interventions_total``, ``_terminations_total``
(``monitor_phase_changes``), ``agentstack_tasks_total{outcome}`` (``tasks``), ``agentstack_decisions_total{outcome}``
(closed ``decisions``: answered, expired, cancelled). Gauges: ``agentstack_agents{status}``,
``agentstack_agents_paused``, ``agentstack_queue_depth`` (pending ``task_queue`` rows), ``agentstack_decisions_pending{kind}``,
``agentstack_runs{status}``, ``agentstack_events_seq``.
Histograms per agent: ``agentstack_agent_files_accessed``, ``agentstack_agent_api_calls``,
``agentstack_agent_tokens`` (the resource monitor's counts in the agent's metadata; tokens fall back to
the row's usage), and ``agentstack_task_latency_seconds`` (finished tasks, end minus ``created_at``).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from agentstack_lab.events import AGENT_STATUSES as _STATUSES
from agentstack_lab.events import UNFINISHED

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["WorkspaceCollector", "exposition", "BUCKETS"]

BUCKETS = {
    "files": (0, 1, 5, 10, 25, 50, 100, 250),
    "api_calls": (1, 5, 10, 25, 50, 100, 250),
    "tokens": (1_000, 10_000, 50_000, 100_000, 250_000, 500_000, 1_000_000),
    "latency": (0.1, 0.5, 1, 5, 15, 60, 300, 1800),
}
AGENT_STATUSES = tuple(s for s in _STATUSES if s != "idle")  # the engine's statuses, from events.py


def _rows(db: Database, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    try:
        return db.query(sql, params)
    except Exception as exc:  # a table another version adds (task_queue) may be absent
        if "no such table" in str(exc) or "no such column" in str(exc):
            return []
        raise


def _histogram(name: str, doc: str, values: Iterable[float], buckets: tuple[float, ...]) -> Any:
    from prometheus_client.core import HistogramMetricFamily

    values = list(values)
    counts, total = [], 0
    for bound in buckets:
        counts.append((str(float(bound)), sum(1 for v in values if v <= bound)))
    counts.append(("+Inf", len(values)))
    total = float(sum(values))
    return HistogramMetricFamily(name, doc, buckets=counts, sum_value=total)


class WorkspaceCollector:
    """A ``prometheus_client`` collector reading one workspace database on every scrape."""

    def __init__(self, db: Database):
        self.db = db

    def describe(self) -> list[Any]:
        return []  # computed at scrape time; registering must not query the database

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        db = self.db
        phases = dict(_rows(db, "SELECT phase, count(*) FROM monitor_phase_changes GROUP BY phase"))
        for phase, name in (("warning", "warnings"), ("intervention", "interventions"),
                            ("termination", "terminations")):
            yield CounterMetricFamily(f"agentstack_monitor_{name}", f"Resource-monitor {phase} phases reached",
                                      value=phases.get(phase, 0))

        tasks = CounterMetricFamily("agentstack_tasks", "Finished tasks by outcome", labels=["outcome"])
        for status, n in _rows(db, "SELECT status, count(*) FROM tasks WHERE status IN "
                                   "('completed', 'failed', 'stopped') GROUP BY status"):
            tasks.add_metric([status], n)
        yield tasks
        decisions = CounterMetricFamily("agentstack_decisions", "Closed decisions by outcome", labels=["outcome"])
        for state, n in _rows(db, "SELECT state, count(*) FROM decisions WHERE state <> 'pending' GROUP BY state"):
            decisions.add_metric([state], n)
        yield decisions

        agents = GaugeMetricFamily("agentstack_agents", "Agents by status", labels=["status"])
        by_status = dict(_rows(db, "SELECT status, count(*) FROM agents GROUP BY status"))
        for status in sorted(set(AGENT_STATUSES) | set(by_status)):
            agents.add_metric([status], by_status.get(status, 0))
        yield agents
        rows = _rows(db, "SELECT status, metadata, input_tokens, output_tokens FROM agents")
        metas = []
        paused = 0
        for status, meta, tin, tout in rows:
            data: dict[str, Any] = {}
            with contextlib.suppress(ValueError, TypeError):
                data = json.loads(meta or "{}")
            if data.get("paused") and status in UNFINISHED:
                paused += 1
            metas.append((data.get("resources") or {}, (tin or 0) + (tout or 0)))
        yield GaugeMetricFamily("agentstack_agents_paused", "Unfinished agents that are paused", value=paused)
        depth = _rows(db, "SELECT count(*) FROM task_queue WHERE state = 'pending'")
        yield GaugeMetricFamily("agentstack_queue_depth", "Pending tasks in the durable queue",
                                value=depth[0][0] if depth else 0)
        pending = GaugeMetricFamily("agentstack_decisions_pending", "Decisions waiting for an answer, by kind",
                                    labels=["kind"])
        for kind, n in _rows(db, "SELECT kind, count(*) FROM decisions WHERE state = 'pending' GROUP BY kind"):
            pending.add_metric([kind], n)
        yield pending
        runs = GaugeMetricFamily("agentstack_runs", "Runs (root agents) by status", labels=["status"])
        for status, n in _rows(db, "SELECT status, count(*) FROM agents WHERE parent_id IS NULL AND run_id = id "
                                   "GROUP BY status"):
            runs.add_metric([status], n)
        yield runs
        seq = _rows(db, "SELECT coalesce(max(seq), 0) FROM events")
        yield GaugeMetricFamily("agentstack_events_seq", "Highest event-log sequence number",
                                value=seq[0][0] if seq else 0)

        monitored = [r for r, _ in metas if r]
        yield _histogram("agentstack_agent_files_accessed", "Files accessed per agent (resource monitor)",
                         (r.get("filesRead", 0) + r.get("filesWritten", 0) + r.get("filesModified", 0)
                          for r in monitored), BUCKETS["files"])
        yield _histogram("agentstack_agent_api_calls", "Model API calls per agent (resource monitor)",
                         (r.get("apiCalls", 0) for r in monitored), BUCKETS["api_calls"])
        yield _histogram("agentstack_agent_tokens", "Tokens consumed per agent",
                         ((r.get("tokens") if r else used) or 0 for r, used in metas), BUCKETS["tokens"])
        latency = [float(r[0]) for r in _rows(
            db, "SELECT COALESCE(completed_at, updated_at) - created_at FROM tasks "
                "WHERE status IN ('completed', 'failed', 'stopped')")
            if r[0] is not None and math.isfinite(float(r[0])) and float(r[0]) >= 0]
        yield _histogram("agentstack_task_latency_seconds", "Seconds from a task's creation to its end", latency,
                         BUCKETS["latency"])


def exposition(db: Database, *, extra: Iterable[Any] = (), accept: str = "") -> tuple[bytes, str]:
    """A workspace's metrics exposition and its Content-Type (a registry of its own, not the global one).

    Prometheus' text format 0.0.4, or OpenMetrics when ``accept`` (the scraper's Accept header) asks
    for ``application/openmetrics-text``, as ``prometheus_client`` negotiates it. ``extra``: more
    collectors, e.g. the server's own gauges (its WebSocket clients).
    """
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkspaceCollector(db))
    for collector in extra:
        registry.register(collector)
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type
