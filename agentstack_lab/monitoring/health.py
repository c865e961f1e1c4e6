"""Liveness, readiness and a detailed check of the workspace (design seed §11.3).

``live``: this process answers. ``ready``: the database opens, takes a write and its migrations are
current. ``detailed``: ``ready`` plus the embedder (it loads, and its name, model and dimension match
what the database recorded for its vectors), the default provider (configured: its key is set), the
queue (depth; claims whose lease expired = a worker died and nobody reclaimed them yet), stuck agents
(unfinished, no state change for ``monitoring.max_time_without_deliverable_s``) and agents the
resource monitor paused. Each check is ``healthy``, ``degraded`` (works, with a warning) or
``unhealthy``; the report's status is the worst. Surfaces: ``agentstack-lab system health`` (exit 0/1/2),
MCP ``system_health``, ``/agentstack/api/health/{live,ready,detailed}`` (503 when unhealthy).

The queue checks read ``task_queue`` (``coordination/``, durable queue): without that table they say so.
"""

from __future__ import annotations

import contextlib
import json
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentstack_lab.events import UNFINISHED

if TYPE_CHECKING:
    from agentstack_lab.config import Config
    from agentstack_lab.embeddings.registry import Embedder
    from agentstack_lab.store.connection import Database

__all__ = ["check", "Checked", "KINDS", "STATUSES", "EXIT_CODES", "worst"]


class Checked(Protocol):
    """What the checks read (a :class:`~agentstack_lab.workspace.Workspace` has it; this layer sits below it)."""

    config: Config

    @property
    def db(self) -> Database: ...

    @property
    def db_path(self) -> Path: ...

    @property
    def embedder(self) -> Embedder: ...

    def get_provider(self, name: str | None = None, **overrides: Any) -> Any: ...

KINDS = ("live", "ready", "detailed")
STATUSES = ("healthy", "degraded", "unhealthy")
EXIT_CODES = {"healthy": 0, "degraded": 1, "unhealthy": 2}


def _item(name: str, status: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "detail": detail, **extra}


def _error(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def worst(checks: list[dict[str, Any]]) -> str:
    """The worst status among ``checks``."""
    return max((c["status"] for c in checks), key=STATUSES.index, default="healthy")


def _db_checks(ws: Checked) -> tuple[list[dict[str, Any]], Any]:
    from agentstack_lab.store.migrations import MIGRATIONS, applied

    try:
        db = ws.db
        db.query("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - a health check reports, it does not raise
        return [_item("database", "unhealthy", _error(exc))], None
    out = [_item("database", "healthy", str(ws.db_path))]
    conn = db.conn
    try:  # a real write to the file (a TEMP table would not touch it), rolled back
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE _agentstack_health_probe (x)")
        finally:
            conn.execute("ROLLBACK")
        out.append(_item("writable", "healthy"))
    except Exception as exc:  # noqa: BLE001
        out.append(_item("writable", "unhealthy", _error(exc)))
    try:
        done = set(applied(db))
        pending = [n for n, _ in MIGRATIONS if n not in done]
        unknown = sorted(done - {n for n, _ in MIGRATIONS})
        if pending:
            out.append(_item("migrations", "unhealthy", f"pending: {', '.join(pending)}"))
        elif unknown:  # a newer agentstack-lab migrated this file
            out.append(_item("migrations", "degraded", f"applied by a newer version: {', '.join(unknown)}"))
        else:
            out.append(_item("migrations", "healthy", f"{len(MIGRATIONS)} applied"))
    except Exception as exc:  # noqa: BLE001
        out.append(_item("migrations", "unhealthy", _error(exc)))
    return out, db


def _embedder(ws: Checked, db: Any) -> dict[str, Any]:
    try:
        emb = ws.embedder
        vectors = emb.embed(["agentstack-lab health check"])
        got = len(vectors[0])
    except Exception as exc:  # noqa: BLE001
        return _item("embedder", "unhealthy", f"does not load: {_error(exc)}")
    name, model, dims = getattr(emb, "name", ws.config.memory.embedder), getattr(emb, "model", "?"), ws.config.memory.vector.dimensions
    if got != dims:
        return _item("embedder", "unhealthy", f"{name} returned {got}-dimensional vectors, configured {dims}")
    row = None
    if db is not None:
        with contextlib.suppress(Exception):
            row = db.query("SELECT embedder, model, dimensions FROM vector_index WHERE id = 1")
            row = row[0] if row else None
    if row is not None and (row[0], row[1], int(row[2])) != (name, model, dims):
        return _item("embedder", "unhealthy",
                     f"the database's vectors were made by {row[0]!r} (model {row[1]!r}, {row[2]} dims) but the "
                     f"configuration asks for {name!r} (model {model!r}, {dims} dims)")
    recorded = "matches the database" if row is not None else "no vectors recorded yet"
    return _item("embedder", "healthy", f"{name} ({model}, {dims} dims; {recorded})")


def _provider(ws: Checked) -> dict[str, Any]:
    name = ws.config.providers.default
    try:
        ws.get_provider(name)
    except Exception as exc:  # noqa: BLE001 - a missing key is the usual answer
        return _item("provider", "degraded", f"default provider {name!r} is not usable: {_error(exc)}")
    return _item("provider", "healthy", f"default provider {name!r} configured")


def _has_table(db: Any, name: str) -> bool:
    return bool(db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))


def _queue(db: Any, now: float) -> list[dict[str, Any]]:
    if not _has_table(db, "task_queue"):
        return [_item("queue", "healthy", "no durable queue in this database (coordination not installed)",
                      depth=0)]
    depth = db.query("SELECT count(*) FROM task_queue WHERE state = 'pending'")[0][0]
    stale = db.query("SELECT id, worker_id, lease_expires_at FROM task_queue WHERE state = 'claimed' "
                     "AND lease_expires_at IS NOT NULL AND lease_expires_at < ? ORDER BY lease_expires_at", (now,))
    out = [_item("queue", "healthy", f"{depth} pending", depth=depth)]
    if stale:
        ids = ", ".join(f"{r[0][:8]} (worker {r[1] or '?'}, expired {now - r[2]:.0f}s ago)" for r in stale[:5])
        out.append(_item("leases", "degraded", f"{len(stale)} stale lease(s): {ids}", stale=len(stale)))
    else:
        out.append(_item("leases", "healthy", "no stale leases", stale=0))
    return out


def _seconds_since(iso: str | None, now: float) -> float:
    if not iso:
        return 0.0
    with contextlib.suppress(ValueError):
        return now - datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    return 0.0


def _agents(ws: Checked, db: Any, now: float) -> list[dict[str, Any]]:
    limit = ws.config.monitoring.max_time_without_deliverable_s
    rows = db.query("SELECT id, type, status, updated_at, metadata FROM agents "
                    f"WHERE status IN ({', '.join(repr(s) for s in UNFINISHED)})")
    paused, stuck = [], []
    for r in rows:
        meta = {}
        with contextlib.suppress(ValueError, TypeError):
            meta = json.loads(r[4] or "{}")
        if meta.get("paused"):
            paused.append(r)
        elif r[2] == "running" and _seconds_since(r[3], now) > limit:
            stuck.append(r)
    out = []
    if stuck:
        names = ", ".join(f"{r[1]} {r[0][:8]}" for r in stuck[:5])
        out.append(_item("agents", "degraded", f"{len(stuck)} stuck (no change for > {limit:g}s): {names}",
                         stuck=len(stuck), paused=len(paused)))
    else:
        out.append(_item("agents", "healthy", f"{len(rows)} unfinished, none stuck; {len(paused)} paused",
                         stuck=0, paused=len(paused)))
    return out


def check(ws: Checked, kind: str = "detailed") -> dict[str, Any]:
    """The health report of ``kind`` (``live``, ``ready`` or ``detailed``) for workspace ``ws``."""
    if kind not in KINDS:
        from agentstack_lab.errors import UsageError

        raise UsageError(f"health check kind must be one of {', '.join(KINDS)}; got {kind!r}")
    now = time.time()
    checks: list[dict[str, Any]] = [_item("process", "healthy", "answering")]
    if kind in ("ready", "detailed"):
        found, db = _db_checks(ws)
        checks += found
        if kind == "detailed":
            checks.append(_embedder(ws, db))
            checks.append(_provider(ws))
            if db is not None and _readable(db):
                for part in (_queue, lambda d, n: _agents(ws, d, n)):
                    try:
                        checks += part(db, now)
                    except Exception as exc:  # noqa: BLE001
                        checks.append(_item("queue/agents", "degraded", _error(exc)))
    return {"status": worst(checks), "kind": kind, "checks": checks, "at": now}


def _readable(db: Any) -> bool:
    with contextlib.suppress(Exception):
        db.query("SELECT count(*) FROM agents")
        return True
    return False
