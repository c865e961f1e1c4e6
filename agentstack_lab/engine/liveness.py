"""Who owns a run, whether that process is still alive, and failing the agents of runs whose owner is gone.

A run lives in one process (a kernel, ``agent run``, the MCP server). When that process is killed
(SIGKILL, the OOM killer, a kernel that dies) nobody is left to finish its agents, and their rows
would say ``running`` forever. So every run records its owner in ``run_owners`` (written in the
same transaction as its first agent row), and :func:`reap_orphans` -- called by the surfaces before
they read agents, and by every new run -- fails the unfinished agents of runs whose owner is gone,
once, in one transaction, with an ``agent-state`` and an ``error`` event each, so the ``agents``
table and the tree rebuilt from the log agree; the run's pending decisions are cancelled in the same
transaction (nobody is left to act on an answer).

How liveness is decided (:func:`owner_alive`), most exact first:

1. Same host, same boot, same pid namespace: the owner is alive iff a process with its pid *and*
   its start time (``/proc/<pid>/stat`` field 22, clock ticks since boot) exists and is not a
   zombie. A reused pid has another start time. Exact and immediate, and a run whose event loop is
   busy for an hour (a long cell) is still alive: nothing depends on it writing anything.
2. Same host name, another boot id: the machine rebooted since the run started; it is gone.
3. Anything else (a container sharing the volume, another pid namespace, a host without ``/proc``,
   a pid hidden by ``hidepid``): the owner's heartbeat decides. A daemon thread of the run refreshes
   ``heartbeat_at`` every :data:`HEARTBEAT_S` seconds (a thread, so a blocked event loop does not
   stop it); older than :data:`STALE_S` means gone. Where ``kill(pid, 0)`` can prove the pid does
   not exist on this host, that wins over the heartbeat.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentstack_lab.events import UNFINISHED

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["ProcessIdentity", "this_process", "owner_alive", "register_owner", "Heartbeat", "reap_orphans",
           "HEARTBEAT_S", "STALE_S", "UNFINISHED"]

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
"""Seconds between heartbeats of a live run."""
STALE_S = 60.0
"""A heartbeat older than this marks the owner gone (only when the process itself cannot be checked)."""


@dataclass(frozen=True, kw_only=True)
class ProcessIdentity:
    """A process as another process can recognise it later: pid plus what tells a reused pid apart."""

    pid: int
    host: str
    boot_id: str | None = None
    pid_ns: str | None = None
    start_ticks: int | None = None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time in clock ticks since boot)`` of a process, or ``None`` when it is not visible."""
    text = _read(f"/proc/{int(pid)}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the command name may contain spaces and parentheses
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def this_process() -> ProcessIdentity:
    """The identity of the calling process."""
    pid = os.getpid()
    stat = _proc_stat(pid)
    try:
        pid_ns: str | None = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = None
    return ProcessIdentity(pid=pid, host=socket.gethostname(), boot_id=_read("/proc/sys/kernel/random/boot_id"),
                           pid_ns=pid_ns, start_ticks=stat[1] if stat else None)


def _pid_absent(pid: int) -> bool:
    """True only when this host has certainly no process ``pid`` (``kill(pid, 0)`` says so)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, owned by someone else
        return False
    return False


def owner_alive(owner: dict[str, Any], here: ProcessIdentity | None = None, now: float | None = None) -> bool:
    """Whether the process recorded in a ``run_owners`` row is still running (see the module docstring)."""
    here = here or this_process()
    pid = int(owner["pid"])
    same_host = owner["host"] == here.host
    if same_host and owner.get("boot_id") and here.boot_id:
        if owner["boot_id"] != here.boot_id:
            return False  # rebooted since: every process of that boot is gone
        if owner.get("pid_ns") == here.pid_ns and owner.get("start_ticks") is not None:
            stat = _proc_stat(pid)
            if stat is not None:
                return stat[0] not in ("Z", "X") and stat[1] == int(owner["start_ticks"])
            if _pid_absent(pid):
                return False
            # the pid exists but /proc hides it (hidepid): fall through to the heartbeat
    elif same_host and not owner.get("boot_id") and not here.boot_id and _pid_absent(pid):
        return False  # no /proc on this system (macOS): the pid is free, so the owner is gone
    now = time.time() if now is None else now
    return now - float(owner["heartbeat_at"]) <= STALE_S


def register_owner(conn: Any, run_id: str, who: ProcessIdentity | None = None) -> None:
    """Record the calling process as the owner of ``run_id`` (inside the caller's transaction)."""
    who = who or this_process()
    now = time.time()
    conn.execute("INSERT OR IGNORE INTO run_owners (run_id, pid, host, boot_id, pid_ns, start_ticks, started_at,"
                 " heartbeat_at) VALUES (?,?,?,?,?,?,?,?)",
                 (run_id, who.pid, who.host, who.boot_id, who.pid_ns, who.start_ticks, now, now))


class Heartbeat:
    """A daemon thread refreshing a run's ``heartbeat_at`` until :meth:`stop` (own connection, closed at the end)."""

    def __init__(self, path: Any, run_id: str, interval: float | None = None):
        self.path = path
        self.run_id = run_id
        self.interval = HEARTBEAT_S if interval is None else interval
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"agentstack-heartbeat-{run_id[:8]}", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating (does not wait for a beat in flight)."""
        self._stop.set()

    def _beat(self) -> None:
        from agentstack_lab.store.connection import connect

        conn = None
        try:
            while not self._stop.wait(self.interval):
                try:
                    conn = conn or connect(self.path)
                    conn.execute("UPDATE run_owners SET heartbeat_at = ? WHERE run_id = ? AND reaped_at IS NULL",
                                 (time.time(), self.run_id))
                    self.beats += 1
                except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the run goes on
                    log.debug("agentstack-lab: heartbeat of run %s failed: %s", self.run_id, exc)
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()


def _failed_state(state: dict[str, Any], error: str, now: float) -> dict[str, Any]:
    out = {k: v for k, v in state.items() if k != "content"}  # streamed text stays as the log has it
    out.update(status="failed", error=error, endedAt=now)
    return out


def _reap_run(db: Database, owner: dict[str, Any]) -> list[dict[str, Any]]:
    """Fail the unfinished agents of one run whose owner is gone; one transaction, events included."""
    from agentstack_lab.agents.spawner import check_transition, now_iso
    from agentstack_lab.decisions import cancel_pending
    from agentstack_lab.events import AgentState, ErrorEvent, to_wire

    run_id, pid = owner["run_id"], owner["pid"]
    marks = ",".join("?" * len(UNFINISHED))
    reaped: list[dict[str, Any]] = []
    with db.transaction() as conn:
        rows = conn.execute(f"SELECT id, name, type, status, parent_id, depth, prompt, result, input_tokens,"
                            f" output_tokens, metadata FROM agents WHERE run_id = ? AND status IN ({marks})"
                            f" ORDER BY depth DESC, created_at, rowid", (run_id, *UNFINISHED)).fetchall()
        last = {r[0]: json.loads(r[1])["state"] for r in conn.execute(
            "SELECT agent_id, payload FROM events WHERE seq IN (SELECT max(seq) FROM events WHERE run_id = ?"
            " AND type = 'agent-state' GROUP BY agent_id)", (run_id,))}
        now = time.time()
        stamp = now_iso(now)
        for r in rows:
            agent_id, was = r[0], r[3]
            check_transition(agent_id, was, "failed")
            error = f"owner process {pid} ended while the agent was {was}"
            state: dict[str, Any] = last.get(agent_id) or {
                "id": agent_id, "parentId": r[4], "name": r[1], "type": r[2], "prompt": r[6], "result": r[7],
                "depth": r[5], "userComment": None, "metadata": json.loads(r[10] or "{}"), "subagents": [],
                "ownUsage": {"inputTokens": r[8], "outputTokens": r[9]}}
            events = [AgentState(agent_id=agent_id, state=_failed_state(state, error, now)),
                      ErrorEvent(agent_id=agent_id, error=error)]
            conn.executemany("INSERT INTO events (run_id, agent_id, type, payload, created_at) VALUES (?,?,?,?,?)",
                             [(run_id, agent_id, ev.type, json.dumps(to_wire(ev), default=str), now)
                              for ev in events])
            conn.execute("UPDATE agents SET status = 'failed', error = ?, ended_at = ?, updated_at = ? WHERE id = ?",
                         (error, stamp, stamp, agent_id))
            reaped.append({"id": agent_id, "run_id": run_id, "was": was, "error": error})
        # its questions can never be answered now: nothing stays pending forever
        cancel_pending(conn, run_id, f"owner process {pid} ended", now)
        conn.execute("UPDATE run_owners SET reaped_at = ? WHERE run_id = ?", (now, run_id))
    return reaped


def reap_orphans(db: Database) -> list[dict[str, Any]]:
    """Fail the unfinished agents of every run whose owner process is gone; returns what was failed.

    Cheap when there is nothing to do (one indexed query plus a ``/proc`` read per live owner), safe
    to call from any number of processes at once (each run is re-checked inside its write
    transaction, so it is failed exactly once), and never raises: a reaper that cannot write logs a
    warning and the caller reads what is there.
    """
    marks = ",".join("?" * len(UNFINISHED))
    try:
        owners = [dict(zip(r.keys(), tuple(r), strict=True)) for r in db.query(
            f"SELECT run_id, pid, host, boot_id, pid_ns, start_ticks, heartbeat_at FROM run_owners WHERE run_id IN"
            f" (SELECT run_id FROM agents WHERE status IN ({marks}) AND run_id IS NOT NULL)", UNFINISHED)]
    except Exception as exc:  # noqa: BLE001 - e.g. a database not migrated yet
        log.warning("agentstack-lab: could not look for orphaned runs: %s", exc)
        return []
    if not owners:
        return []
    here, now = this_process(), time.time()
    reaped: list[dict[str, Any]] = []
    for owner in owners:
        if owner_alive(owner, here, now):
            continue
        try:
            reaped.extend(_reap_run(db, owner))
        except Exception as exc:  # noqa: BLE001 - the next reader tries again
            log.warning("agentstack-lab: could not fail the agents of run %s (owner process %s gone): %s",
                        owner["run_id"], owner["pid"], exc)
    if reaped:
        log.info("agentstack-lab: failed %d agent(s) whose owner process had ended", len(reaped))
    return reaped
