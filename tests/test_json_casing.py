"""One casing rule for JSON leaving the process: every ``--json`` command and every MCP tool result has
camelCase keys (``events.camel_keys``, the converter the lab server uses too), while the user's and the
model's data keep the keys they were written with (a memory entry's ``metadata`` ``{"source_url": …}``).

The walks below run each of the 37 ``--json`` commands (typer runner) and each of the 49 MCP tools (the real
``mcp`` stdio client against ``agentstack-lab mcp``) and check every key with :func:`snake_keys`, written here
independently of the converter; both walks first check they cover every command and tool the app offers, so
a new one must be added here.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.config import Config
from agentstack_lab.events import DATA_KEYED, OPAQUE, VALUE_KEYS, camel_keys
from tests.test_review_loop import BUGGY, FAIL, FIXED, PASS

SNAKE = re.compile(r"_[a-z0-9]")
META = {"source_url": "https://example.com/q3.pdf", "page_no": 3, "nested_dict": {"max_rows": 5}}


def snake_keys(value: Any, path: str = "$") -> list[str]:
    """Paths of the snake_case keys in ``value``, not looking inside opaque data (the converter's rule)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}"
            if SNAKE.search(key) and key not in VALUE_KEYS:
                found.append(here)
            if key in OPAQUE:
                continue
            if key in DATA_KEYED and isinstance(item, dict):
                for name, sub in item.items():
                    found += snake_keys(sub, f"{here}[{name!r}]")
            else:
                found += snake_keys(item, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += snake_keys(item, f"{path}[{i}]")
    return found


# --- the converter -----------------------------------------------------------------------------------------
def test_camel_keys_cases_envelopes_and_passes_data_through():
    row = {"agent_id": "a", "created_at": 1.0, "metadata": META, "tags": ["x_y"],
           "results": [{"run_id": "r", "scores": {"fts_rank": 1}, "input": {"max_rows": 5}}],
           "counts": {"agents": {"waiting_user": 2, "completed": 1}},
           "providers": {"available": {"my_llm": {"available": True, "last_error": None}}}}
    wire = camel_keys(row)
    assert wire == {"agentId": "a", "createdAt": 1.0, "metadata": META, "tags": ["x_y"],
                    "results": [{"runId": "r", "scores": {"fts_rank": 1}, "input": {"max_rows": 5}}],
                    "counts": {"agents": {"waiting_user": 2, "completed": 1}},
                    "providers": {"available": {"my_llm": {"available": True, "lastError": None}}}}
    assert camel_keys(wire) == wire  # idempotent: a value cased at its source may pass again
    assert snake_keys(wire) == []
    assert snake_keys(row) == ["$.agent_id", "$.created_at", "$.results[0].run_id",
                               "$.providers.available['my_llm'].last_error"]


# --- the CLI ---------------------------------------------------------------------------------------------
runner = CliRunner()


def _json_commands() -> set[str]:
    """Every command path of the app that takes ``--json`` (``memory get``, ``worker``, ...)."""
    found: set[str] = set()

    def walk(cmd: Any, path: tuple[str, ...]) -> None:  # typer's vendored click: no isinstance on click's types
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))
        elif any("--json" in getattr(p, "opts", ()) for p in cmd.params):
            found.add(" ".join(path))

    walk(typer.main.get_command(app), ())
    return found


class Cli:
    """Runs commands with ``--json`` and keeps what each printed, by command path."""

    def __init__(self, workdir):
        self.workdir, self.out = workdir, {}

    def __call__(self, *args: str, code: int = 0) -> Any:
        result = runner.invoke(app, [*args, "--json"])
        assert result.exit_code == code, (args, result.output, result.stderr)
        data = json.loads(result.stdout)
        words = [a for a in args if not a.startswith("-")]
        path = next(" ".join(words[:n]) for n in (2, 1) if " ".join(words[:n]) in _json_commands())
        self.out.setdefault(path, []).append(data)
        return data


def test_memory_get_json_keeps_the_metadata_keys_and_cases_the_envelope(workdir):
    runner.invoke(app, ["memory", "store", "q3", "quarterly revenue notes", "--metadata", json.dumps(META)])
    got = json.loads(runner.invoke(app, ["memory", "get", "q3", "--json"]).stdout)
    assert got["metadata"] == META
    assert {"agentId", "createdAt", "updatedAt"} <= set(got) and not {"agent_id", "created_at"} & set(got)
    listed = json.loads(runner.invoke(app, ["memory", "list", "--json"]).stdout)
    hits = json.loads(runner.invoke(app, ["memory", "search", "quarterly", "--json"]).stdout)
    assert listed[0]["metadata"] == META and hits[0]["metadata"] == META and "agentId" in hits[0]


@pytest.mark.slow
def test_every_json_command_prints_camel_case_keys(workdir):
    from agentstack_lab.workspace import Workspace

    (workdir / "agentstack.config.json").write_text(json.dumps({"drift": {"enabled": True, "behavior": "warn"}}))
    cli = Cli(workdir)
    cli("memory", "store", "q3", "quarterly revenue notes", "--metadata", json.dumps(META))
    assert cli("memory", "get", "q3")["metadata"] == META
    cli("memory", "search", "quarterly")
    cli("memory", "list")
    assert cli("memory", "reembed")["finished"] is True
    sid = cli("session", "start", "--name", "demo")["id"]
    cli("session", "status", sid)
    cli("session", "active")
    cli("session", "end", sid)
    cli("config", "validate")

    run = cli("agent", "run", "what is a monad?")
    cli("agent", "list")
    cli("agent", "tree", run["runId"])
    cli("agent", "watch", "--once")

    root = cli("task", "create", "summarise the churn report")["task"]["id"]
    child = cli("task", "create", "summarise the churn report", "--parent", root)
    assert child["drift"]["action"] == "warned" and "isDrift" in child["drift"]
    cid = child["task"]["id"]
    cli("task", "assign", cid, "agent-7")
    cli("task", "complete", cid, "12% in March")
    cli("task", "list")
    cli("task", "get", cid)
    cli("task", "relationships", root)
    cli("task", "drift-metrics")
    cli("queue", "add", "what is a monad?")
    cli("queue", "list")
    cli("worker", "--until-empty")

    with Workspace.open(workdir, announce=False) as ws:
        asked = [ws.decisions.create(kind=kind, prompt="which year?", run_id="r-1", agent_id="a-1",
                                     options={"choice_list": ["2024"]}, metadata={"asked_by": "test"},
                                     code="print(1)" if kind == "approval" else None)
                 for kind in ("clarification", "approval", "approval")]
    cli("decisions", "list")
    assert cli("decisions", "show", asked[0].id)["options"] == {"choice_list": ["2024"]}
    cli("decisions", "answer", asked[0].id, "2024")
    cli("decisions", "approve", asked[1].id)
    cli("decisions", "reject", asked[2].id)

    (workdir / "calc.py").write_text(BUGGY)
    (workdir / "loop.json").write_text(json.dumps({"verdicts": [FAIL, PASS], "revisions": [FIXED]}))
    loop = cli("review", "run", "calc.py", "--script", "loop.json")
    cli("review", "list")
    cli("approval", "rules")
    assert cli("review", "status", loop["id"])["reviews"][0]["coderRunId"]
    cli("review", "issues", loop["id"])
    cli("system", "health")
    cli("workflow", "list")
    (workdir / "report.json").write_text("{}")
    cli("workflow", "validate", "report.json", code=1)

    # the config is a document with the config file's own keys: printed as written, it loads back
    shown = cli("config", "show")
    assert shown["agents"]["max_depth"] == 2 and Config.from_dict(shown).agents.max_depth == 2
    in_effect = cli("system", "config")
    assert in_effect.pop("source").endswith("agentstack.config.json") and Config.from_dict(in_effect).drift.enabled

    assert set(cli.out) == _json_commands()
    for path, outputs in cli.out.items():
        if path in ("config show", "system config"):
            continue
        for data in outputs:
            assert snake_keys(data) == [], (path, data)


# --- MCP -------------------------------------------------------------------------------------------------
class Tools:
    """Calls MCP tools through a real client session and keeps each result, by tool name."""

    def __init__(self, session):
        self.s, self.out = session, {}

    async def __call__(self, tool: str, **args: Any) -> Any:
        res = await self.s.call_tool(tool, args)
        assert not res.is_error, f"{tool} failed: {res.content[0].text}"
        self.out.setdefault(tool, []).append(res.structured_content)
        assert json.loads(res.content[0].text) == res.structured_content  # the text the model reads, too
        return res.structured_content

    async def until(self, tool: str, check, timeout: float = 60.0, **args: Any) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            got = await self(tool, **args)
            if check(got):
                return got
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting on {tool}"
            await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_mcp_memory_tools_keep_the_metadata_keys(workdir):
    pytest.importorskip("mcp")
    from tests.test_mcp import mcp_client

    async with mcp_client(workdir) as s:
        call = Tools(s)
        stored = await call("memory_store", key="q3", content="quarterly revenue notes", metadata=META)
        got = await call("memory_get", key="q3")
        hits = (await call("memory_search", query="quarterly"))["results"]
        entries = (await call("memory_list"))["entries"]
        for entry in (stored, got, hits[0], entries[0]):
            assert entry["metadata"] == META and "agentId" in entry and "agent_id" not in entry
        assert "createdAt" in got and snake_keys(got) == []


@pytest.mark.slow
async def test_every_mcp_tool_result_has_camel_case_keys(workdir):
    pytest.importorskip("mcp")
    from tests.test_mcp import EXPECTED_TOOLS, mcp_client

    (workdir / "agentstack.config.json").write_text(json.dumps({
        "drift": {"enabled": True, "behavior": "warn"},
        "consensus": {"enabled": True, "reviewer_strategy": "human", "require_for_risk_levels": ["high"],
                      "high_risk_patterns": ["deploy"], "high_risk_agent_types": [], "timeout_s": 120}}))
    async with mcp_client(workdir) as s:
        call = Tools(s)
        await call("memory_store", key="q3", content="quarterly revenue notes", metadata=META, tags=["work"])
        assert (await call("memory_get", key="q3"))["metadata"] == META
        await call("memory_search", query="quarterly")
        await call("memory_list")
        await call("memory_delete", key="q3")
        started = await call("session_start", name="demo", metadata={"team_name": "data"})
        assert started["metadata"] == {"team_name": "data"}
        await call("session_status", session_id=started["id"])
        await call("session_active")
        await call("session_end", session_id=started["id"], session_token=started["sessionToken"])

        run = await call("agent_run", prompt="what is a monad?", wait=True)
        await call("agent_status", agent_id=run["runId"])
        await call("agent_tree", run_id=run["runId"])
        await call("agent_list")
        await call("agent_types")

        ident = await call("identity_create", agent_type="researcher", display_name="ada",
                           metadata={"home_dir": "/data"})
        assert ident["metadata"] == {"home_dir": "/data"} and ident["displayName"] == "ada"
        await call("identity_transition", identity="ada", to="active")
        await call("identity_audit", identity=ident["agentId"])
        await call("identity_get", identity="ada")
        await call("identity_list")
        await call("identity_update", identity="ada", description="reads papers")
        status = await call("system_status")
        assert status["counts"]["agents"] == {"completed": 3} and "scripted" in status["providers"]["available"]
        await call("system_health")
        assert (await call("system_config"))["config"]["agents"]["max_depth"] == 2  # the config file's keys

        await call("agent_spawn", agent_type="coder", name="helper", metadata={"tool_set": "basic"})
        await call("agent_update_status", agent="helper", status="running")
        await call("agent_stop", agent_id="helper")

        asks = await call("agent_run", prompt="how are sales trending in df?", subagents=False, on_query="wait",
                          decision_timeout=120)
        pending = await call.until("decision_list", lambda r: r["count"] > 0, run_id=asks["runId"])
        decision = await call("decision_get", decision_id=pending["decisions"][0]["id"])
        await call("agent_intervene", agent_id=asks["runId"], action="comment", text="mind the seasonality")
        await call("decision_answer", decision_id=decision["id"], action="approve")
        await call.until("agent_status", lambda r: r["status"] == "completed", agent_id=asks["runId"])

        root = (await call("task_create", agent_type="researcher", input="map the churn drivers"))["task"]
        child = await call("task_create", agent_type="researcher", input="map the churn drivers",
                           parent_task_id=root["id"])
        cid = child["task"]["id"]
        await call("task_assign", task_id=cid, agent_id="agent-1")
        await call("task_complete", task_id=cid, output="pricing")
        await call("task_list")
        await call("task_get", task_id=cid)
        await call("task_get_relationships", task_id=root["id"])
        drift = await call("task_check_drift", task_input="map the churn drivers", task_type="researcher",
                           parent_task_id=cid)
        assert drift["result"]["checkedAncestors"] == 2 and "warning_threshold" in drift["config"]
        await call("task_drift_metrics")

        await call("consensus_check", agent_type="researcher", input="deploy on fridays")
        for decide in ("consensus_approve", "consensus_reject"):
            await call("agent_run", prompt="should we deploy on fridays?", on_query="wait")
            [cp] = (await call.until("consensus_list_pending", lambda r: r["count"] == 1))["checkpoints"]
            await call("consensus_get", checkpoint_id=cp["id"])
            await call(decide, checkpoint_id=cp["id"], feedback="later")

        loop = await call("review_loop_start", code=BUGGY, path="calc.py",
                          script={"verdicts": [FAIL, PASS], "revisions": [FIXED]}, wait=True)
        await call("review_loop_status", loop_id=loop["loopId"])
        await call("review_loop_issues", loop_id=loop["loopId"])
        await call("review_loop_list")
        await call("review_loop_get_code", loop_id=loop["loopId"])
        endless = await call("review_loop_start", code=BUGGY, script={"verdicts": [FAIL]}, max_iterations=50)
        await call("review_loop_abort", loop_id=endless["loopId"])

    assert set(call.out) == EXPECTED_TOOLS
    for tool, results in call.out.items():
        for data in results:
            assert snake_keys(data) == [], (tool, data)
