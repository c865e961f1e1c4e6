"""The Agents panel's ``GET runs?limit=50`` at 100k and 1M events, and ``health/live`` while it runs.

A real ``jupyter server`` (the extension enabled, token auth) on loopback over a workspace of 60 real
runs (engine, scripted provider) padded with text-delta events to N in all. Measured in the same run:

* ``runs`` p50/p95 through the server: 100 requests one at a time (one panel), then 400, 4 at a time (panels
  in several tabs; the client, the server and the health pings share the 2 cores);
* the peer: the same page built in-process (``runs_page``, the database work alone). Before the fix that
  work ran on the server's event loop, so every other request waited that long (the probe measured
  ~0.5 s at 940k events, p95 2.2 s under load);
* ``health/live`` p95 idle, and p95 while the ``runs`` requests run (every 10 ms): with the database
  work in a worker thread it stays near idle instead of near the ``runs_page`` time.

    .venv/bin/python benchmarks/bench_server.py [N ...]      # default: 100000 1000000
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def _populate(root: Path, n: int) -> None:
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.workspace import Workspace

    async def runs(ws: Workspace) -> None:
        for i in range(60):
            await AgentRun(f"summarise {i}, {i + 1}", workspace=ws, provider=ScriptedProvider())

    with Workspace.open(root, announce=False) as ws:
        asyncio.run(runs(ws))
        have = ws.db.query("SELECT count(*) FROM events")[0][0]
        runs = [r[0] for r in ws.db.query("SELECT id FROM agents WHERE parent_id IS NULL")]
        payload = json.dumps({"type": "text-delta", "agentId": runs[0], "delta": "tok "})
        left = max(0, n - have)
        with ws.db.transaction() as conn:
            conn.executemany("INSERT INTO events(run_id, agent_id, type, payload, created_at) VALUES (?, ?, ?, ?, 0)",
                             ((runs[i % len(runs)], runs[i % len(runs)], "text-delta", payload) for i in range(left)))


def _direct(root: Path, repeat: int = 20) -> list[float]:
    from agentstack_lab.server.handlers import runs_page
    from agentstack_lab.workspace import Workspace

    out = []
    with Workspace.open(root, announce=False) as ws:
        runs_page(ws.db, 50)   # warm the page cache as the server's first request does
        for _ in range(repeat):
            t = time.perf_counter()
            runs_page(ws.db, 50)
            out.append(time.perf_counter() - t)
    return out


async def _measure(port: int, token: str, requests: int = 200, parallel: int = 4) -> dict[str, list[float]]:
    from tornado.httpclient import AsyncHTTPClient

    http = AsyncHTTPClient(max_clients=parallel + 2)
    base = f"http://127.0.0.1:{port}/agentstack/api"
    auth = {"Authorization": f"token {token}"}

    async def timed(path: str) -> float:
        t = time.perf_counter()
        await http.fetch(f"{base}/{path}", headers=auth, request_timeout=120)
        return time.perf_counter() - t

    idle = [await timed("health/live") for _ in range(100)]
    await timed("runs?limit=50")
    runs: list[float] = []
    during: list[float] = []
    busy = True

    async def ping() -> None:
        while busy:
            during.append(await timed("health/live"))
            await asyncio.sleep(0.01)

    async def panel(k: int) -> None:
        for _ in range(k):
            runs.append(await timed("runs?limit=50"))

    pinger = asyncio.create_task(ping())
    await asyncio.gather(*(panel(requests // parallel) for _ in range(parallel)))
    busy = False
    await pinger
    return {"idle": idle, "runs": runs, "during": during}


async def _serve(root: Path) -> dict[int, dict[str, list[float]]]:
    port, token = _port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / "cfg"), JUPYTER_RUNTIME_DIR=str(root / "rt"),
               JUPYTER_PLATFORM_DIRS="1")
    server = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1",
                               f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
                               "--ServerApp.jpserver_extensions={'agentstack_lab.server': True}", "--allow-root",
                               f"--AgentstackExtension.workspace={root}"],
                              cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from tornado.httpclient import AsyncHTTPClient

        for _ in range(300):
            try:
                await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/agentstack/api/health/live?token={token}")
                break
            except Exception:  # noqa: BLE001 - starting
                await asyncio.sleep(0.1)
        return {parallel: await _measure(port, token, requests=100 * parallel, parallel=parallel)
                for parallel in (1, 4)}
    finally:
        server.terminate()
        server.wait(15)


def main(sizes: list[int]) -> None:
    print("| events | panels at once | runs p50 ms | runs p95 ms | peer: runs_page in-process p50 / p95 ms "
          "| health/live p95 idle ms | health/live p95 during runs ms | during / idle |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        root = Path(tempfile.mkdtemp(prefix="bench-server-"))
        try:
            _populate(root, n)
            direct = _direct(root)
            got = asyncio.run(_serve(root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        peer50 = statistics.median(direct) * 1000
        for parallel, m in got.items():
            print(f"| {n:,} | {parallel} | {_p(m['runs'], 0.5):.1f} | {_p(m['runs'], 0.95):.1f} | {peer50:.1f} / "
                  f"{_p(direct, 0.95):.1f} | {_p(m['idle'], 0.95):.1f} | {_p(m['during'], 0.95):.1f} "
                  f"| {_p(m['during'], 0.95) / _p(m['idle'], 0.95):.2f} |", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000])
