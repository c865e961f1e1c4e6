"""A run's own session ends with the run; a session the caller passed stays open (through the CLI)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from agentstack_lab.cli import app

runner = CliRunner()
QUEUED = 12


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def active() -> list[dict]:
    return json.loads(invoke("session", "active", "--json").stdout)


def test_queued_tasks_run_by_a_worker_leave_no_active_session(workdir):
    for i in range(QUEUED):
        invoke("queue", "add", f"what is {i} squared?")
    done = json.loads(invoke("worker", "--until-empty", "--concurrency", "2", "--json").stdout)
    assert done["completed"] == QUEUED and done["failed"] == 0
    assert active() == []
    runs = json.loads(invoke("agent", "list", "--runs", "--json").stdout)
    assert len(runs) == QUEUED
    ended = json.loads(invoke("session", "status", runs[0]["sessionId"], "--json").stdout)
    assert [s["status"] for s in ended] == ["ended"]


def test_agent_run_leaves_no_active_session(workdir):
    invoke("agent", "run", "what is a monad?")
    assert active() == []


def test_a_run_in_a_given_session_leaves_it_active(workdir):
    sid = invoke("session", "start", "--name", "mine").stdout.strip()
    invoke("memory", "store", "kept", "a note of mine", "--session", sid)
    invoke("agent", "run", "what is a monad?", "--session", sid)
    assert [s["id"] for s in active()] == [sid]
    assert json.loads(invoke("memory", "get", "kept", "--session", sid, "--json").stdout)["content"] == "a note of mine"
