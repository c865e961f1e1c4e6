"""Widget updates under a token flood: the coalescing AgentTree against one redraw per delta.

Feeds N text deltas for one agent into an AgentTree whose comm counts the messages it would send,
(a) as fast as possible and (b) paced at 1 ms per delta on a simulated clock (10 s of streaming
for N = 10,000), and measures, in the same run, the naive view that re-renders on every delta.

    .venv/bin/python benchmarks/bench_widget.py [N]
"""

from __future__ import annotations

import itertools
import sys
import time

import comm

from agentstack_lab.events import AgentState, TextDelta
from agentstack_lab.notebook.sanitize import markdown_to_html
from agentstack_lab.notebook.widget import DEFAULT_INTERVAL, AgentTree

_ids = itertools.count()
SENT: list[dict] = []


class CountingComm:
    def __init__(self, *a, comm_id=None, **k):
        self.comm_id = comm_id or f"c{next(_ids)}"
        self.kernel = object()

    def send(self, data=None, metadata=None, buffers=None):
        SENT.append(data)

    def on_msg(self, cb):
        pass

    def close(self, *a, **k):
        pass


def flood(n: int, paced: bool) -> tuple[float, int, int]:
    fake = [0.0]
    tree = AgentTree(clock=(lambda: fake[0]) if paced else time.monotonic)
    tree.apply(AgentState(agent_id="root", state={"status": "running", "type": "researcher", "prompt": "flood"}))
    SENT.clear()
    start = time.perf_counter()
    for i in range(n):
        if paced:
            fake[0] += 0.001
        tree.apply(TextDelta(agent_id="root", delta=f"word{i} "))
    tree.flush()
    return time.perf_counter() - start, sum(1 for m in SENT if m.get("method") == "update"), tree.flushes


def naive(n: int) -> tuple[float, int]:
    text, sends = "", 0
    start = time.perf_counter()
    for i in range(n):
        text += f"word{i} "
        markdown_to_html(text)  # what a per-delta redraw costs
        sends += 1
    return time.perf_counter() - start, sends


def main(n: int = 10_000) -> None:
    comm.create_comm = CountingComm
    rows = [("coalesced, instant flood", *flood(n, paced=False)),
            (f"coalesced, paced 1 ms ({n / 1000:g} s)", *flood(n, paced=True))]
    naive_n = min(n, 2_000)
    t_naive, s_naive = naive(naive_n)
    print(f"AgentTree under a flood of {n:,} text deltas (interval {DEFAULT_INTERVAL} s)")
    print(f"{'view':<34}{'wall s':>9}{'comm updates':>14}{'redraws':>9}{'µs/delta':>10}")
    print("-" * 76)
    for label, wall, sent, flushes in rows:
        print(f"{label:<34}{wall:>9.3f}{sent:>14,}{flushes:>9,}{wall / n * 1e6:>10.1f}")
    print(f"{f'naive: redraw per delta (first {naive_n:,})':<34}{t_naive:>9.3f}{s_naive:>14,}{s_naive:>9,}"
          f"{t_naive / naive_n * 1e6:>10.1f}")
    print("-" * 76)
    paced_sent = rows[1][2]
    bound = 2 * (1 + (n / 1000) / DEFAULT_INTERVAL)
    print(f"paced bound 2 * (1 + T / interval) = {bound:.0f} messages; measured {paced_sent} "
          f"({'within' if paced_sent <= bound else 'OVER'}); naive would send {n:,}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
