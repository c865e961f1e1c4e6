"""Team memory on PostgreSQL + pgvector (issue 15 item 2): several processes share one memory.

The memory suites (test_memory, test_memory_access, test_memory_sessions_hardening) run on both
backends through the `backend` fixture in conftest.py; this module adds what only a shared server
shows: two OS processes writing and searching the same memory, and the configuration errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agentstack_lab.config import Config, ConfigError
from agentstack_lab.memory.backends.postgres import PostgresUnavailableError
from agentstack_lab.workspace import Workspace

AGENT = textwrap.dedent("""
    import json, sys, time
    from agentstack_lab.workspace import Workspace
    root, me, other = sys.argv[1], sys.argv[2], sys.argv[3]
    ws = Workspace.open(root, announce=False)   # the config file names the team database
    mem = ws.memory
    mem.store_many([{"key": f"{me}-{i}", "content": f"{me} finding {i} about churn in region {i % 5}",
                     "namespace": "team", "agent_id": me} for i in range(40)])
    mem.store(f"{me}-plan", f"{me} plan: look at churn", namespace="team", tags=[me])
    deadline = time.time() + 60
    while time.time() < deadline:   # wait until the other process's entries are visible here
        seen = {r.key for r in mem.search(f"{other} finding churn", "hybrid", namespace="team", limit=100)}
        if sum(k.startswith(other + "-") and k[-1].isdigit() for k in seen) >= 40 and \
                mem.get(f"{other}-plan", namespace="team") is not None:   # its plan is written after its findings
            break
        time.sleep(0.1)
    fts = [r.key for r in mem.search(f"{other} plan", "fts", namespace="team")]
    vec = [r.key for r in mem.search(f"{other} finding 7 about churn in region 2", "vector", namespace="team")]
    print(json.dumps({"seen": sorted(seen), "fts": fts, "vec": vec, "count": mem.count(namespace="team")}))
""")


@pytest.fixture
def team(tmp_path, pg_dsn, monkeypatch):
    """A workspace folder whose config points memory at a fresh PostgreSQL database through ${VAR}."""
    monkeypatch.setenv("TEAM_MEMORY_DSN", pg_dsn)
    root = tmp_path / "team"
    root.mkdir()
    cfg = {"memory": {"backend": "postgres", "postgres": {"dsn": "${TEAM_MEMORY_DSN}"}}}
    (root / "agentstack.config.json").write_text(json.dumps(cfg))
    return root


@pytest.mark.slow   # starts processes
def test_two_processes_write_and_search_one_team_memory(team):
    procs = [subprocess.Popen([sys.executable, "-c", AGENT, str(team), me, other], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for me, other in (("alice", "bob"), ("bob", "alice"))]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for res, other in zip(outs, ("bob", "alice"), strict=True):
        assert sum(k.startswith(other + "-") and k[-1].isdigit() for k in res["seen"]) == 40   # the other process's rows, searched
        assert res["fts"][0] == f"{other}-plan"
        assert res["vec"][0] == f"{other}-7"
    with Workspace.open(team, announce=False) as ws:   # and a third process (this one) sees all of it
        assert ws.memory.count(namespace="team") == 82
        assert ws.memory.stats() == {"memory": 82, "fts": 82, "vector": 82}
        assert ws.memory.get("alice-plan", namespace="team").tags == ["alice"]
        assert not (team / ".agentstack" / "agentstack.db").exists() or \
            ws.db.query("SELECT count(*) FROM memory")[0][0] == 0   # nothing went to the SQLite file


@pytest.mark.slow   # needs the PostgreSQL server (a process)
def test_sessions_live_with_the_team_memory(team):
    with Workspace.open(team, announce=False) as a, Workspace.open(team, announce=False) as b:
        s = a.sessions.start("shared")
        a.memory.scoped(s.id).store("note", "private to the session")
        assert b.sessions.status(s.id).entries == 1                      # another connection sees it
        assert b.memory.search("private session", "fts") == []           # unscoped: not visible
        assert [r.key for r in b.memory.scoped(s.id).search("private session", "fts")] == ["note"]
        assert b.sessions.end(s.id).entries == 1
        assert a.memory.stats() == {"memory": 0, "fts": 0, "vector": 0}


def test_postgres_configuration_errors_are_one_line(tmp_path):
    cfg = Config.from_dict({"memory": {"backend": "postgres"}})
    with Workspace.open(tmp_path / "w", config=cfg, announce=False) as ws, \
            pytest.raises(ConfigError, match=r"^memory.postgres.dsn: required when memory.backend is 'postgres'$"):
        ws.memory.count()
    bad = Config.from_dict({"memory": {"backend": "postgres", "postgres": {
        "dsn": f"postgresql://me:hunter2@/nodb?host={tmp_path}", "connect_timeout": 2}}})
    with Workspace.open(tmp_path / "w", config=bad, announce=False) as ws, \
            pytest.raises(PostgresUnavailableError, match="cannot connect") as err:
        ws.memory.count()
    assert "hunter2" not in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "w" / ".agentstack").exists()   # nothing was created


def test_nul_characters_are_refused_with_one_line(ws, backend):
    if backend == "sqlite":
        assert ws.memory.store("k", "a\x00b").content == "a\x00b"
        return
    from agentstack_lab.memory import MemoryValidationError

    with pytest.raises(MemoryValidationError, match="NUL character"):
        ws.memory.store_many([("ok", "fine"), ("k", "a\x00b")])
    assert ws.memory.count() == 0


@pytest.mark.slow   # starts processes
def test_tasks_of_a_postgres_session(team):
    """Sessions live in PostgreSQL: tasks (created directly, or by an engine run) still carry the session,
    checked through the memory backend since ``tasks.session_id`` holds no foreign key (issue 15 gap)."""
    import asyncio

    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.options import RunOptions
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.tasks import TaskService
    from agentstack_lab.tasks.store import TaskError

    cli = [sys.executable, "-m", "agentstack_lab.cli", "-w", str(team)]
    with Workspace.open(team, announce=False) as ws:
        session = ws.sessions.start("team work")
        assert ws.db.query("SELECT count(*) FROM sessions")[0][0] == 0          # not in the SQLite file
        made = subprocess.run([*cli, "task", "create", "write the parser", "--session", session.id, "--json"],
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        task_id = json.loads(made.stdout)["task"]["id"]
        assert ws.db.query("SELECT session_id FROM tasks WHERE id = ?", (task_id,))[0][0] == session.id
        with pytest.raises(TaskError, match="^no session with id 'nope'$"):
            TaskService.of(ws).create("coder", "x", session_id="nope")
        bad = subprocess.run([*cli, "task", "create", "x", "--session", "nope"], capture_output=True, text=True,
                             timeout=120)
        assert bad.returncode != 0 and "no session with id 'nope'" in bad.stderr
        assert ws.db.query("SELECT count(*) FROM tasks")[0][0] == 1              # nothing created
        run = AgentRun("how are sales trending?", workspace=ws, provider=ScriptedProvider(), session_id=session.id,
                       options=RunOptions(final_question=False))

        async def main() -> None:
            await run

        asyncio.run(main())
        rows = ws.db.query("SELECT session_id FROM tasks WHERE run_id = ?", (run.id,))
        assert len(rows) == 3 and {r[0] for r in rows} == {session.id}          # the run's agents, in the session


@pytest.mark.slow   # starts processes and the PostgreSQL server
def test_memory_reembed_through_the_cli_on_postgres(team):
    """A team memory whose embedder changed: one line on a vector search, `memory reembed` moves it, then it searches."""
    def memory(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "memory", *args], cwd=team,
                              capture_output=True, text=True, timeout=120)

    with Workspace.open(team, announce=False) as ws:
        ws.memory.store_many([(f"n{i}", f"note {i}: the kubernetes cluster runs service {i}" if i % 3 == 0
                               else f"note {i}: a recipe for lentil soup number {i}") for i in range(60)])
    cfg = json.loads((team / "agentstack.config.json").read_text())
    cfg["memory"]["vector"] = {"dimensions": 64}
    (team / "agentstack.config.json").write_text(json.dumps(cfg))
    refused = memory("search", "kubernetes", "--mode", "vector")
    assert refused.returncode != 0 and "dimension 384" in refused.stderr and "dimension 64" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    done = memory("reembed", "--batch-size", "25", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["finished"], got["embedded"], got["total"], got["dimensions"]) == (True, 60, 60, 64)
    hits = memory("search", "kubernetes cluster service", "--mode", "vector", "--json")
    assert hits.returncode == 0 and hits.stderr == "", hits.stderr
    assert json.loads(hits.stdout) and all(int(h["key"][1:]) % 3 == 0 for h in json.loads(hits.stdout))
