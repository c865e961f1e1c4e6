"""The engine's migration steps: agents, identities, the event log, run owners, kernel-variable provenance.

Steps only: their names and order, and the bookkeeping, live in :mod:`agentstack_lab.store.migrations`.
A shipped step is never edited: ``engine_agents_names_free_when_done`` rebuilds ``agents`` from the
SQL text ``engine_agents`` left in ``sqlite_master``, so even its whitespace is part of the contract.
"""

from __future__ import annotations

from typing import Any

__all__ = ["engine_agents", "engine_identities", "engine_events", "engine_run_owners", "engine_agents_identity", "engine_agents_names_free_when_done", "engine_provenance",
           "engine_runs_list_indexes"]


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


def engine_agents_identity(conn: Any) -> None:
    """Which persistent identity an agent runs as (``RunOptions(identity=...)``); NULL for most agents."""
    conn.execute("ALTER TABLE agents ADD COLUMN identity_id TEXT")
    conn.execute("CREATE INDEX agents_identity ON agents(identity_id) WHERE identity_id IS NOT NULL")


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


def engine_runs_list_indexes(conn: Any) -> None:
    """Indexes for the runs list at a million events: newest root agents, and each agent's last event.

    ``agents_roots_created`` answers ``list_runs`` (``ORDER BY created_at DESC LIMIT n`` over root
    agents) without sorting every agent; ``events_run_agent`` lets ``last_events`` find an agent's
    newest event by one index seek instead of reading every event of the run.
    """
    conn.execute("CREATE INDEX agents_roots_created ON agents(created_at) WHERE parent_id IS NULL AND run_id = id")
    conn.execute("CREATE INDEX events_run_agent ON events(run_id, agent_id, seq)")
