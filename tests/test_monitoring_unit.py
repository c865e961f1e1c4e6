"""The resource monitor's phases on their own (seed §11.1): each limit drives them, time without a deliverable
too, phases never go back, and every change is one row of ``monitor_phase_changes``."""

from __future__ import annotations

import pytest

from agentstack_lab.config import MonitoringConfig
from agentstack_lab.monitoring.resources import ResourceMonitor


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def monitor(db=None, **limits) -> tuple[ResourceMonitor, Clock]:
    clock = Clock()
    cfg = MonitoringConfig(**{"max_api_calls": 10, "max_tokens_consumed": 1000, "max_subtasks_spawned": 4,
                              "max_files_accessed": 10, "max_time_without_deliverable_s": 100, **limits})
    return ResourceMonitor(cfg, db=db, run_id="run-1", clock=clock), clock


def test_idle_time_drives_the_phases_and_a_deliverable_does_not_lower_them(ws):
    m, clock = monitor(ws.db)
    m.track("a", "coder")
    clock.now += 79
    assert m.evaluate("a") is None
    clock.now += 1  # 80 s of 100 without a deliverable: 0.8
    assert m.evaluate("a") == "warning" and m.agents["a"].reason == "seconds without a deliverable 80/100"
    m.record_deliverable("a", "memory")
    assert m.evaluate("a") is None and m.agents["a"].phase == "warning"  # phases only go up
    clock.now += 150
    assert m.evaluate("a") == "termination"  # 150/100 >= 1.5: straight past intervention
    rows = ws.db.query("SELECT run_id, agent_id, agent_type, phase FROM monitor_phase_changes ORDER BY id")
    assert [tuple(r) for r in rows] == [("run-1", "a", "coder", "warning"), ("run-1", "a", "coder", "termination")]


@pytest.mark.parametrize(("record", "reason"), [
    (lambda m: m.record_api_call("a", tokens=1), "API calls 10/10"),
    (lambda m: m.record_api_call("a", tokens=250), "tokens 1000/1000"),  # 750 is 0.75: no warning first
    (lambda m: m.record_subtask("a"), "subtasks spawned 4/4"),
    (lambda m: m.record_files("a", read=1, written=1), "files accessed 10/10"),
])
def test_each_limit_reaches_intervention(record, reason):
    m, _clock = monitor(max_api_calls=10 if "API" in reason else 1000)
    m.track("a")
    changes = []
    for _ in range(10):
        changed = record(m)
        if changed:
            changes.append(changed)
        if m.agents["a"].phase == "intervention":
            break
    assert changes[-1] == "intervention" and m.agents["a"].reason == reason
    assert changes in (["warning", "intervention"], ["intervention"])  # a big step may skip warning, never back


def test_disabled_monitor_never_changes_phase():
    m, clock = monitor(enabled=False)
    m.track("a")
    for _ in range(50):
        m.record_api_call("a", 100)
    clock.now += 10_000
    assert m.evaluate("a") is None and m.agents["a"].phase == "normal"


def test_thresholds_must_be_ordered():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="warning_at <= intervention_at <= termination_at"):
        MonitoringConfig(warning_at=1.2, intervention_at=1.0)
