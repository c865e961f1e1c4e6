"""One options builder: the config's ``agents`` section, then each surface's explicit choices (issue 25, items 1-3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.engine.options import RunOptions, network_options, run_options
from agentstack_lab.errors import UsageError

# what the config sets; every surface must run with exactly these
CONFIGURED = {"max_depth": 1, "max_children": 3, "max_agents": 7, "max_tokens": 90_000, "auto_approve": True,
              "executor": "subprocess", "on_query": "auto", "max_turns": 5, "decision_timeout": 42.0}


def _write_config(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agentstack.config.json").write_text(json.dumps({"agents": CONFIGURED}))


def _configured(options: dict) -> dict:
    return {k: options[k] for k in CONFIGURED}


async def test_one_config_six_surfaces_same_effective_options(workdir, monkeypatch):
    from agentstack_lab.coordination import TaskQueue
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.coordinate import run_queued
    from agentstack_lab.mcp.tools import Toolbox
    from agentstack_lab.notebook.args import parse_agent_line
    from agentstack_lab.notebook.magics import build_run
    from agentstack_lab.server.base import ServerState
    from agentstack_lab.server.hub import EventHub
    from agentstack_lab.workspace import Workspace

    _write_config(workdir)
    monkeypatch.chdir(workdir)
    seen: dict[str, dict] = {}
    with Workspace.open(workdir) as ws:
        # %agent (the magic's own builder, as a kernel calls it)
        seen["notebook"] = build_run(None, parse_agent_line("what is a monad?"), ws).options.to_dict()
        # Python: a field the caller did not set comes from the config
        run = AgentRun("what is a monad?", workspace=ws, options=RunOptions(max_children=3))
        seen["python"] = run.options.to_dict()
        assert run.options.sources["max_children"] == "explicit" and run.options.sources["max_agents"] == "config"
        # MCP
        tb = Toolbox(ws)
        started = await tb.agent_run("what is a monad?", wait=True)
        seen["mcp"] = started["options"]
        # REST / WebSocket start-agent (both call ServerState.start_run)
        state = ServerState(workspace=ws, hub=EventHub(ws.db))
        lab_run = state.start_run("what is a monad?", None, {"subagents": False})
        await lab_run.wait(raise_on_error=False)
        seen["lab"] = lab_run.options.to_dict()
        # queue add + worker: a queued task's run
        task = TaskQueue(ws.db).enqueue("researcher", "what is a monad?", payload={"options": {"subagents": False}})
        claimed = TaskQueue(ws.db).claim("test-worker", "researcher")
        assert claimed is not None and claimed.id == task.id
        done = await run_queued(ws, claimed, run_factory=AgentRun)
        assert done["status"] == "completed"
        seen["worker"] = done["options"]
        await run.wait(raise_on_error=False)
    # agent run (the terminal), in the same folder
    import asyncio

    result = await asyncio.to_thread(CliRunner().invoke, app, ["agent", "run", "what is a monad?", "--no-subagents",
                                                                "--json"])
    assert result.exit_code == 0, result.output
    seen["terminal"] = json.loads(result.stdout)["options"]
    assert len(seen) == 6
    for surface, options in seen.items():
        assert _configured(options) == CONFIGURED, surface


def test_explicit_flags_win_over_the_config_and_headless_defaults_lose_to_it(workdir, monkeypatch):
    _write_config(workdir)
    from agentstack_lab.config import load_config

    config = load_config(start=workdir)
    opts = run_options(config, surface="terminal", given={"max_children": 1, "executor": "live"})
    assert (opts.max_children, opts.executor, opts.max_agents) == (1, "live", 7)
    assert opts.sources["max_children"] == "explicit" and opts.sources["max_agents"] == "config"
    assert opts.interactive is False and opts.sources["interactive"] == "surface"
    # with no config, a headless surface runs code in a subprocess; the notebook in the live kernel
    assert run_options(None, surface="terminal").executor == "subprocess"
    assert run_options(None, surface="notebook").executor == "live"
    assert RunOptions.coerce(opts) is opts  # a built one is used as is


def test_agent_run_has_the_magics_budget_flags(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(app, ["agent", "run", "what is a monad?", "--no-subagents", "--max-children", "2",
                                      "--max-agents", "5", "--max-tokens", "1000000", "--json"])
    assert result.exit_code == 0, result.output
    options = json.loads(result.stdout)["options"]
    assert (options["max_children"], options["max_agents"], options["max_tokens"]) == (2, 5, 1_000_000)
    bad = CliRunner().invoke(app, ["agent", "run", "x", "--max-agents", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_network_options_are_a_checked_subset(tmp_path):
    root = tmp_path / "ws"
    (root / "cassettes").mkdir(parents=True)
    existing = root / "cassettes" / "old.jsonl"
    existing.write_text("{}\n")
    assert network_options({"maxDepth": 1, "record": "cassettes/new.jsonl"}, root) == {
        "max_depth": 1, "record": str((root / "cassettes" / "new.jsonl").resolve())}
    for bad, words in (({"cluster": "tcp://127.0.0.1:1"}, "agents.cluster"), ({"interactive": False}, "server-side"),
                       ({"record": "/etc/passwd"}, "inside the workspace"), ({"replay": "../x.jsonl"}, "inside"),
                       ({"record": "cassettes/old.jsonl"}, "never overwrites"), ({"bogus": 1}, "bogus"),
                       ({"record": 5}, "cassette path")):
        with pytest.raises(UsageError, match=words):
            network_options(bad, root)
    # appending to the cassette being replayed is what new_episodes means
    assert network_options({"record": "cassettes/old.jsonl", "replay": "cassettes/old.jsonl",
                            "replayMode": "new_episodes"}, root)["record"] == str(existing.resolve())
    with pytest.raises(UsageError):
        network_options(["max_depth"], root)


async def test_rest_start_with_bad_options_is_one_line_and_starts_nothing(workdir):
    from agentstack_lab.server.base import ServerState
    from agentstack_lab.server.hub import EventHub
    from agentstack_lab.workspace import Workspace

    with Workspace.open(workdir) as ws:
        state = ServerState(workspace=ws, hub=EventHub(ws.db))
        for options in ({"cluster": "local"}, {"maxDepth": -1}, {"record": "../out.jsonl"}, {"max_agents": "many"}):
            with pytest.raises(UsageError) as info:
                state.start_run("hello", None, options)
            assert "\n" not in str(info.value)
        assert state.runs == {}


def test_queue_add_and_worker_carry_run_options(workdir, monkeypatch):
    from agentstack_lab.coordination import TaskQueue
    from agentstack_lab.workspace import Workspace

    monkeypatch.chdir(workdir)
    cli = CliRunner()
    added = cli.invoke(app, ["queue", "add", "what is a monad?", "--auto-approve", "--no-subagents", "--json"])
    assert added.exit_code == 0, added.output
    task_id = json.loads(added.stdout)["id"]
    with Workspace.open(workdir) as ws:
        assert TaskQueue(ws.db).get(task_id).payload["options"] == {"auto_approve": True, "subagents": False}
    bad = cli.invoke(app, ["queue", "add", "x", "--on-query", "sometimes"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    ran = cli.invoke(app, ["worker", "--until-empty", "--max-depth", "1", "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["completed"] == 1


def test_the_effective_options_are_recorded_for_other_processes(workdir, monkeypatch):
    """A run's effective options are in its root's agents row (REST ``GET runs/ID`` of another process reads
    them there), not repeated in every ``agent-state`` event."""
    from agentstack_lab.server.handlers import _recorded_options
    from agentstack_lab.workspace import Workspace

    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(app, ["agent", "run", "what is a monad?", "--no-subagents", "--max-children", "2",
                                      "--json"])
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["runId"]
    with Workspace.open(workdir, announce=False) as ws:
        recorded = _recorded_options(ws.db, run_id)
        states = [json.loads(r[0]) for r in ws.db.query("SELECT payload FROM events WHERE run_id = ? AND "
                                                         "type = 'agent-state'", (run_id,))]
    assert recorded is not None and recorded["max_children"] == 2 and recorded["subagents"] is False
    assert recorded == json.loads(result.stdout)["options"]
    assert states and not any("options" in s["state"]["metadata"] for s in states)
