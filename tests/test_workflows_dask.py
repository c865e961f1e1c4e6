"""Workflow batches on Dask (issue 15 item 3): a real LocalCluster of worker processes, one worker
killed mid-batch, every run reported exactly once with its exit code (0 PASS, 1 FAIL, 2 error)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import nbformat
import pytest

from agentstack_lab.workflows.batch import plan_runs

distributed = pytest.importorskip("distributed", reason="the Dask test needs the dask extra (distributed)")
pytestmark = pytest.mark.slow

BODIES = ["x = 1", "assert 1 == 2, 'the check failed'", "raise ValueError('could not run')"]
EXPECTED = {0: ("pass", 0), 1: ("fail", 1), 2: ("error", 2)}


def _notebook(path: Path, i: int) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("n = 0")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("import time, os\ntime.sleep(1.5)\npid = os.getpid()"),
                nbformat.v4.new_code_cell(BODIES[i % 3])]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_twelve_notebooks_on_two_workers_one_killed_mid_batch(tmp_path):
    from agentstack_lab.workflows.cluster import run_batch_on_cluster

    nbs = [_notebook(tmp_path / f"wf{i:02d}.ipynb", i) for i in range(12)]
    specs = plan_runs(nbs, {}, None, tmp_path / "out")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    killed: dict[str, object] = {}

    def kill_one_worker_while_it_runs() -> None:
        pids = client.run(os.getpid)
        deadline = time.time() + 120
        while time.time() < deadline:
            busy = [w for w, tasks in client.processing().items() if tasks]
            if busy and len(client.get_events("agentstack-workflow-attempt")) >= 3:
                time.sleep(1.0)   # the run is inside its notebook now
                addr = busy[0]
                killed["addr"], killed["tasks"] = addr, list(client.processing()[addr])
                os.kill(pids[addr], signal.SIGKILL)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_one_worker_while_it_runs, daemon=True)
    try:
        killer.start()
        runs = run_batch_on_cluster(specs, cluster=client, retries=1)
        killer.join(timeout=5)
    finally:
        client.close()
        cluster.close()

    assert killed, "no worker was killed (the batch finished before the killer saw a running task)"
    assert len(runs) == 12
    assert sorted(Path(r.result.notebook).name for r in runs) == sorted(p.name for p in nbs)   # each exactly once
    for i, (spec, run) in enumerate(zip(specs, runs, strict=True)):
        assert Path(run.result.notebook).name == spec.notebook.name
        assert (run.result.status, run.result.exit_code) == EXPECTED[i % 3], (i, run.result.message)
        executed = nbformat.read(spec.output, as_version=4)        # returned to the caller, written here
        assert executed.cells[1].outputs == [] and "pid" in executed.cells[1].source
        assert json.loads(spec.report.read_text())["execution"]["exitCode"] == EXPECTED[i % 3][1]
    retried = [r for r in runs if r.attempts > 1]
    assert retried, [r.workers for r in runs]                      # the lost worker's runs ran again
    assert all(r.workers[0] == killed["addr"] and r.workers[-1] != killed["addr"] for r in retried)
    assert all(r.attempts == 1 for r in runs if killed["addr"] not in r.workers)
