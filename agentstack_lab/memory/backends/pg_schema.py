"""The PostgreSQL memory schema: named, append-only migrations of their own (not the SQLite list).

Only memory moves to PostgreSQL (``memory``, tags, versions, relationships, ``memory_vec``,
``sessions``); the engine's tables (agents, tasks, events, decisions) stay in the workspace's
SQLite file. Keyword search uses a stored generated ``tsvector`` (key weight A, content B, the
``english`` configuration: Snowball stemming, like FTS5's porter tokenizer) under a GIN index;
``memory_vec`` is made on first open with the embedder's dimension (as in SQLite), plus a pgvector
HNSW index when ``memory.postgres.index = "hnsw"``. Migrations run under an advisory lock, so two
processes opening a new database at once apply each one exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["MIGRATIONS", "migrate", "MIGRATION_LOCK"]

MIGRATION_LOCK = 0x61677374   # pg_advisory_xact_lock key held while migrating ("agst")


def pg_0001_memory(cur: Any) -> None:
    """Entries with a generated tsvector, tags, versions (kept by trigger, as in SQLite), relationships."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    cur.execute("""
        CREATE TABLE memory (
            rid BIGSERIAL PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            key TEXT NOT NULL,
            namespace TEXT NOT NULL DEFAULT 'default',
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            metadata JSONB NOT NULL DEFAULT '{}',
            agent_id TEXT,
            version INTEGER NOT NULL DEFAULT 1,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', key), 'A')
                                              || setweight(to_tsvector('english', content), 'B')) STORED,
            UNIQUE (namespace, key)
        )""")
    cur.execute("CREATE INDEX idx_memory_ns_updated ON memory (namespace, updated_at)")
    cur.execute("CREATE INDEX idx_memory_updated ON memory (updated_at)")
    cur.execute("CREATE INDEX idx_memory_tsv ON memory USING gin (tsv)")
    cur.execute("""
        CREATE TABLE memory_tags (
            memory_rid BIGINT NOT NULL REFERENCES memory (rid) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (memory_rid, tag)
        )""")
    cur.execute("CREATE INDEX idx_memory_tags_tag ON memory_tags (tag)")
    cur.execute("""
        CREATE TABLE memory_versions (
            memory_rid BIGINT NOT NULL REFERENCES memory (rid) ON DELETE CASCADE,
            version INTEGER NOT NULL,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            metadata JSONB NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_rid, version)
        )""")
    cur.execute("""
        CREATE FUNCTION memory_version_keep() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.content_hash IS DISTINCT FROM NEW.content_hash THEN
                INSERT INTO memory_versions (memory_rid, version, content, content_hash, metadata, updated_at)
                VALUES (OLD.rid, OLD.version, OLD.content, OLD.content_hash, OLD.metadata, OLD.updated_at)
                ON CONFLICT (memory_rid, version) DO UPDATE SET content = EXCLUDED.content,
                    content_hash = EXCLUDED.content_hash, metadata = EXCLUDED.metadata,
                    updated_at = EXCLUDED.updated_at;
            END IF;
            RETURN NEW;
        END $$""")
    cur.execute("CREATE TRIGGER memory_version_keep AFTER UPDATE OF content ON memory"
                " FOR EACH ROW EXECUTE FUNCTION memory_version_keep()")
    cur.execute("""
        CREATE TABLE memory_relationships (
            from_rid BIGINT NOT NULL REFERENCES memory (rid) ON DELETE CASCADE,
            to_rid BIGINT NOT NULL REFERENCES memory (rid) ON DELETE CASCADE,
            type TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (from_rid, to_rid, type)
        )""")
    cur.execute("CREATE INDEX idx_memory_rel_to ON memory_relationships (to_rid)")


def pg_0002_sessions(cur: Any) -> None:
    """Sessions live with the memory whose ``session:{id}`` namespaces they own (token: sha256 only)."""
    cur.execute("""
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            name TEXT,
            status TEXT NOT NULL CHECK (status IN ('active', 'ended')),
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            metadata TEXT NOT NULL DEFAULT '{}',
            token_hash TEXT
        )""")
    cur.execute("CREATE INDEX idx_sessions_status ON sessions (status, started_at)")


def pg_0003_vector_index(cur: Any) -> None:
    """The embedder record (one row); ``memory_vec`` itself is made on first open with its dimension."""
    cur.execute("""
        CREATE TABLE vector_index (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            embedder TEXT NOT NULL,
            model TEXT NOT NULL,
            dimensions INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        )""")


def pg_0004_reembed(cur: Any) -> None:
    """``memory reembed`` on PostgreSQL: the embedder of an unfinished run, and a generation per re-embedding.

    The new vectors themselves go to ``memory_reembed_vec``, made by each run with its dimension (see
    :mod:`agentstack_lab.memory.reembed`).
    """
    cur.execute("""
        CREATE TABLE vector_reembed (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            embedder TEXT NOT NULL,
            model TEXT NOT NULL,
            dimensions INTEGER NOT NULL,
            started_at DOUBLE PRECISION NOT NULL
        )""")
    cur.execute("ALTER TABLE vector_index ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")


MIGRATIONS: list[tuple[str, Callable[[Any], None]]] = [
    ("pg_0001_memory", pg_0001_memory),
    ("pg_0002_sessions", pg_0002_sessions),
    ("pg_0003_vector_index", pg_0003_vector_index),
    ("pg_0004_reembed", pg_0004_reembed),
]


def migrate(raw: Any) -> list[str]:
    """Apply the pending migrations on psycopg connection ``raw``; returns the names applied now."""
    done: list[str] = []
    with raw.transaction(), raw.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        cur.execute("CREATE TABLE IF NOT EXISTS agentstack_migrations"
                    " (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)")
        cur.execute("SELECT name FROM agentstack_migrations")
        applied = {r[0] for r in cur.fetchall()}
        for name, fn in MIGRATIONS:
            if name not in applied:
                fn(cur)
                cur.execute("INSERT INTO agentstack_migrations (name, applied_at) VALUES (%s, %s)", (name, time.time()))
                done.append(name)
    return done
