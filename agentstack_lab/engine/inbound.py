"""What arrives from the person: answers to queries, interventions, wire events.

Inbound events (``user-response``, ``user-intervention``, ``get-agent-tree``) arrive here from any surface
and thread; every change they make is applied on the run's loop (``run.on_loop``). These are functions
over a run's :class:`~agentstack_lab.engine.context.InboundContext`; the public handle and the run core
call them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.events import (
    INTERVENTION_STATUSES,
    GetAgentTree,
    StartAgent,
    UserIntervention,
    UserResponse,
    from_wire,
)

if TYPE_CHECKING:
    from agentstack_lab.engine.context import InboundContext

__all__ = ["send", "respond", "intervene", "intervention_of"]


def _user() -> str | None:
    """Who answers from this process (the login name), for "already answered (by …)"."""
    import getpass

    with contextlib.suppress(Exception):
        return getpass.getuser()
    return None


def send(run: InboundContext, event: Any) -> Any:
    """Handle an inbound event (dataclass or wire dict); ``get-agent-tree`` returns the tree."""
    if isinstance(event, dict):
        event = from_wire(cast("dict[str, Any]", event))
    if isinstance(event, UserResponse):
        return respond(run, event.query_id, event.response)
    if isinstance(event, UserIntervention):
        return intervene(run, event.agent_id, user_comment=event.user_comment,
                              user_content=event.user_content, status=event.status)
    if isinstance(event, GetAgentTree):
        return run.tree
    if isinstance(event, StartAgent):
        raise ValueError("start-agent begins a new run: create another AgentRun")
    raise TypeError(f"cannot send {type(event).__name__} to a run")

def respond(run: InboundContext, query_id: str, response: Any, *, surface: str = "widget", by: str | None = None) -> None:
    """Answer a pending ``user-query``; an invalid answer raises and leaves the query pending.

    With a workspace database the answer goes through ``decisions.answer``, like every other
    surface's: when the CLI or MCP answered first, this raises ``DecisionClosedError`` naming them.
    """
    entry = run.open_queries.get(query_id)
    if (entry is None or (entry[1] is not None and entry[1].done())) and run.decision_store is not None:
        with contextlib.suppress(KeyError):
            decision = run.decision_store.get(query_id)
            if decision.run_id == run.run_id and not decision.pending:
                from agentstack_lab.decisions import DecisionClosedError

                raise DecisionClosedError(decision.closed_message())
    if entry is None or (entry[1] is not None and entry[1].done()):
        pending = ", ".join(q.query_id for q in run.pending_queries) or "none"
        raise KeyError(f"no pending query {query_id!r} (pending: {pending})")
    _query, fut, validate = entry
    if validate is not None:
        validate(response)
    if fut is None:   # a query without a future is waited on through the decision store
        assert run.decision_store is not None
        run.decision_store.answer(query_id, response, by=by or _user(), surface=surface)
        return
    run.on_loop(lambda: fut.done() or fut.set_result(response))

def intervene(run: InboundContext, agent_id: str, *, user_comment: str | None = None, user_content: str | None = None,
              status: str | None = None, surface: str = "widget", by: str | None = None) -> None:
    """A comment for the agent's next model call, replaced content, or ``status="stopped"``.

    ``user_content`` replaces the agent's text. A completed agent's result becomes that text
    (a parent that has not summarised yet merges the user's version); an agent still at work
    gets it in its next model call, as the text to continue from. ``status="running"`` (resume)
    of an agent the resource monitor paused answers its ``intervention`` decision ``resume``
    (``by`` whom, from which ``surface``).
    """
    node = run.node(agent_id)
    if status is not None and status not in INTERVENTION_STATUSES:
        raise ValueError(f"an intervention can set status 'stopped', 'paused' or 'running' (resume), "
                         f"got {status!r}")
    if user_comment is None and user_content is None and status is None:
        raise ValueError("an intervention needs user_comment, user_content or status")
    for name, value in (("user_comment", user_comment), ("user_content", user_content)):
        if value is not None and not isinstance(cast(object, value), str):   # callers from Python pass anything
            raise TypeError(f"intervention {name} must be a string, got {type(value).__name__}")

    def apply() -> None:
        if user_comment is not None:
            node.user_comment = user_comment
            node.pending_comments.append(f"User comment: {user_comment}")
        if user_content is not None:
            node.content = user_content
            node.metadata["contentReplaced"] = True
            if node.status == "completed":
                node.result = user_content
            elif not node.terminal:
                node.pending_comments.append(f"The user replaced your text so far with:\n{user_content}")
        if user_comment is not None or user_content is not None:
            run.emit_state(node, with_content=user_content is not None)
        if status == "stopped":
            run.stop_subtree(node, "stopped by the user")
        elif status == "paused" and not node.terminal and not node.metadata.get("paused"):
            node.metadata["paused"] = True
            run.emit_state(node)
        elif status == "running" and (held := intervention_of(run, node.id)) is not None:
            respond(run, held, "resume", surface=surface, by=by or _user())
        elif status == "running" and node.metadata.pop("paused", None):
            run.resume_events.pop(node.id, asyncio.Event()).set()
            run.emit_state(node)

    run.on_loop(apply)

def intervention_of(run: InboundContext, agent_id: str) -> str | None:
    """The id of the resource monitor's pending ``intervention`` decision for this agent, if any."""
    return next((q.query_id for q, fut, _v in run.open_queries.values()
                 if q.agent_id == agent_id and q.kind == "intervention" and (fut is None or not fut.done())), None)
