"""Identities are linked to the agents they run; a retired one cannot spawn; names are free once an agent ends.

Through the Python API (``RunOptions(identity=...)``, the spawner), ``agent run --identity`` and
``%agent --identity``; plus the two named migrations upgrading a database that has agents in it.
"""

from __future__ import annotations

import json

import pytest
from IPython.core.error import UsageError
from typer.testing import CliRunner

from agentstack_lab.agents.identity import IdentityNotFoundError, IdentityRetiredError
from agentstack_lab.agents.spawner import AgentNameTakenError
from agentstack_lab.cli import app
from agentstack_lab.engine import AgentRun, RunOptions
from agentstack_lab.errors import AgentstackError
from agentstack_lab.store import SQLiteDatabase
from agentstack_lab.store import migrations as mig
from agentstack_lab.workspace import Workspace

HEADLESS = {"interactive": False, "subagents": True, "auto_approve": True, "executor": "subprocess", "max_depth": 1}


def _spawns(ws: Workspace, identity_id: str) -> list[dict]:
    return [e.metadata for e in ws.identities.get_audit_trail(identity_id) if e.action == "spawned"]


async def test_a_run_as_an_identity_records_the_spawn_on_its_agents_and_in_the_audit(ws):
    ident = ws.identities.create("researcher", display_name="night-owl")
    ws.identities.activate(ident.agent_id)
    run = AgentRun("what is a monad?", workspace=ws, provider="scripted",
                   options={**HEADLESS, "identity": "night-owl"})  # by display name
    await run
    assert run.status == "completed"
    rows = ws.db.query("SELECT id, parent_id, identity_id FROM agents WHERE run_id = ?", (run.id,))
    assert len(rows) >= 2 and {r["identity_id"] for r in rows} == {ident.agent_id}  # the whole tree acts as it
    assert _spawns(ws, ident.agent_id) == [{"spawned_agent_id": run.id}]  # one spawn: the run's root agent
    assert run.tree["metadata"]["identityId"] == ident.agent_id
    assert ws.spawner.get(run.id).identity_id == ident.agent_id

    plain = await AgentRun("again?", workspace=ws, provider="scripted", options={**HEADLESS, "subagents": False})
    assert plain is not None
    assert ws.db.query("SELECT identity_id FROM agents WHERE prompt = 'again?'")[0][0] is None


async def test_a_retired_identity_cannot_spawn_and_the_audit_never_says_it_did(ws):
    ident = ws.identities.create("coder", display_name="old-timer")
    ws.identities.activate(ident.agent_id)
    ws.identities.retire(ident.agent_id, reason="replaced")
    agents_before = ws.db.query("SELECT count(*) FROM agents")[0][0]
    with pytest.raises(IdentityRetiredError) as info:
        AgentRun("hi", workspace=ws, provider="scripted", options={**HEADLESS, "identity": ident.agent_id})
    message = str(info.value)
    assert isinstance(info.value, AgentstackError) and "\n" not in message
    assert "'old-timer'" in message and ident.agent_id in message and "retired" in message
    with pytest.raises(IdentityRetiredError):
        ws.identities.record_spawn(ident.agent_id, "some-agent")
    assert _spawns(ws, ident.agent_id) == []
    assert [e.action for e in ws.identities.get_audit_trail(ident.agent_id)] == ["retired", "activated", "created"]
    assert ws.db.query("SELECT count(*) FROM agents")[0][0] == agents_before
    with pytest.raises(IdentityNotFoundError, match="no identity with id or name 'ghost'"):
        AgentRun("hi", workspace=ws, provider="scripted", options={**HEADLESS, "identity": "ghost"})
    with pytest.raises(ValueError, match="RunOptions.identity must be a non-empty"):
        RunOptions(identity=" ")


async def test_retired_between_creating_and_starting_the_run_spawns_nothing(ws):
    ident = ws.identities.create("researcher", display_name="late")
    run = AgentRun("hi", workspace=ws, provider="scripted", options={**HEADLESS, "identity": "late"})
    ws.identities.retire(ident.agent_id, reason="retired while the run was being set up")
    with pytest.raises(IdentityRetiredError, match="identity 'late' .* is retired and cannot spawn agents"):
        run.start()
    assert _spawns(ws, ident.agent_id) == [] and dict(run.agents) == {}
    assert ws.db.query("SELECT count(*) FROM agents WHERE run_id = ?", (run.id,))[0][0] == 0


def test_agent_run_identity_on_the_cli(tmp_path):
    proj = tmp_path / "proj"
    with Workspace.open(proj, announce=False) as ws:
        active = ws.identities.create("researcher", display_name="cli-bot")
        retired = ws.identities.create("researcher", display_name="cli-gone")
        ws.identities.retire(retired.agent_id)
    runner = CliRunner()
    ok = runner.invoke(app, ["-w", str(proj), "agent", "run", "--identity", "cli-bot", "--no-subagents", "--json",
                             "what is a monad?"])
    assert ok.exit_code == 0, ok.output
    run_id = json.loads(ok.stdout)["runId"]
    refused = runner.invoke(app, ["-w", str(proj), "agent", "run", "--identity", "cli-gone", "hi"])
    assert refused.exit_code != 0
    assert refused.stderr.strip().splitlines() == [
        f"error: identity 'cli-gone' ({retired.agent_id}) is retired and cannot spawn agents"]
    with Workspace.open(proj, announce=False) as ws:
        assert ws.spawner.get(run_id).identity_id == active.agent_id
        assert _spawns(ws, active.agent_id) == [{"spawned_agent_id": run_id}] and _spawns(ws, retired.agent_id) == []


def test_agent_magic_identity():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "agentstack_lab")
    try:
        ws = shell.magics_manager.registry["AgentstackMagics"].workspace
        ana = ws.identities.create("analyst", display_name="Ana")
        ws.identities.retire(ana.agent_id)
        with pytest.raises(UsageError, match=r"^identity 'Ana' \(.*\) is retired and cannot spawn agents$"):
            shell.run_line_magic("agent", "--identity Ana --no-subagents hi")
        bea = ws.identities.create("analyst", display_name="Bea")
        run = shell.run_line_magic("agent", "--identity Bea --type analyst --no-subagents --auto-approve hi")
        assert run.status == "completed" and ws.spawner.get(run.id).identity_id == bea.agent_id
        assert _spawns(ws, ana.agent_id) == [] and _spawns(ws, bea.agent_id) == [{"spawned_agent_id": run.id}]
    finally:
        shell.run_line_magic("unload_ext", "agentstack_lab")
        InteractiveShell.clear_instance()


async def test_a_recurring_named_agent_can_run_again_once_it_ended(ws):
    sp = ws.spawner
    first = sp.spawn("researcher", name="nightly-report")
    with pytest.raises(AgentNameTakenError, match="'nightly-report' already exists and is idle"):
        sp.spawn("researcher", name="nightly-report")
    sp.update_status(first.id, "running")
    sp.update_status(first.id, "completed", result="monday")
    second = sp.spawn("researcher", name="nightly-report")  # the name is free again
    assert second.id != first.id and sp.get_by_name("nightly-report").id == second.id  # the live one
    sp.update_status(second.id, "running")
    sp.update_status(second.id, "failed", error="tuesday broke")
    third = sp.spawn("researcher", name="nightly-report")
    sp.stop(third.id)
    assert sp.get_by_name("nightly-report").id == third.id  # none live: the most recent
    live = sp.spawn("researcher", name="nightly-report")
    assert sp.get_by_name("nightly-report").id == live.id
    assert [a.status for a in sp.list() if a.name == "nightly-report"] == ["completed", "failed", "stopped", "idle"]

    # the database enforces it too, for writers that skip the spawner's check
    with pytest.raises(Exception, match="UNIQUE constraint failed: agents.name"), ws.db.transaction() as conn:
        conn.execute("INSERT INTO agents (id, name, type, status, created_at, updated_at)"
                     " VALUES ('x', 'nightly-report', 'coder', 'running', 'now', 'now')")
    assert ws.db.query("SELECT count(*) FROM agents WHERE id = 'x'")[0][0] == 0


async def test_an_engine_run_takes_a_name_a_finished_agent_had(ws):
    run = AgentRun("q", workspace=ws, provider="scripted", options={**HEADLESS, "subagents": False})
    short = f"researcher-{run.id[:8]}"
    old = ws.spawner.spawn("researcher", name=short)
    ws.spawner.stop(old.id)
    await run
    assert ws.spawner.get(run.id).name == short  # the stopped squatter no longer holds it
    assert ws.spawner.get_by_name(short).id == run.id


def test_the_agents_migrations_upgrade_a_database_with_agents(tmp_path, monkeypatch):
    names = [n for n, _ in mig.MIGRATIONS]
    cut = names.index("engine_agents_identity")
    monkeypatch.setattr(mig, "MIGRATIONS", mig.MIGRATIONS[:cut])
    db = SQLiteDatabase(tmp_path / "old.db")
    for i, status in enumerate(("completed", "running")):
        db.execute("INSERT INTO agents (id, name, type, status, created_at, updated_at) VALUES (?,?,?,?,?,?)",
                   (f"a{i}", f"old-{i}", "coder", status, f"2024-01-0{i + 1}", "x"))
    monkeypatch.undo()
    assert mig.migrate(db) == names[cut:]
    rows = db.query("SELECT id, name, status, identity_id FROM agents ORDER BY id")
    assert [tuple(r) for r in rows] == [("a0", "old-0", "completed", None), ("a1", "old-1", "running", None)]
    indexes = {r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='agents'")}
    assert {"agents_session", "agents_run", "agents_status", "agents_identity", "agents_live_name"} <= indexes
    table_sql = db.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'agents'")[0][0]
    assert "UNIQUE" not in table_sql and "identity_id TEXT" in table_sql  # the old inline UNIQUE is gone
    fresh = SQLiteDatabase(tmp_path / "new.db")
    schema = "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'agents' ORDER BY type, name"
    assert [tuple(r) for r in db.query(schema)] == [tuple(r) for r in fresh.query(schema)]
    db.close()
    fresh.close()
