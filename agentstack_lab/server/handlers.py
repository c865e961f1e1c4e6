"""REST and WebSocket handlers under ``{base_url}agentstack/api/``.

Every handler is a Jupyter ``APIHandler``/``JupyterHandler``: Jupyter's own authentication (a
request without a token or login cookie gets 403) and XSRF protection (a cookie-authenticated POST
needs ``X-XSRFToken``). JSON leaving the server has camelCase keys, like the event wire format.
A user error (:class:`~agentstack_lab.errors.AgentstackError`) is a 400 (404 for a missing thing)
with ``{"message": one line}``; anything else is a 500 logged with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import tornado
import tornado.iostream
from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from tornado import websocket

from agentstack_lab.errors import AgentstackError, NotFoundError, UsageError, message
from agentstack_lab.events import ACTION_OF, STATUS_OF
from agentstack_lab.redaction import public_message
from agentstack_lab.server.base import PREFIX, BaseHandler, ServerState, loads_json, person_name
from agentstack_lab.server.hub import Message, dumps

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database
    pass

__all__ = ["ServerState", "routes", "MAX_UNSENT"]

MAX_UNSENT = 16 * 2**20   # bytes a WebSocket client may leave untaken before it is dropped
MAX_SEQ = 2**63 - 1       # SQLite's largest integer


def _after_seq(raw: str) -> int | str:
    """``?after=`` as a sequence number, or the one-line error to send instead."""
    try:
        value = int(raw)
    except ValueError:
        return f"after must be an integer, got {raw[:40]!r}"
    if not 0 <= value <= MAX_SEQ:
        return f"after must be between 0 and {MAX_SEQ}, got {raw[:40]}"
    return value

class RunsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        limit = self.int_arg("limit", 50, lo=1, hi=1000)
        from agentstack_lab.server.runctl import notebook_link

        root = self.state.root_dir

        def page() -> list[dict[str, Any]]:
            runs = runs_page(self.db, limit, self.state.workspace.config)
            for r in runs:  # a notebook's path relative to the server's root, only when inside it
                r["notebook"] = notebook_link(r.get("origin"), root)
            return runs

        self.reply({"runs": await self.state.off_loop(page)})

    @tornado.web.authenticated
    def post(self) -> None:
        data = self.body()
        run = self.state.start_run(data.get("prompt", ""), data.get("type") or data.get("agentType"),
                                   data.get("options") or {})
        self.reply({"runId": run.id, "status": run.status, "options": run.options.to_dict()}, status=201)


def runs_page(db: Database, limit: int, config: Any = None) -> list[dict[str, Any]]:
    """The newest ``limit`` runs with their counts, cost, origin, pending decisions and each agent's last event."""
    from agentstack_lab.engine.activity import last_events, run_costs
    from agentstack_lab.engine.liveness import reap_orphans
    from agentstack_lab.engine.log import list_runs
    from agentstack_lab.providers.prices import NO_COST, PriceTable
    from agentstack_lab.server.control import run_extras

    reap_orphans(db)
    runs = list_runs(db, limit=limit)
    ids = [r["id"] for r in runs]
    stats = _run_stats(db, ids)
    costs = run_costs(db, ids, PriceTable.from_config(config))
    last = last_events(db, ids)
    extras = run_extras(db, ids)
    return [{**r, **stats.get(r["id"], {}), "cost": costs.get(r["id"], NO_COST).to_wire(), **extras.get(r["id"], {}),
             "last": last.get(r["id"])} for r in runs]


def _run_stats(db: Database, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    rows = db.query(f"SELECT run_id, count(*), sum(status = 'waiting_user'), sum(coalesce(input_tokens, 0)"
                    f" + coalesce(output_tokens, 0)) FROM agents WHERE run_id IN ({marks}) GROUP BY run_id", run_ids)
    return {r[0]: {"agents": r[1], "waiting": r[2] or 0, "tokens": r[3] or 0} for r in rows}


class RunHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, run_ref: str) -> None:
        from agentstack_lab.engine.activity import resolve_run
        from agentstack_lab.engine.log import rebuild_tree
        from agentstack_lab.providers.prices import PriceTable, price_tree

        def read() -> tuple[str, Any, Any]:
            run_id = _resolve(self.db, run_ref, resolve_run)
            tree = price_tree(rebuild_tree(self.db, run_id, details=True),
                              PriceTable.from_config(self.state.workspace.config))
            return run_id, tree, _recorded_options(self.db, run_id)

        run_id, tree, recorded = await self.state.off_loop(read)
        local = self.state.runs.get(run_id)
        options = local.options.to_dict() if local is not None else recorded
        self.reply({"runId": run_id, "tree": tree, "options": options})


def _recorded_options(db: Database, run_id: str) -> dict[str, Any] | None:
    """The effective options a run of another process recorded in its root's ``agents`` row."""
    rows = db.query("SELECT metadata FROM agents WHERE id = ?", (run_id,))
    try:
        return json.loads(rows[0][0]).get("options") if rows and rows[0][0] else None
    except (ValueError, AttributeError):
        return None


class RunEventsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, run_ref: str) -> None:
        from agentstack_lab.engine.activity import EventFollower, resolve_run

        after, limit = self.int_arg("after", 0, hi=MAX_SEQ), self.int_arg("limit", 10_000, lo=1, hi=100_000)

        def read() -> dict[str, Any]:
            run_id = _resolve(self.db, run_ref, resolve_run)
            follower = EventFollower(self.db, run_id=run_id, after_seq=after)
            rows = follower.poll(limit=limit)
            return {"runId": run_id, "events": [{**r["payload"], "seq": r["seq"]} for r in rows],
                    "next": follower.seq}

        self.reply(await self.state.off_loop(read))


def _resolve(db: Database, ref: str, resolve: Any) -> str:
    try:
        return resolve(db, ref)
    except AgentstackError:
        raise
    except (KeyError, LookupError, ValueError) as exc:
        raise NotFoundError(message(exc)) from None


class MemorySearchHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        query = self.get_argument("q", "")
        if not query.strip():
            raise UsageError("q (the search text) is required")
        mode = self.get_argument("mode", "hybrid")
        if mode not in ("hybrid", "fts", "vector"):   # checked here too, so the type checker knows the mode
            raise UsageError(f"mode must be 'hybrid', 'fts' or 'vector', got {mode!r}")
        limit = self.int_arg("limit", 10, lo=1, hi=1000)
        hits = await self.state.off_loop(lambda: self.state.workspace.memory.search(query, mode, limit=limit))
        self.reply({"results": [_hit(h) for h in hits], "degraded": getattr(hits, "degraded", None)})


def _hit(hit: Any) -> dict[str, Any]:
    if hasattr(hit, "to_dict"):
        return hit.to_dict()
    import dataclasses

    if dataclasses.is_dataclass(hit) and not isinstance(hit, type):
        return dataclasses.asdict(hit)
    return dict(vars(hit))


class HealthHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, kind: str) -> None:
        from agentstack_lab.monitoring.health import check

        report = check(self.state.workspace, kind) if kind == "live" else \
            await self.state.off_loop(check, self.state.workspace, kind)
        self.reply(report, status=200 if report["status"] != "unhealthy" else 503)


class MetricsHandler(BaseHandler):
    """Prometheus text exposition of the workspace (``monitoring/metrics.py``), computed from the database."""

    @tornado.web.authenticated
    async def get(self) -> None:
        from prometheus_client.core import GaugeMetricFamily

        from agentstack_lab.monitoring.metrics import exposition

        clients = self.state.hub.subscribers

        class _ServerGauges:  # the server's own gauge beside the workspace's metrics
            def collect(self) -> Any:
                yield GaugeMetricFamily("agentstack_ws_clients", "WebSocket clients of this server", value=clients)

        accept = self.request.headers.get("Accept", "")
        body, content_type = await self.state.off_loop(
            lambda: exposition(self.state.workspace.db, extra=[_ServerGauges()], accept=accept))
        # APIHandler.finish would make it application/json, which Prometheus 3 refuses to scrape
        self.finish(body, set_content_type=content_type)


# The bases disagree on prepare() (JupyterHandler: async, WebSocketHandler: not), a gap in their typing
class EventsSocket(JupyterHandler, websocket.WebSocketHandler):  # pyright: ignore[reportIncompatibleMethodOverride]
    """The seed's protocol: the log's outbound events out, ``start-agent``/``user-response``/... in."""

    @property
    def state(self) -> ServerState:
        return self.settings["agentstack"]

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        res = super().get(*args, **kwargs)
        if res is not None:
            await ensure_async(res)

    # Jupyter's own origin policy (allow_origin settings); tornado's parameter name, as tornado calls it
    def check_origin(self, origin: str) -> bool:  # pyright: ignore[reportIncompatibleMethodOverride]
        return JupyterHandler.check_origin(self, origin)

    async def open(self) -> None:  # type: ignore[override]
        self._sent = 0
        self._unsent = 0          # bytes handed to the socket that the client has not taken yet
        self._closed = False
        self._buffer: list[Message] | None = []
        self.state.hub.start()   # idempotent; normally already started with the server's loop
        self._unsubscribe = self.state.hub.subscribe(self._deliver)
        after = self.get_argument("after", None)
        if after is not None:
            start = _after_seq(after)
            if isinstance(start, str):
                self._send_error(start)
            else:
                # a task, not awaited here: tornado reads the client's frames (its close among them) only
                # once open() returns, so a catch-up awaited here ran to the end for a client long gone
                self._catching_up = asyncio.get_running_loop().create_task(self._catch_up_then_follow(start))
                return
        self._follow_live()

    def _follow_live(self) -> None:
        buffered, self._buffer = self._buffer or [], None
        self._deliver(buffered)

    async def _catch_up_then_follow(self, after: int) -> None:
        try:
            await self._catch_up(after)
        except Exception:  # a failed catch-up must not leave the client without live events
            log.exception("agentstack-lab: catching a WebSocket client up failed")
            self._send_error("catching up on the event log failed; the server log says why")
        if not self._closed:
            self._follow_live()

    async def _catch_up(self, after: int) -> None:
        """Send the log from ``after`` up to the hub's position, at the client's pace; stop when it leaves."""
        from agentstack_lab.engine.activity import EventFollower
        from agentstack_lab.server.hub import coalesce

        follower = EventFollower(self.state.workspace.db, after_seq=after)
        upto = self.state.hub.seq
        while not self._closed:
            rows = [r for r in await asyncio.to_thread(follower.poll, 2000) if r["seq"] <= upto]
            if not rows or self._closed:
                break
            last = self._write(coalesce(rows), flow=True)
            if last is not None:  # the client's pace: the next batch is read once it has taken this one
                with contextlib.suppress(websocket.WebSocketClosedError, tornado.iostream.StreamClosedError):
                    await last
            if follower.seq >= upto:
                break

    def _deliver(self, messages: list[Message]) -> None:
        if self._buffer is not None:
            self._buffer.extend(messages)
            return
        self._write(messages)

    def _write(self, messages: list[Message], *, flow: bool = False) -> Any:
        """Send ``messages`` not sent yet. ``flow``: wait for the client to take them (catch-up).

        Returns the last write's future (None when nothing was written). Live messages are not waited for: a client with more than :data:`MAX_UNSENT` bytes not taken
        is closed with a reason (1008), so one that stops reading cannot grow the server's memory.
        """
        last = None
        for m in messages:
            if self._closed:
                return None
            if m.get("seq", 0) <= self._sent:
                continue
            self._sent = m.get("seq", self._sent)
            data = dumps(m)
            size = len(data)
            try:
                last = self.write_message(data)
            except websocket.WebSocketClosedError:
                self._gone()
                return None
            self._unsent += size
            last.add_done_callback(lambda _f, n=size: self._taken(n))
            if not flow and self._unsent > MAX_UNSENT:
                self._gone()
                self.close(1008, f"the client did not read: more than {MAX_UNSENT // 2**20} MB waiting to be sent")
                return None
        return last

    def _taken(self, n: int) -> None:
        self._unsent -= n

    def _gone(self) -> None:
        self._closed = True
        self._unsubscribe()

    def _send_error(self, text: str, agent_id: str = "") -> None:
        with contextlib.suppress(websocket.WebSocketClosedError):
            self.write_message(dumps({"type": "error", "agentId": agent_id, "error": text}))

    async def on_message(self, raw: str | bytes) -> None:  # type: ignore[override]
        from agentstack_lab.events import GetAgentTree, StartAgent, UserIntervention, UserResponse, from_wire

        try:
            event = from_wire(loads_json(raw, what="the message"))
            if isinstance(event, StartAgent):
                run = self.state.start_run(event.prompt, event.agent_type, event.options)
                self.write_message(dumps({"type": "run-started", "runId": run.id}))
            elif isinstance(event, UserResponse):
                await answer_query(self.state, event.agent_id, event.query_id, event.response, by=person_name(self))
            elif isinstance(event, UserIntervention):
                await intervene(self.state, event)
            elif isinstance(event, GetAgentTree):
                await self._send_tree(event.run_id)
            else:
                raise UsageError(f"{event.type} is an outbound event; clients send start-agent, user-response, "
                                 "user-intervention or get-agent-tree")
        except ValueError as exc:
            self._send_error(public_message(exc) if isinstance(exc, AgentstackError) else f"not a valid message: {exc}")
        except AgentstackError as exc:
            self._send_error(public_message(exc))
        except Exception:
            self.log.exception("agentstack-lab: WebSocket message failed")
            self._send_error("internal error (see the server log)")

    async def _send_tree(self, run_ref: str | None) -> None:
        from agentstack_lab.engine.activity import resolve_run
        from agentstack_lab.engine.log import list_runs, read_events

        db = self.state.workspace.db

        def snapshot() -> list[tuple[str, dict[str, Any]]]:
            runs = [_resolve(db, run_ref, resolve_run)] if run_ref else [r["id"] for r in list_runs(db, limit=20)]
            out = []
            for rid in runs:
                states: dict[str, Any] = {}
                for _, ev in read_events(db, rid):
                    if ev.type == "agent-state":
                        states[ev.agent_id] = {**states.get(ev.agent_id, {}), **ev.state}
                out += [(rid, {"agentId": a, "state": st}) for a, st in states.items()]
            return out

        for rid, item in await asyncio.to_thread(snapshot):
            self.write_message(dumps({"type": "agent-state", **item, "runId": rid}))

    def on_close(self) -> None:
        self._closed = True
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()


async def answer_query(state: ServerState, agent_id: str, query_id: str, response: Any, *,
                       by: str | None = None) -> None:
    """Answer a user query of any run: one hosted here directly, others through the workspace."""
    run = state.local_run_of(agent_id)
    if run is not None:
        run.respond(query_id, response, surface="lab", by=by)
        return
    from agentstack_lab.decisions import DecisionNotFoundError, decisions_for

    try:  # a run of another process: answer its persisted decision
        decisions_for(state.workspace).answer(query_id, response, surface="lab", by=by)
    except DecisionNotFoundError:
        raise NotFoundError(f"no pending query {query_id} of agent {agent_id} in this workspace") from None


async def intervene(state: ServerState, event: Any) -> None:
    run = state.local_run_of(event.agent_id)
    if run is None:  # a run of another process: queue it for that process
        from agentstack_lab.decisions import Interventions

        if event.status is not None and event.status not in ACTION_OF:
            raise UsageError(f"an intervention can set status {', '.join(map(repr, ACTION_OF))}, got {event.status!r}")
        actions = [("comment", event.user_comment), ("content", event.user_content)]
        actions += [(ACTION_OF.get(event.status or ""), None)]
        for action, text in actions:
            if action is not None and (text is not None or action in STATUS_OF):
                Interventions(state.workspace.db).request(event.agent_id, action, text, surface="lab")
        return
    if event.status == "stopped":
        run.stop(event.agent_id)
    else:
        run.intervene(event.agent_id, user_comment=event.user_comment, user_content=event.user_content,
                      status=event.status)


def routes() -> list[tuple[str, type]]:
    from agentstack_lab.server.control import control_routes
    from agentstack_lab.server.runctl import run_control_routes

    return [*control_routes(), *run_control_routes(),
        (rf"/{PREFIX}/runs", RunsHandler),
        (rf"/{PREFIX}/runs/([^/]+)", RunHandler),
        (rf"/{PREFIX}/runs/([^/]+)/events", RunEventsHandler),
        (rf"/{PREFIX}/memory/search", MemorySearchHandler),
        (rf"/{PREFIX}/health/(live|ready|detailed)", HealthHandler),
        (rf"/{PREFIX}/metrics", MetricsHandler),
        (rf"/{PREFIX}/events", EventsSocket),
    ]
