"""WebSocket fan-out: a 10,000-delta run followed by 5 clients of the Jupyter server extension.

A real ``jupyter server`` (the extension enabled, token auth) on loopback; 5 WebSocket clients in
this process; a separate writer process streams one run of N text deltas through the engine's
``EventLog`` (paced 10 deltas per 10 ms, i.e. ~1,000 deltas/s, a fast model), then completes it.
Measured in the same run: messages each client received, the server's CPU while it followed the
run, and the writer's CPU (the event-log writer alone: the cost every run pays anyway).

Coalescing bound (server/hub.py): per poll of the log (every ``poll_interval`` = 50 ms), one text
message per streaming agent, so a client gets at most ``duration / 0.05 + 1`` text messages per agent
(≤ 20/s), whatever the token rate; other events pass one for one.

    .venv/bin/python benchmarks/bench_ws.py [N] [CLIENTS]
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = r'''
import asyncio, resource, sys, time, uuid
from pathlib import Path
from agentstack_lab.engine.log import EventLog
from agentstack_lab.events import AgentCompleted, AgentState, TextDelta
from agentstack_lab.workspace import Workspace

async def main(root, n):
    ws = Workspace.open(Path(root), announce=False)
    run = str(uuid.uuid4())
    log = EventLog(ws.db, run)
    log.start()
    t0 = time.perf_counter()
    log.append(AgentState(agent_id=run, state={"status": "running", "parentId": None, "type": "researcher"}))
    for i in range(n):
        log.append(TextDelta(agent_id=run, delta=f"tok{i} "))
        if i % 10 == 9:
            await asyncio.sleep(0.01)
    log.append(AgentCompleted(agent_id=run, result="done"))
    await log.close()
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{wall} {ru.ru_utime + ru.ru_stime}")

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
'''


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _client(url: str, counts: dict, done: asyncio.Event, i: int) -> None:
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(url)
    counts[i] = {"messages": 0, "text": 0, "chars": 0}
    ready = counts.setdefault("_ready", [])
    ready.append(i)
    while True:
        raw = await ws.read_message()
        if raw is None:
            return
        m = json.loads(raw)
        counts[i]["messages"] += 1
        if m["type"] == "text-delta":
            counts[i]["text"] += 1
            counts[i]["chars"] += len(m["delta"])
        if m["type"] == "agent-completed":
            ws.close()
            counts[i]["finished"] = True
            if sum(1 for k in range(counts["_n"]) if counts.get(k, {}).get("finished")) == counts["_n"]:
                done.set()
            return


async def main(n: int, clients: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    port, token = _port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / "cfg"), JUPYTER_RUNTIME_DIR=str(root / "rt"),
               JUPYTER_PLATFORM_DIRS="1")
    server = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1",
                               f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
                               "--ServerApp.jpserver_extensions={'agentstack_lab.server': True}", "--allow-root"],
                              cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from tornado.httpclient import AsyncHTTPClient

        http = AsyncHTTPClient()
        for _ in range(300):
            try:
                await http.fetch(f"http://127.0.0.1:{port}/agentstack/api/health/live?token={token}")
                break
            except Exception:  # noqa: BLE001 - starting
                await asyncio.sleep(0.1)
        counts: dict = {"_n": clients}
        done = asyncio.Event()
        url = f"ws://127.0.0.1:{port}/agentstack/api/events?token={token}"
        tasks = [asyncio.create_task(_client(url, counts, done, i)) for i in range(clients)]
        while len(counts.get("_ready", [])) < clients:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        cpu0, t0 = _cpu(server.pid), time.perf_counter()
        writer = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(root), str(n),
                                                      stdout=asyncio.subprocess.PIPE)
        out, _ = await writer.communicate()
        await asyncio.wait_for(done.wait(), 120)
        wall, server_cpu = time.perf_counter() - t0, _cpu(server.pid) - cpu0
        write_wall, write_cpu = map(float, out.split())
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        server.terminate()
        server.wait(15)
    per = [counts[i] for i in range(clients)]
    assert all(p["chars"] == sum(len(f"tok{i} ") for i in range(n)) for p in per), per  # nothing lost
    bound = int(write_wall / 0.05) + 1
    print(f"{n} deltas over {write_wall:.1f} s, {clients} clients; coalescing bound {bound} text messages per agent")
    print("| what | messages per client | text messages | CPU s | wall s |")
    print("|---|---:|---:|---:|---:|")
    print(f"| event-log writer alone (writer process) | - | - | {write_cpu:.2f} | {write_wall:.2f} |")
    print(f"| server: tail + fan-out to {clients} clients | {per[0]['messages']} | {per[0]['text']} "
          f"| {server_cpu:.2f} | {wall:.2f} |")
    print(f"| without coalescing (one message per delta) | {n + 2} | {n} | - | - |")
    assert max(p["text"] for p in per) <= bound, (per, bound)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000, int(sys.argv[2]) if len(sys.argv) > 2 else 5))
