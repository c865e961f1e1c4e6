"""Workflows: a phase runner with a reconciliation loop, and parameterised notebooks run headless.

Nothing heavy is imported here; names resolve lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # for type checkers only: at run time __getattr__ below imports each name on first use
    from agentstack_lab.workflows.api import Workflow
    from agentstack_lab.workflows.execute import RunResult, run_notebook
    from agentstack_lab.workflows.model import Finding, PhaseResult, WorkflowConfig, WorkflowReport
    from agentstack_lab.workflows.params import inject_parameters
    from agentstack_lab.workflows.pool import KernelPool
    from agentstack_lab.workflows.runner import PhaseRunner, PhaseScope
    from agentstack_lab.workflows.schema import validate_report

__all__ = [
    "Finding",
    "KernelPool",
    "PhaseResult",
    "PhaseRunner",
    "PhaseScope",
    "RunResult",
    "Workflow",
    "WorkflowConfig",
    "WorkflowReport",
    "inject_parameters",
    "run_notebook",
    "validate_report",
]

_WHERE = {
    "Finding": "model", "PhaseResult": "model", "WorkflowConfig": "model", "WorkflowReport": "model",
    "PhaseRunner": "runner", "PhaseScope": "runner", "KernelPool": "pool", "RunResult": "execute",
    "run_notebook": "execute", "inject_parameters": "params", "validate_report": "schema", "Workflow": "api",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"agentstack_lab.workflows.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'agentstack_lab.workflows' has no attribute {name!r}")
