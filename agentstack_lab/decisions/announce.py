"""One line per decision a headless run starts waiting on: what it waits for and how to answer it.

A run in a notebook shows its questions in the cell; a headless one (``agent run --json``, a queue
``worker``, ``workflow run``, whose agents may even run in other processes) would wait without a word.
:class:`PendingAnnouncer` tails the workspace's ``decisions`` table instead (the store every surface
answers through, whatever process opened the decision) and writes each new pending decision once::

    ? approval decision 3f2a… (run 9c1e…): run this Python code? …
      waiting for an answer: agentstack-lab decisions approve 3f2a…   (or: decisions reject 3f2a…)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from agentstack_lab.decisions.store import Decision

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database


__all__ = ["PendingAnnouncer", "how_to_answer", "waiting_line"]

POLL_S = 0.5


def how_to_answer(kind: str, decision_id: str, agent_id: str | None = None) -> str:
    """The command line that answers a ``kind`` decision from another terminal."""
    if kind in ("approval", "consensus"):
        return f"agentstack-lab decisions approve {decision_id}   (or: decisions reject {decision_id})"
    if kind == "intervention" and agent_id:
        return (f"agentstack-lab decisions answer {decision_id} resume   (or: ... stop; or: agent resume "
                f"{agent_id[:8]} / agent stop {agent_id[:8]})")
    if kind == "intervention":
        return f"agentstack-lab decisions answer {decision_id} resume   (or: ... stop)"
    return f"agentstack-lab decisions answer {decision_id} TEXT"


def waiting_line(decision: Decision, *, limit: int = 200) -> str:
    """Two lines: the decision (kind, id, run, prompt), then how to answer it."""
    prompt = " ".join(decision.prompt.split())
    if len(prompt) > limit:
        prompt = prompt[: limit - 1] + "…"
    run = f" (run {decision.run_id[:8]})" if decision.run_id else ""
    return (f"? {decision.kind} decision {decision.id}{run}: {prompt}\n"
            f"  waiting for an answer: {how_to_answer(decision.kind, decision.id, decision.agent_id)}")


class PendingAnnouncer:
    """Writes :func:`waiting_line` once for each decision that becomes pending.

    Args:
        db: the workspace database, or a function returning it (``None`` while it does not exist yet).
        write: where a line goes (e.g. ``lambda s: print(s, file=sys.stderr)``).
        runs: the run ids to announce for (a set that may grow, or a callable returning one); ``None``:
            every run's decisions opened since the announcer was made.
        since: announce decisions created at or after this unix time (default: now).
        poll: seconds between looks at the table.
        grace: a decision is announced once it has waited this long, so a surface that shows its own
            questions as they open (``agent run``'s printer, sharing :attr:`announced`) goes first.
    """

    def __init__(self, db: Database | Callable[[], Database | None], write: Callable[[str], Any], *,
                 runs: Iterable[str] | Callable[[], Iterable[str]] | None = None,
                 since: float | None = None, poll: float = POLL_S, grace: float = 0.25):
        self.db = db
        self.write = write
        self.runs = runs
        self.since = time.time() - 1.0 if since is None else since   # a second of slack for clock rounding
        self.poll = poll
        self.grace = grace
        self.announced: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _wanted(self) -> set[str] | None:
        if self.runs is None:
            return None
        return set(self.runs() if callable(self.runs) else self.runs)

    def check(self) -> list[Decision]:
        """Announce the new pending decisions now; returns them."""
        from agentstack_lab.decisions.store import Decisions

        wanted = self._wanted()
        source = self.db
        db = source() if callable(source) else source
        if db is None or (wanted is not None and not wanted):
            return []
        settled = time.time() - self.grace
        new = [d for d in Decisions(db).pending_since(self.since)
               if d.id not in self.announced and d.created_at <= settled and (wanted is None or d.run_id in wanted)]
        for d in new:
            self.announced.add(d.id)
            self.write(waiting_line(d))
        return new

    async def run(self) -> None:
        """Check every ``poll`` seconds until cancelled (a task next to the runs it watches)."""
        while True:
            with contextlib.suppress(Exception):   # a busy or briefly locked database: next time
                await asyncio.to_thread(self.check)
            await asyncio.sleep(self.poll)

    def start(self) -> PendingAnnouncer:
        """Check in a daemon thread until :meth:`stop` (for code that blocks, e.g. a notebook run)."""
        def loop() -> None:
            while not self._stop.wait(self.poll):
                with contextlib.suppress(Exception):
                    self.check()

        self._thread = threading.Thread(target=loop, name="agentstack-pending-announcer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> PendingAnnouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
