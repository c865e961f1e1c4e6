"""The MCP tools as plain methods over one workspace (the server in ``server.py`` only registers them).

Each method's signature is its input schema (``Annotated`` fields carry limits and descriptions);
each returns a JSON-able dict. Expected failures are :class:`~agentstack_lab.errors.AgentstackError`
subclasses, which the server turns into one-line tool errors. Agent runs started here live in this
process; everything else is read from the workspace database, so runs of other processes (a
notebook, the CLI) show too.

Session privacy: session ids are listed by ``session_active``, ``agent_list`` and ``system_status``,
so an id proves nothing. ``session_start`` returns a secret ``session_token`` once (only its sha256
is stored); every tool that reads, writes or ends a session's private namespace (``memory_*`` with
``session_id``, ``session_end``, ``agent_run`` with ``session_id``) needs it, so a second client on
the same workspace, or a model that saw another session's id, cannot use that session. The same token guards
everything a private session's runs own (agents, tasks, decisions, interventions; see ``privacy.py``):
the reading and writing tools take ``session_id``/``session_token`` and the listing tools hide the rest.

Not built yet, so not offered: ``task_*`` and ``consensus_*`` (their services do not exist).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from agentstack_lab.errors import AgentstackError, NotFoundError, UsageError, message
from agentstack_lab.events import AgentStatus, QuestionKind
from agentstack_lab.mcp.decision_tools import DECISION_TOOL_NAMES, DecisionTools
from agentstack_lab.mcp.privacy import Privacy
from agentstack_lab.mcp.tools_system import SYSTEM_TOOL_NAMES, SystemTools

if TYPE_CHECKING:
    from agentstack_lab.agents.identity import IdentityService
    from agentstack_lab.workspace import Workspace

__all__ = ["Toolbox", "TOOL_NAMES"]

log = logging.getLogger(__name__)

TOOL_NAMES = (
    "agent_run", "agent_status", "agent_tree", "agent_list", "agent_stop", "agent_types",
    "memory_store", "memory_get", "memory_search", "memory_list", "memory_delete",
    "session_start", "session_end", "session_status", "session_active",
    "identity_create", "identity_transition", "identity_audit",
    "system_status",
    *DECISION_TOOL_NAMES,
    *SYSTEM_TOOL_NAMES,
)

SessionId = Annotated[str | None, Field(min_length=1, description="Act within this session (its private namespace "
                                                    "session:<id> becomes readable and the default); needs "
                                                    "session_token.")]
SessionToken = Annotated[str | None, Field(max_length=200, description="The secret session_start returned "
                                                                       "for session_id (required with it).")]
Namespace = Annotated[str | None, Field(description="Namespace (default: 'default', or the session's own).")]
Key = Annotated[str, Field(min_length=1, max_length=1024)]
Status = AgentStatus


def _asdict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


class Toolbox(DecisionTools, SystemTools):
    """The tools of one workspace; agent runs started here are kept in :attr:`runs`."""

    def __init__(self, workspace: Workspace):
        self.ws = workspace
        self.runs: dict[str, Any] = {}
        self.privacy = Privacy(workspace)

    # --- agents ------------------------------------------------------------------------------------
    async def agent_run(
        self,
        prompt: Annotated[str, Field(min_length=1, description="What to ask the agent tree.")],
        agent_type: Annotated[str | None, Field(description="Root agent type (see agent_types).")] = None,
        provider: Annotated[str | None, Field(description="Provider name; default: the workspace config's.")] = None,
        model: str | None = None,
        auto_approve: Annotated[bool | None, Field(description="Let agents run Python without asking. Default: "
                                                               "config agents.auto_approve; without it a run that "
                                                               "wants to run code fails closed.")] = None,
        executor: Annotated[Literal["subprocess", "live"] | None, Field(
            description="Where code runs; default: config agents.executor, else subprocess.")] = None,
        wait: Annotated[bool, Field(description="Wait for the end and return result and tree.")] = False,
        session_id: SessionId = None,
        session_token: SessionToken = None,
        max_depth: Annotated[int | None, Field(ge=0, le=8)] = None,
        max_children: Annotated[int | None, Field(ge=0, le=1000, description="Subagents per agent.")] = None,
        max_agents: Annotated[int | None, Field(ge=1, le=1000, description="Agents in the whole tree.")] = None,
        max_tokens: Annotated[int | None, Field(ge=1, description="Token budget of the whole tree.")] = None,
        subagents: bool | None = None,
        timeout_s: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None,
        answers: Annotated[dict[QuestionKind, str] | None,
                           Field(description="Answers given up front to the agents' questions.")] = None,
        identity: Annotated[str | None, Field(min_length=1, description="Id or display name of the persistent "
                                                                        "identity the run acts as (not retired).")
                            ] = None,
        on_query: Annotated[Literal["fail", "wait", "auto"] | None, Field(
            description="A question nobody answered up front: fail closed, wait for an answer from any surface "
                        "(decision_answer, the CLI, a notebook), or auto-approve. Default: config "
                        "agents.on_query, else fail.")] = None,
        decision_timeout: Annotated[float | None, Field(gt=0, description="With on_query=wait: seconds before an "
                                                        "unanswered question expires and the run fails.")] = None,
    ) -> dict[str, Any]:
        """Start a headless agent run; its questions fail it closed, wait for decision_answer, or are auto-approved."""
        from agentstack_lab.engine import AgentRun

        if session_id is not None:
            self._session(session_id, session_token)
        elif session_token is not None:
            raise UsageError("session_token was given without session_id")
        from agentstack_lab.engine.options import run_options

        given = {"auto_approve": auto_approve, "executor": executor, "subagents": subagents,
                 "answers": dict(answers) if answers else None, "on_query": on_query,
                 "decision_timeout": decision_timeout, "max_depth": max_depth, "max_children": max_children,
                 "max_agents": max_agents, "max_tokens": max_tokens, "timeout_s": timeout_s, "identity": identity}
        options = run_options(self.ws.config, surface="mcp", given={k: v for k, v in given.items() if v is not None})
        run = AgentRun(prompt, workspace=self.ws, provider=provider, agent_type=agent_type, options=options,
                       model=model, session_id=session_id, origin="mcp")
        self.runs[run.id] = run
        run.start()
        if not wait:
            await asyncio.sleep(0)  # let the run write its first state
            return {"run_id": run.id, "status": run.status, "done": False, "options": run.options.to_dict()}
        await run.wait(raise_on_error=False)
        return self._run_summary(run)

    def _run_summary(self, run: Any) -> dict[str, Any]:
        root = run.tree
        return {"run_id": run.id, "status": run.status, "done": run.done, "result": run.result,
                "error": run.error or root.get("error"), "session_id": run.session_id,
                "options": run.options.to_dict(), "tree": root}

    def agent_status(self, agent_id: Annotated[str, Field(min_length=1, description="Agent id, name or run id.")],
                     session_id: SessionId = None, session_token: SessionToken = None) -> dict[str, Any]:
        """One agent's persisted state (status, tokens, result or error) and its last logged event."""
        from agentstack_lab.engine.activity import last_events

        self._reap()
        run, node = self._live_node(agent_id)
        if run is not None:  # live state: the database lags a run of this process by one log batch
            out = node.row(run.id, run.session_id) if node is not None else {
                "id": run.id, "run_id": run.id, "status": "pending", "type": run.agent_type, "prompt": run.prompt}
        else:
            out = _asdict(self._agent(agent_id))
        self.privacy.require(self.privacy.caller(session_id, session_token), f"agent {agent_id!r}",
                             run_id=out.get("run_id"), session_id=out.get("session_id"))
        out["last_event"] = last_events(self.ws.db, [out["run_id"]]).get(out["id"]) if out.get("run_id") else None
        out["in_this_process"] = run is not None
        return out

    def agent_tree(self, run_id: Annotated[str, Field(min_length=1, description="Run id (or a unique prefix).")],
                   session_id: SessionId = None, session_token: SessionToken = None) -> dict[str, Any]:
        """The run's agent tree, rebuilt from the workspace event log (works for runs of any process).

        A run still going in this process answers with its live tree, as ``agent_status`` does: the log
        lags it by one batch, so a status read live could say ``completed`` beside a tree without the
        children spawned in the last 50 ms.
        """
        from agentstack_lab.engine.activity import resolve_run
        from agentstack_lab.engine.log import rebuild_tree

        self._reap()
        rid = resolve_run(self.ws.db, run_id)
        self.privacy.require(self.privacy.caller(session_id, session_token), f"run {rid!r}", run_id=rid)
        live = self.runs.get(rid)
        if live is not None and not live.done and rid in live.agents:
            return {"run_id": rid, "tree": live.tree}
        return {"run_id": rid, "tree": rebuild_tree(self.ws.db, rid)}

    def agent_list(self, run_id: str | None = None, status: Status | None = None,
                   session_id: SessionId = None, session_token: SessionToken = None,
                   roots_only: Annotated[bool, Field(description="Only run roots (one row per run).")] = False,
                   limit: Annotated[int, Field(ge=1, le=1000)] = 50) -> dict[str, Any]:
        """Agents in the workspace database, newest first."""
        from agentstack_lab.engine.activity import agent_rows, resolve_run

        self._reap()
        caller = self.privacy.caller(session_id, session_token)
        rid = resolve_run(self.ws.db, run_id) if run_id else None
        rows = agent_rows(self.ws.db, run_id=rid, status=status, session_id=session_id, roots=roots_only, limit=None)
        rows = self.privacy.filter(caller, rows)[:limit]
        for r in rows:
            r["prompt"] = _clip(r["prompt"])
            r["result"] = _clip(r["result"])
        return {"agents": rows, "count": len(rows)}

    async def agent_stop(self, agent_id: Annotated[str, Field(min_length=1, description="Agent or run id.")],
                         reason: str | None = None, session_id: SessionId = None,
                         session_token: SessionToken = None) -> dict[str, Any]:
        """Stop an agent and its subtree (runs started by this server) or an idle spawned agent."""
        from agentstack_lab.agents.spawner import TERMINAL, Spawner

        self._require_agent(agent_id, self.privacy.caller(session_id, session_token))

        reason = reason or "stopped through MCP"
        run, node = self._live_node(agent_id)
        if run is not None and node is None:
            raise UsageError(f"run {agent_id} has not started its root agent yet; try again")
        if node is None:  # not (or no longer) running here: the database says what it is
            self._reap()
            row = self._agent(agent_id)
            if row.status in TERMINAL:
                raise UsageError(f"agent {row.name} already {row.status}; nothing to stop")
            if row.run_id is None:
                return _asdict(Spawner(self.ws.db).stop(row.id, reason))
            from agentstack_lab.decisions import Interventions

            item = Interventions(self.ws.db).request(row.id, "stop", surface="mcp", by="mcp client")
            return {"agent_id": row.id, "run_id": row.run_id, "status": row.status, "error": None,
                    "queued": item.id, "note": "the run lives in another process; it stops there within a second"}
        assert run is not None   # _live_node returns a node only with its run
        if node.terminal:
            raise UsageError(f"agent {node.name} already {node.status}; nothing to stop")
        run.stop(None if node.id == run.id else node.id, reason=reason)
        for _ in range(500):  # the subtree settles within a few loop turns
            if node.terminal:
                break
            await asyncio.sleep(0.01)
        if node.id == run.id:
            await run.wait(raise_on_error=False)  # also flushes the event log
        return {"agent_id": node.id, "run_id": run.id, "status": node.status, "error": node.error}

    def _require_agent(self, ref: str, caller: str | None) -> None:
        """``SessionAccessError`` when agent (or run) ``ref`` belongs to a private session not ``caller``'s."""
        run, _node = self._live_node(ref)
        if run is not None:
            self.privacy.require(caller, f"agent {ref!r}", run_id=run.id, session_id=run.session_id)
            return
        rows = self.ws.db.query("SELECT run_id, session_id FROM agents WHERE id = ? OR name = ? OR run_id = ? OR "
                                "(length(?) >= 4 AND substr(id, 1, length(?)) = ?) LIMIT 5", (ref, ref, ref, ref, ref, ref))
        for r in rows:
            self.privacy.require(caller, f"agent {ref!r}", run_id=r[0], session_id=r[1])

    def _reap(self) -> None:
        """Fail the agents of runs whose owner process is gone, so what is read next is what happened."""
        from agentstack_lab.engine.liveness import reap_orphans

        reap_orphans(self.ws.db)

    def _live_node(self, ref: str) -> tuple[Any, Any]:
        """The run of this process holding agent ``ref`` (id or name) and its node, else ``(None, None)``."""
        for run in self.runs.values():
            if run.done:
                continue
            if ref == run.run_id and run.root_id not in run.agents:
                return run, None
            for node in run.agents.values():
                if ref in (node.id, node.name):
                    return run, node
        return None, None

    def agent_types(self) -> dict[str, Any]:
        """Agent types that runs may use (core, plugin and workspace-registered types)."""
        types = []
        registry = self.ws.agent_types
        for name in registry.list():
            d = registry.get(name)
            types.append({"type": d.type, "name": d.name, "description": d.description,
                          "capabilities": list(d.capabilities), "core": registry.is_core(name)})
        return {"types": types}

    def _agent(self, ref: str) -> Any:
        from agentstack_lab.agents.spawner import AgentNotFoundError, Spawner

        sp = Spawner(self.ws.db)
        row = sp.get(ref) or sp.get_by_name(ref)
        if row is None:
            raise AgentNotFoundError(f"no agent with id or name {ref!r}")
        return row

    # --- memory ------------------------------------------------------------------------------------
    def _session(self, session_id: str, token: str | None) -> Any:
        """The active session ``session_id``, if ``token`` is its secret (checked first: an id alone says nothing)."""
        self.ws.sessions.authorize(session_id, token)
        return self.ws.sessions.require_active(session_id)

    def _memory(self, session_id: str | None, token: str | None, agent_id: str | None = None) -> Any:
        if session_id is None:
            if token is not None:
                raise UsageError("session_token was given without session_id")
            return self.ws.memory.scoped(None, agent_id=agent_id) if agent_id else self.ws.memory
        self._session(session_id, token)
        return self.ws.memory.scoped(session_id, agent_id=agent_id)

    def memory_store(self, key: Key, content: Annotated[str, Field(min_length=1)], namespace: Namespace = None,
                     session_id: SessionId = None, session_token: SessionToken = None, agent_id: str | None = None,
                     tags: list[Annotated[str, Field(min_length=1)]] | None = None,
                     metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Store (or update) a memory entry; a changed content keeps the old version."""
        entry = self._memory(session_id, session_token, agent_id).store(key, content, namespace=namespace, agent_id=agent_id,
                                                         tags=tags, metadata=metadata)
        return entry.to_dict()

    def memory_get(self, key: Key, namespace: Namespace = None, session_id: SessionId = None,
                   session_token: SessionToken = None) -> dict[str, Any]:
        """One memory entry by key."""
        from agentstack_lab.memory.access import derive_namespace

        mem = self._memory(session_id, session_token)
        entry = mem.get(key, namespace=namespace)
        if entry is None:
            raise NotFoundError(f"no entry {key!r} in namespace {derive_namespace(mem.context, namespace)!r}")
        return entry.to_dict()

    def memory_search(self, query: Annotated[str, Field(min_length=1)],
                      mode: Literal["hybrid", "fts", "vector"] = "hybrid", namespace: Namespace = None,
                      session_id: SessionId = None, session_token: SessionToken = None,
                      agent_id: str | None = None, include_shared: bool = True,
                      limit: Annotated[int, Field(ge=1, le=200)] = 10,
                      threshold: Annotated[float | None, Field(ge=0, le=1)] = None) -> dict[str, Any]:
        """Search memory by keywords (FTS5), by meaning (vectors) or both (hybrid).

        Scores are absolute, 0..1 in every search (keywords: share of the query's words found; vectors:
        similarity above the embedder's floor), so ``threshold`` filters; absent things return nothing.
        """
        hits = self._memory(session_id, session_token, agent_id).search(query, mode, namespace=namespace, agent_id=agent_id,
                                                         include_shared=include_shared, limit=limit,
                                                         threshold=threshold)
        return {"results": [h.to_dict() for h in hits], "count": len(hits), "degraded": hits.degraded}

    def memory_list(self, namespace: Namespace = None, session_id: SessionId = None,
                    session_token: SessionToken = None, agent_id: str | None = None, tag: str | None = None, limit: Annotated[int, Field(ge=1, le=1000)] = 50,
                    offset: Annotated[int, Field(ge=0)] = 0) -> dict[str, Any]:
        """Memory entries, newest first."""
        entries = self._memory(session_id, session_token, agent_id).list(namespace=namespace, agent_id=agent_id, tag=tag,
                                                          limit=limit, offset=offset)
        return {"entries": [e.to_dict() for e in entries], "count": len(entries)}

    def memory_delete(self, key: Key, namespace: Namespace = None, session_id: SessionId = None,
                      session_token: SessionToken = None) -> dict[str, Any]:
        """Delete a memory entry."""
        from agentstack_lab.memory.access import derive_namespace

        mem = self._memory(session_id, session_token)
        ns = derive_namespace(mem.context, namespace)
        if not mem.delete(key, namespace=namespace):
            raise NotFoundError(f"no entry {key!r} in namespace {ns!r}")
        return {"deleted": key, "namespace": ns}

    # --- sessions ----------------------------------------------------------------------------------
    def session_start(self, name: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
                      metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start a session: a private memory namespace that ending the session deletes.

        The result's `sessionToken` is shown only here: pass it as session_token with session_id to use or end the
        session.
        """
        session, token = self.ws.sessions.start_private(name, metadata=metadata)
        return {**session.to_dict(), "session_token": token}

    def session_end(self, session_id: Annotated[str, Field(min_length=1)],
                    session_token: SessionToken = None) -> dict[str, Any]:
        """End a session and delete its private memory (`entries` = entries removed); needs its session_token."""
        self.ws.sessions.authorize(session_id, session_token)
        return self.ws.sessions.end(session_id).to_dict()

    def session_status(self, session_id: Annotated[str, Field(min_length=1)]) -> dict[str, Any]:
        """One session (status, times, entries in its namespace)."""
        return self.ws.sessions.status(session_id).to_dict()

    def session_active(self) -> dict[str, Any]:
        """Active sessions, most recent first."""
        return {"sessions": [s.to_dict() for s in self.ws.sessions.active()]}

    # --- identities --------------------------------------------------------------------------------
    def _identities(self) -> IdentityService:
        return self.ws.identities

    def _identity_id(self, ref: str) -> str:
        return self._identities().resolve(ref).agent_id

    def identity_create(self, agent_type: Annotated[str, Field(min_length=1)],
                        display_name: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
                        description: str | None = None, capabilities: list[str] | None = None,
                        metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Create a persistent agent identity (status `created`; the audit trail records it)."""
        return _asdict(self._identities().create(agent_type, display_name=display_name, description=description,
                                                 capabilities=capabilities, metadata=metadata, created_by="mcp"))

    def identity_transition(self, identity: Annotated[str, Field(min_length=1, description="Id or display name.")],
                            to: Literal["active", "dormant", "retired"], reason: str | None = None) -> dict[str, Any]:
        """Move an identity: created → active ⇄ dormant → retired (retired is final)."""
        svc, agent_id = self._identities(), self._identity_id(identity)
        if to == "active":
            return _asdict(svc.activate(agent_id, actor_id="mcp", reason=reason))
        if to == "dormant":
            return _asdict(svc.deactivate(agent_id, reason=reason, actor_id="mcp"))
        return _asdict(svc.retire(agent_id, reason=reason, actor_id="mcp"))

    def identity_audit(self, identity: Annotated[str, Field(min_length=1, description="Id or display name.")],
                       limit: Annotated[int, Field(ge=1, le=1000)] = 50) -> dict[str, Any]:
        """An identity and its audit trail (newest first)."""
        svc, agent_id = self._identities(), self._identity_id(identity)
        return {"identity": _asdict(svc.get(agent_id)),
                "audit": [_asdict(a) for a in svc.get_audit_trail(agent_id, limit)]}

    # --- system ------------------------------------------------------------------------------------
    def system_status(self) -> dict[str, Any]:
        """Workspace, database, schema migrations, row counts, embedder and provider availability."""
        from agentstack_lab.engine.activity import status_counts
        from agentstack_lab.store.migrations import MIGRATIONS, applied

        db, ws = self.ws.db, self.ws
        self._reap()
        done = applied(db)
        emb = ws.embedder
        q = db.query
        return {
            "workspace": str(ws.root), "database": str(ws.db_path),
            "config_file": str(ws.config.source) if ws.config.source else None,
            "migrations": {"applied": done, "pending": [n for n, _ in MIGRATIONS if n not in done]},
            "counts": {"agents": status_counts(db, "agents"),
                       "runs": q("SELECT count(DISTINCT run_id) FROM agents WHERE run_id IS NOT NULL")[0][0],
                       "events": q("SELECT count(*) FROM events")[0][0],
                       "memory": ws.memory.stats(),
                       "sessions": status_counts(db, "sessions"),
                       "identities": status_counts(db, "identities")},
            "embedder": {"name": emb.name, "model": emb.model, "dimensions": emb.dimensions},
            "providers": {"default": ws.config.providers.default, "available": self._providers()},
            "runs_in_this_process": sorted(r for r, run in self.runs.items() if not run.done),
            "not_served": ["task_*", "consensus_*"],
        }

    def _providers(self) -> dict[str, dict[str, Any]]:
        """Each registered provider, built from the config: built = usable (keys, SDK, binary); never contacted.

        A missing key or SDK is the answer for that provider; a provider whose factory crashes is a bug
        (logged with its traceback) and must not take ``system_status`` down with it.
        """
        out: dict[str, dict[str, Any]] = {}
        for name in self.ws.providers.names():
            try:
                self.ws.get_provider(name)
            except (AgentstackError, ImportError) as exc:
                out[name] = {"available": False, "detail": message(exc)[:300]}
            except Exception:  # noqa: BLE001 - one broken (plugin) provider must not hide the others
                log.exception("building provider %r failed", name)
                out[name] = {"available": False, "detail": "internal error (see server log)"}
            else:
                out[name] = {"available": True, "detail": "built from the config (keys, SDK and binary present); "
                                                          "not contacted"}
        return out


def _clip(text: str | None, size: int = 300) -> str | None:
    return text if text is None or len(text) <= size else text[:size] + "…"
