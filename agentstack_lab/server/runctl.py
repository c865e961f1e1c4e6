"""The Agents panel's run controls and what it says about where it is.

``POST runs/ID/stop``, ``/pause``, ``/resume`` and ``/comment {"text": ...}`` act on a run of any process
through the same path as ``agentstack-lab agent stop|pause|resume|comment`` and the notebook's controls:
a run this server started is acted on directly; any other (a kernel's ``%agent``, a terminal's ``agent
run``, a worker's) gets a row in the workspace's intervention queue, which that run applies within its
poll. The target is the run's root agent (stopping it stops the whole run) or ``{"agentId": ...}``, one
of that run's agents.

``GET info``: the workspace this server serves and its root folder, for the panel's header.

Paths a run recorded (``notebook:/abs/path.ipynb``) reach the panel relative to the server's root folder
(``notebook``), and only when they are inside it: the panel opens them with the document manager.
"""

from __future__ import annotations

import os
from pathlib import Path

import tornado

from agentstack_lab.errors import AgentstackError, NotFoundError, UsageError
from agentstack_lab.server.base import PREFIX, BaseHandler, person_name

__all__ = ["MAX_COMMENT", "notebook_link", "run_control_routes"]

MAX_COMMENT = 20_000   # characters of a comment typed in the panel


def notebook_link(origin: str | None, root: str | None) -> str | None:
    """The root-relative path (``/`` separators) of a ``notebook:PATH`` origin inside ``root``; else None."""
    if not origin or not root or not origin.startswith("notebook:"):
        return None
    raw = origin[len("notebook:"):]
    try:
        base = Path(root).resolve()
        path = Path(raw) if os.path.isabs(raw) else base / raw
        rel = path.resolve().relative_to(base)
    except (OSError, ValueError):   # outside the root (or unreadable): no link, the origin text stays
        return None
    return rel.as_posix() if rel.parts else None


def shown_path(path: str | os.PathLike[str], root: str | None) -> str:
    """``path`` relative to ``root`` when inside it (``.`` for the root itself), else as given."""
    if root:
        try:
            rel = Path(path).resolve().relative_to(Path(root).resolve())
            return rel.as_posix() or "."
        except (OSError, ValueError):
            pass
    return str(path)


class RunActionHandler(BaseHandler):
    """``POST runs/ID/(stop|pause|resume|comment)``: one line and a 4xx for anything it cannot do."""

    @tornado.web.authenticated
    async def post(self, run_ref: str, action: str) -> None:
        from agentstack_lab.engine.activity import resolve_run

        data = self.body()
        text, agent = data.get("text"), data.get("agentId")
        if action == "comment":
            if not isinstance(text, str) or not text.strip():
                raise UsageError("comment needs a non-empty 'text' in the request body")
            if len(text) > MAX_COMMENT:
                raise UsageError(f"comment: 'text' is {len(text):,} characters, over the limit of {MAX_COMMENT:,}")
        elif text is not None:
            raise UsageError(f"{action} takes no 'text' (only comment does)")
        if agent is not None and (not isinstance(agent, str) or not agent.strip()):
            raise UsageError("'agentId' must be a non-empty string when given")
        by = person_name(self)

        def target() -> tuple[str, str]:
            from agentstack_lab.engine.liveness import reap_orphans

            try:
                run_id = resolve_run(self.db, run_ref)
            except AgentstackError:   # resolve_run's own: one line already (404 for no such run)
                raise
            except (LookupError, ValueError) as exc:
                raise NotFoundError(f"no run {run_ref[:40]!r} in this workspace") from exc
            reap_orphans(self.db)   # a dead process's run is failed first, so it refuses the action
            agent_id = agent or run_id
            if agent is not None:
                rows = self.db.query("SELECT id FROM agents WHERE run_id = ? AND (id = ? OR substr(id, 1, ?) = ?)"
                                     " LIMIT 2", (run_id, agent, len(agent), agent))
                if len(rows) != 1:
                    raise UsageError(f"agent {agent!r} is not {'one' if rows else 'an'} agent of run {run_id[:8]}")
                agent_id = rows[0][0]
            return run_id, agent_id

        run_id, agent_id = await self.state.off_loop(target)
        local = self.state.runs.get(run_id)
        if local is not None and not local.done:
            applied = "applied"
            if action == "stop":
                local.stop(agent_id, reason=f"stopped from JupyterLab by {by}")
            else:
                status = {"pause": "paused", "resume": "running"}.get(action)
                local.intervene(agent_id, user_comment=text if action == "comment" else None, status=status,
                                surface="lab", by=by)
        else:
            from agentstack_lab.decisions import Interventions

            await self.state.off_loop(
                lambda: Interventions(self.db).request(agent_id, action, text, surface="lab", by=by))
            applied = "queued"
        self.reply({"runId": run_id, "agentId": agent_id, "action": action, "applied": applied}, status=202)


class InfoHandler(BaseHandler):
    """``GET info``: ``{"workspace", "database", "root"}`` — the workspace folder relative to the root when inside."""

    @tornado.web.authenticated
    def get(self) -> None:
        ws, root = self.state.workspace, self.state.root_dir
        self.reply({"workspace": shown_path(ws.root, root), "database": shown_path(ws.db_path, root),
                    "root": str(root) if root else None})


def run_control_routes() -> list[tuple[str, type]]:
    return [
        (rf"/{PREFIX}/runs/([^/]+)/(stop|pause|resume|comment)", RunActionHandler),
        (rf"/{PREFIX}/info", InfoHandler),
    ]
