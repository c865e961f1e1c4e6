"""Secrets are redacted wherever they are stored or shown (issue 26, item 6).

A key pasted into a prompt (and echoed by the model) reached the events, the ``agents`` rows and every
surface reading them; a task's input kept it; a config value of ``${ANTHROPIC_API_KEY}`` named as an
unknown provider printed the key; ``config show`` showed any ``${VAR}`` value that was not a known
secret field. Now the run redacts each event as it is emitted (what the log stores and every surface
shows), a task's input is stored redacted, error lines go through one redaction, and ``config show``
prints any other ``${VAR}`` value as the file wrote it (secret fields stay ``***``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.log import read_events
from agentstack_lab.providers.testing import TestModel

KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
def echo():
    """A test model whose text carries the prompt (and the key in it) back."""
    return TestModel(main=lambda r: f"you said: {r.metadata['prompt']}",
                     summary=lambda r: f"you said: {r.metadata['prompt']}")


def cli(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([*CLI, "-w", str(folder), *args], capture_output=True, text=True, timeout=120,
                          cwd=folder, env={**os.environ, **(env or {})})


async def test_a_key_in_a_prompt_and_the_models_text_is_stored_and_shown_redacted(ws, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    run = AgentRun(f"why does {KEY} fail?", workspace=ws, provider=echo())
    live = []
    run.subscribe(lambda ev: live.append(json.dumps(ev.to_wire() if hasattr(ev, "to_wire") else str(ev))))
    await run
    assert run.status == "completed"
    stored = [json.dumps(ev.state if ev.type == "agent-state" else str(ev)) for _, ev in read_events(ws.db, run.id)]
    assert stored and not any(KEY in s for s in stored)
    assert any("***" in s for s in stored)
    assert not any(KEY in s for s in live)
    rows = ws.db.query("SELECT prompt, result, metadata FROM agents WHERE run_id = ?", (run.id,))
    assert rows and not any(KEY in str(v) for r in rows for v in r)
    raw = ws.db.query("SELECT group_concat(payload, '') FROM events WHERE run_id = ?", (run.id,))[0][0]
    assert KEY not in raw and "***" in raw


@pytest.mark.slow
def test_cli_lists_and_tasks_never_show_a_pasted_key(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    env = {"ANTHROPIC_API_KEY": KEY}
    assert cli(workdir, "agent", "run", f"check {KEY} please", "--no-subagents", env=env).returncode == 0
    made = cli(workdir, "task", "create", f"rotate {KEY}", env=env)
    assert made.returncode == 0, made.stderr
    agents = json.loads(cli(workdir, "agent", "list", "--json").stdout)
    run_id = (agents[0] if isinstance(agents, list) else agents["agents"][0])["runId"]
    for args in (["agent", "list", "--json"], ["task", "list", "--json"], ["agent", "tree", run_id, "--json"]):
        shown = cli(workdir, *args)   # a later process, without the variable: what was stored is redacted
        assert shown.returncode == 0, (args, shown.stderr)
        assert KEY not in shown.stdout and "***" in shown.stdout, args
    db = (workdir / ".agentstack" / "agentstack.db").read_bytes()
    assert KEY.encode() not in db


@pytest.mark.slow
def test_an_unknown_provider_from_the_environment_is_named_without_its_value(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "agentstack.config.json").write_text(json.dumps({"providers": {"default": "${ANTHROPIC_API_KEY}"}}))
    for args in (["agent", "run", "hi"], ["memory", "list"], ["config", "validate"]):
        done = cli(workdir, *args, env={"ANTHROPIC_API_KEY": KEY})
        assert KEY not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
    done = cli(workdir, "agent", "run", "hi", env={"ANTHROPIC_API_KEY": KEY})
    assert done.returncode == 2 and "unknown provider" in done.stderr, done.stderr


@pytest.mark.slow
def test_config_show_prints_every_environment_value_as_the_file_wrote_it(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "agentstack.config.json").write_text(json.dumps({
        "memory": {"postgres": {"dsn": "postgresql://me:${PGPASS}@db.team:5432/agents"}},
        "providers": {"ollama": {"base_url": "http://${OLLAMA_HOSTNAME:-localhost}:11434"}}}))
    done = cli(workdir, "config", "show", "--json", env={"PGPASS": "hunter2-but-longer", "OLLAMA_HOSTNAME": "gpu-7"})
    assert done.returncode == 0, done.stderr
    assert "hunter2-but-longer" not in done.stdout and "gpu-7" not in done.stdout
    shown = json.loads(done.stdout)
    config = shown.get("config", shown)
    assert config["memory"]["postgres"]["dsn"] == "***"          # a secret field, masked as always
    assert config["providers"]["ollama"]["base_url"] == "http://${OLLAMA_HOSTNAME:-localhost}:11434"
