"""Decisions answered from anywhere: two real OS processes (``agent run --on-query wait`` and
``decisions approve|reject|answer``), the loser of a race, expiry, interventions from the CLI.

Exit codes follow ``agentstack_lab.cli.common``: 1 when the run failed or was stopped, 2 for bad input
or an answer that came too late."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentstack_lab.decisions import Decisions
from agentstack_lab.engine.log import read_events
from agentstack_lab.events import AgentState, ToolResult
from agentstack_lab.store.connection import SQLiteDatabase
from tests.waits import poll

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
ASKS_FOR_CODE = "how are sales trending in df?"   # the scripted provider wants to run Python for this one

pytestmark = pytest.mark.slow


def cli(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(folder), *args], capture_output=True, text=True, timeout=timeout)


def start_run(folder: Path, *extra: str, prompt: str = ASKS_FOR_CODE) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "-w", str(folder), "agent", "run", prompt, "--no-subagents", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def pending_decision(folder: Path, proc: subprocess.Popen, timeout: float = 90) -> dict:
    """The first pending decision, read with ``decisions list --json`` (another process) as it appears."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.stdout.read()} {proc.stderr.read()}")
        if (folder / ".agentstack" / "agentstack.db").exists():
            listed = cli(folder, "decisions", "list", "--json")
            assert listed.returncode == 0, listed.stderr
            items = json.loads(listed.stdout)
            if items:
                return items[0]
        time.sleep(0.2)
    raise AssertionError("no decision appeared")


def test_headless_run_waits_for_an_approval_from_another_process(workdir):
    run = start_run(workdir, "--on-query", "wait", "--decision-timeout", "2m")
    try:
        d = pending_decision(workdir, run)
        assert d["kind"] == "approval" and d["state"] == "pending" and "df" in d["code"]
        shown = cli(workdir, "decisions", "show", d["id"][:8])
        assert shown.returncode == 0 and "kind:    approval" in shown.stdout and "code:" in shown.stdout
        approved = cli(workdir, "decisions", "approve", d["id"][:8])
        assert approved.returncode == 0 and approved.stdout.strip() == f"decision {d['id'][:8]} approved"
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert f"decisions approve {d['id']}" in out  # the run told the terminal how to answer it
    assert "↳ python" in out and "NameError: name 'df' is not defined" in out  # the approved code ran
    late = cli(workdir, "decisions", "reject", d["id"])
    assert late.returncode == 2 and late.stderr.strip().startswith(
        f"error: decision {d['id']} already answered (by ") and late.stderr.strip().endswith("from the terminal)")
    everything = json.loads(cli(workdir, "decisions", "list", "--all", "--json").stdout)
    assert [(x["state"], x["surface"], x["answer"]) for x in everything] == [("answered", "cli", {"approved": True})]


def test_headless_run_rejected_from_another_process_continues_without_the_code(workdir):
    run = start_run(workdir, "--on-query", "wait")
    try:
        d = pending_decision(workdir, run)
        rejected = cli(workdir, "decisions", "reject", d["id"], "--reason", "not on prod data")
        assert rejected.returncode == 0 and "rejected: not on prod data" in rejected.stdout
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert "rejected by the user" in out and "NameError" not in out  # the code never ran


def test_headless_run_whose_decision_expires_fails_closed(workdir):
    run = start_run(workdir, "--on-query", "wait", "--decision-timeout", "1s")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1
    assert err.strip().splitlines()[-1].startswith("error: run failed closed: agent ")
    assert "nobody answered its approval query within 1.0 s" in err and "Traceback" not in err
    (d,) = json.loads(cli(workdir, "decisions", "list", "--all", "--json").stdout)
    assert d["state"] == "expired" and d["answer"] is None
    late = cli(workdir, "decisions", "approve", d["id"])
    assert late.returncode == 2 and "is expired" in late.stderr


def test_cli_bad_input_is_one_line_and_changes_nothing(workdir):
    db = SQLiteDatabase(workdir / ".agentstack" / "agentstack.db")
    ds = Decisions(db)
    q = ds.create(kind="clarification", prompt="Which year?")
    for args, message in [
        (("decisions", "show", "ghost"), "error: no decision 'ghost'"),
        (("decisions", "approve", q.id), "is a clarification question, not an approval"),
        (("decisions", "list", "--state", "done"), "unknown decision state 'done'"),
        (("agent", "run", "hi", "--on-query", "maybe"), "--on-query must be fail, wait or auto"),
        (("agent", "run", "hi", "--decision-timeout", "10m"), "--decision-timeout only applies with --on-query wait"),
        (("agent", "run", "hi", "--on-query", "wait", "--decision-timeout", "soon"),
         "RunOptions.decision_timeout must be a positive duration"),
        (("agent", "pause", "ghost"), "no agent 'ghost'"),
    ]:
        res = cli(workdir, *args)
        assert res.returncode == 2 and message in res.stderr.strip().splitlines()[-1], (args, res.stderr)
        assert "Traceback" not in res.stderr
    assert ds.get(q.id).pending
    answered = cli(workdir, "decisions", "answer", q.id[:6], "2024", "--json")
    assert answered.returncode == 0 and json.loads(answered.stdout)["answer"] == "2024"


def test_auto_policy_approves_and_records_it(workdir):
    res = cli(workdir, "agent", "run", ASKS_FOR_CODE, "--no-subagents", "--on-query", "auto")
    assert res.returncode == 0, res.stderr
    assert "NameError: name 'df' is not defined" in res.stdout
    (d,) = json.loads(cli(workdir, "decisions", "list", "--all", "--json").stdout)
    assert (d["kind"], d["state"], d["surface"], d["answer"]) == ("approval", "answered", "policy", {"approved": True})


def _paused_after_code(folder: Path, run_id: str) -> bool:
    """The run's log has a tool result followed by the root's ``paused`` status."""
    db = SQLiteDatabase(folder / ".agentstack" / "agentstack.db")
    try:
        events = [ev for _, ev in read_events(db, run_id)]
    finally:
        db.close()
    ran = next((i for i, ev in enumerate(events) if isinstance(ev, ToolResult)), None)
    return ran is not None and any(isinstance(ev, AgentState) and ev.agent_id == run_id
                                   and ev.state.get("status") == "paused" for ev in events[ran:])


def _applied(folder: Path, count: int, timeout: float = 30) -> list[tuple]:
    db = SQLiteDatabase(folder / ".agentstack" / "agentstack.db")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = [tuple(r) for r in db.query("SELECT action, applied_at IS NOT NULL, error FROM interventions ORDER BY id")]
        if len(rows) >= count and all(r[1] for r in rows):
            db.close()
            return rows
        time.sleep(0.1)
    raise AssertionError(f"interventions not applied: {rows}")


def test_pause_comment_resume_from_another_process(workdir):
    """``agent pause|comment|resume`` queue interventions that the run's own process applies between steps."""
    run = start_run(workdir, "--on-query", "wait")
    try:
        d = pending_decision(workdir, run)
        root = d["runId"]
        paused = cli(workdir, "agent", "pause", root[:8])
        assert paused.returncode == 0 and "pause queued" in paused.stdout
        assert cli(workdir, "agent", "comment", root, "mention the seasonality").returncode == 0
        assert _applied(workdir, 2) == [("pause", 1, None), ("comment", 1, None)]
        assert cli(workdir, "decisions", "approve", d["id"]).returncode == 0
        poll(lambda: _paused_after_code(workdir, root), "the approved code to run and the agent to pause")
        assert run.poll() is None  # the code ran, and the paused agent waits before its next model call
        tree = json.loads(cli(workdir, "agent", "tree", root, "--json").stdout)
        assert tree["metadata"].get("paused") is True and tree["userComment"] == "mention the seasonality"
        assert tree["status"] == "paused"  # every surface shows it paused, not running (issue 25 item 6)
        listed = json.loads(cli(workdir, "agent", "list", "--json").stdout)
        assert [r["status"] for r in listed] == ["paused"]
        assert "paused" in cli(workdir, "agent", "watch", "--once").stdout
        assert cli(workdir, "agent", "resume", root).returncode == 0
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert "NameError: name 'df' is not defined" in out


def test_stop_from_another_process_cancels_its_decision(workdir):
    run = start_run(workdir, "--on-query", "wait")
    try:
        d = pending_decision(workdir, run)
        stopped = cli(workdir, "agent", "stop", d["runId"])
        assert stopped.returncode == 0 and "stop queued" in stopped.stdout
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 1 and "stopped by the user from the terminal" in err
    (after,) = json.loads(cli(workdir, "decisions", "list", "--all", "--json").stdout)
    assert after["state"] == "cancelled"
    again = cli(workdir, "agent", "resume", d["runId"])
    assert again.returncode == 2 and "nothing to resume" in again.stderr
