"""The run's side of the control plane: drift checks before a subagent starts, consensus on a plan.

Every agent is a task (same id) mirrored by the event log; this module adds what must happen
*before* a child exists, so it cannot ride on the log's batches:

* drift (``drift`` config, docs/tasks.md): the child's prompt is embedded and compared with its
  ancestors' tasks. ``warn``: the child starts with ``metadata.drift`` (a badge in the tree);
  ``prevent``: it is not spawned, and the parent gets a note (and a line in its next model call)
  saying why. With drift disabled (the default) nothing here touches the database.
* consensus (``consensus`` config, docs/tasks.md): the subtasks a parent is about to spawn are risk-rated;
  when required they wait on a checkpoint (a ``consensus`` decision). ``auto`` approves, ``human``
  asks through :func:`~agentstack_lab.engine.queries.ask` like any other decision (the run's ``on_query``:
  fail closed, auto-approve, or wait for any surface while the parent shows ``waiting_user``),
  ``adversarial`` runs a reviewer agent
  (a node under the parent, in the tree) whose structured verdict decides. Rejected subtasks are
  not spawned; the parent is told which and why. A review that fails decides nothing: the run's
  ``on_query`` policy does (``fail`` fails the run with the reason).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentstack_lab.validation import as_dict

if TYPE_CHECKING:
    from agentstack_lab.engine.context import GateContext
    from agentstack_lab.engine.state import AgentNode

__all__ = ["RunControl", "ConsensusVerdict"]

log = logging.getLogger(__name__)


class ConsensusVerdict(BaseModel):
    """The adversarial reviewer's answer (the seed's review JSON)."""

    approved: bool = Field(description="True to let the plan go ahead (minus any rejected subtasks)")
    rejected_subtask_ids: list[str] = Field(default_factory=list, description="Ids of subtasks that must not run")
    feedback: str = Field(default="", description="Reasoning, shown to the parent agent")


class RunControl:
    """Drift and consensus for one run (its :class:`~agentstack_lab.engine.context.GateContext`)."""

    def __init__(self, run: GateContext):
        self.run = run
        self.drift_cfg = run.workspace.config.drift
        self.consensus_cfg = run.workspace.config.consensus
        self._detector: Any = None
        self._consensus: Any = None

    @property
    def _db(self) -> Any:
        return self.run.workspace.db

    # --- drift -----------------------------------------------------------------------------------------
    @property
    def drift_on(self) -> bool:
        return bool(self.drift_cfg.enabled and self._db is not None)

    def _drift(self) -> Any:
        if self._detector is None:
            from agentstack_lab.tasks.drift import DriftDetector

            self._detector = DriftDetector(self._db, self.run.workspace.embedder, self.drift_cfg)
        return self._detector

    def _register(self, node: AgentNode, vector: Any = None) -> None:
        """Write the agent's task row and its embedding now (its children are compared with it)."""
        from agentstack_lab.tasks.store import TaskStore

        with self._db.transaction() as conn:
            TaskStore(self._db, session_exists=self.run.workspace.session_lookup).upsert_agents(conn, [node.row(self.run.run_id, self.run.session_id)])
        self._drift().index(node.id, node.prompt, vector=vector)

    def begin(self, root: AgentNode) -> None:
        if self.drift_on:
            self._register(root)

    def check_spawn(self, parent: AgentNode, prompt: str, agent_type: str, child_id: str) -> tuple[dict[str, Any], Any]:
        """Metadata for the child (``drift`` when warned) and its embedding; raises when prevented."""
        if not self.drift_on:
            return {}, None
        from agentstack_lab.tasks.drift import DriftPreventedError

        result, vector = self._drift().check(prompt, agent_type, parent.id, task_id=child_id, run_id=self.run.run_id)
        if result.action == "prevented":
            why = (f"subagent not spawned: drift detection found its prompt repeats ancestor task "
                   f"{result.most_similar_task_id} (similarity {result.highest_similarity:.3f} >= "
                   f"{result.threshold:g}); do this part yourself or ask a narrower question")
            self.run.note(parent, why)
            parent.pending_comments.append(why)
            raise DriftPreventedError(why, result)
        if result.action == "warned":
            return {"drift": {"action": "warned", "similarity": round(result.highest_similarity, 4),
                              "ancestorId": result.most_similar_task_id, "threshold": result.threshold}}, vector
        return {}, vector

    def spawned(self, child: AgentNode, vector: Any) -> None:
        if self.drift_on:
            self._register(child, vector)

    # --- consensus -------------------------------------------------------------------------------------
    def _service(self) -> Any:
        if self._consensus is None:
            from agentstack_lab.decisions import decisions_for
            from agentstack_lab.tasks.consensus import Consensus

            self._consensus = Consensus(self._db, self.consensus_cfg, decisions_for(self.run.workspace))
        return self._consensus

    async def gate(self, parent: AgentNode, subs: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
        """``(question, agent_type)`` pairs → the ``(id, question, agent_type)`` the parent may spawn."""
        ids = [str(uuid.uuid4()) for _ in subs]
        plan = [(i, q, t) for i, (q, t) in zip(ids, subs, strict=True)]
        cfg = self.consensus_cfg
        if not subs or not cfg.enabled or self._db is None:
            return plan
        from agentstack_lab.tasks.consensus import RISK_ORDER, requires_consensus

        consensus = self._service()
        proposed = consensus.propose([(t, q) for q, t in subs], ids=ids)
        risk = max((s.risk_level for s in proposed), key=RISK_ORDER.__getitem__)
        required, reason = requires_consensus(risk, parent.depth + 1, parent.id, cfg)
        if not required:
            return plan
        cp = consensus.create(parent.id, proposed, parent_task_id=parent.parent_id, run_id=self.run.run_id,
                              agent_id=parent.id, parent_input=parent.prompt)
        parent.metadata["consensus"] = {"checkpointId": cp.id, "decisionId": cp.decision_id, "status": "pending",
                                        "riskLevel": risk, "strategy": cfg.reviewer_strategy, "reason": reason}
        self.run.emit_state(parent)
        strategy = cfg.reviewer_strategy
        if strategy == "auto":
            cp = consensus.approve(cp.id, feedback="auto-approved (reviewer_strategy: auto)", by="auto",
                                   surface="auto", reviewer_type="auto")
        elif strategy == "adversarial":
            cp = await self._adversarial(parent, cp)
        else:  # a person decides
            cp = await self._ask_person(parent, cp)
        return self._apply(parent, cp, plan)

    async def _ask_person(self, parent: AgentNode, cp: Any, why: str = "") -> Any:
        """The checkpoint's decision as a question to a person, as for every decision.

        The run's ``on_query`` and ``decision_timeout`` apply, and every surface shows it.
        """
        from agentstack_lab.engine.queries import ask

        subs = cp.proposed_subtasks
        ask_text = (f"consensus checkpoint {cp.id[:8]}: {why}approve the plan of {len(subs)} subtask(s) "
                    f"({cp.risk_level} risk) before any starts? " + "; ".join(s.input for s in subs))
        await ask(self.run, parent, "consensus", ask_text,
                  {"checkpointId": cp.id, "riskLevel": cp.risk_level, "subtasks": [s.to_dict() for s in subs]},
                  decision_id=cp.decision_id)
        return self._service().get(cp.id)

    async def _unreviewed(self, parent: AgentNode, cp: Any, error: str) -> Any:
        """The adversarial review could not decide: the run's ``on_query`` policy does.

        ``fail`` (headless default) fails the run naming the error, ``auto`` approves, ``wait`` leaves the
        checkpoint to any surface (``agentstack-lab decisions``), as for a ``human`` checkpoint.
        """
        from agentstack_lab.engine.options import HeadlessQueryError

        consensus = self._service()
        policy = self.run.options.query_policy
        parent.metadata["consensus"]["reviewError"] = error
        if policy == "auto":
            return consensus.approve(cp.id, feedback=f"{error}; approved by on_query=auto", by="on_query=auto",
                                     surface="policy", reviewer_type="policy")
        if policy == "wait":
            return await self._ask_person(parent, cp, why=f"{error}; ")
        consensus.reject(cp.id, feedback=f"{error}; the run failed (on_query=fail)", by="on_query=fail",
                         surface="policy", reviewer_type="policy")
        raise HeadlessQueryError(
            f"consensus checkpoint {cp.id}: {error}; nobody decided the plan (on_query=fail). Fix the reviewer, "
            "or run with on_query='wait' (answer with `agentstack-lab decisions`) or on_query='auto'", "consensus")

    def _apply(self, parent: AgentNode, cp: Any, plan: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        decision = as_dict(cp.decision)
        rejected = set(cp.rejected_ids)
        parent.metadata["consensus"].update({"status": cp.status, "rejected": sorted(rejected),
                                             "reviewedBy": decision.get("reviewed_by"),
                                             "feedback": decision.get("feedback")})
        if rejected:
            names = "; ".join(f"{q!r} ({i})" for i, q, _t in plan if i in rejected)
            who = decision.get("reviewer_type") or "reviewer"
            text = (f"consensus checkpoint {cp.id} ({cp.status}, by {who}): rejected subtasks {names}"
                    + (f". Feedback: {decision['feedback']}" if decision.get("feedback") else ""))
            self.run.note(parent, text)
            parent.pending_comments.append(text)
        else:
            self.run.emit_state(parent)
        return [p for p in plan if p[0] not in rejected]

    async def _adversarial(self, parent: AgentNode, cp: Any) -> Any:
        """A reviewer agent under the parent reviews the plan; its structured verdict decides."""
        from agentstack_lab.engine.state import AgentNode
        from agentstack_lab.providers.base import Message, ProviderRequest
        from agentstack_lab.providers.complete import structured
        from agentstack_lab.tasks.consensus import review_prompt

        run = self.run
        kind = "adversarial" if run.registry.has("adversarial") else run.default_type
        prompt = review_prompt(cp, cp.risk_level, parent.prompt)
        node = AgentNode(id=str(uuid.uuid4()), type=kind, prompt=prompt, depth=parent.depth + 1, parent_id=parent.id,
                         metadata={"origin": "consensus-review", "checkpointId": cp.id})
        run.nodes[node.id] = node
        parent.subagents.append(node.id)
        run.emit_state(node)
        run.emit_state(parent)
        node.set_status("running")
        run.emit_state(node)
        request = ProviderRequest(
            system=f"{run.registry.get(kind).system_prompt}\n\n# Current step\nReview this plan of subtasks before "
                   "any of them starts. Reply with your verdict.",
            messages=[Message(role="user", content=prompt)], model=run.model,
            metadata={"step": "consensus_review", "agent_type": kind, "agent_id": node.id, "depth": node.depth,
                      "prompt": prompt, "checkpoint_id": cp.id,
                      "subtasks": [s.to_dict() for s in cp.proposed_subtasks]})
        consensus = self._service()
        try:
            verdict, completion = await structured(run.provider, request, ConsensusVerdict)
        except Exception as exc:  # noqa: BLE001 - a broken review decides nothing: the run's on_query does
            error = f"adversarial review failed: {type(exc).__name__}: {exc}"
            run.finish_agent(node, "failed", error=error)
            return await self._unreviewed(parent, cp, error)
        run.charge(node, completion.usage)
        known = {s.id for s in cp.proposed_subtasks}
        rejected = [i for i in verdict.rejected_subtask_ids if i in known]
        if verdict.approved or rejected:
            cp = consensus.approve(cp.id, rejected_subtask_ids=rejected, feedback=verdict.feedback, by=node.id,
                                   surface="adversarial", reviewer_type="adversarial")
        else:
            cp = consensus.reject(cp.id, feedback=verdict.feedback, by=node.id, surface="adversarial",
                                  reviewer_type="adversarial")
        summary = (f"Verdict: {cp.status}; rejected {len(cp.rejected_ids)} of {len(cp.proposed_subtasks)} "
                   f"subtasks.\n\n{verdict.feedback}").strip()
        node.content = summary
        run.emit_state(node, with_content=True)
        run.finish_agent(node, "completed", result=summary)
        return cp
