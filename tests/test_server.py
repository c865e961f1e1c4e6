"""The Jupyter server extension, in a real Jupyter server (pytest-jupyter), against runs of other processes.

Tests are plain functions that run their coroutine on the server's own loop (``jp_asyncio_loop``):
pytest-asyncio would otherwise run them on a second loop that the server never serves.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tornado

# pytest-jupyter's fixtures, imported here only: loading it as a plugin would register its coroutine
# test runner for the whole session, taking async tests of other modules away from pytest-asyncio.
from pytest_jupyter.jupyter_core import *  # noqa: E402, F403
from pytest_jupyter.jupyter_server import *  # noqa: E402, F403
from pytest_jupyter.pytest_tornasync import *  # noqa: E402, F403

from agentstack_lab.events import from_wire

CLI = [sys.executable, "-m", "agentstack_lab.cli"]
ENDPOINTS = ["runs", "runs/x", "runs/x/events", "memory/search?q=a", "metrics", "health/live", "health/ready",
             "health/detailed"]


@pytest.fixture
def jp_server_config(jp_root_dir):
    return {"ServerApp": {"jpserver_extensions": {"agentstack_lab.server": True}},
            "AgentstackExtension": {"workspace": str(jp_root_dir), "poll_interval": 0.02}}


def _cli(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AGENTSTACK_CONFIG"}
    res = subprocess.run([*CLI, "--workspace", str(root), *args], capture_output=True, text=True, env=env,
                         timeout=120, cwd=root)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def _wire(message: dict) -> object:
    """A WebSocket/REST event validates against the one event vocabulary (runId/seq are the envelope)."""
    return from_wire({k: v for k, v in message.items() if k not in ("runId", "seq")})


async def _get(jp_fetch, path: str, **kw):
    res = await jp_fetch("agentstack", "api", *path.split("/"), **kw)
    return json.loads(res.body)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_every_endpoint_needs_jupyters_token(jp_fetch, path, jp_asyncio_loop):
    async def body():
        route, _, query = path.partition("?")
        params = dict([query.split("=")]) if query else None
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", *route.split("/"), headers={"Authorization": ""}, params=params)
        assert info.value.code == 403
    jp_asyncio_loop.run_until_complete(body())


def test_post_without_token_or_xsrf_is_refused(jp_fetch, jp_asyncio_loop):
    async def body():
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", "runs", method="POST", body=json.dumps({"prompt": "x"}),
                           headers={"Authorization": ""})
        assert info.value.code == 403
    jp_asyncio_loop.run_until_complete(body())


def test_websocket_needs_jupyters_token(jp_ws_fetch, jp_asyncio_loop):
    async def body():
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_ws_fetch("agentstack", "api", "events", headers={"Authorization": ""})
        assert info.value.code == 403
    jp_asyncio_loop.run_until_complete(body())


@pytest.mark.slow
def test_rest_serves_a_run_started_by_a_cli_process(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        out = await asyncio.to_thread(_cli, jp_root_dir, "agent", "run", "summarise 1, 2, 3", "--no-subagents",
                                      "--auto-approve")
        assert out.returncode == 0
        runs = (await _get(jp_fetch, "runs"))["runs"]
        assert len(runs) == 1 and runs[0]["status"] == "completed" and runs[0]["agents"] == 1
        run_id = runs[0]["id"]
        tree = (await _get(jp_fetch, f"runs/{run_id}"))["tree"]
        assert tree["status"] == "completed" and tree["prompt"] == "summarise 1, 2, 3"
        page = await _get(jp_fetch, f"runs/{run_id}/events")
        events = [_wire(e) for e in page["events"]]
        assert events[-1].type == "agent-completed" and page["next"] == page["events"][-1]["seq"]
        later = await _get(jp_fetch, f"runs/{run_id}/events", params={"after": str(page["next"])})
        assert later["events"] == []
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", "runs", "nope-no-such-run")
        assert info.value.code == 404 and "nope-no-such-run" in json.loads(info.value.response.body)["message"]
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", "runs", run_id, "events", params={"after": "x"})
        assert info.value.code == 400 and json.loads(info.value.response.body)["message"] == \
            "after must be an integer, got 'x'"
    jp_asyncio_loop.run_until_complete(body())


async def _receive_until(ws, done, timeout: float = 60) -> list[dict]:
    got: list[dict] = []
    async def loop():
        while True:
            msg = await ws.read_message()
            assert msg is not None, "socket closed"
            got.append(json.loads(msg))
            if done(got[-1]):
                return
    await asyncio.wait_for(loop(), timeout)
    return got


@pytest.mark.slow
def test_websocket_follows_runs_of_other_processes_live(jp_ws_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events")
        proc = await asyncio.create_subprocess_exec(*CLI, "--workspace", str(jp_root_dir), "agent", "run",
                                                    "what is 2 + 2?", "--auto-approve", cwd=jp_root_dir,
                                                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        root: dict[str, str] = {}

        def done(m):
            if m["type"] == "agent-state" and m["state"].get("parentId") is None and "prompt" in m["state"]:
                root.setdefault("id", m["agentId"])
            return m["type"] == "agent-completed" and m["agentId"] == root.get("id")

        messages = await _receive_until(ws, done)
        assert await proc.wait() == 0
        events = [_wire(m) for m in messages]
        assert {e.type for e in events} >= {"agent-state", "text-delta", "agent-completed"}
        seqs = [m["seq"] for m in messages]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert len({m["runId"] for m in messages}) == 1
        ws.close()

        # a client that connects later catches up from ?after= without gaps or repeats
        late = await jp_ws_fetch("agentstack", "api", "events", params={"after": "0"})
        replay = await _receive_until(late, lambda m: m["seq"] == seqs[-1])
        assert "".join(m["delta"] for m in replay if m["type"] == "text-delta") == \
            "".join(m["delta"] for m in messages if m["type"] == "text-delta")
        late.close()
    jp_asyncio_loop.run_until_complete(body())


def test_websocket_refuses_bad_messages_with_one_line(jp_ws_fetch, jp_asyncio_loop):
    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events")
        for raw, expected in [("not json", "not a valid message"),
                              (json.dumps({"type": "nope"}), "unknown event type 'nope'"),
                              (json.dumps({"type": "text-delta", "agentId": "a", "delta": "x"}), "outbound event"),
                              (json.dumps({"type": "user-response", "agentId": "a", "queryId": "q", "response": 1}),
                               "no pending query q")]:
            await ws.write_message(raw)
            reply = json.loads(await asyncio.wait_for(ws.read_message(), 10))
            assert reply["type"] == "error" and expected in reply["error"], reply
            assert "\n" not in reply["error"]
        ws.close()
    jp_asyncio_loop.run_until_complete(body())


@pytest.mark.slow
def test_start_agent_over_the_websocket_runs_in_the_server(jp_ws_fetch, jp_fetch, jp_asyncio_loop):
    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events")
        await ws.write_message(json.dumps({"type": "start-agent", "prompt": "summarise 4, 5",
                                           "options": {"subagents": False, "auto_approve": True,
                                                       "executor": "subprocess"}}))
        started = json.loads(await asyncio.wait_for(ws.read_message(), 10))
        assert started["type"] == "run-started"
        run_id = started["runId"]
        await _receive_until(ws, lambda m: m["type"] == "agent-completed" and m["agentId"] == run_id)
        tree = (await _get(jp_fetch, f"runs/{run_id}"))["tree"]
        assert tree["status"] == "completed"
        ws.close()
    jp_asyncio_loop.run_until_complete(body())


def test_health_endpoints(jp_fetch, jp_asyncio_loop):
    async def body():
        live = await _get(jp_fetch, "health/live")
        assert live["status"] == "healthy"
        ready = await _get(jp_fetch, "health/ready")
        assert {c["name"] for c in ready["checks"]} >= {"database", "writable", "migrations"}
        assert ready["status"] == "healthy"
    jp_asyncio_loop.run_until_complete(body())
