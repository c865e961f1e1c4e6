"""MCP tools of the control plane: list and answer decisions, intervene in a running agent.

``decision_list``/``decision_get`` read the workspace database (decisions of any process);
``decision_answer`` approves, rejects or answers one, with the same exactly-one-wins rule as the
widget and the CLI (a late answer is a tool error naming who answered first and from where).
``agent_intervene`` comments, replaces content, pauses, resumes or stops an agent: directly when
its run lives in this server, queued for its owner process otherwise.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agentstack_lab.errors import UsageError

_SID = Annotated[str | None, Field(min_length=1, description="The private session owning the run (needs "
                                                            "session_token).")]
_TOKEN = Annotated[str | None, Field(max_length=200, description="The secret session_start returned.")]

__all__ = ["DecisionTools", "DECISION_TOOL_NAMES"]

DECISION_TOOL_NAMES = ("decision_list", "decision_get", "decision_answer", "agent_intervene")

DecisionId = Annotated[str, Field(min_length=1, description="Decision id (or a unique prefix of at least 4 chars).")]


class DecisionTools:
    """Mixed into the Toolbox (needs ``self.ws``, ``self._reap`` and ``self._live_node``)."""

    ws: Any

    def _decisions(self) -> Any:
        from agentstack_lab.decisions import decisions_for

        self._reap()  # type: ignore[attr-defined]
        ds = decisions_for(self.ws)
        ds.expire_due()
        return ds

    def decision_list(self, run_id: str | None = None,
                      state: Literal["pending", "answered", "expired", "cancelled"] | None = "pending",
                      kind: Literal["clarification", "blocking", "approval", "final", "consensus"] | None = None,
                      limit: Annotated[int, Field(ge=1, le=1000)] = 50, session_id: _SID = None,
                      session_token: _TOKEN = None) -> dict[str, Any]:
        """Decisions (questions and approvals runs wait on), newest first; default: pending ones."""
        caller = self.privacy.caller(session_id, session_token)  # type: ignore[attr-defined]
        items = [d.to_dict() for d in self._decisions().list(run=run_id, state=state, kind=kind, limit=10_000)]
        items = self.privacy.filter(caller, items)[:limit]  # type: ignore[attr-defined]
        return {"decisions": items, "count": len(items)}

    def decision_get(self, decision_id: DecisionId, session_id: _SID = None,
                     session_token: _TOKEN = None) -> dict[str, Any]:
        """One decision: prompt, code of an approval, state, answer, who answered and from where."""
        d = self._decisions().get(decision_id)
        self._require_decision(d, session_id, session_token)
        return d.to_dict()

    def _require_decision(self, d: Any, session_id: str | None, token: str | None) -> None:
        caller = self.privacy.caller(session_id, token)  # type: ignore[attr-defined]
        self.privacy.require(caller, f"decision {d.id}", run_id=d.run_id)  # type: ignore[attr-defined]

    def decision_answer(
        self,
        decision_id: DecisionId,
        action: Annotated[Literal["approve", "reject", "answer"],
                          Field(description="approve/reject an approval or consensus checkpoint; answer a question")],
        text: Annotated[str | None, Field(description="The answer (action=answer).")] = None,
        code: Annotated[str | None, Field(description="Edited code to run instead (action=approve).")] = None,
        reason: Annotated[str | None, Field(description="Why (action=reject); the agent sees it.")] = None,
        session_id: _SID = None,
        session_token: _TOKEN = None,
    ) -> dict[str, Any]:
        """Answer a pending decision; exactly one answer wins (a late one is an error naming the winner)."""
        ds = self._decisions()
        d = ds.get(decision_id)
        self._require_decision(d, session_id, session_token)
        if action == "approve":
            done = ds.approve(d.id, code=code, by="mcp client", surface="mcp")
        elif action == "reject":
            done = ds.reject(d.id, reason=reason, by="mcp client", surface="mcp")
        else:
            if text is None:
                raise UsageError("decision_answer: action 'answer' needs text")
            done = ds.answer(d.id, text, by="mcp client", surface="mcp")
        return done.to_dict()

    def agent_intervene(
        self,
        agent_id: Annotated[str, Field(min_length=1, description="Agent id (or prefix); a run id means its root.")],
        action: Literal["comment", "content", "pause", "resume", "stop"],
        text: Annotated[str | None, Field(description="The comment, or the replacement content.")] = None,
        session_id: _SID = None,
        session_token: _TOKEN = None,
    ) -> dict[str, Any]:
        """Comment on, replace the content of, pause, resume or stop a running agent of any process."""
        self._require_agent(agent_id, self.privacy.caller(session_id, session_token))  # type: ignore[attr-defined]
        run, node = self._live_node(agent_id)  # type: ignore[attr-defined]
        if run is not None and node is not None:
            from types import SimpleNamespace

            from agentstack_lab.engine.control import apply_intervention

            if action in ("comment", "content") and not (text or "").strip():
                raise UsageError(f"intervention {action!r} needs a non-empty text")
            apply_intervention(run, SimpleNamespace(agent_id=node.id, action=action, text=text, surface="mcp"))
            return {"agent_id": node.id, "run_id": run.id, "action": action, "applied": True}
        from agentstack_lab.decisions import Interventions

        self._reap()  # type: ignore[attr-defined]
        item = Interventions(self.ws.db).request(agent_id, action, text, surface="mcp", by="mcp client")
        return {"agent_id": item.agent_id, "run_id": item.run_id, "action": action, "applied": False,
                "queued": item.id}
