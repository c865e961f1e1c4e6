"""The decision queue (services layer): create, answer exactly once, wait across processes, expire, cancel."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time

import pytest

from agentstack_lab.decisions import (
    DecisionClosedError,
    DecisionError,
    DecisionNotFoundError,
    Decisions,
    normalise_answer,
)
from agentstack_lab.errors import AgentstackError
from agentstack_lab.store.connection import SQLiteDatabase


@pytest.fixture
def db(tmp_path):
    d = SQLiteDatabase(tmp_path / "ws.db")
    yield d
    d.close()


def test_create_answer_once_and_list(db):
    ds = Decisions(db)
    d = ds.create(kind="approval", prompt="Run this?", run_id="r1", agent_id="a1", code="print(1)",
                  options={"code": "print(1)"})
    assert d.pending and ds.get(d.id).kind == "approval" and ds.get(d.id[:8]).id == d.id
    assert [x.id for x in ds.list(run="r1", state="pending")] == [d.id]
    done = ds.approve(d.id, by="alice", surface="cli")
    assert done.state == "answered" and done.answer == {"approved": True} and done.approved is True
    assert done.answered_by == "alice" and done.surface == "cli" and done.answered_at >= done.created_at
    with pytest.raises(DecisionClosedError, match=r"already answered \(by alice, from the terminal\)"):
        ds.reject(d.id, by="bob", surface="mcp")
    assert ds.get(d.id).answer == {"approved": True}  # the loser changed nothing
    assert ds.list(run="r1", state="pending") == []


def test_bad_input_is_one_clear_error_and_changes_nothing(db):
    ds = Decisions(db)
    with pytest.raises(DecisionError, match="unknown decision kind 'vote'"):
        ds.create(kind="vote", prompt="?")
    q = ds.create(kind="clarification", prompt="Which year?")
    with pytest.raises(DecisionError, match="not an approval"):
        ds.approve(q.id)
    a = ds.create(kind="approval", prompt="Run?", code="x = 1")
    with pytest.raises(DecisionError, match="approval answer must be"):
        ds.answer(a.id, "perhaps")
    with pytest.raises(DecisionError, match="'code' must be a non-empty string"):
        ds.approve(a.id, code="  ")
    assert ds.get(a.id).pending and ds.get(q.id).pending
    with pytest.raises(DecisionNotFoundError, match="no decision 'nope'"):
        ds.get("nope")
    with pytest.raises(DecisionError, match="unknown decision state"):
        ds.list(state="done")
    assert isinstance(DecisionNotFoundError("x"), AgentstackError)
    assert normalise_answer("consensus", {"approved": False, "rejected": ["t2"]}) == {"approved": False,
                                                                                     "rejected": ["t2"]}
    assert normalise_answer("approval", {"approved": True, "code": "x = 1"}, "x = 1") == {"approved": True}


def test_expiry_and_cancel(db):
    ds = Decisions(db)
    d = ds.create(kind="blocking", prompt="Which table?", run_id="r2", timeout=0.05)
    time.sleep(0.08)
    with pytest.raises(DecisionClosedError, match="is expired: no answer before it expired"):
        ds.answer(d.id, "sales")
    assert ds.get(d.id).state == "expired"
    e = ds.create(kind="blocking", prompt="Due?", run_id="r2", timeout=0.01)
    time.sleep(0.02)
    assert ds.expire_due() == 1 and ds.get(e.id).state == "expired"
    c1, c2 = (ds.create(kind="final", prompt=f"q{i}", run_id="r3") for i in range(2))
    assert ds.cancel_for_run("r3", "the run ended") == 2
    assert {ds.get(c.id).state for c in (c1, c2)} == {"cancelled"}
    with pytest.raises(DecisionClosedError, match="is cancelled: the run ended"):
        ds.answer(c1.id, "x")


def test_wait_in_process_fast_path_and_timeout(db):
    ds = Decisions(db)

    async def main():
        d = ds.create(kind="clarification", prompt="Which year?")
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        loop.call_later(0.05, lambda: ds.answer(d.id, "2024", surface="widget"))
        got = await ds.wait(d.id, timeout=5)
        waited = time.perf_counter() - t0
        late = ds.create(kind="clarification", prompt="Which month?")
        expired = await ds.wait(late.id, timeout=0.05)
        return got, waited, expired

    got, waited, expired = asyncio.run(main())
    assert got.state == "answered" and got.answer == "2024" and waited < 1.0
    assert expired.state == "expired" and "no answer within 50 ms" in expired.reason


_ANSWER = textwrap.dedent("""
    import sys, json
    from agentstack_lab.store.connection import SQLiteDatabase
    from agentstack_lab.decisions import Decisions, DecisionClosedError
    db = SQLiteDatabase(sys.argv[1])
    ds = Decisions(db)
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        d = ds.answer(sys.argv[2], sys.argv[3], by=sys.argv[3], surface="cli")
        print(json.dumps({"won": d.answered_by}))
    except DecisionClosedError as exc:
        print(json.dumps({"lost": str(exc)}))
""")


@pytest.mark.slow
def test_wait_sees_an_answer_from_another_process(db, tmp_path):
    ds = Decisions(db)
    d = ds.create(kind="clarification", prompt="Which year?")

    async def main():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ANSWER, str(db.path), d.id, "2023",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert (await proc.stdout.readline()).strip() == b"ready"
        waiter = asyncio.ensure_future(ds.wait(d.id, timeout=20))
        await asyncio.sleep(0.1)
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        out = json.loads(await proc.stdout.readline())
        t_answered = time.perf_counter()
        got = await waiter
        lag = time.perf_counter() - t_answered
        await proc.wait()
        return out, got, lag

    out, got, lag = asyncio.run(main())
    assert out == {"won": "2023"} and got.answer == "2023" and got.surface == "cli"
    assert lag < 0.5


@pytest.mark.slow
def test_two_processes_answer_at_once_exactly_one_wins(db):
    for _ in range(3):
        d = Decisions(db).create(kind="clarification", prompt="Which region?")
        procs = [subprocess.Popen([sys.executable, "-c", _ANSWER, str(db.path), d.id, who],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for who in ("alice", "bob")]
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:  # release both at once
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in procs]
        winners = [o["won"] for o in outs if "won" in o]
        losers = [o["lost"] for o in outs if "lost" in o]
        assert len(winners) == 1 and len(losers) == 1, outs
        assert losers[0] == f"decision {d.id} already answered (by {winners[0]}, from the terminal)"
        final = Decisions(db).get(d.id)
        assert final.answer == winners[0] and final.answered_by == winners[0]


@pytest.mark.slow
def test_answering_process_killed_mid_answer_leaves_it_pending_or_answered(db):
    """SIGKILL inside the answer's transaction: the row is pending (never half written), then answerable."""
    script = textwrap.dedent("""
        import contextlib, os, signal, sys
        from agentstack_lab.store.connection import SQLiteDatabase
        from agentstack_lab.decisions import Decisions

        class Killing:  # the real answer(), killed right after its UPDATE ran, before COMMIT
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                cur = self.conn.execute(sql, params)
                if sql.startswith("UPDATE decisions SET state = 'answered'"):
                    os.kill(os.getpid(), signal.SIGKILL)
                return cur

        db = SQLiteDatabase(sys.argv[1])
        real = db.transaction
        @contextlib.contextmanager
        def transaction():
            with real() as conn:
                yield Killing(conn)
        db.transaction = transaction
        Decisions(db).answer(sys.argv[2], "2023", by="killed", surface="cli")
    """)
    ds = Decisions(db)
    d = ds.create(kind="clarification", prompt="Which year?")
    proc = subprocess.run([sys.executable, "-c", script, str(db.path), d.id], timeout=60)
    assert proc.returncode == -9
    again = Decisions(SQLiteDatabase(db.path))
    row = again.get(d.id)
    assert row.state == "pending" and row.answer is None and row.answered_by is None
    assert again.answer(d.id, "2024", by="carol").state == "answered"
    assert db.query("PRAGMA integrity_check")[0][0] == "ok"


def test_durations_in_messages_are_for_people():
    from agentstack_lab.validation import seconds_text

    assert seconds_text(0.9994144439697266) == "1.0 s"
    assert [seconds_text(x) for x in (0.05, 0.2, 12.34, 125, 3725)] == ["50 ms", "0.2 s", "12.3 s", "2 min 05 s",
                                                                       "1 h 02 min"]
