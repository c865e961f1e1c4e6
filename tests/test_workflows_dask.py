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


def test_twelve_notebooks_on_two_workers_one_killed_mid_batch(tmp_path, monkeypatch):
    from agentstack_lab.workflows.cluster import run_batch_on_cluster

    nbs = [_notebook(tmp_path / f"wf{i:02d}.ipynb", i) for i in range(12)]
    specs = plan_runs(nbs, {}, None, tmp_path / "out")
    # the workers' TMPDIR and Dask directory are this test's own, so what the batch leaves behind is seen
    tmp, local = tmp_path / "tmpdir", tmp_path / "dask-local"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       local_directory=str(local))
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
        # papermill's error-marker cells stand before a failed run's cells: the pid cell is found by its source
        pid_cells = [c for c in executed.cells if "pid = os.getpid()" in c.source]
        assert len(pid_cells) == 1 and pid_cells[0].outputs == [], (i, [c.source for c in executed.cells])
        assert pid_cells[0].execution_count is not None
        assert json.loads(spec.report.read_text())["execution"]["exitCode"] == EXPECTED[i % 3][1]
    retried = [r for r in runs if r.attempts > 1]
    assert retried, [r.workers for r in runs]                      # the lost worker's runs ran again
    assert all(r.workers[0] == killed["addr"] and r.workers[-1] != killed["addr"] for r in retried)
    assert all(r.attempts == 1 for r in runs if killed["addr"] not in r.workers)
    # nothing of the killed worker's runs stays behind: scratch folders, kernel logs, connection files
    assert list(tmp.iterdir()) == []
    assert [p.relative_to(local) for p in local.rglob("*") if "agentstack" in p.name] == []


def _pid_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("n = 0")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("import os\nprint(os.getpid(), os.getppid(), 'seen' in globals())\n"
                                                  "seen = n")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_runs_on_a_worker_are_served_by_that_workers_kernel_pool(tmp_path):
    import psutil

    from agentstack_lab.workflows.cluster import run_batch_on_cluster

    nbs = [_pid_notebook(tmp_path / f"pid{i}.ipynb") for i in range(4)]
    specs, later = plan_runs(nbs, {}, None, tmp_path / "out"), plan_runs(nbs[:2], {}, None, tmp_path / "out2")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        worker_pids = client.run(os.getpid)
        runs = run_batch_on_cluster(specs, cluster=client, pool_size=1)
        again = run_batch_on_cluster(later, cluster=client, pool_size=1)   # the same pools, still warm
        zygote_parents = {addr: {p.ppid() for p in psutil.Process(pid).children()} for addr, pid in worker_pids.items()}

    assert [r.result.status for r in runs + again] == ["pass"] * 6
    kernels = []
    for spec, run in zip(specs + later, runs + again, strict=True):
        [addr] = run.workers
        pool = run.pool
        assert pool["pid"] == worker_pids[addr] and pool["forked"]         # the pool lives in the serving worker
        out = nbformat.read(spec.output, as_version=4).cells[1].outputs[0]["text"].split()
        kernel_pid, kernel_parent, reused = int(out[0]), int(out[1]), out[2]
        assert reused == "False"                                          # a fresh kernel: nothing left by a run
        assert kernel_parent == pool["zygotePid"]                         # forked from that pool's zygote
        kernels.append((addr, pool["id"], pool["run"], kernel_pid))
    assert len({k[3] for k in kernels}) == 6                              # one kernel per run, never reused
    by_worker: dict[str, set] = {}
    for addr, pool_id, _n, _ in kernels:
        by_worker.setdefault(addr, set()).add(pool_id)
    assert all(len(ids) == 1 for ids in by_worker.values())               # one pool per worker, kept across batches
    assert len({next(iter(ids)) for ids in by_worker.values()}) == len(by_worker)
    for addr in by_worker:                                                # each pool counted its own runs 1, 2, 3 ...
        assert sorted(n for a, _, n, _ in kernels if a == addr) == list(range(1, 1 + sum(k[0] == addr for k in kernels)))
    assert all(worker_pids[a] in parents for a, parents in zygote_parents.items() if a in by_worker)


TWO_BATCHES = '''
import json, sys
from pathlib import Path
from agentstack_lab.workflows.batch import plan_runs
from agentstack_lab.workflows.cluster import run_batch_on_cluster

if __name__ == "__main__":   # the LocalCluster's worker processes are spawned and re-import __main__
    nbs, out = [Path(p) for p in sys.argv[1:-1]], Path(sys.argv[-1])
    batches = []
    for name in ("first", "second"):
        runs = run_batch_on_cluster(plan_runs(nbs, {}, None, out / name), cluster="local", pool_size=1)
        batches.append([{"status": r.result.status, "scheduler": r.scheduler, "workers": r.workers,
                         "pool": r.pool} for r in runs])
    print(json.dumps(batches))
'''


def test_two_local_batches_in_one_process_share_its_local_cluster(tmp_path):
    import subprocess
    import sys

    import psutil

    script = tmp_path / "two_batches.py"
    script.write_text(TWO_BATCHES)
    nbs = [str(_pid_notebook(tmp_path / f"pid{i}.ipynb")) for i in range(2)]
    proc = subprocess.run([sys.executable, str(script), *nbs, str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["status"] for r in first + second] == ["pass"] * 4
    schedulers = {r["scheduler"] for r in first + second}
    assert len(schedulers) == 1 and next(iter(schedulers)).startswith("tcp://127.0.0.1:")   # one scheduler for both
    # the second batch found the first batch's worker pools still warm: same pool ids, their run counts go on
    pools = {r["pool"]["id"]: r["pool"]["pid"] for r in first}
    assert {r["pool"]["id"] for r in second} <= set(pools)
    assert max(r["pool"]["run"] for r in second) > 1
    workers = set(pools.values()) | {r["pool"]["pid"] for r in second}
    assert proc.returncode == 0 and os.getpid() not in workers
    deadline = time.monotonic() + 30                          # closed at exit: no worker process outlives it
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in workers):
        time.sleep(0.2)
    assert not any(psutil.pid_exists(p) for p in workers), workers
