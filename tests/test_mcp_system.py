"""MCP agent_spawn/agent_update_status, identity_get/list/update, system_health/system_config (issue 11 item 9)
through a real ``agentstack-lab mcp`` server process and the real ``mcp`` client."""

from __future__ import annotations

import json

import pytest

from tests.test_mcp import call, error, mcp_client

pytestmark = pytest.mark.slow  # every test here starts a process


async def test_spawn_update_identities_health_and_config(workdir):
    (workdir / "agentstack.config.json").write_text(json.dumps(
        {"providers": {"openai": {"api_key": "sk-test-secret-value-123456"}}, "monitoring": {"max_api_calls": 7}}))
    async with mcp_client(workdir) as s:
        agent = await call(s, "agent_spawn", agent_type="coder", name="builder")
        assert (agent["name"], agent["type"], agent["status"]) == ("builder", "coder", "idle")
        assert "already exists" in await error(s, "agent_spawn", agent_type="coder", name="builder")
        assert "unknown agent type" in (await error(s, "agent_spawn", agent_type="wizard")).lower()
        running = await call(s, "agent_update_status", agent="builder", status="running")
        assert running["status"] == "running" and running["startedAt"]
        done = await call(s, "agent_update_status", agent=agent["id"], status="completed", result="built")
        assert (done["status"], done["result"]) == ("completed", "built")
        bad = await error(s, "agent_update_status", agent="builder", status="running")
        assert "completed" in bad and "running" in bad  # a finished agent cannot restart: nothing changed
        assert (await call(s, "agent_status", agent_id="builder"))["status"] == "completed"

        ident = await call(s, "identity_create", agent_type="researcher", display_name="ada")
        other = await call(s, "identity_create", agent_type="coder", display_name="bob")
        got = await call(s, "identity_get", identity="ada")
        assert got["agentId"] == ident["agentId"] and got["status"] == "created"
        updated = await call(s, "identity_update", identity=ident["agentId"], description="reads papers",
                             capabilities=["search"])
        assert (updated["description"], updated["version"]) == ("reads papers", ident["version"] + 1)
        assert "taken" in await error(s, "identity_update", identity="ada", display_name="bob")
        assert "at least one" in await error(s, "identity_update", identity="ada")
        assert "no identity" in await error(s, "identity_get", identity="nobody")
        listed = await call(s, "identity_list", agent_type="coder")
        assert [i["agentId"] for i in listed["identities"]] == [other["agentId"]]
        assert (await call(s, "identity_list", status="created"))["count"] == 2
        audit = await call(s, "identity_audit", identity="ada")
        assert [a["action"] for a in audit["audit"]][:2] == ["updated", "created"]

        health = await call(s, "system_health")
        assert health["status"] == "healthy" and {c["name"] for c in health["checks"]} >= {
            "database", "writable", "migrations", "events", "memory", "embedder", "provider", "queue", "agents"}
        assert (await call(s, "system_health", kind="live"))["kind"] == "live"
        config = await call(s, "system_config")
        assert config["config"]["providers"]["openai"]["api_key"] == "***"
        assert config["config"]["monitoring"]["max_api_calls"] == 7
        assert config["source"].endswith("agentstack.config.json")
        assert "sk-test-secret-value-123456" not in json.dumps(config)
