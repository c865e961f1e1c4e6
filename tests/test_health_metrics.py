"""Health (issue 11 item 8) and metrics (item 7) through the CLI, against real workspace databases.

``system health`` exits 0 healthy, 1 degraded, 2 unhealthy: a read-only database and a mismatched
embedder are unhealthy, a stale queue lease and a provider without its key are degraded. The metrics
text parses with ``prometheus_client.parser`` and its values match the database.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentstack_lab.decisions import Decisions
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace
from tests.test_monitoring import looping_brain, monitored_workspace, pending_interventions

pytestmark = pytest.mark.slow  # every test here starts a process

SCRIPT = Path(sys.executable).parent / "agentstack-lab"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(folder), *args], capture_output=True, text=True, timeout=120)


def health(folder: Path) -> tuple[int, dict]:
    out = cli(folder, "system", "health", "--json")
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def new_workspace(folder: Path, config: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "agentstack.config.json").write_text(json.dumps(config))
    with Workspace.open(folder, announce=False) as ws:
        ws.memory.store("note", "the sales are up")  # records the embedder's name, model and dimension
    return folder


def test_healthy_workspace_exits_0(tmp_path):
    folder = new_workspace(tmp_path / "ws")
    code, report = health(folder)
    assert code == 0 and report["status"] == "healthy", report
    checks = by_name(report)
    assert {"database", "writable", "migrations", "events", "memory", "embedder", "provider", "queue", "agents"} <= set(checks)
    assert "matches the database" in checks["embedder"]["detail"]
    live = cli(folder, "system", "health", "--kind", "live", "--json")
    assert live.returncode == 0 and json.loads(live.stdout)["kind"] == "live"
    bad = cli(folder, "system", "health", "--kind", "sometimes")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--kind must be one of" in bad.stderr


def test_read_only_database_is_unhealthy(tmp_path):
    folder = new_workspace(tmp_path / "ws")
    db = folder / ".agentstack" / "agentstack.db"
    with Workspace.open(folder, announce=False) as ws:  # fold the WAL into the file first
        ws.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        ws.db.execute("PRAGMA journal_mode = DELETE")
    raw = bytearray(db.read_bytes())
    raw[18] = 3  # file-format write version > 2: SQLite opens the file read-only (also for root)
    db.write_bytes(bytes(raw))
    before = db.read_bytes()
    code, report = health(folder)
    assert code == 2 and report["status"] == "unhealthy", report
    bad = [c for c in report["checks"] if c["status"] == "unhealthy"]
    assert bad and bad[0]["name"] in ("database", "writable") and "readonly" in bad[0]["detail"].replace(" ", "")
    assert db.read_bytes() == before  # the check changed nothing


def test_mismatched_embedder_is_degraded_until_reembedded(tmp_path):
    folder = new_workspace(tmp_path / "ws")  # vectors recorded with 384 dimensions
    (folder / "agentstack.config.json").write_text(json.dumps({"memory": {"vector": {"dimensions": 256}}}))
    code, report = health(folder)   # keyword search still works: degraded, not down
    emb = by_name(report)["embedder"]
    assert emb["status"] == "degraded" and "384 dims" in emb["detail"] and "256 dims" in emb["detail"], report
    assert "memory reembed" in emb["detail"] and code >= 1


# The durable queue's table (branch ``queue``, ``coordination/``): health reads ``task_queue`` by name.
# Until that migration is in this database the test creates the columns the check reads.
QUEUE_DDL = """CREATE TABLE IF NOT EXISTS task_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, agent_type TEXT NOT NULL,
    priority INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'pending', input TEXT NOT NULL,
    worker_id TEXT, lease TEXT, lease_expires_at REAL, created_at REAL NOT NULL)"""


def test_stale_lease_is_degraded_and_queue_depth_counts(tmp_path):
    folder = new_workspace(tmp_path / "ws")
    with Workspace.open(folder, announce=False) as ws, ws.db.transaction() as conn:
        conn.execute(QUEUE_DDL)
        now = time.time()
        conn.execute("INSERT INTO task_queue (id, agent_type, priority, state, input, created_at) "
                     "VALUES ('t-pending', 'coder', 5, 'pending', 'x', ?)", (now,))
        conn.execute("INSERT INTO task_queue (id, agent_type, priority, state, input, worker_id, lease, "
                     "lease_expires_at, created_at) VALUES ('t-claimed', 'coder', 5, 'claimed', 'y', 'w-dead', "
                     "'l1', ?, ?)", (now - 120, now - 200))
    code, report = health(folder)
    assert code == 1 and report["status"] == "degraded", report
    checks = by_name(report)
    assert checks["leases"]["status"] == "degraded" and checks["leases"]["stale"] == 1
    assert "w-dead" in checks["leases"]["detail"]
    assert checks["queue"]["depth"] == 1
    metrics = {s.name: s.value for f in text_string_to_metric_families(cli(folder, "metrics").stdout)
               for s in f.samples}
    assert metrics["agentstack_queue_depth"] == 1


def test_default_provider_without_key_is_degraded(tmp_path):
    folder = new_workspace(tmp_path / "ws", {"providers": {"default": "anthropic"}})
    code, report = health(folder)
    assert code == 1, report
    assert "ANTHROPIC_API_KEY" in by_name(report)["provider"]["detail"]


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_parse_and_match_the_database(tmp_path):
    scratch = Path.cwd() / "scratch"   # inside the working folder: writes outside it are denied by a built-in rule
    scratch.mkdir()
    ws = monitored_workspace(tmp_path / "ws", max_api_calls=6)
    try:
        for _ in range(2):  # two looping agents, each warned, paused, then stopped from another surface
            run = AgentRun("loop forever", workspace=ws, provider=ScriptedProvider(looping_brain(scratch)),
                           options={"subagents": False, "auto_approve": True, "max_turns": 1000},
                           executor=LiveKernelExecutor(namespace={}))
            run.start()
            [d] = await pending_interventions(ws)
            Decisions(ws.db).answer(d.id, "stop", surface="cli")
            await asyncio.wait_for(run.wait(), 60)
        done = AgentRun("hello", workspace=ws, provider="scripted", options={"subagents": False})
        await done
        proc = await asyncio.create_subprocess_exec(*CLI, "-w", str(ws.root), "metrics",
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        got = samples(out.decode())
        q = ws.db.query
        phases = dict(q("SELECT phase, count(*) FROM monitor_phase_changes GROUP BY phase"))
        # the looping agents were warned and paused; the plain run's 3 model calls reached warning (3/6) too
        assert phases == {"warning": 3, "intervention": 2}
        assert got[("agentstack_monitor_warnings_total", ())] == phases["warning"]
        assert got[("agentstack_monitor_interventions_total", ())] == phases["intervention"]
        assert got[("agentstack_monitor_terminations_total", ())] == 0
        for status, n in q("SELECT status, count(*) FROM agents GROUP BY status"):
            assert got[("agentstack_agents", (("status", status),))] == n
        for status, n in q("SELECT status, count(*) FROM tasks WHERE status IN ('completed','failed','stopped') "
                           "GROUP BY status"):
            assert got[("agentstack_tasks_total", (("outcome", status),))] == n
        assert got[("agentstack_tasks_total", (("outcome", "stopped"),))] == 2
        for state, n in q("SELECT state, count(*) FROM decisions WHERE state <> 'pending' GROUP BY state"):
            assert got[("agentstack_decisions_total", (("outcome", state),))] == n
        # the two interventions, answered from the CLI; the approval rules' decisions are answered rows too
        assert dict(q("SELECT kind, count(*) FROM decisions WHERE state = 'answered' AND surface = 'cli' "
                      "GROUP BY kind")) == {"intervention": 2}
        assert got[("agentstack_agents_paused", ())] == 0
        # histograms: one observation per monitored agent; API calls summed from the agents' metadata
        metas = [json.loads(r[0]).get("resources") for r in q("SELECT metadata FROM agents")]
        monitored = [m for m in metas if m]
        assert got[("agentstack_agent_api_calls_count", ())] == len(monitored) == 3
        assert got[("agentstack_agent_api_calls_sum", ())] == sum(m["apiCalls"] for m in monitored)
        assert got[("agentstack_agent_files_accessed_sum", ())] == sum(
            m["filesRead"] + m["filesWritten"] + m["filesModified"] for m in monitored) > 0
        assert got[("agentstack_agent_api_calls_bucket", (("le", "5.0"),))] == sum(
            m["apiCalls"] <= 5 for m in monitored)
        assert got[("agentstack_task_latency_seconds_count", ())] == q(
            "SELECT count(*) FROM tasks WHERE status IN ('completed','failed','stopped')")[0][0]
    finally:
        ws.close()
