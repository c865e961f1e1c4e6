"""The recursive agent engine: runs, steps, tools, executors and the event log."""

from agentstack_lab.engine.run import (
    AgentFailedError,
    AgentRun,
    AgentRunError,
    BudgetExceededError,
    HeadlessQueryError,
    RunOptions,
    RunStillGoingError,
    run_agent,
)

__all__ = ["AgentRun", "RunOptions", "run_agent", "HeadlessQueryError", "BudgetExceededError", "AgentRunError",
           "AgentFailedError", "RunStillGoingError"]
