"""Named, append-only schema migrations, recorded in ``_migrations``.

Never edit or reorder a migration that has shipped: append a new one. Each layer
adds its tables here, in order, as a named function taking a connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MIGRATIONS", "migration", "migrate", "applied"]

MIGRATIONS: list[tuple[str, Callable[[Any], None]]] = []


def migration(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register ``fn`` as the next migration, named after the function."""
    if any(name == fn.__name__ for name, _ in MIGRATIONS):
        raise ValueError(f"duplicate migration name {fn.__name__!r}")
    MIGRATIONS.append((fn.__name__, fn))
    return fn


def applied(db: Any) -> list[str]:
    return [r[0] for r in db.query("SELECT name FROM _migrations ORDER BY id")]


def migrate(db: Any, *, upto: int | None = None) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied now.

    ``upto`` applies only the first ``upto`` migrations: a database as an older release left it
    (the upgrade test starts from every such prefix).
    """
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
               " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))")
    done: list[str] = []
    for name, fn in MIGRATIONS[:upto]:
        with db.transaction() as conn:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name) VALUES (?)", (name,))
            done.append(name)
    return done


# --- migrations, in order (append only) ---------------------------------------------------------
# Foundation (memory, sessions, tasks, vectors) first; the engine's tables (agents, identities,
# events) after. See each layer's module for what the tables are for.


@migration
def engine_agents(conn: Any) -> None:
    """Agents of engine runs and of the spawner; status transitions are enforced in ``agents/spawner.py``."""
    conn.execute("""
        CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            status TEXT NOT NULL,
            run_id TEXT,
            parent_id TEXT,
            session_id TEXT,
            depth INTEGER NOT NULL DEFAULT 0,
            prompt TEXT,
            result TEXT,
            error TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            started_at TEXT,
            ended_at TEXT,
            updated_at TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX agents_session ON agents(session_id)")
    conn.execute("CREATE INDEX agents_run ON agents(run_id)")
    conn.execute("CREATE INDEX agents_status ON agents(status)")


@migration
def engine_identities(conn: Any) -> None:
    """Persistent agent identities (created → active ⇄ dormant → retired) and their audit trail."""
    conn.execute("""
        CREATE TABLE identities (
            agent_id TEXT PRIMARY KEY,
            agent_type TEXT NOT NULL,
            status TEXT NOT NULL,
            capabilities TEXT NOT NULL DEFAULT '[]',
            version INTEGER NOT NULL DEFAULT 1,
            display_name TEXT UNIQUE,
            description TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            last_active_at TEXT NOT NULL,
            retired_at TEXT,
            retirement_reason TEXT,
            created_by TEXT,
            updated_at TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX identities_status ON identities(status)")
    conn.execute("""
        CREATE TABLE identity_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            agent_id TEXT NOT NULL REFERENCES identities(agent_id) ON DELETE CASCADE,
            action TEXT NOT NULL,
            previous_status TEXT,
            new_status TEXT,
            reason TEXT,
            actor_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            timestamp TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX identity_audit_agent ON identity_audit(agent_id, id)")


@migration
def engine_events(conn: Any) -> None:
    """The event log: every outbound engine event with a monotonic sequence number (wire JSON)."""
    conn.execute("""
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            agent_id TEXT,
            type TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE INDEX events_run ON events(run_id, seq)")


# --- foundation: memory, sessions, tasks, vectors (owner: foundation) ---------------------------


@migration
def foundation_memory(conn: Any) -> None:
    """Memory entries (seed §2.1 plus content hash, tags, versions), FTS5 index kept in step by triggers.

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


@migration
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


@migration
def foundation_sessions_tasks(conn: Any) -> None:
    """Sessions (seed §2.1) and tasks; a session's memory namespace is ``session:{id}``."""
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


@migration
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


@migration
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


@migration
def engine_run_owners(conn: Any) -> None:
    """The process that owns each engine run, so a run whose process died can be told apart from a live one.

    ``pid`` + ``boot_id`` + ``pid_ns`` + ``start_ticks`` (process start time from ``/proc``) identify the
    process exactly on its own machine; ``heartbeat_at`` is refreshed by the live run for readers that
    cannot look at that process. ``reaped_at``: when its unfinished agents were failed because the owner
    was gone (see ``engine/liveness.py``).
    """
    conn.execute("""
        CREATE TABLE run_owners (
            run_id TEXT PRIMARY KEY,
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            boot_id TEXT,
            pid_ns TEXT,
            start_ticks INTEGER,
            started_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            reaped_at REAL
        )""")


@migration
def foundation_fts_hashsize(conn: Any) -> None:
    """FTS5 keeps up to 8 MB of pending terms in memory before writing a segment (default 1 MB).

    A ``store_many`` of 10k entries then writes one segment at commit instead of several that
    FTS5 must merge again: the FTS fill costs about half as much; queries measured the same.
    Stored in ``memory_fts_config``, so every connection and process uses it.
    """
    conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('hashsize', 8388608)")


@migration
def foundation_session_tokens(conn: Any) -> None:
    """The sha256 of a session's secret token (MCP session privacy; the token itself is never stored).

    A session started through MCP gets a 256-bit token, returned once; every MCP tool that reads,
    writes or ends the session's private namespace must present it. NULL: a session started
    locally (CLI, Python API, notebook), which MCP clients cannot use until its owner issues a token.
    """
    conn.execute("ALTER TABLE sessions ADD COLUMN token_hash TEXT")


@migration
def engine_agents_identity(conn: Any) -> None:
    """Which persistent identity an agent runs as (``RunOptions(identity=...)``); NULL for most agents."""
    conn.execute("ALTER TABLE agents ADD COLUMN identity_id TEXT")
    conn.execute("CREATE INDEX agents_identity ON agents(identity_id) WHERE identity_id IS NOT NULL")


@migration
def engine_agents_names_free_when_done(conn: Any) -> None:
    """A name is unique among live agents only, so a recurring named agent can run again once it ended.

    The column's inline ``UNIQUE`` cannot be dropped in SQLite, so the table is rebuilt from its own
    current definition (columns added by earlier migrations are kept) without it, its indexes are
    re-created, and a partial unique index over non-terminal rows takes the constraint's place.
    """
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'agents'").fetchone()
    plain = sql.replace("name TEXT NOT NULL UNIQUE", "name TEXT NOT NULL", 1)
    if plain == sql:
        raise RuntimeError("engine_agents_names_free_when_done: agents.name has no inline UNIQUE to remove")
    indexes = [r[0] for r in conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'agents' AND sql IS NOT NULL")]
    conn.execute(plain.replace("CREATE TABLE agents", "CREATE TABLE agents_rebuilt", 1))
    conn.execute("INSERT INTO agents_rebuilt SELECT * FROM agents")
    conn.execute("DROP TABLE agents")
    conn.execute("ALTER TABLE agents_rebuilt RENAME TO agents")
    for index_sql in indexes:
        conn.execute(index_sql)
    conn.execute("CREATE UNIQUE INDEX agents_live_name ON agents(name)"
                 " WHERE status NOT IN ('completed', 'failed', 'stopped')")


@migration
def services_decisions(conn: Any) -> None:
    """Persisted decisions: every question a run puts to a person, and every consensus checkpoint.

    ``state`` goes ``pending → answered | expired | cancelled`` once (a conditional ``UPDATE … WHERE
    state = 'pending'`` decides who wins); ``answer``/``options``/``metadata`` are JSON. Times are unix
    seconds. See ``agentstack_lab/decisions/``.
    """
    conn.execute("""
        CREATE TABLE decisions (
            id TEXT PRIMARY KEY,
            run_id TEXT,
            agent_id TEXT,
            kind TEXT NOT NULL,
            prompt TEXT NOT NULL,
            options TEXT NOT NULL DEFAULT '{}',
            code TEXT,
            state TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'answered', 'expired', 'cancelled')),
            answer TEXT,
            answered_by TEXT,
            surface TEXT,
            reason TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            answered_at REAL,
            expires_at REAL
        )""")
    conn.execute("CREATE INDEX decisions_state ON decisions(state, created_at)")
    conn.execute("CREATE INDEX decisions_run ON decisions(run_id, state)")


@migration
def services_interventions(conn: Any) -> None:
    """User interventions for a run that may live in another process: comment, content, pause, resume, stop.

    The owning engine applies each row once (``applied_at``) between steps and tool calls.
    """
    conn.execute("""
        CREATE TABLE interventions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('comment', 'content', 'pause', 'resume', 'stop')),
            text TEXT,
            surface TEXT,
            created_by TEXT,
            created_at REAL NOT NULL,
            applied_at REAL,
            error TEXT
        )""")
    conn.execute("CREATE INDEX interventions_pending ON interventions(run_id, applied_at)")


@migration
def tasks_control_plane(conn: Any) -> None:
    """Tasks of the control plane (design seed §4): one row per engine agent plus tasks created directly.

    ``tasks`` gains its parent, run, assigned agent, error, depth, risk level and update time (the
    engine's agent id is the task id). ``task_relationships`` (unique per from, to, type),
    ``task_embeddings`` (drift detection, §4.1), ``drift_detection_events`` (every check at or above
    the warning level) and ``consensus_checkpoints`` (§4.2; the person-facing side is a decision of
    kind ``consensus``) follow the seed's tables, with REAL epoch seconds as elsewhere in this file.
    """
    for column in ("parent_id TEXT", "run_id TEXT", "agent_id TEXT", "error TEXT", "risk_level TEXT",
                   "depth INTEGER NOT NULL DEFAULT 0", "updated_at REAL"):
        conn.execute(f"ALTER TABLE tasks ADD COLUMN {column}")
    conn.execute("CREATE INDEX idx_tasks_parent ON tasks(parent_id)")
    conn.execute("CREATE INDEX idx_tasks_run ON tasks(run_id)")
    conn.execute("CREATE INDEX idx_tasks_status ON tasks(status, created_at)")
    conn.execute("""
        CREATE TABLE task_relationships (
            id TEXT PRIMARY KEY,
            from_task_id TEXT NOT NULL,
            to_task_id TEXT NOT NULL,
            relationship_type TEXT NOT NULL
                CHECK (relationship_type IN ('parent_of', 'derived_from', 'depends_on', 'supersedes')),
            metadata TEXT,
            created_at REAL NOT NULL,
            UNIQUE (from_task_id, to_task_id, relationship_type),
            CHECK (from_task_id <> to_task_id)
        )""")
    conn.execute("CREATE INDEX idx_task_rel_to ON task_relationships(to_task_id, relationship_type)")
    conn.execute("""
        CREATE TABLE task_embeddings (
            task_id TEXT PRIMARY KEY,
            embedding BLOB NOT NULL,
            model TEXT NOT NULL,
            dimensions INTEGER NOT NULL,
            created_at REAL NOT NULL
        )""")
    conn.execute("""
        CREATE TABLE drift_detection_events (
            id TEXT PRIMARY KEY,
            task_id TEXT,
            task_type TEXT NOT NULL,
            ancestor_task_id TEXT NOT NULL,
            similarity_score REAL NOT NULL,
            threshold REAL NOT NULL,
            action_taken TEXT NOT NULL CHECK (action_taken IN ('allowed', 'warned', 'prevented')),
            task_input TEXT,
            run_id TEXT,
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE INDEX idx_drift_events_created ON drift_detection_events(created_at)")
    conn.execute("""
        CREATE TABLE consensus_checkpoints (
            id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            parent_task_id TEXT,
            run_id TEXT,
            decision_id TEXT,
            proposed_subtasks TEXT NOT NULL,
            risk_level TEXT NOT NULL CHECK (risk_level IN ('low', 'medium', 'high')),
            reviewer_strategy TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
            decision TEXT,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            decided_at REAL
        )""")
    conn.execute("CREATE INDEX idx_consensus_status ON consensus_checkpoints(status, created_at)")


@migration
def coordination_queue_and_messages(conn: Any) -> None:
    """The durable task queue and the message bus (design seed §5, ``agentstack_lab/coordination/``).

    ``task_queue``: one row per queued task; ``seq`` is the FIFO order within a priority (1-10, higher
    first). A claim is a lease: ``lease`` (a fresh token per claim) and ``lease_expires_at``, renewed by
    the worker's heartbeat; a claimed row whose lease expired is claimable again, and only the holder of
    the current token can complete or fail it (exactly once). ``messages``: the bus, tailed by ``seq``
    like ``events`` (``recipient`` NULL is a broadcast). Times are unix seconds.
    """
    conn.execute("""
        CREATE TABLE task_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            agent_type TEXT NOT NULL,
            priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 10),
            state TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'claimed', 'completed', 'failed', 'cancelled')),
            input TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            group_id TEXT,
            worker_id TEXT,
            lease TEXT,
            lease_expires_at REAL,
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 3,
            result TEXT,
            error TEXT,
            created_at REAL NOT NULL,
            claimed_at REAL,
            finished_at REAL
        )""")
    conn.execute("CREATE INDEX task_queue_claim ON task_queue(state, priority DESC, seq)")
    conn.execute("CREATE INDEX task_queue_group ON task_queue(group_id, state)")
    conn.execute("""
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            sender TEXT NOT NULL,
            recipient TEXT,
            type TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT 'null',
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE INDEX messages_recipient ON messages(recipient, seq)")


@migration
def monitoring_phase_changes(conn: Any) -> None:
    """Every phase change of the resource-exhaustion monitor (seed §11.1; ``monitoring/resources.py``).

    One row per agent and phase reached (``warning``, ``intervention``, ``termination``), with the
    reason and the agent's usage then (JSON); the metrics' warning/intervention/termination counters
    count these rows, so work done by any process counts.
    """
    conn.execute("""
        CREATE TABLE monitor_phase_changes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT,
            agent_id TEXT NOT NULL,
            agent_type TEXT,
            phase TEXT NOT NULL CHECK (phase IN ('warning', 'intervention', 'termination')),
            reason TEXT,
            usage TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE INDEX monitor_phase_changes_phase ON monitor_phase_changes(phase, created_at)")


@migration
def engine_provenance(conn: Any) -> None:
    """Which run, agent and tool call created, changed or deleted which kernel variable (``store/provenance.py``).

    One row per name and python tool call (``created``/``changed``/``deleted``), and one per name an
    undo put back (``restored``/``removed``). ``before``/``after`` are short, redacted summaries
    (type, shape or length, a small repr of scalars), never the value: values may hold secrets.
    """
    conn.execute("""
        CREATE TABLE provenance (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            agent_id TEXT,
            call_id TEXT,
            name TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('created', 'changed', 'deleted', 'restored', 'removed')),
            before TEXT NOT NULL DEFAULT '',
            after TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL
        )""")
    conn.execute("CREATE INDEX provenance_name ON provenance(name, id)")
    conn.execute("CREATE INDEX provenance_run ON provenance(run_id, id)")


@migration
def workflows_review_loops(conn: Any) -> None:
    """Adversarial review loops (seed §3.2 review-loop tools; ``workflows/review_loop.py``).

    ``review_loops``: one row per loop with its current code, status and last verdict, so
    ``review_loop_status|list|get_code`` work from any process; ``abort_requested`` is how another
    process stops a running loop (its owner polls it). ``review_loop_reviews``: one row per
    iteration with the code the reviewer saw, its verdict and findings (JSON), and the agent runs.
    Times are unix seconds.
    """
    conn.execute("""
        CREATE TABLE review_loops (
            id TEXT PRIMARY KEY,
            status TEXT NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'passed', 'failed', 'aborted', 'error')),
            kind TEXT NOT NULL CHECK (kind IN ('code', 'diff')),
            path TEXT,
            original TEXT NOT NULL,
            code TEXT NOT NULL,
            max_iterations INTEGER NOT NULL CHECK (max_iterations >= 1),
            iteration INTEGER NOT NULL DEFAULT 0,
            verdict TEXT CHECK (verdict IN ('PASS', 'FAIL')),
            error TEXT,
            provider TEXT,
            abort_requested INTEGER NOT NULL DEFAULT 0,
            owner_pid INTEGER,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            finished_at REAL
        )""")
    conn.execute("CREATE INDEX review_loops_status ON review_loops(status, created_at)")
    conn.execute("""
        CREATE TABLE review_loop_reviews (
            loop_id TEXT NOT NULL REFERENCES review_loops(id) ON DELETE CASCADE,
            iteration INTEGER NOT NULL,
            code TEXT NOT NULL,
            verdict TEXT NOT NULL CHECK (verdict IN ('PASS', 'FAIL')),
            summary TEXT NOT NULL DEFAULT '',
            findings TEXT NOT NULL DEFAULT '[]',
            reviewer_run_id TEXT,
            coder_run_id TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (loop_id, iteration)
        )""")


@migration
def tasks_session_id_without_fk(conn: Any) -> None:
    """``tasks.session_id`` without its foreign key to ``sessions``.

    With ``memory.backend = "postgres"`` sessions live in PostgreSQL, so a task of such a session could
    not be written here at all (the foreign key) or lost its session (the engine wrote NULL). The id is
    now checked by ``TaskStore`` (this database's ``sessions``, else the memory backend). SQLite cannot
    drop a constraint: the table is rebuilt with the same columns, rows and indexes (nothing references
    ``tasks``, so dropping it cascades nowhere). Sessions are ended, never deleted, so ``ON DELETE SET
    NULL`` had no effect to keep.
    """
    cols = ("id, session_id, agent_type, status, input, output, metadata, created_at, completed_at, parent_id,"
            " run_id, agent_id, error, risk_level, depth, updated_at")
    conn.execute("""
        CREATE TABLE tasks_new (
            id TEXT PRIMARY KEY,
            session_id TEXT,
            agent_type TEXT NOT NULL,
            status TEXT NOT NULL,
            input TEXT,
            output TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            completed_at REAL,
            parent_id TEXT,
            run_id TEXT,
            agent_id TEXT,
            error TEXT,
            risk_level TEXT,
            depth INTEGER NOT NULL DEFAULT 0,
            updated_at REAL
        )""")
    conn.execute(f"INSERT INTO tasks_new ({cols}) SELECT {cols} FROM tasks")
    conn.execute("DROP TABLE tasks")
    conn.execute("ALTER TABLE tasks_new RENAME TO tasks")
    conn.execute("CREATE INDEX idx_tasks_session ON tasks(session_id, status)")
    conn.execute("CREATE INDEX idx_tasks_parent ON tasks(parent_id)")
    conn.execute("CREATE INDEX idx_tasks_run ON tasks(run_id)")
    conn.execute("CREATE INDEX idx_tasks_status ON tasks(status, created_at)")
