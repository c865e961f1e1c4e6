"""The control plane over REST: decisions (list, show, answer, approve, reject), tasks and metrics.

Decisions are rows of the workspace database (:mod:`agentstack_lab.decisions`), so the lab panel
answers a question of any run — a kernel's, a CLI ``agent run --on-query wait`` in a terminal, a
worker's — and the engine waiting on it sees the answer within its poll (25 ms). Exactly one answer
wins; a late one is a 400 naming who answered and from where.

Metrics are the Prometheus text exposition of a registry built per scrape from the database (a
scrape is three indexed ``GROUP BY`` queries, ~1 ms on a 10,000-agent workspace), so every process's
runs count, not only this server's.
"""

from __future__ import annotations

from typing import Any

import tornado

from agentstack_lab.errors import UsageError
from agentstack_lab.server.base import PREFIX, BaseHandler, person_name

__all__ = ["control_routes", "run_extras"]


def _decisions(state: Any) -> Any:
    from agentstack_lab.decisions import decisions_for

    return decisions_for(state.workspace)


def _decision(d: Any) -> dict[str, Any]:
    return d.to_dict()


class DecisionsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        state = self.get_argument("state", "pending") or None
        run, kind = self.get_argument("run", None), self.get_argument("kind", None)
        limit = self.int_arg("limit", 100, lo=1, hi=1000)

        def read() -> list[Any]:
            ds = _decisions(self.state)
            ds.expire_due()
            return ds.list(run=run, state=None if state == "all" else state, kind=kind, limit=limit)

        self.reply({"decisions": [_decision(d) for d in await self.state.off_loop(read)]})


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
            code = data.get("code")
            if code is not None and not isinstance(code, str):
                raise UsageError("approve: 'code' must be a string when given")
            act = lambda ds: ds.approve(ref, code=code, by=by, surface="lab")  # noqa: E731
        else:
            reason = data.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise UsageError("reject: 'reason' must be a string when given")
            act = lambda ds: ds.reject(ref, reason=reason or None, by=by, surface="lab")  # noqa: E731
        self.reply(_decision(await self.state.off_loop(lambda: act(_decisions(self.state)))))


class TasksHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        limit = self.int_arg("limit", 100, lo=1, hi=1000)
        status = self.get_argument("status", None)
        run = self.get_argument("run", None)
        self.reply({"tasks": await self.state.off_loop(
            lambda: list_tasks(self.db, status=status, run=run, limit=limit))})


def list_tasks(db: Any, *, status: str | None, run: str | None, limit: int) -> list[dict[str, Any]]:
    """Tasks, newest first: through the tasks service where it is installed, else the ``tasks`` table."""
    try:
        from agentstack_lab.tasks import TaskStore
    except ImportError:  # the tasks service is not on this branch yet: the foundation table is the truth
        TaskStore = None  # noqa: N806
    if TaskStore is not None:
        return [t.to_dict() for t in TaskStore(db).list(status=status, run_id=run, limit=limit)]
    import json

    where, params = [], []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if run is not None:
        where.append("json_extract(metadata, '$.runId') = ?")
        params.append(run)
    rows = db.query("SELECT id, session_id, agent_type, status, input, output, metadata, created_at, completed_at"
                    " FROM tasks" + (f" WHERE {' AND '.join(where)}" if where else "")
                    + " ORDER BY created_at DESC LIMIT ?", (*params, limit))
    out = []
    for r in rows:
        item = dict(zip(r.keys(), tuple(r), strict=True))
        item["metadata"] = json.loads(item["metadata"] or "{}")
        out.append(item)
    return out


class MetricsHandler(BaseHandler):
    @tornado.web.authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.finish(exposition(self.db, clients=self.state.hub.subscribers))


def exposition(db: Any, *, clients: int = 0) -> bytes:
    """The workspace's gauges in Prometheus text format (``agentstack_*``)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    reg = CollectorRegistry()
    agents = Gauge("agentstack_agents", "Agents in the workspace by status", ["status"], registry=reg)
    for status, n in db.query("SELECT status, count(*) FROM agents GROUP BY status"):
        agents.labels(status=status).set(n)
    runs = Gauge("agentstack_runs", "Runs (root agents) by status", ["status"], registry=reg)
    for status, n in db.query("SELECT status, count(*) FROM agents WHERE parent_id IS NULL AND run_id = id"
                              " GROUP BY status"):
        runs.labels(status=status).set(n)
    pending = Gauge("agentstack_decisions_pending", "Decisions waiting for a person, by kind", ["kind"],
                    registry=reg)
    for kind, n in db.query("SELECT kind, count(*) FROM decisions WHERE state = 'pending' GROUP BY kind"):
        pending.labels(kind=kind).set(n)
    Gauge("agentstack_events_seq", "Highest event-log sequence number", registry=reg).set(
        db.query("SELECT coalesce(max(seq), 0) FROM events")[0][0])
    Gauge("agentstack_ws_clients", "WebSocket clients of this server", registry=reg).set(clients)
    return generate_latest(reg)


def run_extras(db: Any, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per run: its ``origin`` (notebook path, terminal, worker, MCP, lab), pending decisions, and more.

    For a follow-up (``run.ask`` / ``%agent --continue``): the run it continues and that run's question.
    """
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    out: dict[str, dict[str, Any]] = {r: {"origin": None, "waiting_for_you": 0, "continues": None,
                                          "continues_prompt": None} for r in run_ids}
    for rid, origin, continues, prompt in db.query(
            "SELECT id, json_extract(metadata, '$.origin'), json_extract(metadata, '$.continues'),"
            f" json_extract(metadata, '$.continuesPrompt') FROM agents WHERE id IN ({marks})", run_ids):
        out[rid].update(origin=origin, continues=continues, continues_prompt=prompt)
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
    ]
