"""The workspace control plane's decisions: every question a run puts to a person, persisted.

A decision (clarification, blocking question, code approval, final question, consensus checkpoint) is
a row of the ``decisions`` table, not a future in one process's memory, so any surface answers it:
the widget, ``agentstack-lab decisions approve ID``, MCP ``decision_answer``, the lab panel.

    ds = decisions_for(ws)            # one per workspace: in-process answers wake the waiter at once
    d = ds.create(kind="approval", prompt="Run this?", run_id=..., code="print(1)", timeout=600)
    ds.answer(d.id, {"approved": True}, by="alice", surface="cli")   # exactly one answer wins
    await ds.wait(d.id)                                              # sees it within ~25 ms

``pending → answered | expired | cancelled``. A run that ends, is stopped or whose owner process dies
cancels its pending decisions (:meth:`Decisions.cancel_for_run`, :func:`cancel_pending` in the
reaper's transaction). Interventions (comment, replace content, pause, resume, stop) for runs in
another process are queued in :mod:`agentstack_lab.decisions.interventions`.

Services layer: imports only the foundation (store via the ``db`` passed in, events, errors).
"""

from agentstack_lab.decisions.interventions import ACTIONS, Intervention, Interventions, interventions_for
from agentstack_lab.decisions.store import (
    ALWAYS_SCOPES,
    POLL_S,
    SURFACES,
    Decision,
    DecisionClosedError,
    DecisionError,
    DecisionNotFoundError,
    Decisions,
    cancel_pending,
    decisions_for,
    normalise_answer,
    surface_label,
)

__all__ = ["Decision", "Decisions", "decisions_for", "interventions_for", "DecisionError", "DecisionClosedError", "DecisionNotFoundError", "SURFACES",
           "surface_label", "normalise_answer", "cancel_pending", "POLL_S", "Intervention", "Interventions",
           "ACTIONS", "ALWAYS_SCOPES"]
