"""Workflow data: phases, findings, phase results, the running context and the report (docs/workflows.md).

Everything here is plain dataclasses with ``to_dict()`` giving the camelCase JSON that
``report.schema.json`` describes.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from agentstack_lab.events import wire_keys

Phase = Literal["inventory", "analysis", "sync", "consistency", "adversarial", "reconciliation"]
Severity = Literal["low", "medium", "high"]
# PASS: every check held; FAIL: a check failed; ERROR: the run could not complete (a phase raised,
# a cell crashed, the kernel died), so nothing was decided: never reported as FAIL.
Verdict = Literal["PASS", "FAIL", "ERROR"]

PHASES: tuple[str, ...] = ("inventory", "analysis", "sync", "consistency", "adversarial", "reconciliation")
SEVERITIES: tuple[str, ...] = ("low", "medium", "high")

__all__ = [
    "PHASES",
    "SEVERITIES",
    "DocumentInfo",
    "Finding",
    "Phase",
    "PhaseResult",
    "Severity",
    "Verdict",
    "WorkflowConfig",
    "WorkflowContext",
    "WorkflowEvent",
    "WorkflowReport",
]


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict: Callable[[], Any] | None = getattr(value, "to_dict", None)
        return to_dict() if to_dict is not None else dataclasses.asdict(value)
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


@dataclass(kw_only=True)
class Finding:
    """Something a phase found: a claim and what contradicted it."""

    claim: str
    contradiction: str
    severity: Severity = "medium"
    evidence: list[str] = field(default_factory=list)
    file: str | None = None
    line: int | None = None
    phase: str | None = None
    iteration: int | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding severity must be one of {SEVERITIES}, got {self.severity!r}")
        if isinstance(self.evidence, str):
            self.evidence = [self.evidence]

    def to_dict(self) -> dict[str, Any]:
        out = wire_keys({k: _jsonable(v) for k, v in dataclasses.asdict(self).items()})
        return {k: v for k, v in out.items() if v is not None}


@dataclass(kw_only=True)
class DocumentInfo:
    """One document found by the inventory phase."""

    path: str
    title: str | None = None
    lines: int = 0
    sections: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "lines": self.lines, "sections": list(self.sections)}


@dataclass(kw_only=True)
class PhaseResult:
    """The outcome of running one phase once."""

    phase: str
    success: bool = True
    findings: list[Finding] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    iteration: int = 1
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "phase": self.phase,
            "success": self.success,
            "iteration": self.iteration,
            "duration": round(self.duration, 6),
            "findings": [f.to_dict() for f in self.findings],
            "artifacts": _jsonable(self.artifacts),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(kw_only=True)
class WorkflowConfig:
    """What to run: a name, the phases in order, the loop bound and free-form parameters."""

    name: str
    phases: tuple[str, ...] = ("inventory", "analysis", "sync", "consistency", "adversarial")
    max_iterations: int = 3
    parameters: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [p for p in self.phases if p not in PHASES]
        if unknown:
            raise ValueError(f"unknown workflow phase(s) {unknown}; valid phases: {list(PHASES)}")
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise ValueError(f"max_iterations must be an integer >= 1, got {self.max_iterations!r}")


@dataclass(kw_only=True)
class WorkflowContext:
    """The state a phase executor sees (docs/workflows.md ``WorkflowContext``)."""

    config: WorkflowConfig
    current_phase: str | None = None
    iteration: int = 1
    results: list[PhaseResult] = field(default_factory=list)
    inventory: list[DocumentInfo] = field(default_factory=list)
    started_at: datetime = field(default_factory=_now)
    verdict: Verdict | None = None
    state: dict[str, Any] = field(default_factory=dict)

    def last(self, phase: str) -> PhaseResult | None:
        """The most recent result of ``phase``, if it ran."""
        for result in reversed(self.results):
            if result.phase == phase:
                return result
        return None


@dataclass(frozen=True, kw_only=True)
class WorkflowEvent:
    """``workflow:start|complete|error``, ``phase:start|complete`` or ``finding``."""

    type: Literal["workflow:start", "workflow:complete", "workflow:error", "phase:start", "phase:complete",
                  "finding"]
    workflow: str
    phase: str | None = None
    iteration: int | None = None
    data: Any = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "workflow": self.workflow}
        if self.phase is not None:
            out["phase"] = self.phase
        if self.iteration is not None:
            out["iteration"] = self.iteration
        if self.data is not None:
            out["data"] = _jsonable(self.data)
        return out


@dataclass(kw_only=True)
class WorkflowReport:
    """The result of a workflow run (docs/workflows.md ``WorkflowReport``)."""

    workflow: str
    started_at: datetime
    completed_at: datetime
    verdict: Verdict
    phases: list[PhaseResult]
    iterations: int
    max_iterations: int
    # the documentation counters: None (left out of the summary) unless the workflow counted documents
    documents_scanned: int | None = None
    documents_updated: int | None = None
    sections_removed: int | None = None
    sections_added: int | None = None
    diagrams_updated: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def duration(self) -> float:
        return (self.completed_at - self.started_at).total_seconds()

    @property
    def findings(self) -> list[Finding]:
        return [f for result in self.phases for f in result.findings]

    @property
    def unique_findings(self) -> list[Finding]:
        """The findings with repeats left out: the same finding from another phase or iteration counts once."""
        seen: dict[str, Finding] = {}
        for finding in self.findings:
            key = {k: v for k, v in finding.to_dict().items() if k not in ("phase", "iteration")}
            seen.setdefault(repr(sorted(key.items())), finding)
        return list(seen.values())

    def _last_adversarial(self) -> PhaseResult | None:
        return next((r for r in reversed(self.phases) if r.phase == "adversarial"), None)

    @property
    def confidence(self) -> str:
        """high/medium/low from how the verdict was reached (seed: ``confidence: string``).

        Never high when a gate of the last adversarial pass was skipped (a reviewer that called no model).
        """
        adversarial = [r for r in self.phases if r.phase == "adversarial"]
        errored = any(r.error for r in self.phases)
        if errored or not adversarial:
            return "low"
        skipped = "SKIPPED" in (adversarial[-1].artifacts.get("gates") or {}).values()
        if self.verdict == "PASS" and self.iterations == 1 and not skipped:
            return "high"
        return "medium"

    @property
    def decision(self) -> dict[str, Any] | None:
        """Which gates of the last adversarial pass decided the verdict (``None`` when it recorded none).

        ``decidedBy`` lists the gates that FAILed when the verdict is FAIL, every gate that passed when it is
        PASS, and is empty on ERROR; a ``SKIPPED`` gate (a reviewer that called no model) never decides.
        ``reviewer`` is the reviewer agent's verdict and findings, or ``skipped`` with the reason.
        """
        last = self._last_adversarial()
        gates = dict(last.artifacts.get("gates") or {}) if last else {}
        if not gates:
            return None
        wanted = {"FAIL": "FAIL", "PASS": "PASS"}.get(self.verdict)
        decided = [g for g, v in gates.items() if v == wanted]
        out: dict[str, Any] = {"decidedBy": decided, "gates": gates}
        agent = last.artifacts.get("agent") if last else None
        if isinstance(agent, dict) and "verdict" in agent:
            out["reviewer"] = {k: agent[k] for k in ("verdict", "summary", "findings", "provider", "offline")
                               if k in agent}
            if agent.get("skipped"):
                out["reviewer"] |= {"skipped": True, "reason": agent.get("skipReason") or "no model was called"}
        return out

    def to_dict(self) -> dict[str, Any]:
        by_severity = dict.fromkeys(SEVERITIES, 0)
        for finding in self.unique_findings:
            by_severity[finding.severity] += 1
        counters = {"documentsScanned": self.documents_scanned, "documentsUpdated": self.documents_updated,
                    "sectionsRemoved": self.sections_removed, "sectionsAdded": self.sections_added,
                    "diagramsUpdated": self.diagrams_updated}
        out = {
            "id": self.id,
            "workflow": self.workflow,
            "startedAt": _iso(self.started_at),
            "completedAt": _iso(self.completed_at),
            "duration": round(self.duration, 6),
            "verdict": self.verdict,
            "iterations": self.iterations,
            "maxIterations": self.max_iterations,
            "parameters": _jsonable(self.parameters),
            "phases": [r.to_dict() for r in self.phases],
            "summary": {
                **({k: v or 0 for k, v in counters.items()} if any(v is not None for v in counters.values())
                   else {}),
                "findingsTotal": sum(by_severity.values()),
                "findingsBySeverity": by_severity,
            },
            "confidence": self.confidence,
        }
        decision = self.decision
        if decision is not None:
            out["decision"] = _jsonable(decision)
        return out
