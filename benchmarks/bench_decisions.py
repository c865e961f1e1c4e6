"""Decisions: an approval answered in another OS process until the run continues, vs the in-process widget path.

Run: ``.venv/bin/python benchmarks/bench_decisions.py [--n 50]``

One run makes N python tool calls in a row, each needing an approval (a persisted decision):

1. **another process** (the CLI's path): a second Python process watches ``decisions`` for a pending
   row, takes ``t0 = time.time()`` and calls ``Decisions.answer`` (one ``BEGIN IMMEDIATE`` transaction);
   the engine, polling ``PRAGMA data_version`` every 25 ms, resumes.
2. **in process** (the widget's path, the peer, same run of this script): ``run.respond`` right after
   the ``user-query`` event, which writes the same decision row and wakes the waiter through an
   ``asyncio.Event``.

Latency = the moment the agent is ``running`` again (its ``agent-state`` event) minus ``t0``.
Goal: p50 <= 200 ms for the cross-process path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import AgentState, UserQuery
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.workspace import Workspace

NO = {"needs_clarification": False, "has_question": False, "question": None}

ANSWERER = textwrap.dedent("""
    import json, sys, time
    from agentstack_lab.store.connection import SQLiteDatabase
    from agentstack_lab.decisions import Decisions
    ds = Decisions(SQLiteDatabase(sys.argv[1]))
    want = int(sys.argv[2])
    print("ready", flush=True)
    done = 0
    while done < want:
        pending = ds.list(state="pending")
        if not pending:
            time.sleep(0.005)
            continue
        t0 = time.time()
        d = ds.answer(pending[0].id, True, by="bench", surface="cli")
        print(json.dumps({"id": d.id, "t0": t0, "commit": time.time() - t0}), flush=True)
        done += 1
""")


def brain(n: int):
    def fn(req):
        step = req.metadata["step"]
        if step in ("clarify", "blocking", "final"):
            return NO
        if step == "subquestions":
            return {"subquestions": []}
        if step == "main":
            results = sum(1 for m in req.messages if m.role == "user" and not isinstance(m.content, str))
            return [tool_call("python", {"code": "x = 1"})] if results < n else "done"
        return "summary"

    return fn


async def one_run(ws: Workspace, n: int, *, in_process: bool) -> tuple[list[float], list[float]]:
    run = AgentRun("bench", workspace=ws, provider=ScriptedProvider(brain(n)),
                   options={"subagents": False, "max_turns": n + 2}, executor=LiveKernelExecutor(namespace={}))
    t_query: dict[str, float] = {}
    resumed: list[float] = []
    waiting = {"on": False}

    def on_event(ev):
        if isinstance(ev, UserQuery):
            waiting["on"] = True
            if in_process:
                t_query[ev.query_id] = time.time()
                run.respond(ev.query_id, True)   # what the widget's Approve button calls
        elif isinstance(ev, AgentState) and waiting["on"] and ev.state.get("status") == "running":
            waiting["on"] = False
            resumed.append(time.time())

    run.subscribe(on_event)
    proc = None
    if not in_process:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", ANSWERER, str(ws.db_path), str(n),
                                                    stdout=subprocess.PIPE)
        assert (await proc.stdout.readline()).strip() == b"ready"
    await run
    commits: list[float] = []
    if proc is not None:
        for line in (await proc.stdout.read()).decode().splitlines():
            rec = json.loads(line)
            t_query[rec["id"]] = rec["t0"]
            commits.append(rec["commit"])
        await proc.wait()
    starts = list(t_query.values())
    assert len(starts) == len(resumed) == n, (len(starts), len(resumed))
    return [(r - s) * 1000 for s, r in zip(starts, resumed, strict=True)], [c * 1000 for c in commits]


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Workspace.open(tmp, announce=False) as ws:
        cross, commits = asyncio.run(one_run(ws, args.n, in_process=False))
        local, _ = asyncio.run(one_run(ws, args.n, in_process=True))
    p50_peer = pct(local, 50)
    print(f"\n### Decision answered → run continues ({args.n} approvals per path)\n")
    print("| path | n | p50 ms | p95 ms | max ms | p50 ratio to peer |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, vals in (("in process, widget path (peer)", local), ("another OS process (CLI path)", cross)):
        print(f"| {name} | {len(vals)} | {pct(vals, 50):.1f} | {pct(vals, 95):.1f} | {max(vals):.1f} | "
              f"{pct(vals, 50) / p50_peer:.1f}x |")
    print(f"\nanswer transaction in the other process: p50 {pct(commits, 50):.1f} ms, p95 {pct(commits, 95):.1f} ms")
    print(f"goal p50 <= 200 ms (another process): {'PASS' if pct(cross, 50) <= 200 else 'FAIL'}")


if __name__ == "__main__":
    main()
