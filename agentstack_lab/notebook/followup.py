"""``%agent --continue PROMPT``: a follow-up of this kernel's previous run, as one line of a magic.

The previous run is the latest one ``%agent`` started in this kernel (or a shown ``run.ask(...)`` of
it). The follow-up is built by the engine (:meth:`AgentRun.ask`'s rules, engine/followup.py): the
thread's questions and answers go before the new request, the session, provider, model, type, executor
and budgets carry over, and what the line gives explicitly (``--max-depth``, ``--provider``, ``--wait``,
``--auto-approve``, ``--answer`` ...) overrides them. Every refusal is one line: no previous run, a
previous run still going, ``--session`` (a follow-up keeps the thread's session), a bad option value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from agentstack_lab.errors import AgentstackError

if TYPE_CHECKING:
    from agentstack_lab.notebook.args import AgentArgs
    from agentstack_lab.workspace import Workspace

__all__ = ["follow_up"]


def follow_up(magics: Any, args: AgentArgs, prompt: str, workspace: Workspace, namespace: dict[str, Any],
              check_names: Callable[[AgentArgs, Workspace, dict[str, Any]], tuple[str, Any]], *,
              cell_id: str | None = None) -> Any:
    """The (unstarted) ``AgentRun`` following up ``magics.last_run`` with ``prompt`` (from cell ``cell_id``).

    Raises:
        UsageError: No previous run in this kernel, the previous run has not ended, ``--session`` given,
            an unknown ``--type``/``--provider``, or an option value the engine refuses (one line each).
    """
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.followup import base_provider, follow_options

    previous = getattr(magics, "last_run", None)
    if previous is None:
        raise UsageError("%agent --continue: no earlier %agent run in this kernel to follow up; "
                         "ask with %agent PROMPT first")
    if args.session is not None:
        raise UsageError(f"%agent --continue keeps the previous run's session ({previous.session_id}); "
                         "leave --session out")
    provider, agent_type = base_provider(previous), args.type or previous.agent_type
    if args.provider is not None or args.type is not None:  # validated like any %agent line
        checked_type, checked_provider = check_names(dataclasses.replace(args, type=agent_type), workspace, namespace)
        provider = checked_provider if args.provider is not None else provider
        agent_type = checked_type
    overrides: dict[str, Any] = {**args.given_options(), "interactive": not args.wait, "answers": dict(args.answers)}
    if not args.subagents:
        overrides["subagents"] = False
    try:
        options = follow_options(previous.options, overrides)
        return AgentRun(prompt, workspace=workspace, provider=provider, agent_type=agent_type, options=options,
                        model=args.model or previous.model,
                        executor=previous.executor if args.executor is None else None,
                        origin=previous.origin, follows=previous, cell_id=cell_id)
    except (AgentstackError, ValueError, TypeError) as exc:  # still going, ended session, a bad value: one line
        raise UsageError(f"%agent --continue: {exc}") from None
