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

pytestmark = pytest.mark.slow  # every test here starts a process

CLI = [sys.executable, "-m", "agentstack_lab.cli"]
ENDPOINTS = ["runs", "runs/x", "runs/x/events", "memory/search?q=a", "health/live", "health/ready",
             "health/detailed", "decisions", "decisions/x", "tasks", "metrics", "info"]
POSTS = ["runs", "decisions/x/answer", "decisions/x/approve", "decisions/x/reject", "runs/x/stop", "runs/x/pause",
         "runs/x/resume", "runs/x/comment"]
ASKS_FOR_CODE = "how are sales trending in df?"   # the scripted provider wants to run Python for this one


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


@pytest.mark.parametrize("path", POSTS)
def test_post_without_token_or_xsrf_is_refused(jp_fetch, path, jp_asyncio_loop):
    async def body():
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", *path.split("/"), method="POST", body=json.dumps({"prompt": "x"}),
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
        for raw, expected in [("not json", "the message is not JSON"),
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


async def _pending(jp_fetch, proc, timeout: float = 90) -> dict:
    """The first pending decision, read over REST while the other process waits on it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        assert proc.returncode is None, "the run ended before it asked"
        found = (await _get(jp_fetch, "decisions"))["decisions"]
        if found:
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError("no decision appeared")


def _waiting_run(root: Path):
    return asyncio.create_subprocess_exec(*CLI, "--workspace", str(root), "agent", "run", ASKS_FOR_CODE,
                                          "--no-subagents", "--on-query", "wait", "--decision-timeout", "2m",
                                          cwd=root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


@pytest.mark.slow
def test_rest_approval_lets_a_headless_run_of_another_process_finish(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        proc = await _waiting_run(jp_root_dir)
        try:
            d = await _pending(jp_fetch, proc)
            assert d["kind"] == "approval" and d["state"] == "pending" and "df" in d["code"]
            runs = (await _get(jp_fetch, "runs"))["runs"]
            assert [(r["id"], r["origin"], r["waitingForYou"]) for r in runs] == [(d["runId"], "terminal", 1)]
            assert (await _get(jp_fetch, f"decisions/{d['id'][:8]}"))["id"] == d["id"]
            # the agents row follows the decision within the event log's 50 ms batch: read until it shows
            for _ in range(100):
                metrics = (await jp_fetch("agentstack", "api", "metrics")).body.decode()
                if 'agentstack_runs{status="waiting_user"} 1.0' in metrics:
                    break
                await asyncio.sleep(0.05)
            assert 'agentstack_decisions_pending{kind="approval"} 1.0' in metrics
            assert 'agentstack_runs{status="waiting_user"} 1.0' in metrics
            done = await _get(jp_fetch, f"decisions/{d['id']}/approve", method="POST", body="{}")
            assert done["state"] == "answered" and done["surface"] == "lab" and done["answer"] == {"approved": True}
            out, err = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
        assert proc.returncode == 0, err.decode()
        assert "NameError: name 'df' is not defined" in out.decode()  # the approved code ran over there
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:  # exactly one answer wins
            await jp_fetch("agentstack", "api", "decisions", d["id"], "reject", method="POST", body="{}")
        assert info.value.code == 400
        assert json.loads(info.value.response.body)["message"].endswith("from JupyterLab)")
        runs = (await _get(jp_fetch, "runs"))["runs"]
        assert runs[0]["status"] == "completed" and runs[0]["waitingForYou"] == 0
        assert (await _get(jp_fetch, "decisions"))["decisions"] == []
        assert len((await _get(jp_fetch, "decisions", params={"state": "all"}))["decisions"]) == 1
        tasks = (await _get(jp_fetch, "tasks"))["tasks"]
        assert isinstance(tasks, list)
    jp_asyncio_loop.run_until_complete(body())


@pytest.mark.slow
def test_websocket_user_response_answers_a_run_of_another_process(jp_ws_fetch, jp_fetch, jp_root_dir,
                                                                   jp_asyncio_loop):
    async def body():
        ws = await jp_ws_fetch("agentstack", "api", "events")
        proc = await _waiting_run(jp_root_dir)
        try:
            got = await _receive_until(ws, lambda m: m["type"] == "user-query")
            query = _wire(got[-1])
            assert query.kind == "approval"
            await ws.write_message(json.dumps({"type": "user-response", "agentId": query.agent_id,
                                               "queryId": query.query_id, "response": False}))
            out, err = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
        assert proc.returncode == 0, err.decode()
        assert "rejected by the user" in out.decode()
        (d,) = (await _get(jp_fetch, "decisions", params={"state": "all"}))["decisions"]
        assert d["surface"] == "lab" and d["answer"] == {"approved": False}
        ws.close()
    jp_asyncio_loop.run_until_complete(body())


def test_decision_actions_refuse_bad_input_with_one_line(jp_fetch, jp_asyncio_loop):
    async def body():
        for path, payload, code, text in [
                ("decisions/nope/approve", {}, 404, "no decision 'nope'"),
                ("decisions/nope/answer", {}, 400, "answer needs a 'response'"),
                ("decisions/nope/reject", {"reason": 3}, 400, "'reason' must be a string")]:
            with pytest.raises(tornado.httpclient.HTTPClientError) as info:
                await jp_fetch("agentstack", "api", *path.split("/"), method="POST", body=json.dumps(payload))
            assert info.value.code == code and text in json.loads(info.value.response.body)["message"]
        with pytest.raises(tornado.httpclient.HTTPClientError) as info:
            await jp_fetch("agentstack", "api", "decisions", params={"state": "maybe"})
        assert info.value.code == 400 and "unknown decision state 'maybe'" in json.loads(info.value.response.body)[
            "message"]
        metrics = (await jp_fetch("agentstack", "api", "metrics")).body.decode()
        assert "# TYPE agentstack_agents gauge" in metrics and "agentstack_ws_clients 0.0" in metrics
    jp_asyncio_loop.run_until_complete(body())


def _question_and_follow_up(root: Path) -> tuple[str, str]:
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.workspace import Workspace

    async def runs() -> tuple[str, str]:
        with Workspace.open(root, announce=False) as ws:
            first = AgentRun("what is 6 * 7?", workspace=ws, options={"subagents": False})
            await first
            second = first.ask("and times 2?")
            await second
            return first.id, second.id

    return asyncio.run(runs())


def test_runs_list_links_a_follow_up_to_the_run_it_continues(jp_fetch, jp_root_dir, jp_asyncio_loop):
    """The lab panel's runs list shows "↪ follow-up to “…”" from these two fields."""
    async def body():
        first, second = await asyncio.to_thread(_question_and_follow_up, jp_root_dir)
        runs = {r["id"]: r for r in (await _get(jp_fetch, "runs"))["runs"]}
        assert runs[second]["continues"] == first and runs[second]["continuesPrompt"] == "what is 6 * 7?"
        assert runs[first]["continues"] is None and runs[first]["continuesPrompt"] is None
    jp_asyncio_loop.run_until_complete(body())


def test_rest_keeps_the_keys_of_user_and_model_data(jp_fetch, jp_root_dir, jp_asyncio_loop):
    """Envelope keys are camelCase; a memory entry's metadata and a tool call's input keep the keys they were
    written with (the reply's recursive camel-casing turned ``source_url`` into ``sourceUrl``)."""
    from agentstack_lab.events import camel_keys
    from agentstack_lab.workspace import Workspace

    with Workspace.open(jp_root_dir, announce=False) as ws:
        ws.memory.store("q3", "quarterly revenue notes", metadata={"source_url": "https://x", "page_no": 3})

    async def body():
        hits = (await _get(jp_fetch, "memory/search", params={"q": "quarterly revenue"}))["results"]
        assert hits[0]["metadata"] == {"source_url": "https://x", "page_no": 3} and "agentId" in hits[0]
    jp_asyncio_loop.run_until_complete(body())
    wire = camel_keys({"events": [{"type": "tool-call", "tool_id": "t", "input": {"max_rows": 5}}]})
    assert wire == {"events": [{"type": "tool-call", "toolId": "t", "input": {"max_rows": 5}}]}


def test_rest_and_websocket_answers_name_the_jupyter_user(jp_fetch, jp_ws_fetch, jp_root_dir, jp_asyncio_loop):
    """Each token request gets a made-up "Anonymous …" user from Jupyter; the answer names the one person."""
    import getpass

    from agentstack_lab.decisions import decisions_for
    from agentstack_lab.workspace import Workspace

    async def body():
        with Workspace.open(jp_root_dir, announce=False) as w:
            ds = decisions_for(w)
            made = [ds.create(kind="clarification", prompt=f"Which month? {i}", run_id="r1", agent_id="a1")
                    for i in range(3)]
            for d in made[:2]:
                done = await _get(jp_fetch, f"decisions/{d.id}/answer", method="POST",
                                  body=json.dumps({"response": "May"}))
                assert done["state"] == "answered" and done["surface"] == "lab"
            ws = await jp_ws_fetch("agentstack", "api", "events")
            await ws.write_message(json.dumps({"type": "user-response", "agentId": "a1", "queryId": made[2].id,
                                               "response": "June"}))
            for _ in range(200):  # the socket answers in its own handler: wait for the row to change
                if not ds.get(made[2].id).pending:
                    break
                await asyncio.sleep(0.02)
            ws.close()
            by = [ds.get(d.id).answered_by for d in made]
        assert by == [getpass.getuser()] * 3, by
    jp_asyncio_loop.run_until_complete(body())
