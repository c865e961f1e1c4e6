"""The server extension under bad input, in a real Jupyter server (issue 26 items 4, 7, 8, 9, 10, 14).

Malformed bodies are a 400 with one line, never a 500; run options never reach outside the workspace;
a WebSocket's ``?after`` and deep JSON are one error line; ``get-agent-tree`` takes a ``runId``.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import tornado
from pytest_jupyter.jupyter_core import *  # noqa: E402, F403
from pytest_jupyter.jupyter_server import *  # noqa: E402, F403
from pytest_jupyter.pytest_tornasync import *  # noqa: E402, F403

pytestmark = pytest.mark.slow  # every test here starts a process

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJ = '{"a":' * 50_000 + "1" + "}" * 50_000

MALFORMED = [
    b"not json", b"{", b"[]", b"[1, 2]", b'"a string"', b"42", b"null", b"true", b"\xff\xfe\x00",
    DEEP.encode(), DEEP_OBJ.encode(), b'{"prompt": 5}', b'{"prompt": null}', b'{"prompt": ["x"]}',
    b'{"prompt": {"a": 1}}', b'{"prompt": "x", "type": 5}', b'{"prompt": "x", "agentType": ["a"]}',
    b'{"prompt": "x", "options": [1]}', b'{"prompt": "x", "options": "fast"}', b'{"prompt": "x", "options": 7}',
    b'{"prompt": "x", "options": {"maxDepth": "deep"}}', b'{"prompt": "x", "options": {"maxDepth": 1e400}}',
    b'{"prompt": "x", "options": {"maxDepth": 99999999999999999999999999999}}',
    b'{"prompt": "x", "options": {"maxDepth": -1}}', b'{"prompt": "x", "options": {"subagents": "yes"}}',
    b'{"prompt": "x", "options": {"timeout": NaN}}', b'{"prompt": "x", "options": {"record": 5}}',
    b'{"prompt": "x", "options": {"nope": 1}}', b'{"prompt": "\\ud800"}',
    ('{"prompt": "x", "options": ' + DEEP_OBJ + "}").encode(),
]


@pytest.fixture
def jp_server_config(jp_root_dir):
    return {"ServerApp": {"jpserver_extensions": {"agentstack_lab.server": True}},
            "AgentstackExtension": {"workspace": str(jp_root_dir), "poll_interval": 0.02, "provider": "scripted"}}


async def _post(jp_fetch, path: str, body: bytes) -> tuple[int, str]:
    try:
        res = await jp_fetch("agentstack", "api", *path.split("/"), method="POST", body=body)
    except tornado.httpclient.HTTPClientError as exc:
        return exc.code, exc.response.body.decode()
    return res.code, res.body.decode()


@pytest.mark.parametrize("path", ["runs", "decisions/x/answer", "decisions/x/approve", "decisions/x/reject"])
def test_malformed_bodies_are_a_400_with_one_line(jp_fetch, jp_asyncio_loop, path):
    async def body():
        bad = []
        for raw in MALFORMED:
            code, text = await _post(jp_fetch, path, raw)
            if code >= 500 or code < 400 and path == "runs":   # "\ud800" too: refused, not a run that vanishes
                bad.append((raw[:60], code, text[:200]))
                continue
            if code >= 400:
                msg = json.loads(text)["message"]
                if "\n" in msg or len(msg) > 400:
                    bad.append((raw[:60], code, msg[:200]))
        assert not bad, bad
    jp_asyncio_loop.run_until_complete(body())


def _state(jp_serverapp):
    return jp_serverapp.web_app.settings["agentstack"]


async def _reply(ws) -> dict:
    """The next reply to this client; live log events (they carry a ``seq``) from runs still going are skipped."""
    while "seq" in (message := json.loads(await asyncio.wait_for(ws.read_message(), 20))):
        pass
    return message


async def _ws_error(ws) -> str:
    reply = await _reply(ws)
    assert reply["type"] == "error", reply
    assert "\n" not in reply["error"]
    return reply["error"]


def test_deep_json_over_the_websocket_is_one_error_line(jp_ws_fetch, jp_asyncio_loop):
    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events")
        for raw in (DEEP, DEEP_OBJ, '{"type": "start-agent", "prompt": "x", "options": ' + DEEP_OBJ + "}"):
            await ws.write_message(raw)
            error = await _ws_error(ws)
            assert "nested deeper than" in error and "internal error" not in error, error
        ws.close()
    jp_asyncio_loop.run_until_complete(body())


@pytest.mark.parametrize("after", ["x", "1e3", "-1", "99999999999999999999999", "9223372036854775808"])
def test_websocket_after_out_of_range_is_one_error(jp_ws_fetch, jp_asyncio_loop, after):
    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events", params={"after": after})
        assert (await _ws_error(ws)).startswith("after must be")
        ws.close()
    jp_asyncio_loop.run_until_complete(body())


def _insert_events(db, n: int, *, run_id: str = "bulk-run", delta: str = "x") -> None:
    payload = json.dumps({"type": "text-delta", "agentId": "bulk-agent", "delta": delta})
    with db.transaction() as conn:
        conn.executemany("INSERT INTO events(run_id, agent_id, type, payload, created_at) VALUES (?, ?, ?, ?, 0)",
                         ((run_id, "bulk-agent", "text-delta", payload) for _ in range(n)))


async def _hub_at_head(state) -> None:
    state.hub.start()   # idempotent; the first WebSocket starts it in a server the fixtures made
    head = state.workspace.db.query("SELECT max(seq) FROM events")[0][0]
    while state.hub.seq < head:
        await asyncio.sleep(0.05)


def test_catch_up_stops_when_its_client_leaves(jp_ws_fetch, jp_serverapp, jp_asyncio_loop, monkeypatch):
    from agentstack_lab.engine.activity import EventFollower

    state = _state(jp_serverapp)
    _insert_events(state.workspace.db, 200_000)
    catch_up_polls = []
    poll = EventFollower.poll

    def counting(self, limit: int = 10_000):
        if limit != 10_000:  # the hub polls with the default; a catch-up with its own batch size
            catch_up_polls.append(limit)
        return poll(self, limit)

    monkeypatch.setattr(EventFollower, "poll", counting)

    async def body():
        await _hub_at_head(state)
        ws = await jp_ws_fetch("agentstack", "api", "events", params={"after": "0"})
        await asyncio.wait_for(ws.read_message(), 20)
        ws.close()
        await asyncio.sleep(1.0)
        seen = len(catch_up_polls)
        await asyncio.sleep(1.5)
        assert len(catch_up_polls) == seen, "the catch-up kept reading the log for a client that left"
        assert seen < 20
    jp_asyncio_loop.run_until_complete(body())


def test_a_client_that_does_not_read_is_dropped_with_a_reason(jp_ws_fetch, jp_serverapp, jp_asyncio_loop):
    from agentstack_lab.server.handlers import MAX_UNSENT

    state = _state(jp_serverapp)

    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events")
        while state.hub.subscribers < 1:
            await asyncio.sleep(0.02)
        big = "y" * 100_000
        for _ in range(3 * MAX_UNSENT // len(big) // 50 + 1):   # 3x the outbox, in batches of 50 events
            _insert_events(state.workspace.db, 50, delta=big)
            await asyncio.sleep(0.03)
        for _ in range(400):
            if state.hub.subscribers == 0:
                break
            await asyncio.sleep(0.05)
        assert state.hub.subscribers == 0, "a client that never reads was kept"
        while await asyncio.wait_for(ws.read_message(), 30) is not None:
            pass
        assert ws.close_code == 1008 and "did not read" in ws.close_reason
    jp_asyncio_loop.run_until_complete(body())


def _start_and_finish(jp_fetch, prompt: str = "summarise 1, 2") -> str:
    async def go() -> str:
        res = await jp_fetch("agentstack", "api", "runs", method="POST", body=json.dumps(
            {"prompt": prompt, "options": {"subagents": False, "autoApprove": True}}))
        run_id = json.loads(res.body)["runId"]
        for _ in range(600):
            tree = json.loads((await jp_fetch("agentstack", "api", "runs", run_id)).body)["tree"]
            if tree and tree.get("status") in ("completed", "failed"):
                return run_id
            await asyncio.sleep(0.1)
        raise AssertionError("the run did not finish")
    return go()


def test_get_agent_tree_takes_a_run_id_and_prefixes_need_4_characters(jp_fetch, jp_ws_fetch, jp_asyncio_loop):
    async def body():
        run_id = await _start_and_finish(jp_fetch)
        other = await _start_and_finish(jp_fetch, "summarise 3, 4")
        ws = await jp_ws_fetch("agentstack", "api", "events")
        await ws.write_message(json.dumps({"type": "get-agent-tree", "runId": run_id[:8]}))
        reply = await _reply(ws)
        assert reply["type"] == "agent-state" and reply["runId"] == run_id, reply
        await ws.write_message(json.dumps({"type": "get-agent-tree", "runId": run_id[:3]}))
        while (reply := await _reply(ws))["type"] == "agent-state":
            assert reply["runId"] == run_id != other   # only the asked run, never the recent ones
        assert reply["type"] == "error" and "at least 4 characters" in reply["error"], reply
        ws.close()
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", "runs", run_id[:3])
        assert info.value.code == 400 and "at least 4 characters" in json.loads(info.value.response.body)["message"]
        assert json.loads((await jp_fetch("agentstack", "api", "runs", run_id[:4])).body)["runId"] == run_id
    jp_asyncio_loop.run_until_complete(body())


def test_a_slow_runs_page_does_not_hold_up_other_requests(jp_fetch, jp_asyncio_loop, monkeypatch):
    """Item 7: the database work of ``GET runs`` runs off the event loop. The page is held open (as a slow
    query at 1M events would be) and ``health/live`` and ``GET runs/<id>`` are answered meanwhile; with
    the work on the loop they would wait for it (the probe: ~0.5 s per panel refresh at 940k events)."""
    import threading

    from agentstack_lab.server import handlers

    release, entered = threading.Event(), threading.Event()
    page = handlers.runs_page

    def slow_page(*args):
        entered.set()
        release.wait(30)
        return page(*args)

    monkeypatch.setattr(handlers, "runs_page", slow_page)

    async def body():
        runs = asyncio.ensure_future(jp_fetch("agentstack", "api", "runs", params={"limit": "50"}))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        try:
            live = await asyncio.wait_for(jp_fetch("agentstack", "api", "health", "live"), 10)
            assert live.code == 200 and not runs.done()   # answered while the runs page is still held
        finally:
            release.set()
        assert (await runs).code == 200
    jp_asyncio_loop.run_until_complete(body())
