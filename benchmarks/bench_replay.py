"""Replay overhead: a recorded 16-agent tree replayed from its cassette, against the engine driven live.

Run: ``.venv/bin/python benchmarks/bench_replay.py [--repeats 15] [--deltas 40]``

The tree: a root with 3 subagents, each with 4 of their own (1 + 3 + 12 = 16 agents, the default
``max_agents``), every main step streaming ``--deltas`` text deltas. The peer is the same tree
produced by the zero-latency scripted provider in the same process (no cassette), so the
difference is the replay provider's cost: normalising and redacting each request, hashing it, and
turning the recorded JSON back into provider events. The cassette is recorded once, from the
scripted provider, through ``RunOptions(record=...)``; each replay goes through
``RunOptions(replay=...)``, which reads and parses the cassette again (part of its cost). Both arms
use a workspace with its SQLite event log, alternate, and report the median wall and CPU time per
run. Goal: replay / scripted <= 1.5x.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from agentstack_lab.engine import AgentRun, RunOptions
from agentstack_lab.providers.cassette import load_cassette
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace

NO = {"needs_clarification": False, "has_question": False, "question": None}
FANOUT = {0: 3, 1: 4}  # subagents per agent at each depth: 1 + 3 + 3 * 4 = 16 agents


def brain(n_deltas: int):
    def fn(req):
        meta = req.metadata
        step, depth = meta["step"], meta["depth"]
        if step in ("clarify", "blocking", "final"):
            return NO
        if step == "subquestions":
            kids = FANOUT.get(depth, 0)
            return {"subquestions": [{"question": f"{meta['prompt']} / part {i}", "agent_type": "researcher"}
                                     for i in range(kids)]}
        if step == "main":
            return [f"tok{i} " for i in range(n_deltas)]
        return f"summary of {meta['prompt']}"

    return fn


def _options(**kw) -> RunOptions:
    return RunOptions(interactive=False, max_depth=2, max_children=4, max_agents=16, executor="subprocess", **kw)


async def one(ws, provider, options) -> tuple[float, float, AgentRun]:
    wall, cpu = time.perf_counter(), time.process_time()
    run = AgentRun("Survey the field", workspace=ws, provider=provider, options=options)
    await run
    return time.perf_counter() - wall, time.process_time() - cpu, run


async def main(repeats: int, deltas: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, Workspace.open(Path(tmp) / "ws", announce=False) as ws:
        cassette = Path(tmp) / "tree.jsonl"
        _, _, recorded = await one(ws, ScriptedProvider(brain(deltas)), _options(record=str(cassette)))
        agents = len(recorded.nodes)
        assert agents == 16 and recorded.status == "completed", (agents, recorded.status)
        entries = len(load_cassette(cassette)[1])
        for _ in range(2):  # warm both paths
            await one(ws, ScriptedProvider(brain(deltas)), _options())
            await one(ws, None, _options(replay=str(cassette)))
        live: list[tuple[float, float]] = []
        replay: list[tuple[float, float]] = []
        for _ in range(repeats):
            w, c, run = await one(ws, ScriptedProvider(brain(deltas)), _options())
            live.append((w, c))
            w, c, again = await one(ws, None, _options(replay=str(cassette)))
            replay.append((w, c))
            assert again.result == run.result and len(again.nodes) == agents
        rows = []
        for name, data in (("scripted (live engine)", live), ("replay from cassette", replay)):
            rows.append((name, statistics.median(w for w, _ in data) * 1000, statistics.median(c for _, c in data) * 1000))
        base_w, base_c = rows[0][1], rows[0][2]
        print(f"16-agent tree ({agents} agents, {entries} model calls, {deltas} deltas per main step, "
              f"cassette {cassette.stat().st_size / 1024:.0f} KiB), median of {repeats} runs each, alternating")
        print(f"load average {os.getloadavg()[0]:.2f} / {os.cpu_count()} cores")
        print()
        print("| run | wall ms | CPU ms | wall ratio | CPU ratio |")
        print("|---|---:|---:|---:|---:|")
        for name, w, c in rows:
            print(f"| {name} | {w:.1f} | {c:.1f} | {w / base_w:.2f}x | {c / base_c:.2f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--deltas", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.repeats, args.deltas))
