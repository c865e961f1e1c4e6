"""Asking a person: every query of a run is a persisted decision that any surface may answer.

The one place the engine asks (clarification, blocking, approval, final). Order: an answer given
up front (``RunOptions.answers``), then the run's ``on_query`` policy:

- ``fail``: raise :class:`HeadlessQueryError` (an optional question -- the final one -- is skipped);
- ``auto``: approve approvals and checkpoints, tell a clarification to proceed on its best
  assumption, skip the final question; the decision is recorded as answered by the policy;
- ``wait`` (the default of interactive runs): write a pending decision, emit ``user-query`` with the
  decision id as ``queryId``, and wait for any surface (widget, CLI, MCP) to answer; after
  ``decision_timeout`` seconds the decision expires and the run fails closed.

A run without a workspace database (a bare test double) keeps the answer in an in-process future.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.options import AgentRunError, HeadlessQueryError
from agentstack_lab.events import UserQuery
from agentstack_lab.validation import seconds_text

if TYPE_CHECKING:
    from agentstack_lab.engine.run import AgentRun
    from agentstack_lab.engine.state import AgentNode

__all__ = ["ask", "AUTO_TEXT"]

AUTO_TEXT = "No answer is available (on_query=auto): proceed with your best assumption and say so."


async def ask(run: AgentRun, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None = None, *,
              validate: Callable[[Any], Any] | None = None, optional: bool = False) -> Any:
    """Ask the person and return the answer (see the module docstring for the order)."""
    opts = run.options
    if kind in opts.answers:
        answer = opts.answers[kind]
        run.record_answer(node, kind, prompt, answer, "options")
        return answer
    policy = opts.query_policy
    if policy == "auto":
        return _auto_answer(run, node, kind, prompt, options)
    if policy == "fail":
        if optional:
            run.note(node, f"{kind} question skipped (headless): {prompt}")
            return None
        raise HeadlessQueryError(
            f"agent {node.name} needs an answer to {'an' if kind[0] in 'aeiou' else 'a'} {kind} query ({prompt!r}) but the run is headless "
            f"(on_query=fail) and none was given; pass answers={{{kind!r}: ...}}, on_query='wait' "
            f"(answer with `agentstack-lab decisions`) or on_query='auto'"
            + (" or auto_approve=True" if kind == "approval" else ""), kind)
    store = run.decision_store
    timeout = opts.decision_timeout
    fut: asyncio.Future[Any] | None = None
    if store is not None:
        decision = store.create(kind=kind, prompt=prompt, run_id=run.run_id, agent_id=node.id, options=options,
                                code=(options or {}).get("code") if kind == "approval" else None, timeout=timeout)
        query_id = decision.id
    else:
        query_id = str(uuid.uuid4())
        fut = asyncio.get_running_loop().create_future()
    query = UserQuery(agent_id=node.id, query_id=query_id, kind=kind, prompt=prompt,  # type: ignore[arg-type]
                      options=dict(options or {}))
    run.open_queries[query_id] = (query, fut, validate)
    node.set_status("waiting_user")
    run.emit_state(node)
    run.emit(query)
    surface, by = "widget", None
    try:
        if fut is not None:
            answer = await (fut if timeout is None else asyncio.wait_for(fut, timeout))
        else:
            decision = await store.wait(query_id)
            if decision.state != "answered":
                return _unanswered(run, node, kind, decision, optional)
            answer, surface, by = decision.answer, decision.surface or "python", decision.answered_by
    except TimeoutError:
        return _unanswered(run, node, kind, None, optional)
    except BaseException:
        if store is not None:  # stopped while waiting: nobody may answer this any more
            store.cancel(query_id, node.stop_reason or "the agent stopped waiting")
        raise
    finally:
        run.open_queries.pop(query_id, None)
    node.set_status("running")
    run.record_answer(node, kind, prompt, answer, surface, query_id=query_id, by=by)
    return answer


def _auto_answer(run: AgentRun, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None) -> Any:
    answer: Any = {"approved": True} if kind in ("approval", "consensus") else None if kind == "final" else AUTO_TEXT
    query_id = None
    store = run.decision_store
    if store is not None:
        decision = store.create(kind=kind, prompt=prompt, run_id=run.run_id, agent_id=node.id, options=options,
                                metadata={"policy": "auto"},
                                code=(options or {}).get("code") if kind == "approval" else None)
        query_id = decision.id
        store.answer(query_id, answer, by="on_query=auto", surface="policy")
    run.record_answer(node, kind, prompt, answer, "policy", query_id=query_id)
    return answer


def _unanswered(run: AgentRun, node: AgentNode, kind: str, decision: Any, optional: bool) -> None:
    """An expired decision skips an optional question and fails anything else closed; a cancelled one fails."""
    state = decision.state if decision is not None else "expired"
    waited = seconds_text(run.options.decision_timeout) if run.options.decision_timeout is not None else "its timeout"
    if state == "expired" and optional:
        node.set_status("running")
        run.note(node, f"{kind} question skipped: nobody answered within {waited}")
        return None
    if state == "expired":
        which = f" (decision {decision.id} expired)" if decision is not None else ""
        raise HeadlessQueryError(f"agent {node.name}: nobody answered its {kind} query within {waited}{which}", kind)
    raise AgentRunError(f"agent {node.name}: its {kind} decision {decision.id} was {state}: {decision.reason}")
