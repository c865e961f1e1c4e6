"""A run whose process is killed: its agents become ``failed`` (with the reason) for every reader; live runs stay running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentstack_lab.engine import AgentRun, liveness
from agentstack_lab.engine.liveness import ProcessIdentity, owner_alive, reap_orphans, this_process
from agentstack_lab.engine.log import read_events, rebuild_tree
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace

# A run in its own process, the way a notebook kernel runs one; the scripted model is slowed down.
RUN_IN_ANOTHER_PROCESS = textwrap.dedent("""
    import asyncio, sys
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.workspace import Workspace

    async def main():
        ws = Workspace.open(sys.argv[1], announce=False)
        run = AgentRun(sys.argv[3], workspace=ws, provider=ScriptedProvider(latency=float(sys.argv[2])),
                       options={"interactive": False}).start()
        print(run.id, flush=True)
        await run

    asyncio.run(main())
""")
CLI = [sys.executable, "-m", "agentstack_lab.cli"]


def start_run(folder: Path, latency: float, prompt: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", RUN_IN_ANOTHER_PROCESS, str(folder), str(latency), prompt],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = proc.stdout.readline().strip()
    assert len(run_id) == 36, proc.stderr.read()
    return proc, run_id


def wait_for(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def statuses(db, run_id: str) -> dict[str, tuple[str, str | None]]:
    return {r[0]: (r[1], r[2]) for r in db.query("SELECT id, status, error FROM agents WHERE run_id = ?", (run_id,))}


def flatten(node: dict) -> dict[str, tuple[str, str | None]]:
    out = {node["id"]: (node["status"], node.get("error"))}
    for child in node.get("children", []):
        out.update(flatten(child))
    return out


def events_of(db, run_id: str) -> list[tuple[int, str, str]]:
    return [tuple(r) for r in db.query("SELECT seq, type, payload FROM events WHERE run_id = ? ORDER BY seq", (run_id,))]


@pytest.mark.slow
def test_sigkill_mid_run_fails_its_agents_for_every_reader_and_spares_a_live_run(tmp_path):
    folder = tmp_path / "ws"
    ws = Workspace.open(folder, announce=False)
    db = ws.db
    live, live_id = start_run(folder, 30.0, "a run that stays alive")  # sits in its first model call
    victim, victim_id = start_run(folder, 1.0, "what is a monad?")
    try:
        # mid-run: the root has split into subagents that are still working
        wait_for(lambda: len(s := statuses(db, victim_id)) == 3
                 and sum(st == "running" for st, _ in s.values()) == 3)
        before = events_of(db, victim_id)
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.wait(timeout=30) == -signal.SIGKILL
        at_kill = statuses(db, victim_id)
        assert any(st != "completed" for st, _ in at_kill.values()) and all(st != "failed" for st, _ in at_kill.values())
        assert statuses(db, live_id)[live_id][0] == "running"

        assert db.query("PRAGMA integrity_check")[0][0] == "ok"
        after = events_of(db, victim_id)
        assert after[:len(before)] == before  # nothing written before the kill is lost, still in seq order
        snapshot = tmp_path / "copy" / ".agentstack" / "agentstack.db"
        snapshot.parent.mkdir(parents=True)
        db.execute("VACUUM INTO ?", (str(snapshot),))  # the same state for the MCP check below

        # the CLI, in its own process, reaps and lists
        out = subprocess.run([*CLI, "-w", str(folder), "agent", "list", "--json", "--limit", "100"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        listed = {a["id"]: a for a in json.loads(out.stdout)}
        for agent_id, (was, _) in at_kill.items():
            row = listed[agent_id]
            if was in ("completed", "stopped"):
                assert row["status"] == was
            else:
                assert row["status"] == "failed"
                assert row["error"] == f"owner process {victim.pid} ended while the agent was {was}"
                assert row["endedAt"] is not None
        assert listed[live_id]["status"] == "running" and listed[live_id]["error"] is None  # no false positive
        assert live.poll() is None

        # log and table agree: the tree rebuilt from the log alone says what the agents table says
        assert flatten(rebuild_tree(db, victim_id)) == statuses(db, victim_id)
        after_reap = events_of(db, victim_id)
        assert after_reap[:len(after)] == after
        added = after_reap[len(after):]
        failed = [a for a, (was, _) in at_kill.items() if was not in ("completed", "stopped")]
        assert [t for _, t, _ in added] == ["agent-state", "error"] * len(failed)
        assert [seq for seq, _, _ in after_reap] == sorted(seq for seq, _, _ in after_reap)

        # written once: later readers (this process, another listing) find nothing more to do
        assert reap_orphans(db) == []
        subprocess.run([*CLI, "-w", str(folder), "agent", "tree", victim_id, "--json"], check=True,
                       capture_output=True, timeout=120)
        assert events_of(db, victim_id) == after_reap

        # the MCP tools reap too (on a copy taken before any reaper ran)
        from agentstack_lab.mcp.tools import Toolbox

        tools = Toolbox(Workspace.open(snapshot, announce=False))
        child = next(a for a in failed if a != victim_id)
        status = tools.agent_status(child)
        assert status["status"] == "failed" and status["error"].startswith(f"owner process {victim.pid} ended")
        assert status["last_event"]["type"] == "error"
        counts = tools.system_status()["counts"]["agents"]
        assert counts.get("failed") == len(failed) and counts.get("running") == 1  # the live run, still running
        assert {a["id"]: a["status"] for a in tools.agent_list(run_id=victim_id)["agents"]} == \
            {a: "failed" if was not in ("completed", "stopped") else was for a, (was, _) in at_kill.items()}

        # the live run, once its process is killed too, is failed the same way
        live.kill()
        live.wait(timeout=30)
        gone = reap_orphans(db)
        assert {g["run_id"] for g in gone} == {live_id}
        assert statuses(db, live_id)[live_id] == ("failed", f"owner process {live.pid} ended while the agent was running")
    finally:
        for proc in (live, victim):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        ws.close()


# --- deciding liveness -----------------------------------------------------------------------------
def owner_row(who: ProcessIdentity, heartbeat_at: float | None = None) -> dict:
    return {"pid": who.pid, "host": who.host, "boot_id": who.boot_id, "pid_ns": who.pid_ns,
            "start_ticks": who.start_ticks, "heartbeat_at": time.time() if heartbeat_at is None else heartbeat_at}


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_owner_identity_decides_on_this_machine():
    me = this_process()
    assert me.start_ticks and me.boot_id and me.pid_ns
    long_ago = time.time() - 10 * liveness.STALE_S
    assert owner_alive(owner_row(me, heartbeat_at=long_ago), me)  # alive though silent (a long cell)
    reused = owner_row(me) | {"start_ticks": me.start_ticks + 1}
    assert not owner_alive(reused, me)  # same pid, another start time: the pid was reused
    rebooted = owner_row(me) | {"boot_id": "another-boot"}
    assert not owner_alive(rebooted, me)

    exited = subprocess.Popen(["true"])
    exited.wait()
    assert not owner_alive(owner_row(me) | {"pid": exited.pid}, me)

    zombie = subprocess.Popen(["sleep", "30"])
    try:
        assert owner_alive(owner_row(me) | {"pid": zombie.pid, "start_ticks": liveness._proc_stat(zombie.pid)[1]}, me)
        os.kill(zombie.pid, signal.SIGKILL)
        wait_for(lambda: liveness._proc_stat(zombie.pid)[0] == "Z", timeout=10)  # killed, not yet waited for
        assert not owner_alive(owner_row(me) | {"pid": zombie.pid,
                                                "start_ticks": liveness._proc_stat(zombie.pid)[1]}, me)
    finally:
        zombie.kill()
        zombie.wait()


def test_heartbeat_decides_when_the_process_cannot_be_seen():
    me = this_process()
    other_ns = owner_row(me) | {"pid_ns": "pid:[1]", "pid": 1}  # e.g. a container sharing the volume
    assert owner_alive(other_ns, me)
    assert not owner_alive(other_ns | {"heartbeat_at": time.time() - liveness.STALE_S - 1}, me)
    other_host = owner_row(me) | {"host": me.host + "-elsewhere", "boot_id": "x", "pid": 999_999_999}
    assert owner_alive(other_host, me)
    assert not owner_alive(other_host | {"heartbeat_at": time.time() - liveness.STALE_S - 1}, me)


def test_a_run_of_this_process_is_never_reaped_and_its_heartbeat_ticks(workdir, monkeypatch):
    monkeypatch.setattr(liveness, "HEARTBEAT_S", 0.05)
    ws = Workspace.open(workdir, announce=False)

    async def main():
        run = AgentRun("what is a monad?", workspace=ws, provider=ScriptedProvider(latency=0.3),
                       options={"interactive": False, "subagents": False}).start()
        first = ws.db.query("SELECT pid, heartbeat_at FROM run_owners WHERE run_id = ?", (run.id,))[0]
        assert first[0] == os.getpid()
        for _ in range(200):   # a few heartbeats (every 50 ms here), polled
            beat = ws.db.query("SELECT heartbeat_at FROM run_owners WHERE run_id = ?", (run.id,))[0][0]
            if beat > first[1]:
                break
            await asyncio.sleep(0.01)
        assert reap_orphans(ws.db) == [] and run.status == "running"
        assert beat > first[1]
        await run
        return run

    run = asyncio.run(main())
    assert run.status == "completed"
    assert statuses(ws.db, run.id)[run.id] == ("completed", None)
    assert flatten(rebuild_tree(ws.db, run.id)) == statuses(ws.db, run.id)
    assert [ev.type for _, ev in read_events(ws.db, run.id)][-1] == "agent-completed"
    ws.close()


def test_an_orphan_whose_owner_cannot_be_checked_waits_for_its_heartbeat_to_go_stale(workdir):
    ws = Workspace.open(workdir, announce=False)
    db = ws.db

    async def main():
        run = AgentRun("what is a monad?", workspace=ws, provider=ScriptedProvider(latency=30),
                       options={"interactive": False, "subagents": False}).start()
        while statuses(db, run.id).get(run.id, ("",))[0] != "running":   # its row says running, polled
            await asyncio.sleep(0.01)
        # pretend the owner lives in another pid namespace: only its heartbeat can speak for it
        db.execute("UPDATE run_owners SET pid_ns = 'pid:[elsewhere]' WHERE run_id = ?", (run.id,))
        assert reap_orphans(db) == []
        db.execute("UPDATE run_owners SET heartbeat_at = heartbeat_at - ? WHERE run_id = ?",
                   (liveness.STALE_S + 5, run.id))
        reaped = reap_orphans(db)
        assert [(r["id"], r["was"]) for r in reaped] == [(run.id, "running")]
        assert statuses(db, run.id)[run.id] == ("failed",
                                                f"owner process {os.getpid()} ended while the agent was running")
        assert flatten(rebuild_tree(db, run.id)) == statuses(db, run.id)
        assert reap_orphans(db) == []
        run.stop()
        await run.wait(raise_on_error=False)

    asyncio.run(main())
    ws.close()
