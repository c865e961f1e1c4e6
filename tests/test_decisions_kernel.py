"""A re-run ``%agent`` cell and a dead kernel leave no decision pending forever (a real kernel via nbclient)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from agentstack_lab.decisions import Decisions
from agentstack_lab.store.connection import SQLiteDatabase

pytestmark = pytest.mark.slow


def _decisions(db: SQLiteDatabase, want: int, timeout: float = 60) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = Decisions(db).list()
        if len(items) >= want and any(d.pending for d in items):
            return items
        time.sleep(0.1)
    raise AssertionError(f"expected {want} decisions, got {Decisions(db).list()}")


def _execute_as_cell(kc, code: str, cell_id: str) -> None:
    """An execute_request carrying the cell's id in its metadata, as JupyterLab and Notebook 7 send it."""
    msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                         metadata={"cellId": cell_id})
    kc.shell_channel.send(msg)
    while True:
        reply = kc.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            assert reply["content"]["status"] == "ok", reply["content"]
            return


def test_rerun_cell_and_dead_kernel_cancel_pending_decisions(workdir):
    ask = "run = %agent --no-subagents --executor subprocess how are sales trending in df?"
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(workdir))
    try:
        _execute_as_cell(kc, "%load_ext agentstack_lab", "cell-setup")
        _execute_as_cell(kc, ask, "cell-ask")
        db = SQLiteDatabase(workdir / ".agentstack" / "agentstack.db")
        (first,) = _decisions(db, 1)
        assert first.kind == "approval" and first.pending
        _execute_as_cell(kc, ask, "cell-ask")  # the same cell again: its old run is stopped, its question cancelled
        items = _decisions(db, 2)
        old = next(d for d in items if d.id == first.id)
        deadline = time.monotonic() + 30
        while old.pending and time.monotonic() < deadline:
            time.sleep(0.1)
            old = Decisions(db).get(first.id)
        assert old.state == "cancelled" and "its cell was run again" in old.reason
        new = next(d for d in items if d.id != first.id)
        assert Decisions(db).get(new.id).pending
        km.shutdown_kernel(now=True)  # SIGKILL: the kernel dies with a question pending
    finally:
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel(now=True)
    time.sleep(0.5)
    script = Path(sys.executable).with_name("agentstack-lab")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
    listed = subprocess.run([*cmd, "-w", str(workdir), "decisions", "list", "--all", "--json"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    states = {d["id"]: (d["state"], d["reason"]) for d in json.loads(listed.stdout)}
    assert states[new.id][0] == "cancelled" and "owner process" in states[new.id][1] and "ended" in states[new.id][1]
    assert not any(s == "pending" for s, _ in states.values())
