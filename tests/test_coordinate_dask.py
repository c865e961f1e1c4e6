"""A coordinated run places its subagents on a Dask cluster (issue 15 item 3, last sentence): a real
LocalCluster of two worker processes, the offline scripted provider, and the workspace's SQLite file
(the filesystem the workers share). The subagents run on Dask workers through the durable queue, and
their events, agent rows and results land in the coordinator's run as from any worker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from agentstack_lab.coordination import TaskQueue
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.log import rebuild_tree
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.providers.scripted import ScriptedProvider

distributed = pytest.importorskip("distributed", reason="the Dask placement needs the dask extra (distributed)")
pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "agentstack_lab.cli"]


def shape(node: dict) -> dict:
    return {"type": node["type"], "prompt": node["prompt"], "status": node["status"], "result": node.get("result"),
            "content": node.get("content"),
            "children": sorted((shape(c) for c in node.get("children", [])), key=lambda n: n["prompt"])}


def test_coordinated_run_places_its_subagents_on_dask_workers(ws):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pids, address = set(client.run(os.getpid).values()), client.scheduler.address

        async def main():
            plain = AgentRun("how are sales trending?", workspace=ws, provider=ScriptedProvider(),
                             options=RunOptions(final_question=False))
            await plain
            run = AgentRun("how are sales trending?", workspace=ws, provider=ScriptedProvider(),
                           options=RunOptions(final_question=False, coordinate=True, cluster=client))
            await run
            return plain, run

        plain, run = asyncio.run(main())
        left = [f for f in run.coordination.placement.futures.values()]
    assert run.status == "completed" and not left           # the run's end let go of its Dask tasks
    assert len(run.tree["children"]) == 2
    assert shape(run.tree) == shape(plain.tree) == shape(rebuild_tree(ws.db, run.id))
    rows = TaskQueue(ws.db).list(group_id=run.id)
    assert {t.state for t in rows} == {"completed"} and {t.id for t in rows} == {c["id"] for c in run.tree["children"]}
    for t in rows:   # worked by a one-task worker inside a Dask worker process, not by this process
        assert t.worker_id.startswith("dask-") and int(t.worker_id.split("-")[-2]) in pids
        assert int(t.worker_id.split("-")[-2]) != os.getpid()
    for child in run.tree["children"]:
        assert child["metadata"]["queue"]["cluster"] == address
        assert child["metadata"]["queue"]["worker"] in {t.worker_id for t in rows}
    # the Dask workers wrote the children's events and agent rows into the coordinator's run
    writers = ws.db.query("SELECT agent_id, count(*) FROM events WHERE run_id = ? GROUP BY agent_id", (run.id,))
    assert {c["id"] for c in run.tree["children"]} <= {r[0] for r in writers}
    agents = ws.db.query("SELECT id, parent_id, status FROM agents WHERE run_id = ?", (run.id,))
    assert {(r[1], r[2]) for r in agents if r[0] != run.id} == {(run.id, "completed")}


def test_cli_coordinate_on_a_local_cluster_and_bad_input(ws):
    proc = subprocess.run([*CLI, "-w", str(ws.root), "agent", "run", "how are sales trending?", "--coordinate",
                           "--cluster", "local", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = ws.db.query("SELECT state, worker_id FROM task_queue")
    assert len(rows) == 2 and {r[0] for r in rows} == {"completed"} and all(r[1].startswith("dask-") for r in rows)
    for args, needle in ((["--cluster", "local"], "--cluster only applies with --coordinate"),
                         (["--coordinate", "--cluster", "scheduler:8786"], "tcp://host:8786")):
        bad = subprocess.run([*CLI, "-w", str(ws.root), "agent", "run", "q", *args], capture_output=True, text=True,
                             timeout=120)
        assert bad.returncode == 2 and needle in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert ws.db.query("SELECT count(*) FROM task_queue")[0][0] == 2   # nothing changed


def test_config_names_a_bad_cluster_address():
    from agentstack_lab.config import Config
    from agentstack_lab.errors import AgentstackError

    with pytest.raises(AgentstackError, match="agents.cluster"):
        Config.from_dict({"agents": {"cluster": "scheduler:8786"}})
    assert Config.from_dict({"agents": {"cluster": "local"}}).agents.cluster == "local"
    with pytest.raises(ValueError, match="RunOptions.cluster"):
        RunOptions(coordinate=True, cluster="nowhere")
