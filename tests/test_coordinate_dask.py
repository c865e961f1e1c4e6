"""A coordinated run places its subagents on a Dask cluster (issue 15 item 3, last sentence): a real
LocalCluster of two worker processes, the offline scripted provider, and the workspace's SQLite file
(the filesystem the workers share). The subagents run on Dask workers through the durable queue, and
their events, agent rows and results land in the coordinator's run as from any worker."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from agentstack_lab.coordination import TaskQueue
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.log import rebuild_tree
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.providers.scripted import ScriptedProvider
from tests.notebook_helpers import by_tag, run_cells

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
        left = [f for f in run._core.coordination.placement.futures.values()]
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


GATED_PLUGIN = '''
"""A provider plugin for the kill test: the demo, but a subagent's model calls wait for a release file."""
import asyncio
import json
import logging
import os
import signal
from pathlib import Path

from agentstack_lab.plugins import hookimpl


def _gated(config=None, **overrides):
    from agentstack_lab.providers.demo import demo_reply
    from agentstack_lab.providers.scripted import ScriptedProvider

    gate = Path(os.environ["AGENTSTACK_TEST_GATE"])

    async def reply(request):
        meta = request.metadata or {}
        if int(meta.get("depth") or 0) >= 1:
            mark = gate / f"started-{os.getpid()}-{meta['agent_id']}"
            if not mark.exists():
                mark.write_text(str(os.getpid()))
            while not (gate / "release").exists():
                await asyncio.sleep(0.05)
        return demo_reply(request)

    provider = ScriptedProvider(reply)
    provider.name = "gated"
    return provider


@hookimpl
def register_providers(register):
    register("gated", _gated)
'''


def _gated_plugin(folder):
    """A real installed plugin (module + dist-info entry point) the Dask worker processes import."""
    folder.mkdir()
    (folder / "gated_provider.py").write_text(GATED_PLUGIN)
    dist = folder / "gated_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gated-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[agentstack_lab]\ngated = gated_provider\n")
    return folder


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_dask_worker_killed_mid_subagent_is_retried_on_the_survivor_and_reported(ws, tmp_path, monkeypatch, caplog):
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("AGENTSTACK_TEST_GATE", str(gate))          # inherited by the worker processes
    monkeypatch.syspath_prepend(str(_gated_plugin(tmp_path / "plugins")))   # spawned workers copy sys.path
    provider = ScriptedProvider()                                   # the coordinator plans; the workers are gated
    provider.name = "gated"
    killed: dict = {}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)                                # {address: pid}
        by_pid = {pid: addr for addr, pid in pids.items()}

        def kill_one_while_both_run_a_subagent():
            started = _wait_for(lambda: sorted(gate.glob("started-*")) if len(list(gate.glob("started-*"))) >= 2
                                else None, 240, "both workers to start a subagent")
            victim = int(started[0].read_text())
            assert len({int(p.read_text()) for p in started}) == 2, "both subagents on one worker"
            killed.update(addr=by_pid[victim], pid=victim, agent=started[0].name.split("-", 2)[2])
            # no restart of the killed worker: the retry must go to the survivor
            client.run(lambda dask_worker: dask_worker.close_gracefully(), nanny=True, workers=[killed["addr"]])
            os.kill(victim, signal.SIGKILL)
            _wait_for(lambda: killed["addr"] not in client.scheduler_info()["workers"], 60, "the loss to be seen")
            killed["lease_expires"] = TaskQueue(ws.db).get(killed["agent"]).lease_expires_at
            killed["at"] = time.time()
            (gate / "release").write_text("go")

        killer = threading.Thread(target=kill_one_while_both_run_a_subagent, daemon=True)
        killer.start()

        async def main():
            run = AgentRun("how are sales trending?", workspace=ws, provider=provider,
                           options=RunOptions(final_question=False, coordinate=True, cluster=client))
            await run
            return run

        with caplog.at_level(logging.WARNING, logger="agentstack_lab"):
            run = asyncio.run(main())
        done_at = time.time()
        killer.join(timeout=5)
        survivor = next(a for a in pids if a != killed.get("addr"))

    assert killed and "at" in killed, "no worker was killed"
    assert run.status == "completed", run.tree.get("error")
    children = run.tree["children"]
    assert len(children) == 2 and {c["status"] for c in children} == {"completed"}
    assert shape(run.tree) == shape(rebuild_tree(ws.db, run.id))
    rows = {t.id: t for t in TaskQueue(ws.db).list(group_id=run.id)}
    assert set(rows) == {c["id"] for c in children} and {t.state for t in rows.values()} == {"completed"}
    lost = rows[killed["agent"]]
    assert lost.attempts == 2 and int(lost.worker_id.split("-")[-2]) == pids[survivor]   # retried on the survivor
    assert [t.attempts for t in rows.values() if t.id != lost.id] == [1]
    assert done_at < killed["lease_expires"]       # taken over at once, not after the dead worker's lease expired
    for child in children:                                          # each subagent reported exactly once
        completed = ws.db.query("SELECT count(*) FROM events WHERE run_id = ? AND agent_id = ? AND type = ?",
                                (run.id, child["id"], "agent-completed"))[0][0]
        assert completed == 1, (child["id"], completed)
    # what happened is visible: the child's metadata and notes, and a log line, name the lost worker
    node = next(c for c in children if c["id"] == lost.id)
    assert node["metadata"]["queue"]["lost"] == [killed["addr"]]
    assert any(killed["addr"] in n and survivor in n for n in node["metadata"].get("notes", [])), node["metadata"]
    assert any(killed["addr"] in r.getMessage() and lost.id in r.getMessage() for r in caplog.records)


TWO_RUNS = '''
import asyncio, json, sys
from agentstack_lab.coordination import TaskQueue
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace


async def main(ws):
    out = []
    for question in ("how are sales trending?", "what drives churn?"):
        run = AgentRun(question, workspace=ws, provider=ScriptedProvider(),
                       options=RunOptions(final_question=False, coordinate=True, cluster="local"))
        await run
        rows = TaskQueue(ws.db).list(group_id=run.id)
        out.append({"status": run.status, "clusters": sorted({c["metadata"]["queue"]["cluster"]
                                                              for c in run.tree["children"]}),
                    "pids": sorted({int(t.worker_id.split("-")[-2]) for t in rows}),
                    "states": sorted({t.state for t in rows})})
    return out


with Workspace.open(sys.argv[1], announce=False) as ws:
    print(json.dumps(asyncio.run(main(ws))))
'''


def test_cluster_local_is_one_local_cluster_per_process_reused_by_runs_and_closed_at_exit(tmp_path):
    import psutil

    proc = subprocess.run([sys.executable, "-c", TWO_RUNS, str(tmp_path / "ws")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first["status"] == second["status"] == "completed" and first["states"] == second["states"] == ["completed"]
    assert len(first["clusters"]) == 1 and first["clusters"] == second["clusters"]   # the same scheduler
    assert first["clusters"][0].startswith("tcp://127.0.0.1:")
    assert os.getpid() not in first["pids"]
    workers = set(first["pids"]) | set(second["pids"])
    assert len(workers) <= 2                                  # the same two worker processes served both runs
    deadline = time.monotonic() + 30                          # closed at exit: no worker process outlives it
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in workers):
        time.sleep(0.2)
    assert not any(psutil.pid_exists(p) for p in workers), workers


MAGIC_CELLS = {
    "setup": "%load_ext agentstack_lab\nimport os\nfrom agentstack_lab.coordination import TaskQueue",
    "first": "r1 = %agent --wait --coordinate --cluster local --provider scripted How are sales trending?\n"
             "rows = TaskQueue(r1.workspace.db).list(group_id=r1.id)\n"
             "print(r1.status, sorted({c['metadata']['queue']['cluster'] for c in r1.tree['children']}))\n"
             "print(sorted({t.state for t in rows}), all(int(t.worker_id.split('-')[-2]) != os.getpid() for t in rows))",
    "second": "r2 = %agent --wait --coordinate --cluster local --provider scripted What drives churn?\n"
              "print(r2.status, sorted({c['metadata']['queue']['cluster'] for c in r2.tree['children']}))\n"
              "before = len(TaskQueue(r2.workspace.db).list(limit=1000))",
    "no-coordinate": "%agent --wait --cluster local hi",
    "bad-address": "%agent --wait --coordinate --cluster scheduler:8786 hi",
    "unchanged": "print(len(TaskQueue(r2.workspace.db).list(limit=1000)) == before)",
}


def test_agent_magic_cluster_in_a_real_kernel(tmp_path):
    out = {tag: c.outputs for tag, c in by_tag(run_cells(MAGIC_CELLS, tmp_path, timeout=240)).items()}

    def text(tag):
        return "".join(o.get("text", "") if o["output_type"] == "stream" else "\n".join(o.get("traceback", []))
                       for o in out[tag] if o["output_type"] in ("stream", "error"))

    first, second = ([ln for ln in text(tag).splitlines() if not ln.startswith("agentstack-lab: using database")]
                     for tag in ("first", "second"))
    assert first[0].startswith("completed ['tcp://127.0.0.1:") and first[1] == "['completed'] True", text("first")
    assert second[0] == first[0]       # the kernel's one LocalCluster served both runs (the same scheduler)
    for tag, needle in (("no-coordinate", "%agent: error: --cluster only applies with --coordinate"),
                        ("bad-address", "argument --cluster: cluster address must look like tcp://host:8786")):
        lines = [ln for ln in text(tag).splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in lines[0], text(tag)
    assert text("unchanged").strip() == "True"          # bad input queued nothing
