"""Asking a person: every query of a run is a persisted decision that any surface may answer.

The one place the engine waits on a person, whatever the decision's kind: the questions
(clarification, blocking, approval, final), a consensus checkpoint (``engine/gate.py``, which opens
its decision itself and passes its id) and the resource monitor's intervention
(``monitoring/resources.py``). Order: an answer given up front (``RunOptions.answers``, questions
only), then the run's ``on_query`` policy:

- ``fail``: raise :class:`HeadlessQueryError` (an optional question -- the final one -- is skipped);
- ``auto``: approve approvals and checkpoints, resume a paused agent, tell a clarification to proceed
  on its best assumption, skip the final question; the decision is recorded as answered by the policy;
- ``wait`` (the default of interactive runs): write a pending decision, emit ``user-query`` with the
  decision id as ``queryId``, and wait for any surface (widget, CLI, MCP) to answer; after
  ``decision_timeout`` seconds the decision expires and the run fails closed. A decision with an
  expiry of its own that comes first (a checkpoint's ``consensus.timeout_s``) returns ``None`` on
  expiry instead: its owner settles it as its config says.

A run without a workspace database (a bare test double) keeps the answer in an in-process future.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.options import AgentRunError, HeadlessQueryError
from agentstack_lab.events import QUERY_KINDS, UserQuery
from agentstack_lab.validation import seconds_text

if TYPE_CHECKING:
    from agentstack_lab.engine.context import AskContext
    from agentstack_lab.engine.state import AgentNode

__all__ = ["ask", "AUTO_TEXT"]

AUTO_TEXT = "No answer is available (on_query=auto): proceed with your best assumption and say so."


async def ask(run: AskContext, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None = None, *,
              validate: Callable[[Any], Any] | None = None, optional: bool = False,
              decision_id: str | None = None, opened: Callable[[str], Any] | None = None,
              waiting: str = "waiting_user") -> Any:
    """Ask the person and return the answer (see the module docstring for the order).

    ``decision_id``: a pending decision its caller opened already (a consensus checkpoint's);
    ``opened(id)`` is called once the run waits on its decision, with the agent's status ``waiting``
    (``paused`` for the resource monitor's intervention).
    """
    opts = run.options
    if kind in opts.answers:
        answer = opts.answers[kind]
        run.record_answer(node, kind, prompt, answer, "options")
        return answer
    policy = opts.query_policy
    if policy == "auto":
        return _auto_answer(run, node, kind, prompt, options, decision_id)
    if policy == "fail":
        if optional:
            run.note(node, f"{kind} question skipped (headless): {prompt}")
            return None
        raise HeadlessQueryError(_headless(node.name, kind, prompt), kind)
    store = run.decision_store
    timeout = opts.decision_seconds
    fut: asyncio.Future[Any] | None = None
    own_first = False  # the decision's own expiry comes before the run's decision_timeout
    if decision_id is not None:
        if store is None:
            raise AgentRunError(f"agent {node.name}: decision {decision_id} needs the workspace database")
        query_id = decision_id
        expires = store.get(decision_id).expires_at
        own = None if expires is None else max(0.0, expires - time.time())
        own_first = own is not None and (timeout is None or own <= timeout)
        timeout = own if own_first else timeout
    elif store is not None:
        decision = store.create(kind=kind, prompt=prompt, run_id=run.run_id, agent_id=node.id, options=options,
                                code=(options or {}).get("code") if kind == "approval" else None, timeout=timeout)
        query_id = decision.id
        timeout = None  # the decision expires on its own
    else:
        query_id = str(uuid.uuid4())
        fut = asyncio.get_running_loop().create_future()
    query = UserQuery(agent_id=node.id, query_id=query_id, kind=kind, prompt=prompt,  # type: ignore[arg-type]
                      options=dict(options or {}))
    run.open_queries[query_id] = (query, fut, validate)
    node.set_status(waiting)
    if opened is not None:
        opened(query_id)
    run.emit_state(node)
    run.emit(query)
    surface, by = "widget", None
    try:
        if fut is not None:
            answer = await (fut if timeout is None else asyncio.wait_for(fut, timeout))
        else:
            assert store is not None   # a query without a future is a stored decision
            decision = await store.wait(query_id, timeout)
            if decision.state == "expired" and own_first:  # its owner settles it (a checkpoint's auto_reject)
                node.set_status("running")
                return None
            if decision.state != "answered":
                return _unanswered(run, node, kind, decision, optional)
            answer, surface, by = decision.answer, decision.surface or "python", decision.answered_by
    except TimeoutError:
        return _unanswered(run, node, kind, None, optional)
    except BaseException:
        # stopped while waiting: nobody may answer this any more, and the agent's Q&A lists it as cancelled
        reason = node.stop_reason or "the agent stopped waiting"
        if store is None or store.cancel(query_id, reason):
            run.record_answer(node, kind, prompt, None, "stop", query_id=query_id, state="cancelled", reason=reason)
        raise
    finally:
        run.open_queries.pop(query_id, None)
    node.set_status("running")
    run.record_answer(node, kind, prompt, answer, surface, query_id=query_id, by=by)
    return answer


def _headless(name: str, kind: str, prompt: str) -> str:
    """Why a headless run (``on_query=fail``) cannot go on, and the ways to let it."""
    what = "query" if kind in QUERY_KINDS else "decision"
    return (f"agent {name} needs an answer to {'an' if kind[0] in 'aeiou' else 'a'} {kind} {what} ({prompt!r}) "
            f"but the run is headless (on_query=fail) and none was given; "
            + (f"pass answers={{{kind!r}: ...}}, " if kind in QUERY_KINDS else "")
            + "on_query='wait' (answer with `agentstack-lab decisions`) or on_query='auto'"
            + (" or auto_approve=True" if kind == "approval" else ""))


def _auto_answer(run: AskContext, node: AgentNode, kind: str, prompt: str, options: dict[str, Any] | None,
                 decision_id: str | None = None) -> Any:
    answer: Any = ({"approved": True} if kind in ("approval", "consensus") else "resume" if kind == "intervention"
                   else None if kind == "final" else AUTO_TEXT)
    query_id = decision_id
    store = run.decision_store
    if store is not None:
        if query_id is None:
            query_id = store.create(kind=kind, prompt=prompt, run_id=run.run_id, agent_id=node.id, options=options,
                                    metadata={"policy": "auto"},
                                    code=(options or {}).get("code") if kind == "approval" else None).id
        store.answer(query_id, answer, by="on_query=auto", surface="policy")
    run.record_answer(node, kind, prompt, answer, "policy", query_id=query_id)
    return answer


def _unanswered(run: AskContext, node: AgentNode, kind: str, decision: Any, optional: bool) -> None:
    """An expired decision skips an optional question and fails anything else closed; a cancelled one fails."""
    state = decision.state if decision is not None else "expired"
    limit = run.options.decision_seconds
    waited = seconds_text(limit) if limit is not None else "its timeout"
    if state == "expired" and optional:
        node.set_status("running")
        run.note(node, f"{kind} question skipped: nobody answered within {waited}")
        return None
    if state == "expired":
        which = f" (decision {decision.id} expired)" if decision is not None else ""
        raise HeadlessQueryError(f"agent {node.name}: nobody answered its {kind} query within {waited}{which}", kind)
    assert decision is not None   # only an expiry comes without a decision
    raise AgentRunError(f"agent {node.name}: its {kind} decision {decision.id} was {state}: {decision.reason}")
