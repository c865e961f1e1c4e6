"""The phase runner (docs/workflows.md): run phases in order, emit events, loop on adversarial FAIL.

Pure Python and async; it knows nothing about notebooks or kernels. A phase executor is a
function (sync or async) taking a :class:`PhaseScope`; it records findings with
``scope.finding(...)``, may call ``scope.fail(reason)``, and may return ``None``, a bool
(success), a dict (artifacts) or a :class:`PhaseResult`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from agentstack_lab.errors import AgentstackError
from agentstack_lab.workflows.model import (
    PHASES,
    DocumentInfo,
    Finding,
    PhaseResult,
    WorkflowConfig,
    WorkflowContext,
    WorkflowEvent,
    WorkflowReport,
)

__all__ = ["PhaseError", "PhaseExecutor", "PhaseRunner", "PhaseScope"]

PhaseExecutor = Callable[["PhaseScope"], Any]
Listener = Callable[[WorkflowEvent], Awaitable[None] | None]
_COUNTERS = ("documents_updated", "sections_removed", "sections_added", "diagrams_updated")


class PhaseError(AgentstackError, RuntimeError):
    """A phase executor raised; ``phase`` and ``iteration`` say where."""

    def __init__(self, phase: str, iteration: int, cause: BaseException):
        super().__init__(f"workflow phase {phase!r} (iteration {iteration}) raised "
                         f"{type(cause).__name__}: {cause}")
        self.phase = phase
        self.iteration = iteration


class PhaseScope:
    """What one phase execution sees: the workflow context plus a place for its own results."""

    def __init__(self, context: WorkflowContext, result: PhaseResult, runner: PhaseRunner):
        self.context = context
        self.result = result
        self._runner = runner

    @property
    def phase(self) -> str:
        return self.result.phase

    @property
    def iteration(self) -> int:
        return self.context.iteration

    @property
    def params(self) -> dict[str, Any]:
        return self.context.config.parameters

    @property
    def inventory(self) -> list[DocumentInfo]:
        return self.context.inventory

    @property
    def state(self) -> dict[str, Any]:
        """Free-form state shared by all phases of this run."""
        return self.context.state

    @property
    def artifacts(self) -> dict[str, Any]:
        return self.result.artifacts

    def last(self, phase: str) -> PhaseResult | None:
        return self.context.last(phase)

    def finding(self, claim: str, contradiction: str, severity: str = "medium", *,
                evidence: list[str] | str | None = None, file: str | None = None,
                line: int | None = None) -> Finding:
        """Record a finding for this phase (a ``finding`` event follows when the phase ends)."""
        found = Finding(claim=claim, contradiction=contradiction, severity=severity,  # type: ignore[arg-type]
                        evidence=list([evidence] if isinstance(evidence, str) else evidence or []),
                        file=file, line=line, phase=self.phase, iteration=self.iteration)
        self.result.findings.append(found)
        return found

    def add_finding(self, finding: Finding) -> None:
        """Record an already-built finding."""
        finding.phase = finding.phase or self.phase
        finding.iteration = finding.iteration or self.iteration
        self.result.findings.append(finding)

    def fail(self, reason: str | None = None) -> None:
        """Mark this phase as failed (an adversarial failure starts reconciliation)."""
        self.result.success = False
        if reason:
            self.result.artifacts.setdefault("failReasons", []).append(reason)

    def gate(self, name: str, passed: bool, reason: str | None = None) -> None:
        """Record the verdict of one check that gates this phase (``static``, ``reviewer``); a FAIL fails it.

        The report's ``decision`` names the gates of the last adversarial pass and which of them decided.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a gate name must be a non-empty string, got {name!r}")
        self.result.artifacts.setdefault("gates", {})[name] = "PASS" if passed else "FAIL"
        if not passed:
            self.fail(f"{name}: {reason}" if reason else f"{name}: FAIL")

    def skip_gate(self, name: str, reason: str) -> None:
        """Record that the check ``name`` did not run (``SKIPPED``): it neither passes nor fails this phase."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a gate name must be a non-empty string, got {name!r}")
        self.result.artifacts.setdefault("gates", {})[name] = "SKIPPED"
        self.result.artifacts.setdefault("skipReasons", []).append(f"{name}: {reason}")

    def count(self, counter: str, n: int = 1) -> None:
        """Add to a report counter: documents_updated, sections_removed, sections_added, diagrams_updated.

        A report carries these counters (and ``documentsScanned``) only when its workflow counted one.
        """
        if counter not in _COUNTERS:
            raise ValueError(f"unknown counter {counter!r}; valid: {list(_COUNTERS)}")
        counts = self.context.state.setdefault("_counters", dict.fromkeys(_COUNTERS, 0))
        counts[counter] += n


class PhaseRunner:
    """Runs a workflow's phases with the reconciliation loop and builds the report.

    Args:
        config: What to run (name, phase order, ``max_iterations``, parameters).
        executors: Phase name → executor. A phase without an executor succeeds with no findings.
    """

    def __init__(self, config: WorkflowConfig, executors: dict[str, PhaseExecutor] | None = None):
        self.config = config
        self.executors: dict[str, PhaseExecutor] = {}
        self.events: list[WorkflowEvent] = []
        self._listeners: list[Listener] = []
        self.context = WorkflowContext(config=config)
        for phase, fn in (executors or {}).items():
            self.register(phase, fn)

    def register(self, phase: str, executor: PhaseExecutor) -> None:
        """Set the executor for ``phase``."""
        if phase not in PHASES:
            raise ValueError(f"unknown workflow phase {phase!r}; valid phases: {list(PHASES)}")
        self.executors[phase] = executor

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` (sync or async) for every event; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def _emit(self, type_: str, *, phase: str | None = None, data: Any = None) -> None:
        event = WorkflowEvent(type=type_, workflow=self.config.name, phase=phase,  # type: ignore[arg-type]
                              iteration=self.context.iteration, data=data)
        self.events.append(event)
        for listener in list(self._listeners):
            out = listener(event)
            if inspect.isawaitable(out):
                await out

    async def execute_phase(self, phase: str) -> PhaseResult:
        """Run one phase once and append its result to the context."""
        ctx = self.context
        ctx.current_phase = phase
        result = PhaseResult(phase=phase, iteration=ctx.iteration)
        executor = self.executors.get(phase)
        if executor is None:
            ctx.results.append(result)
            return result
        await self._emit("phase:start", phase=phase)
        scope = PhaseScope(ctx, result, self)
        start = time.perf_counter()
        try:
            out = executor(scope)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:
            result.duration = time.perf_counter() - start
            result.success = False
            result.error = f"{type(exc).__name__}: {exc}"
            ctx.results.append(result)
            await self._emit("workflow:error", phase=phase, data={"error": result.error})
            raise PhaseError(phase, ctx.iteration, exc) from exc
        result.duration = time.perf_counter() - start
        if isinstance(out, PhaseResult):
            out.phase, out.iteration, out.duration = phase, ctx.iteration, result.duration
            out.findings = result.findings + [f for f in out.findings if f not in result.findings]
            out.artifacts = {**result.artifacts, **out.artifacts}
            out.success = out.success and result.success
            result = out
        elif isinstance(out, bool):
            result.success = result.success and out
        elif isinstance(out, dict):
            result.artifacts.update(out)
        elif out is not None:
            raise PhaseError(phase, ctx.iteration, TypeError(
                f"phase executor returned {type(out).__name__}; expected None, bool, dict or PhaseResult"))
        for finding in result.findings:
            finding.phase, finding.iteration = phase, ctx.iteration
            await self._emit("finding", phase=phase, data=finding)
        ctx.results.append(result)
        await self._emit("phase:complete", phase=phase, data=result)
        return result

    async def run(self) -> WorkflowReport:
        """Run every phase, then reconcile while the adversarial phase fails; return the report."""
        ctx = self.context
        ctx.started_at = datetime.now(UTC)
        await self._emit("workflow:start", data={"phases": list(self.config.phases),
                                                 "maxIterations": self.config.max_iterations})
        try:
            await self._run_phases()
        except PhaseError:
            ctx.verdict = None  # the run could not complete, so nothing was decided: report() says ERROR
            raise
        report = self.report()
        await self._emit("workflow:complete", data={"verdict": report.verdict, "id": report.id})
        return report

    async def _run_phases(self) -> None:
        ctx = self.context
        for phase in self.config.phases:
            if phase != "reconciliation":
                await self.execute_phase(phase)
        if "adversarial" in self.config.phases:
            adversarial = ctx.last("adversarial")
            assert adversarial is not None   # execute_phase appends a result for every phase it runs
            ctx.verdict = "PASS" if adversarial.success else "FAIL"
            while ctx.verdict == "FAIL" and ctx.iteration < self.config.max_iterations:
                ctx.iteration += 1
                if "reconciliation" in self.config.phases:
                    await self.execute_phase("reconciliation")
                if "sync" in self.config.phases:
                    await self.execute_phase("sync")
                if (await self.execute_phase("adversarial")).success:
                    ctx.verdict = "PASS"
        else:
            ctx.verdict = "PASS" if all(r.success for r in ctx.results) else "FAIL"

    def report(self) -> WorkflowReport:
        """Build the report from the context as it is now (verdict ERROR until the run has decided one)."""
        ctx = self.context
        counts = ctx.state.get("_counters")  # the documentation counters, when the workflow counted any
        docs = {"documents_scanned": len(ctx.inventory), **counts} if counts is not None else {}
        return WorkflowReport(
            workflow=self.config.name, started_at=ctx.started_at, completed_at=datetime.now(UTC),
            verdict=ctx.verdict or "ERROR", phases=list(ctx.results), iterations=ctx.iteration,
            max_iterations=self.config.max_iterations, parameters=dict(self.config.parameters), **docs,
        )
