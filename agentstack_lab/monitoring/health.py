"""Liveness, readiness and a detailed check of the workspace (docs/tasks.md).

``live``: this process answers. ``ready``: the database opens, takes a write, its migrations are
current and its ``events`` table is there, and the memory backend answers (PostgreSQL when
``memory.backend`` says so; down is unhealthy). ``detailed``: ``ready`` plus the embedder (it loads, and
its name, model and dimension match what the database recorded for its vectors, else degraded: keyword
search still works until ``memory reembed``; a remote one that does not answer is degraded), the default provider (configured: its key is set; a remote one must answer
over HTTP, else degraded), the queue (depth; claims whose lease expired = a worker died and nobody reclaimed them yet), stuck agents
(unfinished, no state change for ``monitoring.max_time_without_deliverable_s``) and agents the
resource monitor paused. Each check is ``healthy``, ``degraded`` (works, with a warning) or
``unhealthy``; the report's status is the worst. Surfaces: ``agentstack-lab system health`` (exit 0/1/2),
MCP ``system_health``, ``/agentstack/api/health/{live,ready,detailed}`` (503 when unhealthy).

The queue checks read ``task_queue`` (``coordination/``, durable queue): without that table they say so.
Every network probe (PostgreSQL, Ollama, OpenAI, Anthropic) gives up after ``PROBE_TIMEOUT_S``; the HTTP
probes send no key (any HTTP answer counts: the key itself is the provider check's business).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentstack_lab.events import UNFINISHED
from agentstack_lab.validation import seconds_text

if TYPE_CHECKING:
    from agentstack_lab.config import Config
    from agentstack_lab.embeddings.registry import Embedder
    from agentstack_lab.store.connection import SQLiteDatabase
    from agentstack_lab.store.protocol import Database

__all__ = ["check", "Checked", "KINDS", "STATUSES", "EXIT_CODES", "PROBE_TIMEOUT_S", "worst"]


class Checked(Protocol):
    """What the checks read (a :class:`~agentstack_lab.workspace.Workspace` has it; this layer sits below it)."""

    config: Config

    @property
    def db(self) -> SQLiteDatabase: ...

    @property
    def db_path(self) -> Path: ...

    @property
    def embedder(self) -> Embedder: ...

    def get_provider(self, name: str | None = None, **overrides: Any) -> Any: ...

KINDS = ("live", "ready", "detailed")
STATUSES = ("healthy", "degraded", "unhealthy")
EXIT_CODES = {"healthy": 0, "degraded": 1, "unhealthy": 2}
PROBE_TIMEOUT_S = 2.0  # a health check answers in seconds, whatever the configured request timeouts


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
    try:  # every run appends its events here; without the table no surface can follow a run
        if _has_table(db, "events"):
            last = db.query("SELECT max(seq) FROM events")[0][0]
            out.append(_item("events", "healthy", f"last sequence number {last or 0}"))
        else:
            out.append(_item("events", "unhealthy", "the events table is missing"))
    except Exception as exc:  # noqa: BLE001
        out.append(_item("events", "unhealthy", _error(exc)))
    return out, db


def _memory(ws: Checked) -> dict[str, Any]:
    """The memory backend answers: the workspace database, or the configured PostgreSQL (a fresh connection)."""
    cfg = ws.config.memory
    if cfg.backend != "postgres":
        return _item("memory", "healthy", "sqlite (the workspace database)")
    pg = cfg.postgres
    if pg.dsn is None or not pg.dsn.get_secret_value().strip():
        return _item("memory", "unhealthy", "memory.postgres.dsn: required when memory.backend is 'postgres'")
    try:
        from agentstack_lab.memory.backends.postgres import PgDatabase

        db = PgDatabase(pg.dsn.get_secret_value(), connect_timeout=min(pg.connect_timeout, PROBE_TIMEOUT_S),
                        migrate=False)
        try:
            db.query("SELECT 1")
        finally:
            db.close()
    except Exception as exc:  # noqa: BLE001 - the message names the server, never the password
        return _item("memory", "unhealthy", _error(exc))
    return _item("memory", "healthy", f"postgres at {db.path} answers")


def _endpoint(name: str, config: Any) -> str | None:
    """The URL a built-in remote provider or embedder ``name`` answers on (configured base URL), else None."""
    from agentstack_lab.providers.registry import provider_settings

    base = provider_settings(config, name).get("base_url")
    if name == "ollama":
        from agentstack_lab.providers.ollama import ollama_base_url

        return ollama_base_url(base) + "/api/version"
    if name == "openai":
        return (base or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/") + "/models"
    if name == "anthropic":
        return (base or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com").rstrip("/") + "/v1/models"
    return None


def _unanswered(name: str, config: Any) -> str | None:
    """Why remote ``name`` does not answer an HTTP GET within ``PROBE_TIMEOUT_S``; None when it answers (or is local)."""
    url = _endpoint(name, config)
    if url is None:
        return None
    import httpx

    shown = url
    try:
        parsed = httpx.URL(url)
        shown = str(parsed.copy_with(username=None, password=None, query=None))
        httpx.get(parsed, timeout=PROBE_TIMEOUT_S, follow_redirects=False)
    except Exception as exc:  # noqa: BLE001 - refused, timed out, unresolvable, malformed: it does not answer
        return f"{name} at {shown} does not answer: {_error(exc)}"
    return None


def _embedder(ws: Checked, db: Database) -> dict[str, Any]:
    down = _unanswered(ws.config.memory.embedder, ws.config)
    if down is not None:  # memory search falls back to keywords meanwhile: degraded, not down
        return _item("embedder", "degraded", down)
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
        # keyword search, reads and deletes still work; vector search and writes wait for `memory reembed`
        return _item("embedder", "degraded",
                     f"the database's vectors were made by {row[0]!r} (model {row[1]!r}, {row[2]} dims) but the "
                     f"configuration asks for {name!r} (model {model!r}, {dims} dims); keyword search works,"
                     " run `agentstack-lab memory reembed`")
    recorded = "matches the database" if row is not None else "no vectors recorded yet"
    return _item("embedder", "healthy", f"{name} ({model}, {dims} dims; {recorded})")


def _provider(ws: Checked) -> dict[str, Any]:
    name = ws.config.providers.default
    try:
        ws.get_provider(name)
    except Exception as exc:  # noqa: BLE001 - a missing key is the usual answer
        return _item("provider", "degraded", f"default provider {name!r} is not usable: {_error(exc)}")
    down = _unanswered(name, ws.config)
    if down is not None:
        return _item("provider", "degraded", f"default provider {name!r}: {down}")
    return _item("provider", "healthy", f"default provider {name!r} configured")


def _has_table(db: Database, name: str) -> bool:
    return bool(db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))


def _queue(db: Database, now: float) -> list[dict[str, Any]]:
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


def _agents(ws: Checked, db: Database, now: float) -> list[dict[str, Any]]:
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
        out.append(_item("agents", "degraded", f"{len(stuck)} stuck (no change for > {seconds_text(limit)}): {names}",
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
        checks.append(_memory(ws))
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


def _readable(db: Database) -> bool:
    with contextlib.suppress(Exception):
        db.query("SELECT count(*) FROM agents")
        return True
    return False
