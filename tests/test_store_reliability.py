"""Several processes writing one database file; a writer killed with SIGKILL mid-transaction."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from agentstack_lab.workspace import Workspace

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent("""
    import os, sys, time
    from agentstack_lab.workspace import Workspace
    folder, worker, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ws = Workspace.open(folder, announce=False)
    mem = ws.memory
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    for i in range(0, 500, 50):   # half one by one, half in batches
        if (i // 50) % 2:
            mem.store_many([{"key": f"w{worker}-{j}", "content": f"worker {worker} entry {j}"} for j in range(i, i + 50)])
        else:
            for j in range(i, i + 50):
                mem.store(f"w{worker}-{j}", f"worker {worker} entry {j}", agent_id=f"agent-{worker}")
    ws.close()
    print("done", worker)
""")

KILLED = textwrap.dedent("""
    import sys
    from agentstack_lab.workspace import Workspace
    ws = Workspace.open(sys.argv[1], announce=False)
    ws.memory.store_many([(f"base-{i}", f"committed entry {i}") for i in range(300)])
    print("ready", flush=True)
    ws.memory.store_many([(f"big-{i}", f"entry {i} of the transaction that gets killed") for i in range(200_000)])
    print("finished", flush=True)
""")


def counts(ws):
    st = ws.memory.stats()   # the full-text index (a file of its own) caught up with the committed rows
    return st["memory"], st["fts"], st["vector"]


def test_four_processes_store_500_each(tmp_path):
    folder = tmp_path / "shared"
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(w), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    assert [p.stdout.readline().strip() for p in procs] == ["ready"] * 4  # every writer waits for the go
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.startswith("done") and "Traceback" not in err, out
    with Workspace.open(folder, announce=False) as ws:
        assert counts(ws) == (2000, 2000, 2000)
        assert ws.db.query("PRAGMA integrity_check")[0][0] == "ok"
        assert len({e.key for e in ws.memory.list(limit=5000)}) == 2000
        assert ws.memory.search("worker 3 entry 499", "fts", limit=1)[0].key == "w3-499"


def test_sigkill_during_store_many_leaves_a_consistent_database(tmp_path):
    folder = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(folder)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.0)   # the write transaction starts at once (embedding runs alongside it in a thread)
    wal = folder / ".agentstack" / "agentstack.db-wal"
    deadline = time.time() + 60
    size = wal.stat().st_size
    while time.time() < deadline and proc.poll() is None:   # wait until the transaction spills into the WAL
        time.sleep(0.2)
        if wal.stat().st_size > size + 1_000_000:
            break
    assert proc.poll() is None, "the writer finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Workspace.open(folder, announce=False) as ws:
        assert ws.db.query("PRAGMA integrity_check")[0][0] == "ok"
        assert counts(ws) == (300, 300, 300)       # the killed transaction left nothing behind
        assert {r[0] for r in ws.db.query("SELECT name FROM sqlite_master WHERE type = 'trigger'"
                                          " AND tbl_name = 'memory'")} >= {"memory_vlog_ai"}
        assert ws.memory.search("committed entry 299", "vector", limit=1)[0].key == "base-299"
        ws.memory.store("after", "the database still takes writes")
        assert counts(ws) == (301, 301, 301)
