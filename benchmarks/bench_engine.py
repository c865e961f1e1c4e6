"""Engine benchmarks: overhead per event, and subagent fan-out against the critical path.

Run: ``.venv/bin/python benchmarks/bench_engine.py [--deltas 20000] [--latency 0.2]``

1. Overhead per event, zero-latency scripted provider: a run whose main step streams N text
   deltas, against its peer measured in the same run — draining the same provider stream
   directly (no engine). Reported with and without the SQLite event log.
2. Fan-out: every model call takes ``L`` seconds; a root with 4 subagents. The critical path is
   computed from the requests actually made (root calls before the children start, the longest
   of root-main vs. each child's calls, root calls after), and compared to the wall time and
   to the serial sum of all calls. Target: wall <= 1.3 x critical path.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter

from agentstack_lab.engine import AgentRun, RunOptions
from agentstack_lab.providers.base import Message, ProviderRequest, TextDeltaEvent
from agentstack_lab.providers.complete import complete
from agentstack_lab.providers.scripted import ScriptedProvider
from agentstack_lab.workspace import Workspace

NO = {"needs_clarification": False, "has_question": False, "question": None}


def brain(n_deltas: int, children: int):
    deltas = [TextDeltaEvent(text="tok ") for _ in range(n_deltas)]

    def fn(req):
        step = req.metadata["step"]
        if step in ("clarify", "blocking", "final"):
            return NO
        if step == "subquestions":
            if req.metadata["depth"] > 0:
                return {"subquestions": []}
            return {"subquestions": [{"question": f"part {i}", "agent_type": "researcher"} for i in range(children)]}
        if step == "main":
            return deltas if req.metadata["depth"] == 0 else "child answer"
        return "summary"

    return fn


class NoDb:
    """A workspace without a database (no event log), for the overhead comparison."""

    db = None
    memory = None
    config = None


async def overhead(n: int, ws) -> list[tuple[str, float, int]]:
    rows = []
    provider = ScriptedProvider(brain(n, 0))
    req = ProviderRequest(messages=[Message(role="user", content="q")], metadata={"step": "main", "depth": 0,
                                                                                  "prompt": "q"})
    t = time.perf_counter()
    c = await complete(provider, req)
    rows.append(("provider stream alone (peer)", time.perf_counter() - t, len(c.text.split())))
    for label, workspace in (("engine, no event log", NoDb()), ("engine + SQLite event log", ws)):
        run = AgentRun("q", workspace=workspace, provider=ScriptedProvider(brain(n, 0)),
                       options=RunOptions(auto_approve=True, subagents=False))
        t = time.perf_counter()
        await run
        rows.append((label, time.perf_counter() - t, len(run.events)))
    return rows


async def fanout(latency: float, ws) -> dict[str, float]:
    provider = ScriptedProvider(brain(5, 4), latency=latency)
    run = AgentRun("q", workspace=ws, provider=provider, options=RunOptions(auto_approve=True))
    t = time.perf_counter()
    await run
    wall = time.perf_counter() - t
    calls = Counter((r.metadata["agent_id"], r.metadata["step"]) for r in provider.requests)
    root = run.id
    pre = sum(calls[(root, s)] for s in ("clarify", "blocking", "subquestions"))
    root_main = calls[(root, "main")]
    post = sum(calls[(root, s)] for s in ("summary", "final"))
    child_paths = [sum(v for (a, _), v in calls.items() if a == c) for c in run.nodes[root].subagents]
    critical = latency * (pre + max([root_main, *child_paths]) + post)
    serial = latency * sum(calls.values())
    return {"wall": wall, "critical": critical, "serial": serial, "children": len(child_paths),
            "calls": sum(calls.values())}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--deltas", type=int, default=20_000)
    ap.add_argument("--latency", type=float, default=0.2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(tmp, announce=False)
        _ = ws.db  # open and migrate before timing
        rows = await overhead(args.deltas, ws)
        base = rows[0][1] / rows[0][2]
        print(f"\n## Engine overhead per event ({args.deltas} text deltas, zero-latency scripted provider)\n")
        print("| path | wall s | events | µs/event | ratio to peer |")
        print("|---|---:|---:|---:|---:|")
        for label, secs, n in rows:
            per = secs / n
            print(f"| {label} | {secs:.3f} | {n} | {per * 1e6:.1f} | {per / base:.1f}x |")
        f = await fanout(args.latency, ws)
        ok = f["wall"] <= 1.3 * f["critical"]
        print(f"\n## Fan-out: root + {f['children']} subagents, {args.latency:g} s per model call "
              f"({f['calls']} calls)\n")
        print("| measure | seconds | wall / measure |")
        print("|---|---:|---:|")
        print(f"| wall time | {f['wall']:.3f} | 1.00 |")
        print(f"| critical path | {f['critical']:.3f} | {f['wall'] / f['critical']:.2f} |")
        print(f"| serial sum of calls | {f['serial']:.3f} | {f['wall'] / f['serial']:.2f} |")
        print(f"\nwall <= 1.3 x critical path: {'PASS' if ok else 'FAIL'}")
        ws.close()


if __name__ == "__main__":
    asyncio.run(main())
