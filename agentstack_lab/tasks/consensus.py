"""Consensus checkpoints (docs/tasks.md): risky subtasks wait for a reviewer before they start.

Risk is estimated exactly as the seed does: the agent type in ``high_risk_agent_types`` → high, in
``medium_risk_agent_types`` → medium; else the input (lower-cased) containing a
``high_risk_patterns`` entry → high, a ``medium_risk_patterns`` entry → medium; else low. A plan of
subtasks needs a checkpoint when its highest risk is in ``require_for_risk_levels`` and the
subtasks have a parent (root tasks never do); a depth beyond ``max_depth`` says so in the reason.

A checkpoint is a row of ``consensus_checkpoints`` (the proposed subtasks, risk, reviewer strategy)
*and* a decision of kind ``consensus`` in the workspace decision queue, so any surface answers it
and exactly one answer wins. The decision is the source of truth: a checkpoint whose decision was
answered (or expired) elsewhere is settled from it when read. Answers: approve all, reject all, or
reject some subtasks by id (the rest go ahead) with feedback for the parent. A checkpoint past its
``timeout_s`` expires; ``auto_reject`` decides whether that rejects every subtask or lets them run.

This module imports only the foundation; the decision queue is passed in (duck-typed
``create/answer/get/wait``, see :mod:`agentstack_lab.decisions`).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import AgentstackError, NotFoundError

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Consensus", "Checkpoint", "ProposedSubtask", "ConsensusError", "CheckpointNotFoundError",
           "estimate_risk", "requires_consensus", "RISK_ORDER"]

RISK_ORDER = {"low": 0, "medium": 1, "high": 2}


class ConsensusError(AgentstackError, ValueError):
    """Bad consensus input (unknown subtask id, checkpoint already decided); nothing was changed."""


class CheckpointNotFoundError(NotFoundError):
    """No consensus checkpoint with that id."""


@dataclass(frozen=True, kw_only=True)
class ProposedSubtask:
    """A subtask a parent wants to start (its id becomes the task's and the agent's id)."""

    id: str
    agent_type: str
    input: str
    risk_level: str = "low"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "agent_type": self.agent_type, "input": self.input, "risk_level": self.risk_level}


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """One checkpoint: ``pending → approved | rejected | expired`` (``decision``: who, what, why)."""

    id: str
    task_id: str
    proposed_subtasks: list[ProposedSubtask]
    risk_level: str
    reviewer_strategy: str
    status: str = "pending"
    parent_task_id: str | None = None
    run_id: str | None = None
    decision_id: str | None = None
    decision: dict[str, Any] | None = None
    created_at: float = 0.0
    expires_at: float = 0.0
    decided_at: float | None = None
    reason: str | None = field(default=None, compare=False)

    @property
    def rejected_ids(self) -> list[str]:
        """Ids of the subtasks that will not run (all of them when rejected or expired with auto_reject)."""
        if self.status == "pending":
            return []
        return list((self.decision or {}).get("rejected_subtask_ids") or [])

    @property
    def approved_subtasks(self) -> list[ProposedSubtask]:
        rejected = set(self.rejected_ids)
        return [] if self.status == "pending" else [s for s in self.proposed_subtasks if s.id not in rejected]

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "proposed_subtasks"}
        out["proposed_subtasks"] = [s.to_dict() for s in self.proposed_subtasks]
        out["approved_subtask_ids"] = [s.id for s in self.approved_subtasks]
        return out


def estimate_risk(agent_type: str, text: str | None, config: Any) -> str:
    """The seed's ``estimateRiskLevel``: agent type lists first, then input patterns, else low."""
    if agent_type in config.high_risk_agent_types:
        return "high"
    if agent_type in config.medium_risk_agent_types:
        return "medium"
    if text:
        lowered = text.lower()
        if any(p.lower() in lowered for p in config.high_risk_patterns):
            return "high"
        if any(p.lower() in lowered for p in config.medium_risk_patterns):
            return "medium"
    return "low"


def requires_consensus(risk_level: str, depth: int, parent_task_id: str | None, config: Any) -> tuple[bool, str]:
    """The seed's ``requiresConsensus(riskLevel, depth, parentTaskId)``: (required?, reason)."""
    if not config.enabled:
        return False, "consensus is disabled"
    if risk_level not in config.require_for_risk_levels:
        return False, f"risk level {risk_level!r} does not require consensus"
    if depth > config.max_depth:
        return True, f"task depth {depth} exceeds the maximum depth {config.max_depth}"
    if not parent_task_id:
        return False, "root tasks do not require consensus"
    return True, f"risk level {risk_level!r} at depth {depth} requires consensus"


def _checkpoint(row: Any) -> Checkpoint:
    data = dict(zip(row.keys(), tuple(row), strict=True))
    data["proposed_subtasks"] = [ProposedSubtask(**s) for s in json.loads(data["proposed_subtasks"])]
    data["decision"] = json.loads(data["decision"]) if data.get("decision") else None
    return Checkpoint(**data)


def review_prompt(cp_or_subtasks: Any, risk_level: str, parent_input: str | None = None) -> str:
    """What a reviewer (a person or the adversarial agent) is shown: the plan and what to look for."""
    subtasks = getattr(cp_or_subtasks, "proposed_subtasks", cp_or_subtasks)
    lines = "\n".join(f"- id {s.id} [{s.agent_type}, {s.risk_level} risk]: {s.input}" for s in subtasks)
    parent = f"Parent task: {parent_input}\n" if parent_input else ""
    return (f"Consensus checkpoint ({risk_level} risk). {parent}Proposed subtasks:\n{lines}\n\n"
            "Check them for scope creep or drift from the parent task, self-reinforcing loops, the risk "
            "assessment, and security or safety concerns. Approve all, reject all, or reject some subtasks "
            "by id, with feedback for the parent.")


class Consensus:
    """Checkpoints of one workspace: ``config`` is its ``consensus`` section, ``decisions`` its queue."""

    def __init__(self, db: Database, config: Any, decisions: Any):
        self.db = db
        self.config = config
        self.decisions = decisions

    @property
    def enabled(self) -> bool:
        return bool(self.config.enabled)

    def estimate(self, agent_type: str, text: str | None) -> str:
        return estimate_risk(agent_type, text, self.config)

    def check(self, agent_type: str, text: str | None, depth: int, parent_task_id: str | None,
              risk_level: str | None = None) -> dict[str, Any]:
        """Would creating this task need a checkpoint? (the seed's ``checkConsensusRequired``)."""
        risk = risk_level or self.estimate(agent_type, text)
        if risk not in RISK_ORDER:
            raise ConsensusError(f"unknown risk level {risk!r}; expected low, medium or high")
        required, reason = requires_consensus(risk, depth, parent_task_id, self.config)
        return {"requires_consensus": required, "reason": reason, "risk_level": risk, "depth": depth,
                "enabled": self.enabled, "reviewer_strategy": self.config.reviewer_strategy}

    def propose(self, subtasks: list[tuple[str, str]], *, ids: list[str] | None = None) -> list[ProposedSubtask]:
        """``(agent_type, input)`` pairs as proposed subtasks with their estimated risk."""
        ids = ids or [str(uuid.uuid4()) for _ in subtasks]
        return [ProposedSubtask(id=i, agent_type=t, input=text, risk_level=self.estimate(t, text))
                for i, (t, text) in zip(ids, subtasks, strict=True)]

    def create(self, task_id: str, subtasks: list[ProposedSubtask], *, parent_task_id: str | None = None,
               run_id: str | None = None, agent_id: str | None = None, parent_input: str | None = None,
               origin: str = "engine") -> Checkpoint:
        """A pending checkpoint and its ``consensus`` decision (expires after ``timeout_s``)."""
        if not subtasks:
            raise ConsensusError("a consensus checkpoint needs at least one proposed subtask")
        risk = max((s.risk_level for s in subtasks), key=RISK_ORDER.__getitem__)
        cp_id = str(uuid.uuid4())
        now = time.time()
        timeout = float(self.config.timeout_s)
        decision = self.decisions.create(
            kind="consensus", prompt=review_prompt(subtasks, risk, parent_input), run_id=run_id, agent_id=agent_id,
            options={"checkpoint_id": cp_id, "subtasks": [s.to_dict() for s in subtasks], "risk_level": risk,
                     "reviewer_strategy": self.config.reviewer_strategy},
            timeout=timeout, metadata={"checkpoint_id": cp_id, "task_id": task_id, "origin": origin})
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO consensus_checkpoints (id, task_id, parent_task_id, run_id, decision_id,"
                         " proposed_subtasks, risk_level, reviewer_strategy, status, created_at, expires_at)"
                         " VALUES (?,?,?,?,?,?,?,?,'pending',?,?)",
                         (cp_id, task_id, parent_task_id, run_id, decision.id,
                          json.dumps([s.to_dict() for s in subtasks]), risk, self.config.reviewer_strategy, now,
                          now + timeout))
        return self.get(cp_id)

    # --- reading -------------------------------------------------------------------------------------
    def get(self, checkpoint_id: str) -> Checkpoint:
        """A checkpoint, settled from its decision when that was answered, expired or cancelled elsewhere."""
        rows = self.db.query("SELECT * FROM consensus_checkpoints WHERE id = ?", (checkpoint_id,))
        if not rows:
            rows = self.db.query("SELECT * FROM consensus_checkpoints WHERE id LIKE ? || '%' LIMIT 2",
                                 (checkpoint_id,)) if len(checkpoint_id) >= 6 else []
            if len(rows) != 1:
                raise CheckpointNotFoundError(f"no consensus checkpoint with id {checkpoint_id!r}")
        cp = _checkpoint(rows[0])
        return self._settle(cp) if cp.status == "pending" else cp

    def list_pending(self, limit: int = 50, offset: int = 0) -> list[Checkpoint]:
        """Checkpoints still awaiting review, oldest first (expired ones are settled on the way)."""
        rows = self.db.query("SELECT id FROM consensus_checkpoints WHERE status = 'pending'"
                             " ORDER BY created_at, rowid LIMIT ? OFFSET ?", (int(limit), int(offset)))
        found = [self.get(r[0]) for r in rows]
        return [cp for cp in found if cp.status == "pending"]

    def _settle(self, cp: Checkpoint) -> Checkpoint:
        d = self.decisions.get(cp.decision_id) if cp.decision_id else None
        if d is not None and d.state == "pending" and d.expires_at is not None and d.expires_at <= time.time():
            self.decisions.expire_due()
            d = self.decisions.get(cp.decision_id)
        if d is None or d.state == "pending":
            return cp
        ids = [s.id for s in cp.proposed_subtasks]
        if d.state == "answered":
            answer: dict[str, Any] = d.answer if isinstance(d.answer, dict) else {"approved": bool(d.answer)}
            rejected = list(answer.get("rejected_subtask_ids") or [])
            if not answer.get("approved") and not rejected:
                rejected = ids
            status = "rejected" if set(rejected) >= set(ids) else "approved"
            decision = {"approved": status == "approved", "rejected_subtask_ids": rejected,
                        "feedback": answer.get("feedback") or answer.get("reason"),
                        "reviewed_by": d.answered_by, "surface": d.surface,
                        "reviewer_type": answer.get("reviewer_type") or ("human" if d.surface not in
                                                                         ("adversarial", "auto") else d.surface)}
        else:  # expired or cancelled
            rejected = ids if (self.config.auto_reject or d.state == "cancelled") else []
            status = "expired"
            decision = {"approved": not rejected, "rejected_subtask_ids": rejected,
                        "feedback": f"checkpoint {d.state}" + (f": {d.reason}" if d.reason else "")
                        + (" (auto_reject: every subtask rejected)" if d.state == "expired" and rejected else ""),
                        "reviewed_by": None, "surface": None, "reviewer_type": "timeout"}
        with self.db.transaction() as conn:
            conn.execute("UPDATE consensus_checkpoints SET status = ?, decision = ?, decided_at = ?"
                         " WHERE id = ? AND status = 'pending'",
                         (status, json.dumps(decision), d.answered_at or time.time(), cp.id))
        rows = self.db.query("SELECT * FROM consensus_checkpoints WHERE id = ?", (cp.id,))
        return _checkpoint(rows[0])

    # --- deciding ------------------------------------------------------------------------------------
    def _decide(self, checkpoint_id: str, approved: bool, rejected: list[str] | None, feedback: str | None,
                by: str | None, surface: str, reviewer_type: str) -> Checkpoint:
        cp = self.get(checkpoint_id)
        if cp.status != "pending":
            who = (cp.decision or {}).get("reviewed_by")
            raise ConsensusError(f"checkpoint {cp.id} is already {cp.status}" + (f" (by {who})" if who else ""))
        known = [s.id for s in cp.proposed_subtasks]
        rejected = list(dict.fromkeys(rejected or []))
        unknown = [r for r in rejected if r not in known]
        if unknown:
            raise ConsensusError(f"checkpoint {cp.id} has no subtask {unknown[0]!r}; its subtasks: {', '.join(known)}")
        answer = {"approved": approved, "rejected_subtask_ids": rejected if (approved or rejected) else known,
                  "reviewer_type": reviewer_type}
        if feedback:
            answer["feedback"] = feedback
        self.decisions.answer(cp.decision_id, answer, by=by, surface=surface)  # exactly one answer wins
        return self.get(cp.id)

    def approve(self, checkpoint_id: str, *, rejected_subtask_ids: list[str] | None = None,
                feedback: str | None = None, by: str | None = None, surface: str = "python",
                reviewer_type: str = "human") -> Checkpoint:
        """Approve the plan; ``rejected_subtask_ids`` are left out (a partial rejection)."""
        return self._decide(checkpoint_id, True, rejected_subtask_ids, feedback, by, surface, reviewer_type)

    def reject(self, checkpoint_id: str, *, subtask_ids: list[str] | None = None, feedback: str | None = None,
               by: str | None = None, surface: str = "python", reviewer_type: str = "human") -> Checkpoint:
        """Reject every subtask, or only ``subtask_ids`` (the rest go ahead)."""
        if subtask_ids:
            return self._decide(checkpoint_id, True, subtask_ids, feedback, by, surface, reviewer_type)
        return self._decide(checkpoint_id, False, None, feedback, by, surface, reviewer_type)

    async def wait(self, checkpoint_id: str) -> Checkpoint:
        """Wait for any surface to decide (or for the timeout); returns the settled checkpoint."""
        cp = self.get(checkpoint_id)
        if cp.status == "pending":
            await self.decisions.wait(cp.decision_id, timeout=max(0.0, cp.expires_at - time.time()))
        return self.get(checkpoint_id)
