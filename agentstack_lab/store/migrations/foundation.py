"""The foundation's migration steps: memory (FTS5, tags, versions, relationships), vectors, sessions, tasks.

The memory tables are the ones both memory backends mirror (PostgreSQL's own list is
:mod:`agentstack_lab.memory.backends.pg_schema`); ``memory_vec`` is not made here but by
``memory/vectors.py`` on first open, because its dimension comes from the configured embedder. Steps
only: their names and order, and the bookkeeping, live in :mod:`agentstack_lab.store.migrations`.
A shipped step is never edited (its SQL text is what existing files hold in ``sqlite_master``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["foundation_memory", "foundation_vectors", "foundation_sessions_tasks", "foundation_memory_bulk", "foundation_memory_lean_inserts", "foundation_fts_hashsize", "foundation_session_tokens",
           "foundation_fts_own_file", "foundation_memory_reembed"]


def foundation_memory(conn: Any) -> None:
    """Memory entries (docs/notebook.md plus content hash, tags, versions), FTS5 index kept in step by triggers.

    ``rid`` is an explicit AUTOINCREMENT rowid so FTS and vector rows can never be re-pointed by a VACUUM.
    The sqlite-vec table ``memory_vec`` is created by ``memory/vectors.py`` on first open, because its
    dimension comes from the configured embedder (recorded in ``vector_index``).
    """
    conn.execute("""
        CREATE TABLE memory (
            rid INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            key TEXT NOT NULL,
            namespace TEXT NOT NULL DEFAULT 'default',
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            agent_id TEXT DEFAULT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (namespace, key)
        )""")
    conn.execute("CREATE INDEX idx_memory_ns_updated ON memory(namespace, updated_at)")
    conn.execute("CREATE INDEX idx_memory_updated ON memory(updated_at)")
    conn.execute("CREATE INDEX idx_memory_agent ON memory(agent_id)")
    conn.execute("""
        CREATE VIRTUAL TABLE memory_fts USING fts5(
            key, content, content='memory', content_rowid='rid', tokenize='porter unicode61')""")
    conn.execute("""
        CREATE TRIGGER memory_ai AFTER INSERT ON memory BEGIN
            INSERT INTO memory_fts(rowid, key, content) VALUES (NEW.rid, NEW.key, NEW.content);
        END""")
    conn.execute("""
        CREATE TRIGGER memory_ad AFTER DELETE ON memory BEGIN
            INSERT INTO memory_fts(memory_fts, rowid, key, content) VALUES ('delete', OLD.rid, OLD.key, OLD.content);
        END""")
    conn.execute("""
        CREATE TRIGGER memory_au AFTER UPDATE OF key, content ON memory BEGIN
            INSERT INTO memory_fts(memory_fts, rowid, key, content) VALUES ('delete', OLD.rid, OLD.key, OLD.content);
            INSERT INTO memory_fts(rowid, key, content) VALUES (NEW.rid, NEW.key, NEW.content);
        END""")
    # tags, previous versions and relationships hang off an entry and go with it (ON DELETE CASCADE)
    conn.execute("""
        CREATE TABLE memory_tags (
            memory_rid INTEGER NOT NULL REFERENCES memory(rid) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (memory_rid, tag)
        ) WITHOUT ROWID""")
    conn.execute("CREATE INDEX idx_memory_tags_tag ON memory_tags(tag)")
    conn.execute("""
        CREATE TABLE memory_versions (
            memory_rid INTEGER NOT NULL REFERENCES memory(rid) ON DELETE CASCADE,
            version INTEGER NOT NULL,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            metadata TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (memory_rid, version)
        )""")
    conn.execute("""
        CREATE TRIGGER memory_version_keep AFTER UPDATE OF content ON memory
        WHEN OLD.content_hash IS NOT NEW.content_hash BEGIN
            INSERT OR REPLACE INTO memory_versions (memory_rid, version, content, content_hash, metadata, updated_at)
            VALUES (OLD.rid, OLD.version, OLD.content, OLD.content_hash, OLD.metadata, OLD.updated_at);
        END""")
    conn.execute("""
        CREATE TABLE memory_relationships (
            from_rid INTEGER NOT NULL REFERENCES memory(rid) ON DELETE CASCADE,
            to_rid INTEGER NOT NULL REFERENCES memory(rid) ON DELETE CASCADE,
            type TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (from_rid, to_rid, type)
        )""")
    conn.execute("CREATE INDEX idx_memory_rel_to ON memory_relationships(to_rid)")


def foundation_vectors(conn: Any) -> None:
    """Embedder record (one row) and the change log that keeps in-memory vector copies in step."""
    conn.execute("""
        CREATE TABLE vector_index (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            embedder TEXT NOT NULL,
            model TEXT NOT NULL,
            dimensions INTEGER NOT NULL,
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE TABLE memory_vec_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, rid INTEGER NOT NULL)")
    conn.execute("""CREATE TRIGGER memory_vlog_ai AFTER INSERT ON memory BEGIN
            INSERT INTO memory_vec_log (rid) VALUES (NEW.rid); END""")
    conn.execute("""CREATE TRIGGER memory_vlog_ad AFTER DELETE ON memory BEGIN
            INSERT INTO memory_vec_log (rid) VALUES (OLD.rid); END""")
    conn.execute("""CREATE TRIGGER memory_vlog_au AFTER UPDATE OF content, namespace, agent_id ON memory BEGIN
            INSERT INTO memory_vec_log (rid) VALUES (NEW.rid); END""")


def foundation_sessions_tasks(conn: Any) -> None:
    """Sessions (docs/notebook.md) and tasks; a session's memory namespace is ``session:{id}``."""
    conn.execute("""
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            name TEXT,
            status TEXT NOT NULL CHECK (status IN ('active', 'ended')),
            started_at REAL NOT NULL,
            ended_at REAL,
            metadata TEXT NOT NULL DEFAULT '{}'
        )""")
    conn.execute("CREATE INDEX idx_sessions_status ON sessions(status, started_at)")
    conn.execute("""
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
            agent_type TEXT NOT NULL,
            status TEXT NOT NULL,
            input TEXT,
            output TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            completed_at REAL
        )""")
    conn.execute("CREATE INDEX idx_tasks_session ON tasks(session_id, status)")


def foundation_memory_bulk(conn: Any) -> None:
    """Let ``Memory.store_many`` index a batch of new rows in one statement instead of row by row.

    While a row exists in ``memory_bulk`` (only ever inside the writer's own transaction) the
    per-row insert triggers stand aside; the writer then fills ``memory_fts`` and ``memory_vec_log``
    for exactly its new rowid range with ``INSERT ... SELECT`` before committing.
    """
    conn.execute("CREATE TABLE memory_bulk (active INTEGER NOT NULL)")
    conn.execute("DROP TRIGGER memory_ai")
    conn.execute("""
        CREATE TRIGGER memory_ai AFTER INSERT ON memory WHEN NOT EXISTS (SELECT 1 FROM memory_bulk) BEGIN
            INSERT INTO memory_fts(rowid, key, content) VALUES (NEW.rid, NEW.key, NEW.content);
        END""")
    conn.execute("DROP TRIGGER memory_vlog_ai")
    conn.execute("""CREATE TRIGGER memory_vlog_ai AFTER INSERT ON memory WHEN NOT EXISTS (SELECT 1 FROM memory_bulk)
        BEGIN INSERT INTO memory_vec_log (rid) VALUES (NEW.rid); END""")


def foundation_memory_lean_inserts(conn: Any) -> None:
    """Cheaper inserts into ``memory``: one index fewer and plain per-row insert triggers.

    ``idx_memory_agent`` goes: agent filters always come with a namespace or the ``updated_at``
    order, which have their own indexes. ``Memory.store_many`` now sets the insert triggers aside by
    dropping and re-creating them inside its transaction (see ``memory/api.py``), so the
    ``memory_bulk`` switch and the ``WHEN`` clause it needed are removed.
    """
    conn.execute("DROP INDEX IF EXISTS idx_memory_agent")
    conn.execute("DROP TRIGGER memory_ai")
    conn.execute("""
        CREATE TRIGGER memory_ai AFTER INSERT ON memory BEGIN
            INSERT INTO memory_fts(rowid, key, content) VALUES (NEW.rid, NEW.key, NEW.content);
        END""")
    conn.execute("DROP TRIGGER memory_vlog_ai")
    conn.execute("""CREATE TRIGGER memory_vlog_ai AFTER INSERT ON memory BEGIN
            INSERT INTO memory_vec_log (rid) VALUES (NEW.rid); END""")
    conn.execute("DROP TABLE memory_bulk")


def foundation_fts_hashsize(conn: Any) -> None:
    """FTS5 keeps up to 8 MB of pending terms in memory before writing a segment (default 1 MB).

    A ``store_many`` of 10k entries then writes one segment at commit instead of several that
    FTS5 must merge again: the FTS fill costs about half as much; queries measured the same.
    Stored in ``memory_fts_config``, so every connection and process uses it.
    """
    conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('hashsize', 8388608)")


def foundation_session_tokens(conn: Any) -> None:
    """The sha256 of a session's secret token (MCP session privacy; the token itself is never stored).

    A session started through MCP gets a 256-bit token, returned once; every MCP tool that reads,
    writes or ends the session's private namespace must present it. NULL: a session started
    locally (CLI, Python API, notebook), which MCP clients cannot use until its owner issues a token.
    """
    conn.execute("ALTER TABLE sessions ADD COLUMN token_hash TEXT")


def foundation_fts_own_file(conn: Any) -> None:
    """The full-text index moves to a file of its own, ``fts/<db name>``, filled from the change log.

    Its FTS5 rows were written inside every memory write, on SQLite's one writer of this file (half of
    a bulk load's work at 1M entries); see :mod:`agentstack_lab.memory.fts_file`. The triggers that
    kept ``memory_fts`` in step go with it; ``memory_vec_log`` (every insert, delete and content
    change of ``memory``) is the log the new index follows, and it is built from ``memory`` on first use.
    """
    for name in ("memory_ai", "memory_ad", "memory_au"):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP TABLE IF EXISTS memory_fts")


def foundation_memory_reembed(conn: Any) -> None:
    """Where ``memory reembed`` puts the new vectors until they replace ``memory_vec`` (``memory/reembed.py``).

    ``memory_reembed_vec`` holds one vector per entry with the content hash it was made from (a changed entry
    is embedded again); ``vector_reembed`` names the embedder they come from, so an interrupted run
    resumes with the same one and starts over with another. ``vector_index.generation`` counts the
    re-embeddings: every process's vector index follows it (``created_at`` names the database, and
    the full-text index keeps following that).
    """
    conn.execute("ALTER TABLE vector_index ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
    conn.execute("CREATE TABLE memory_reembed_vec (rid INTEGER PRIMARY KEY, content_hash TEXT NOT NULL,"
                 " embedding BLOB NOT NULL)")
    conn.execute("""
        CREATE TABLE vector_reembed (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            embedder TEXT NOT NULL,
            model TEXT NOT NULL,
            dimensions INTEGER NOT NULL,
            started_at REAL NOT NULL
        )""")
