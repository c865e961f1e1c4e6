"""The control plane over REST: decisions (list, show, answer, approve, reject), saved approval rules, tasks, metrics.

``POST decisions/ID/approve {"always": "session" | "workspace"}`` approves and has the run save "Always allow
code like this" as a rule (a pending approval's JSON carries ``alwaysRule``: what it would match);
``GET approval/rules`` lists the saved rules and ``DELETE approval/rules/ID`` removes one.

Decisions are rows of the workspace database (:mod:`agentstack_lab.decisions`), so the lab panel
answers a question of any run — a kernel's, a CLI ``agent run --on-query wait`` in a terminal, a
worker's — and the engine waiting on it sees the answer within its poll (25 ms). Exactly one answer
wins; a late one is a 400 naming who answered and from where.

Metrics are the Prometheus text exposition of a registry built per scrape from the database (a
scrape is three indexed ``GROUP BY`` queries, ~1 ms on a 10,000-agent workspace), so every process's
runs count, not only this server's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tornado

from agentstack_lab.errors import UsageError
from agentstack_lab.server.base import PREFIX, BaseHandler, person_name

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["control_routes", "decision_context", "run_extras"]


def _decisions(state: Any) -> Any:
    from agentstack_lab.decisions import decisions_for

    return decisions_for(state.workspace)


def _always(d: Any) -> Any:
    """What "Always allow code like this" would save for approval ``d`` (its card's classes and code)."""
    from agentstack_lab.approval import always_rule

    classes: Any = d.options.get("classes")
    return always_rule(classes if isinstance(classes, list) else [], d.code or "")


def _decision(d: Any) -> dict[str, Any]:
    """A decision's JSON; a pending code approval also carries ``always_rule``: the rule "always" would save."""
    out = d.to_dict()
    if d.kind == "approval" and d.pending and d.code:
        out["always_rule"] = _always(d).to_dict()
    return out


class DecisionsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        state = self.get_argument("state", "pending") or None
        run, kind = self.get_argument("run", None), self.get_argument("kind", None)
        limit = self.int_arg("limit", 100, lo=1, hi=1000)

        def read() -> list[Any]:
            ds = _decisions(self.state)
            ds.expire_due()
            found = ds.list(run=run, state=None if state == "all" else state, kind=kind, limit=limit)
            return [{**_decision(d), **extra} for d, extra in zip(found, decision_context(self.db, found),
                                                                    strict=True)]

        self.reply({"decisions": await self.state.off_loop(read)})


class DecisionHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, ref: str) -> None:
        self.reply(_decision(await self.state.off_loop(lambda: _decisions(self.state).get(ref))))


class DecisionActionHandler(BaseHandler):
    """``POST decisions/ID/answer {response}``, ``/approve {code?}``, ``/reject {reason?}``."""

    @tornado.web.authenticated
    async def post(self, ref: str, action: str) -> None:
        data = self.body()
        by = person_name(self)
        if action == "answer":
            if "response" not in data:
                raise UsageError("answer needs a 'response' in the request body")
            act = lambda ds: ds.answer(ref, data["response"], by=by, surface="lab")  # noqa: E731
        elif action == "approve":
            code, always = data.get("code"), data.get("always")
            if code is not None and not isinstance(code, str):
                raise UsageError("approve: 'code' must be a string when given")
            if always is not None and always not in ("session", "workspace"):
                raise UsageError(f"approve: 'always' must be 'session' or 'workspace', got {always!r}")

            def act(ds: Any) -> Any:
                if always is not None:   # refused before anything is answered when no rule can be saved
                    d = ds.get(ref)
                    rule = _always(d) if d.kind == "approval" else None
                    if rule is not None and rule.refused:
                        raise UsageError(f"approve: no rule can be saved for decision {d.id[:8]}: {rule.refused}")
                return ds.approve(ref, code=code, by=by, surface="lab", always=always)
        else:
            reason = data.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise UsageError("reject: 'reason' must be a string when given")
            act = lambda ds: ds.reject(ref, reason=reason or None, by=by, surface="lab")  # noqa: E731
        self.reply(_decision(await self.state.off_loop(lambda: act(_decisions(self.state)))))


class ApprovalRulesHandler(BaseHandler):
    """``GET approval/rules``: the saved approval rules, oldest first; ``DELETE approval/rules/ID`` removes one."""

    @tornado.web.authenticated
    async def get(self) -> None:
        from agentstack_lab.approval import SavedRules

        self.reply({"rules": [r.to_dict() for r in await self.state.off_loop(lambda: SavedRules(self.db).list())]})


class ApprovalRuleHandler(BaseHandler):
    @tornado.web.authenticated
    async def delete(self, rule_id: str) -> None:
        from agentstack_lab.approval import SavedRules

        self.reply((await self.state.off_loop(lambda: SavedRules(self.db).remove(rule_id))).to_dict())


class TasksHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        limit = self.int_arg("limit", 100, lo=1, hi=1000)
        status = self.get_argument("status", None)
        run = self.get_argument("run", None)
        self.reply({"tasks": await self.state.off_loop(
            lambda: list_tasks(self.db, status=status, run=run, limit=limit))})


def list_tasks(db: Database, *, status: str | None, run: str | None, limit: int) -> list[dict[str, Any]]:
    """Tasks, newest first, through the tasks service."""
    from agentstack_lab.tasks import TaskStore

    return [t.to_dict() for t in TaskStore(db).list(status=status, run_id=run, limit=limit)]


def decision_context(db: Database, decisions: list[Any]) -> list[dict[str, Any]]:
    """What a decision card says beside the question: the asking agent's type, its run's prompt, where code runs.

    ``executor`` is the run's: ``live`` is the kernel, ``subprocess`` an isolated process.
    """
    ids = sorted({i for d in decisions for i in (d.agent_id, d.run_id) if i})
    rows: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for r in db.query(f"SELECT id, type, prompt, json_extract(metadata, '$.executor') FROM agents"
                          f" WHERE id IN ({marks})", chunk):
            rows[r[0]] = tuple(r)
    out = []
    for d in decisions:
        agent, run = rows.get(d.agent_id or ""), rows.get(d.run_id or "")
        out.append({"agent_type": agent[1] if agent else None, "run_prompt": run[2] if run else None,
                    "executor": (run[3] if run else None) or (agent[3] if agent else None)})
    return out


def run_extras(db: Database, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per run: its ``origin`` (notebook path, terminal, worker, MCP, lab), pending decisions, and more.

    For a follow-up (``run.ask`` / ``%agent --continue``): the run it continues and that run's question.
    ``cell_id``: the notebook cell that started it; ``executor``: where its code runs (``live``: the kernel);
    ``paused``: a pause was applied (its status turns ``paused`` at its next step, and Resume lifts it).
    """
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    out: dict[str, dict[str, Any]] = {r: {"origin": None, "waiting_for_you": 0, "continues": None,
                                          "continues_prompt": None, "cell_id": None, "executor": None,
                                          "paused": False}
                                      for r in run_ids}
    for rid, origin, continues, prompt, cell, executor, paused in db.query(
            "SELECT id, json_extract(metadata, '$.origin'), json_extract(metadata, '$.continues'),"
            " json_extract(metadata, '$.continuesPrompt'), json_extract(metadata, '$.cellId'),"
            " json_extract(metadata, '$.executor'), json_extract(metadata, '$.paused')"
            f" FROM agents WHERE id IN ({marks})", run_ids):
        out[rid].update(origin=origin, continues=continues, continues_prompt=prompt, cell_id=cell, executor=executor,
                        paused=bool(paused))
    for rid, n in db.query(f"SELECT run_id, count(*) FROM decisions WHERE state = 'pending' AND run_id IN ({marks})"
                           " GROUP BY run_id", run_ids):
        out[rid]["waiting_for_you"] = n
    return out


def control_routes() -> list[tuple[str, type]]:
    return [
        (rf"/{PREFIX}/decisions", DecisionsHandler),
        (rf"/{PREFIX}/decisions/([^/]+)", DecisionHandler),
        (rf"/{PREFIX}/decisions/([^/]+)/(answer|approve|reject)", DecisionActionHandler),
        (rf"/{PREFIX}/tasks", TasksHandler),
        (rf"/{PREFIX}/approval/rules", ApprovalRulesHandler),
        (rf"/{PREFIX}/approval/rules/([^/]+)", ApprovalRuleHandler),
    ]
