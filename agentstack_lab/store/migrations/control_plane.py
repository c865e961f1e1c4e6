"""The control plane's migration steps: decisions, interventions, tasks, queue and bus, monitor, review loops.

The tables of the services and workflows layers (docs/architecture.md, "The store"; docs/tasks.md): tasks,
relationships, drift, consensus, the durable queue and message bus, and the resource monitor's phase changes. Steps only: their names and order, and the bookkeeping, live in
:mod:`agentstack_lab.store.migrations`. A shipped step is never edited: append a new one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["services_decisions", "services_interventions", "tasks_control_plane", "coordination_queue_and_messages", "monitoring_phase_changes", "workflows_review_loops", "tasks_session_id_without_fk", "approval_saved_rules"]


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


def tasks_control_plane(conn: Any) -> None:
    """Tasks of the control plane (docs/tasks.md): one row per engine agent plus tasks created directly.

    ``tasks`` gains its parent, run, assigned agent, error, depth, risk level and update time (the
    engine's agent id is the task id). ``task_relationships`` (unique per from, to, type),
    ``task_embeddings`` (drift detection, docs/tasks.md), ``drift_detection_events`` (every check at or above
    the warning level) and ``consensus_checkpoints`` (docs/tasks.md; the person-facing side is a decision of
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


def coordination_queue_and_messages(conn: Any) -> None:
    """The durable task queue and the message bus (docs/tasks.md, ``agentstack_lab/coordination/``).

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


def monitoring_phase_changes(conn: Any) -> None:
    """Every phase change of the resource-exhaustion monitor (docs/tasks.md; ``monitoring/resources.py``).

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


def workflows_review_loops(conn: Any) -> None:
    """Adversarial review loops (docs/mcp.md review-loop tools; ``workflows/review_loop.py``).

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


def approval_saved_rules(conn: Any) -> None:
    """Approval rules a person saved with "Always allow code like this" (``agentstack_lab/approval/saved.py``).

    Applied after the config's ``approval.rules`` (the last match wins). ``scope`` is ``session`` (only
    runs of ``session_id``) or ``workspace``; ``any_of``/``only`` are JSON lists of code classes, ``code``
    a regular expression; a saved rule never lifts a built-in deny. ``decision_id`` is the approval it
    was answered with. Times are unix seconds.
    """
    conn.execute("""
        CREATE TABLE approval_rules (
            id TEXT PRIMARY KEY,
            action TEXT NOT NULL CHECK (action IN ('allow', 'ask', 'deny', 'dry_run_then_allow')),
            any_of TEXT,
            only TEXT,
            code TEXT,
            scope TEXT NOT NULL CHECK (scope IN ('session', 'workspace')),
            session_id TEXT,
            description TEXT NOT NULL DEFAULT '',
            decision_id TEXT,
            created_by TEXT,
            created_at REAL NOT NULL,
            CHECK ((scope = 'session') = (session_id IS NOT NULL)),
            CHECK (any_of IS NOT NULL OR only IS NOT NULL OR code IS NOT NULL)
        )""")
    conn.execute("CREATE INDEX approval_rules_order ON approval_rules(created_at)")
