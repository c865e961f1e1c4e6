"""Agent services: registry (§1.1), spawner (§1.2), identities (§1.4), on a real workspace database."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentstack_lab.agents import (
    CORE_AGENT_TYPES,
    AgentDefinition,
    AgentRegistry,
    IdentityService,
    InvalidTransitionError,
    Spawner,
    UnknownAgentTypeError,
)
from agentstack_lab.agents.registry import AgentTypeError, core_definitions
from agentstack_lab.plugins import hookimpl, load_plugins, new_manager
from agentstack_lab.store import SQLiteDatabase
from agentstack_lab.workspace import Workspace


@pytest.fixture
def db(tmp_path):
    d = SQLiteDatabase(tmp_path / "a.db")
    yield d
    d.close()


def test_core_types_have_structured_prompts_from_package_data():
    defs = core_definitions()
    assert tuple(defs) == CORE_AGENT_TYPES and len(defs) == 11
    for d in defs.values():
        for section in ("# Role", "# Responsibilities", "# Guidelines", "# Output"):
            assert section in d.system_prompt, (d.type, section)
        bullets = d.system_prompt.split("# Responsibilities")[1].split("# Guidelines")[0].count("\n- ")
        assert 3 <= bullets <= 5 and d.capabilities and d.description


def test_custom_types_register_unregister_and_core_is_protected():
    r = AgentRegistry()
    with pytest.raises(AgentTypeError, match="core type and cannot be overridden"):
        r.register({"type": "coder", "system_prompt": "x"})
    with pytest.raises(AgentTypeError, match="core type and cannot be unregistered"):
        r.unregister("coder")
    r.register({"type": "poet", "systemPrompt": "You write poems.", "capabilities": ["verse"]})
    with pytest.raises(AgentTypeError, match="already registered"):
        r.register(AgentDefinition(type="poet", name="Poet", description="", system_prompt="again"))
    assert r.has("poet") and r.list()[-1] == "poet" and r.get("poet").capabilities == ("verse",)
    assert r.unregister("poet") is True and r.unregister("poet") is False
    with pytest.raises(UnknownAgentTypeError, match="unknown agent type 'poet'; known types: coder"):
        r.get("poet")
    with pytest.raises(AgentTypeError, match="missing system_prompt"):
        r.register({"type": "empty"})


def test_custom_types_come_from_the_plugin_hook_and_a_bad_one_is_skipped(caplog, tmp_path):
    class Plugin:
        @hookimpl
        def register_agent_types(self, register):
            register({"type": "translator", "system_prompt": "You translate."})
            register({"type": "coder", "system_prompt": "hijack"})

    pm = load_plugins(new_manager())
    pm.register(Plugin(), name="translator-plugin")
    with Workspace.open(tmp_path, announce=False, plugins=pm) as ws:
        r = ws.agent_types
        assert r.has("translator") and "hijack" not in r.get("coder").system_prompt
    assert "'translator-plugin': skipped an agent type" in caplog.text and "cannot be overridden" in caplog.text


def test_spawner_lifecycle_and_enforced_transitions(db):
    s = Spawner(db, AgentRegistry())
    a = s.spawn("coder", name="alice", session_id="s1", metadata={"k": 1})
    assert a.status == "idle" and s.get_by_name("alice").id == a.id and s.get(a.id).metadata == {"k": 1}
    with pytest.raises(ValueError, match="named 'alice' already exists and is idle"):
        s.spawn("coder", name="alice")
    with pytest.raises(UnknownAgentTypeError):
        s.spawn("wizard")
    s.spawn("tester", session_id="s2")
    assert [x.name for x in s.list("s1")] == ["alice"] and len(s.list()) == 2
    assert s.update_status(a.id, "running").started_at is not None
    with pytest.raises(InvalidTransitionError, match="cannot go from 'running' to 'pending'"):
        s.update_status(a.id, "pending")
    assert s.get(a.id).status == "running"  # nothing changed
    done = s.update_status(a.id, "completed", result="ok")
    assert done.ended_at and done.result == "ok"
    with pytest.raises(InvalidTransitionError, match="allowed: none \\(terminal\\)"):
        s.stop(a.id)
    with pytest.raises(InvalidTransitionError, match="unknown agent status 'zombie'"):
        s.update_status(a.id, "zombie")
    with pytest.raises(KeyError, match="no agent with id 'nope'"):
        s.update_status("nope", "running")


@pytest.mark.slow
def test_spawned_agents_are_visible_to_another_process(db):
    s = Spawner(db)
    a = s.spawn("researcher", name="bob")
    s.update_status(a.id, "running")
    code = ("import sys; from agentstack_lab.store import SQLiteDatabase; from agentstack_lab.agents import Spawner;"
            "print(Spawner(SQLiteDatabase(sys.argv[1])).get_by_name('bob').status)")
    out = subprocess.run([sys.executable, "-c", code, str(db.path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "running"


def test_identity_lifecycle_with_audit_trail(db):
    ids = IdentityService(db, AgentRegistry())
    ident = ids.create("analyst", display_name="Ana", capabilities=["sql"], created_by="lead")
    assert ident.status == "created" and ids.get_by_name("Ana").agent_id == ident.agent_id
    ids.activate(ident.agent_id, actor_id="lead")
    ids.deactivate(ident.agent_id, reason="idle", actor_id="ops")
    ids.activate(ident.agent_id, actor_id="ops")
    ids.update(ident.agent_id, description="numbers", actor_id="lead")
    with pytest.raises(InvalidTransitionError, match="cannot go from 'active' to 'active'"):
        ids.activate(ident.agent_id)
    retired = ids.retire(ident.agent_id, reason="replaced", actor_id="lead")
    assert retired.retired_at and retired.retirement_reason == "replaced" and retired.version == 2
    with pytest.raises(InvalidTransitionError, match="retired is final"):
        ids.activate(ident.agent_id)
    with pytest.raises(InvalidTransitionError, match="cannot be updated"):
        ids.update(ident.agent_id, description="x")
    trail = ids.get_audit_trail(ident.agent_id)
    assert [(t.action, t.previous_status, t.new_status) for t in reversed(trail)] == [
        ("created", None, "created"), ("activated", "created", "active"), ("deactivated", "active", "dormant"),
        ("activated", "dormant", "active"), ("updated", "active", "active"), ("retired", "active", "retired")]
    assert trail[0].reason == "replaced" and trail[0].actor_id == "lead" and trail[0].timestamp
    assert len(ids.get_audit_trail(ident.agent_id, limit=2)) == 2
    assert [i.display_name for i in ids.list(status="retired")] == ["Ana"]
    with pytest.raises(ValueError, match="unknown identity status"):
        ids.list(status="asleep")
