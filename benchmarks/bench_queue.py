"""Durable queue throughput: tasks/s through ``task_queue`` with worker processes vs in-process asyncio tasks.

Run: ``.venv/bin/python benchmarks/bench_queue.py [--tasks 200] [--workers 3] [--concurrency 3]``

Every task is a headless agent run with the zero-latency scripted provider (the offline demo, no
subagents): clarify, blocking and main steps, event log and agent rows written to SQLite. Measured in
the same run, on fresh workspaces:

1. peer: the same tasks run by in-process asyncio tasks (``AgentRun`` each, at most
   ``workers x concurrency`` at once), no queue.
2. queue: ``--workers`` ``agentstack-lab worker`` processes (started and idle first, so interpreter
   start-up is not counted) take the tasks from the durable queue; the clock runs from the first
   enqueue to the last completion. Exactly once is checked: one ``task:completed`` per task, and
   every row completed.
3. the queue alone: enqueue + claim + complete with no agent (one process), its floor.

Goal (issue 11): the queue's rate >= 50% of the in-process rate, exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from agentstack_lab.coordination import MessageBus, TaskQueue
from agentstack_lab.engine import AgentRun, RunOptions
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace

TYPES = ("coder", "researcher", "tester")
OPTIONS = {"subagents": False}


def tasks(n: int) -> list[tuple[str, str, int]]:
    rng = random.Random(11)
    return [(rng.choice(TYPES), f"task {i}: reply with one short line", rng.randint(1, 10)) for i in range(n)]


async def in_process(work: list[tuple[str, str, int]], limit: int) -> float:
    with Workspace.open(tempfile.mkdtemp(prefix="bench-queue-peer-"), announce=False) as ws:
        provider = ScriptedProvider()
        gate = asyncio.Semaphore(limit)
        ordered = sorted(work, key=lambda w: -w[2])  # the same priority order the queue follows

        async def one(agent_type: str, prompt: str) -> str | None:
            async with gate:
                run = AgentRun(prompt, workspace=ws, provider=provider, agent_type=agent_type,
                               options=RunOptions(interactive=False, final_question=False, **OPTIONS))
                return await run

        start = time.perf_counter()
        results = await asyncio.gather(*(one(t, p) for t, p, _ in ordered))
        wall = time.perf_counter() - start
        assert len(results) == len(work) and all(results)
        return wall


def through_queue(work: list[tuple[str, str, int]], workers: int, concurrency: int) -> tuple[float, int]:
    folder = Path(tempfile.mkdtemp(prefix="bench-queue-"))
    with Workspace.open(folder, announce=False) as ws:
        queue = TaskQueue(ws.db)
        procs = [subprocess.Popen([sys.executable, "-m", "agentstack_lab.cli", "-w", str(folder), "worker",
                                   "--concurrency", str(concurrency), "--provider", "scripted"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(workers)]
        try:
            for p in procs:  # each says "worker …: taking …" once it is ready
                line = p.stderr.readline()
                assert "taking" in line, line
            start = time.perf_counter()
            made = [queue.enqueue(t, prompt, priority=prio, payload={"options": OPTIONS}) for t, prompt, prio in work]
            ids = {m.id for m in made}
            while _unfinished(ws, ids):
                time.sleep(0.01)
            wall = time.perf_counter() - start
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.communicate(timeout=60)
        msgs = MessageBus(ws.db).read(limit=1_000_000)
        completions = Counter(m.payload["taskId"] for m in msgs if m.type == "task:completed")
        rows = ws.db.query("SELECT count(*) FROM task_queue WHERE state = 'completed'")[0][0]
        exactly_once = set(completions) == ids and set(completions.values()) == {1} and rows == len(ids)
        return wall, int(exactly_once)


def _unfinished(ws, ids: set[str]) -> bool:
    done = ws.db.query("SELECT count(*) FROM task_queue WHERE state IN ('completed', 'failed', 'cancelled')")[0][0]
    return done < len(ids)


def queue_alone(n: int) -> float:
    with Workspace.open(tempfile.mkdtemp(prefix="bench-queue-raw-"), announce=False) as ws:
        queue = TaskQueue(ws.db)
        start = time.perf_counter()
        for t, prompt, prio in tasks(n):
            queue.enqueue(t, prompt, priority=prio)
        while (task := queue.claim("bench")) is not None:
            queue.complete(task, {"text": "ok"})
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=3)
    args = ap.parse_args()
    work = tasks(args.tasks)
    n = len(work)
    peer = asyncio.run(in_process(work, args.workers * args.concurrency))
    wall, once = through_queue(work, args.workers, args.concurrency)
    raw = queue_alone(n)
    rate_peer, rate_queue = n / peer, n / wall
    print(f"## Durable queue (bench_queue.py): {n} zero-latency agent tasks\n")
    print("| path | wall s | tasks/s | ratio to in-process |")
    print("|---|---:|---:|---:|")
    print(f"| in-process asyncio tasks, {args.workers * args.concurrency} at once (peer) | {peer:.2f} | "
          f"{rate_peer:.1f} | 1.00 |")
    print(f"| durable queue, {args.workers} worker processes x {args.concurrency} | {wall:.2f} | {rate_queue:.1f} | "
          f"{rate_queue / rate_peer:.2f} |")
    print(f"| queue alone: enqueue + claim + complete, no agent (1 process) | {raw:.2f} | {n / raw:.0f} | "
          f"{(n / raw) / rate_peer:.1f} |")
    print(f"\nexactly once: {'PASS' if once else 'FAIL'}; goal queue >= 50% of in-process: "
          f"{'PASS' if rate_queue >= 0.5 * rate_peer else 'FAIL'}")


if __name__ == "__main__":
    main()
