"""The durable queue, the message bus, workers and the coordinator (issue 11 items 1-4), through the public API."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

from agentstack_lab.coordination import (
    Coordinator,
    LeaseLostError,
    MessageBus,
    QueuedTaskNotFoundError,
    QueueError,
    TaskQueue,
    Worker,
)
from agentstack_lab.errors import AgentstackError
from tests.waits import poll


def _events(bus: MessageBus) -> list[tuple[str, str | None]]:
    return [(m.type, (m.payload or {}).get("taskId")) for m in bus.read()]


# --- queue -------------------------------------------------------------------------------------------------
def test_priority_order_fifo_within_a_priority_and_type_filter(ws):
    q = TaskQueue(ws.db)
    made = [q.enqueue(t, f"{t} {p} {i}", priority=p) for i, (t, p) in
            enumerate([("coder", 3), ("researcher", 9), ("coder", 9), ("coder", 3), ("tester", 10)])]
    assert q.depth() == 5 and q.depth("coder") == 3
    assert q.claim("w", "coder").input == "coder 9 2"
    assert q.claim("w", ["coder", "researcher"]).input == "researcher 9 1"
    assert [q.claim("w").input for _ in range(3)] == ["tester 10 4", "coder 3 0", "coder 3 3"]
    assert q.claim("w") is None and q.dequeue() is None
    assert {t.id for t in q.list(state="claimed")} == {t.id for t in made}


def test_bad_input_is_one_clear_error_and_changes_nothing(ws):
    q = TaskQueue(ws.db)
    for kwargs, words in [({"priority": 0}, "priority must be an integer from 1 to 10"),
                          ({"priority": 11}, "got 11"), ({"priority": "5"}, "got '5'"), ({"priority": True}, "True"),
                          ({"max_attempts": 0}, "max_attempts")]:
        with pytest.raises(QueueError, match=words):
            q.enqueue("coder", "x", **kwargs)
    with pytest.raises(QueueError, match="agent type must be a non-empty string"):
        q.enqueue(" ", "x")
    with pytest.raises(QueueError, match="non-empty input"):
        q.enqueue("coder", "  ")
    with pytest.raises(QueueError, match="JSON-serialisable"):
        q.enqueue("coder", "x", payload={"f": object()})
    with pytest.raises(QueueError, match="worker id"):
        q.claim("")
    with pytest.raises(QueueError, match="lease must be > 0"):
        TaskQueue(ws.db, lease_s=0)
    with pytest.raises(QueuedTaskNotFoundError, match="no queued task with id 'nope'"):
        q.get("nope")
    with pytest.raises(QueueError, match="unknown queue state"):
        q.list(state="done")
    assert ws.db.query("SELECT count(*) FROM task_queue")[0][0] == 0
    assert ws.db.query("SELECT count(*) FROM messages")[0][0] == 0
    assert isinstance(QueueError("x"), AgentstackError)


def test_lease_expiry_returns_the_task_and_a_lost_lease_cannot_complete(ws):
    q = TaskQueue(ws.db, lease_s=0.2)
    task = q.enqueue("coder", "x", priority=6)
    first = q.claim("w1")
    assert q.claim("w2") is None  # leased
    assert q.renew(first) is True
    second = poll(lambda: q.claim("w2"), "the lease to expire")  # 0.2 s after the renewal
    assert second.id == task.id and second.attempts == 2 and second.priority == 6 and second.lease != first.lease
    assert q.renew(first) is False  # the heartbeat tells the first worker it lost the task
    with pytest.raises(LeaseLostError, match="lease lost .*held by w2.*completion was refused"):
        q.complete(first, {"text": "late"})
    with pytest.raises(LeaseLostError):
        q.fail(first, "late")
    done = q.complete(second, {"text": "ok"})
    assert done.state == "completed" and done.result == {"text": "ok"} and done.worker_id == "w2"
    with pytest.raises(LeaseLostError, match="it is completed"):
        q.complete(second, {"text": "twice"})
    assert q.get(task.id).result == {"text": "ok"}
    assert [e for e in _events(MessageBus(ws.db)) if e[0] == "task:completed"] == [("task:completed", task.id)]


def test_assign_takes_a_task_from_a_holder_known_to_be_dead_at_once(ws):
    q = TaskQueue(ws.db)   # 30 s leases: nothing here waits for one to expire
    task = q.enqueue("coder", "x")
    dead = q.assign(task.id, "w1")
    with pytest.raises(QueueError, match="held by w1"):
        q.assign(task.id, "w2", take_from="w3")     # only from the holder named: nothing changed
    assert q.get(task.id).worker_id == "w1" and q.get(task.id).lease == dead.lease
    taken = q.assign(task.id, "w2", take_from="w1")
    assert taken.worker_id == "w2" and taken.attempts == 2 and taken.lease != dead.lease
    assert q.renew(dead) is False                     # were w1 alive after all, its heartbeat stops it
    with pytest.raises(LeaseLostError):
        q.complete(dead, {"text": "late"})
    assert q.complete(taken, {"text": "ok"}).result == {"text": "ok"}
    assert [m.payload.get("takenFrom") for m in MessageBus(ws.db).read() if m.type == "task:assigned"] == [None, "w1"]


def test_assign_requeue_release_fail_cancel_clear(ws):
    q = TaskQueue(ws.db)
    a = q.enqueue("coder", "a", priority=5)
    held = q.assign(a.id, "w1")
    with pytest.raises(QueueError, match="is claimed \\(held by w1\\); only a pending task can be assigned"):
        q.assign(a.id, "w2")
    back = q.requeue(held)
    assert back.state == "pending" and back.priority == 4 and back.attempts == 1  # the seed's requeue: lower
    low = q.requeue(q.assign(a.id, "w1"))
    assert low.priority == 3
    released = q.release(q.claim("w1"))
    assert released.priority == 3 and released.attempts == 2  # a release does not count the attempt
    assert q.fail(q.claim("w1"), "gave up").state == "failed"
    r = q.enqueue("coder", "r", priority=5, max_attempts=2)
    retried = q.fail(q.claim("w1"), "boom", retry=True)
    assert retried.id == r.id and retried.state == "pending" and retried.priority == 4 and retried.error == "boom"
    failed = q.fail(q.claim("w1"), "boom again", retry=True)  # attempts exhausted (2 of 2)
    assert failed.state == "failed" and failed.error == "boom again" and failed.result is None
    kept = q.enqueue("coder", "k")   # a failure may keep what the failed work left (a subagent's tree)
    assert q.fail(q.claim("w1"), "died", result={"tree": {"id": kept.id}}).result == {"tree": {"id": kept.id}}
    assert q.get(kept.id).result == {"tree": {"id": kept.id}} and q.get(kept.id).error == "died"
    b = q.enqueue("coder", "b", group_id="g")
    c = q.enqueue("tester", "c", group_id="g")
    q.enqueue("tester", "d", group_id="other")
    q.claim("w9", "coder")  # b is claimed: clear takes claimed tasks out too
    assert q.cancel(c.id, "not needed") is True and q.cancel(c.id) is False
    assert q.clear("g") == 1 and q.get(b.id).state == "cancelled" and q.depth() == 1
    assert q.renew(q.get(b.id), q.get(b.id).lease or "x") is False


def test_queue_events_on_the_bus_in_order(ws):
    bus = MessageBus(ws.db)
    seen: list[str] = []
    bus.subscribe_all(lambda m: seen.append(m.type))  # in-process fast path: no loop needed
    q = TaskQueue(ws.db, bus=bus)
    t = q.enqueue("coder", "x")
    q.complete(q.claim("w"), {"text": "y"})
    u = q.enqueue("coder", "z")
    q.fail(q.claim("w"), "bad")
    assert seen == ["task:added", "task:assigned", "queue:empty", "task:completed",
                    "task:added", "task:assigned", "queue:empty", "task:failed"]
    assert _events(bus)[0] == ("task:added", t.id) and _events(bus)[-1] == ("task:failed", u.id)


# --- bus -----------------------------------------------------------------------------------------------------
def test_bus_send_broadcast_subscribe_in_process(ws):
    bus = MessageBus(ws.db)
    to_b, everything = [], []
    unsub = bus.subscribe("b", lambda m: to_b.append((m.sender, m.type, m.payload)))
    bus.subscribe_all(lambda m: everything.append(m.recipient))
    bus.send("a", "b", "hello", {"n": 1})
    bus.send("a", "c", "psst")
    bus.broadcast("coordinator", "shutdown")
    assert to_b == [("a", "hello", {"n": 1}), ("coordinator", "shutdown", None)]
    assert everything == ["b", "c", None]
    unsub()
    bus.send("a", "b", "again")
    assert len(to_b) == 2
    assert [m.type for m in bus.read(agent="c")] == ["psst", "shutdown"]
    with pytest.raises(AgentstackError, match="message recipient must be a non-empty string"):
        bus.send("a", "", "x")
    with pytest.raises(AgentstackError, match="callback must be callable"):
        bus.subscribe("a", None)


@pytest.mark.slow
def test_bus_across_processes(ws):
    code = ("import sys; from agentstack_lab.store.connection import SQLiteDatabase; "
            "from agentstack_lab.coordination import MessageBus; b = MessageBus(SQLiteDatabase(sys.argv[1])); "
            "b.send('worker-agent', 'coordinator', 'result', {'answer': 42}); b.broadcast('worker-agent', 'bye')")

    async def main() -> list:
        bus = MessageBus(ws.db)
        got: list = []
        arrived = asyncio.Event()

        def on(m) -> None:
            got.append((m.sender, m.type, m.payload))
            if m.type == "bye":
                arrived.set()

        bus.subscribe("coordinator", on)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, str(ws.db_path))
        assert await proc.wait() == 0
        await asyncio.wait_for(arrived.wait(), 10)
        bus.close()
        return got

    assert asyncio.run(main()) == [("worker-agent", "result", {"answer": 42}), ("worker-agent", "bye", None)]


# --- workers and the coordinator -------------------------------------------------------------------------------
def test_worker_runs_tasks_of_its_types_and_a_paused_worker_loses_its_lease(ws):
    q = TaskQueue(ws.db, lease_s=0.3)
    q.enqueue("coder", "fast")
    other = q.enqueue("tester", "not mine")

    async def runner(task):
        return {"text": task.input.upper()}

    async def main() -> Worker:
        w = Worker(q, runner, types=["coder"], concurrency=2)
        await w.run(until_empty=True)
        return w

    w = asyncio.run(main())
    assert w.completed == 1 and q.get(other.id).state == "pending"
    done = [t for t in q.list(state="completed")]
    assert [t.result for t in done] == [{"text": "FAST"}]

    # a worker whose process stalls past its lease (here: a blocking sleep) is refused at the end
    slow = q.enqueue("coder", "slow", priority=10)
    stolen: list = []

    def thief() -> None:
        time.sleep(0.5)
        t = TaskQueue(ws.db, lease_s=5).claim("thief", "coder")
        stolen.append(t)
        TaskQueue(ws.db).complete(t, {"text": "thief"})

    async def stalling(task):
        time.sleep(0.8)  # blocks the loop: no heartbeat
        return {"text": "late"}

    async def main2() -> Worker:
        w2 = Worker(q, stalling, types=["coder"])
        job = asyncio.ensure_future(w2.run())
        while w2.completed + len(stolen) == 0 or w2.running:
            await asyncio.sleep(0.05)
        w2.stop(0)
        await job
        return w2

    th = threading.Thread(target=thief)
    th.start()
    w2 = asyncio.run(main2())
    th.join()
    assert stolen and stolen[0].id == slow.id
    assert w2.completed == 0 and q.get(slow.id).result == {"text": "thief"}


def test_coordinator_spawns_workers_on_demand_reuses_them_and_shutdown_clears(ws):
    q = TaskQueue(ws.db)
    ran: list[tuple[str, str]] = []

    async def runner(task):
        await asyncio.sleep(0.01)
        ran.append((task.agent_type, task.input))
        return {"text": "ok"}

    async def main() -> tuple:
        coord = Coordinator(q, runner, max_workers=2)
        for i in range(6):
            coord.submit("coder" if i % 2 else "researcher", f"t{i}", priority=1 + i)
        done = await coord.wait_all(timeout=30)
        spawned = coord.spawned
        coord.submit("tester", "last one")  # a third type at the limit: an idle worker is retired for it
        await coord.wait_all(timeout=30)
        types_now = sorted(w.types[0] for w, _ in coord.workers)
        # shutdown: pending tasks are cleared and every in-process worker stops
        stuck = Coordinator(q, max_workers=0, group_id="g2")
        stuck.submit("coder", "never run")
        cleared = await stuck.shutdown()
        await coord.shutdown()
        return done, spawned, types_now, cleared, coord

    done, spawned, types_now, cleared, coord = asyncio.run(main())
    assert [t.state for t in done] == ["completed"] * 6 and len(ran) == 7
    assert spawned == 2  # one per type, reused for the later tasks of that type
    assert "tester" in types_now and len(types_now) <= 2
    assert cleared == 1 and q.list(group_id="g2")[0].state == "cancelled"
    assert coord.workers == [] and q.depth() == 0
    with pytest.raises(QueueError, match="shut down"):
        coord.submit("coder", "late")
    with pytest.raises(QueueError, match="needs a runner"):
        Coordinator(q, max_workers=1)
