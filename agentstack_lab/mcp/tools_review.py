"""The ``review_loop_*`` MCP tools (docs/mcp.md review-loop tools), over :mod:`agentstack_lab.workflows.review_loop`.

The seed exported these but never registered them; here they are served. A loop started by
``review_loop_start`` runs on the server's event loop (it returns at once unless ``wait``); status,
issues, code and list read the workspace database, so loops started by a notebook or the CLI show
too, and ``review_loop_abort`` stops a loop of any process (its owner sees the flag within 0.2 s).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

__all__ = ["REVIEW_TOOL_NAMES", "ReviewTools"]

REVIEW_TOOL_NAMES = ("review_loop_start", "review_loop_status", "review_loop_abort", "review_loop_issues",
                     "review_loop_list", "review_loop_get_code")

LoopId = Annotated[str, Field(min_length=1, description="Review loop id (or a unique prefix of 4+ characters).")]


class ReviewTools:
    """Review-loop tools of one workspace; loops started here run in this process."""

    def __init__(self, workspace: Any):
        self.ws = workspace
        self._loops: Any = None

    @property
    def loops(self) -> Any:
        if self._loops is None:
            from agentstack_lab.workflows.review_loop import ReviewLoops

            self._loops = ReviewLoops(self.ws)
        return self._loops

    async def review_loop_start(
        self,
        code: Annotated[str, Field(min_length=1, description="The code (or unified diff) to review.")],
        path: Annotated[str | None, Field(description="Its file name, shown to the agents.")] = None,
        kind: Annotated[Literal["code", "diff"] | None, Field(description="Default: diff when it looks like one."
                                                              )] = None,
        max_iterations: Annotated[int, Field(ge=1, le=50, description="Reviews at most; a FAIL at the last one "
                                                                     "ends the loop failed.")] = 3,
        provider: Annotated[str | None, Field(description="Provider for both agents; default: the offline "
                                                          "'scripted' one, which with no script reviews nothing "
                                                          "(the loop ends error, never passed).")] = None,
        script: Annotated[dict[str, Any] | None, Field(
            description="With provider 'scripted': {\"verdicts\": [verdict objects or raw replies], "
                        "\"revisions\": [code]} played in order (the last repeats).")] = None,
        reviewer_type: Annotated[str, Field(min_length=1)] = "reviewer",
        coder_type: Annotated[str, Field(min_length=1)] = "coder",
        context: Annotated[str, Field(description="Extra text for the reviewer (requirements, known issues).")] = "",
        wait: Annotated[bool, Field(description="Wait for the end and return the final status.")] = False,
    ) -> dict[str, Any]:
        """Start an adversarial review loop: a reviewer agent's PASS/FAIL verdict decides, a coder agent revises."""
        loop = self.loops.start(code, path=path, kind=kind, max_iterations=max_iterations, provider=provider,
                                script=script, reviewer_type=reviewer_type, coder_type=coder_type, context=context)
        if wait:
            await loop.wait()
        return {"loop_id": loop.id, **self._status(loop.id)}

    def _status(self, loop_id: str) -> dict[str, Any]:
        state = self.loops.status(loop_id)
        reviews = [{k: r[k] for k in ("iteration", "verdict", "summary", "reviewer_run_id", "coder_run_id")}
                   | {"findings": len(r["findings"])} for r in self.loops.reviews(state.id)]
        return {**state.to_dict(), "reviews": reviews}

    def review_loop_status(self, loop_id: LoopId) -> dict[str, Any]:
        """A loop's status (running, passed, failed, aborted, error), last verdict, iteration and each review."""
        return self._status(loop_id)

    def review_loop_abort(self, loop_id: LoopId) -> dict[str, Any]:
        """Stop a running loop (of this or another process)."""
        return self.loops.abort(loop_id).to_dict()

    def review_loop_issues(self, loop_id: LoopId,
                           iteration: Annotated[int | None, Field(ge=1, description="Only this iteration.")] = None,
                           ) -> dict[str, Any]:
        """The reviewer's findings (severity, file, line, claim, evidence) of every iteration, or one."""
        state = self.loops.status(loop_id)
        issues = [i.to_dict() for i in self.loops.issues(state.id, iteration=iteration)]
        return {"loop_id": state.id, "status": state.status, "issues": issues, "count": len(issues)}

    def review_loop_list(self, status: Literal["running", "passed", "failed", "aborted", "error"] | None = None,
                         limit: Annotated[int, Field(ge=1, le=1000)] = 100) -> dict[str, Any]:
        """Review loops, newest first; status 'running' lists the active ones."""
        loops = [s.to_dict() for s in self.loops.list(status=status, limit=limit)]
        return {"loops": loops, "count": len(loops), "active": sum(not s["done"] for s in loops)}

    def review_loop_get_code(self, loop_id: LoopId) -> dict[str, Any]:
        """The loop's current code: the coder's latest revision, or the original."""
        state = self.loops.status(loop_id)
        return {"loop_id": state.id, "status": state.status, "iteration": state.iteration, "path": state.path,
                "code": state.code}

    async def shutdown(self) -> None:
        """Abort the loops this server started (the client went away)."""
        if self._loops is not None:
            await self._loops.shutdown()
