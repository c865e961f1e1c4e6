"""Liveness, readiness and a detailed check of the workspace, for ``/agentstack/api/health/*``.

``live``: the server answers. ``ready``: the database opens, is writable and its migrations are
current. ``detailed``: ``ready`` plus the embedder's recorded dimension and stuck agents. Status is
``healthy``, ``degraded`` (works, with a warning) or ``unhealthy`` (503).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentstack_lab.embeddings.registry import Embedder
    from agentstack_lab.store.connection import Database

__all__ = ["check", "Checked"]


class Checked(Protocol):
    """What the checks read (a :class:`~agentstack_lab.workspace.Workspace` has it; this layer sits below it)."""

    @property
    def db(self) -> Database: ...

    @property
    def db_path(self) -> Path: ...

    @property
    def embedder(self) -> Embedder: ...


def _db_checks(ws: Checked) -> list[dict[str, Any]]:
    from agentstack_lab.store.migrations import MIGRATIONS, applied

    out: list[dict[str, Any]] = []
    try:
        db = ws.db
        db.query("SELECT 1")
        out.append({"name": "database", "status": "healthy", "detail": str(ws.db_path)})
    except Exception as exc:  # noqa: BLE001 - a health check reports, it does not raise
        return [{"name": "database", "status": "unhealthy", "detail": f"{type(exc).__name__}: {exc}"}]
    try:
        with db.transaction() as conn:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS _health (x)")
        out.append({"name": "writable", "status": "healthy", "detail": ""})
    except Exception as exc:  # noqa: BLE001
        out.append({"name": "writable", "status": "unhealthy", "detail": f"{type(exc).__name__}: {exc}"})
    pending = [n for n, _ in MIGRATIONS if n not in set(applied(db))]
    out.append({"name": "migrations", "status": "unhealthy" if pending else "healthy",
                "detail": f"pending: {', '.join(pending)}" if pending else f"{len(MIGRATIONS)} applied"})
    return out


def check(ws: Checked, kind: str) -> dict[str, Any]:
    checks: list[dict[str, Any]] = [{"name": "server", "status": "healthy", "detail": ""}]
    if kind in ("ready", "detailed"):
        checks += _db_checks(ws)
    if kind == "detailed":
        try:
            emb = ws.embedder
            checks.append({"name": "embedder", "status": "healthy",
                           "detail": f"{getattr(emb, 'name', '?')} ({getattr(emb, 'dimensions', '?')} dims)"})
        except Exception as exc:  # noqa: BLE001
            checks.append({"name": "embedder", "status": "unhealthy", "detail": f"{type(exc).__name__}: {exc}"})
    worst = "healthy"
    for c in checks:
        if c["status"] == "unhealthy":
            worst = "unhealthy"
        elif c["status"] == "degraded" and worst == "healthy":
            worst = "degraded"
    return {"status": worst, "kind": kind, "checks": checks, "at": time.time()}
