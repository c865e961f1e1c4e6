"""A coordinated run whose Dask cluster cannot be reached fails within the connect timeout (issue 25 item 5):
one line and exit 2 from ``agent run``, a failed run from Python; no subagent is queued or reported done."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import pytest

from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.providers.scripted import ScriptedProvider

distributed = pytest.importorskip("distributed", reason="the Dask placement needs the dask extra (distributed)")

pytestmark = pytest.mark.slow  # Dask (its client, a cluster's address): the full lane

CLI = [sys.executable, "-m", "agentstack_lab.cli"]


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"  # bound then closed: nothing listens there


def test_python_run_on_an_unreachable_cluster_fails(ws):
    import dask.config

    from agentstack_lab.coordination.dask import ClusterError

    address = closed_port()
    run = AgentRun("how are sales trending?", workspace=ws, provider=ScriptedProvider(),
                   options=RunOptions(final_question=False, coordinate=True, cluster=address))
    t0 = time.monotonic()
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}), pytest.raises(ClusterError, match=address):
        asyncio.run(run.wait())
    assert time.monotonic() - t0 < 20
    assert run.status == "failed" and "cannot reach the Dask scheduler" in run.error
    assert run.tree["children"] == []    # never "completed" with subagents that never ran
    assert ws.db.query("SELECT count(*) FROM task_queue")[0][0] == 0


def test_cli_run_on_an_unreachable_cluster_exits_2_with_one_line(ws):
    address = closed_port()
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    t0 = time.monotonic()
    proc = subprocess.run([*CLI, "-w", str(ws.root), "agent", "run", "how are sales trending?", "--coordinate",
                           "--cluster", address, "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "using database" not in ln]
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0] and address in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout.strip() == ""
    assert ws.db.query("SELECT count(*) FROM task_queue")[0][0] == 0
