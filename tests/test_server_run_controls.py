"""The Agents panel's REST additions, in a real Jupyter server: run controls, workspace info, links and cards.

- ``POST runs/ID/stop|pause|resume|comment`` acts on a run of another process through the workspace's
  intervention queue (the path of ``agentstack-lab agent stop`` and the notebook's controls): a headless
  ``agent run --on-query wait`` waiting for an approval in another OS process is stopped from REST.
- Bad input is a 4xx with one line and queues nothing.
- ``GET info`` names the workspace relative to the server's root; ``runs`` give a notebook origin's path
  relative to the root only when it is inside it, with the cell id and executor the run recorded.
- ``decisions`` carry the asking agent's type, the run's prompt and where its code runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import tornado
from pytest_jupyter.jupyter_core import *  # noqa: E402, F403
from pytest_jupyter.jupyter_server import *  # noqa: E402, F403
from pytest_jupyter.pytest_tornasync import *  # noqa: E402, F403

from agentstack_lab.server.runctl import notebook_link

CLI = [sys.executable, "-m", "agentstack_lab.cli"]
ASKS_FOR_CODE = "how are sales trending in df?"


@pytest.fixture
def jp_server_config(jp_root_dir):
    return {"ServerApp": {"jpserver_extensions": {"agentstack_lab.server": True}},
            "AgentstackExtension": {"workspace": str(jp_root_dir), "poll_interval": 0.02}}


async def _get(jp_fetch, path: str, **kw):
    res = await jp_fetch("agentstack", "api", *path.split("/"), **kw)
    return json.loads(res.body)


async def _refused(jp_fetch, path: str, payload: object) -> tuple[int, str]:
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch("agentstack", "api", *path.split("/"), method="POST",
                       body=payload if isinstance(payload, str) else json.dumps(payload))
    body = json.loads(info.value.response.body)
    assert set(body) == {"message"} and "\n" not in body["message"], body
    return info.value.code, body["message"]


def test_notebook_links_stay_inside_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    assert notebook_link(f"notebook:{root / 'sub' / 'a.ipynb'}", str(root)) == "sub/a.ipynb"
    assert notebook_link("notebook:sub/a.ipynb", str(root)) == "sub/a.ipynb"
    assert notebook_link(f"notebook:{tmp_path / 'elsewhere.ipynb'}", str(root)) is None
    assert notebook_link("notebook:../../etc/passwd", str(root)) is None
    assert notebook_link(f"notebook:{root}", str(root)) is None
    assert notebook_link("terminal", str(root)) is None and notebook_link(None, str(root)) is None


@pytest.mark.slow
def test_info_names_the_workspace_relative_to_the_root(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        info = await _get(jp_fetch, "info")
        assert info["workspace"] == "." and info["root"] == str(jp_root_dir)
        assert info["database"] == ".agentstack/agentstack.db"
    jp_asyncio_loop.run_until_complete(body())


def _run_in_a_notebook_kernel(root: Path) -> str:
    """A run as ``%agent`` in a kernel of ``root/nb/a.ipynb`` records it: origin, cell id, live executor."""
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.workspace import Workspace

    async def go() -> str:
        with Workspace.open(root, announce=False) as ws:
            run = AgentRun("what is 6 * 7?", workspace=ws, options={"subagents": False},
                           origin=f"notebook:{root / 'nb' / 'a.ipynb'}", cell_id="cell-1234", executor="live")
            await run
            outside = AgentRun("and 7 * 8?", workspace=ws, options={"subagents": False},
                               origin=f"notebook:{root.parent / 'b.ipynb'}")
            await outside
            return run.id

    return asyncio.run(go())


@pytest.mark.slow
def test_runs_and_decisions_carry_what_the_panel_shows(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        run_id = await asyncio.to_thread(_run_in_a_notebook_kernel, jp_root_dir)
        runs = {r["prompt"]: r for r in (await _get(jp_fetch, "runs"))["runs"]}
        mine = runs["what is 6 * 7?"]
        assert mine["id"] == run_id and mine["notebook"] == "nb/a.ipynb" and mine["cellId"] == "cell-1234"
        assert mine["executor"] == "live" and mine["createdAt"]
        assert runs["and 7 * 8?"]["notebook"] is None and runs["and 7 * 8?"]["cellId"] is None
    jp_asyncio_loop.run_until_complete(body())


@pytest.mark.slow
def test_run_controls_refuse_bad_input_with_one_line(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        run_id = await asyncio.to_thread(_run_in_a_notebook_kernel, jp_root_dir)
        for path, payload, code, text in [
                ("runs/nope/stop", {}, 404, "nope"),
                (f"runs/{run_id}/comment", {}, 400, "comment needs a non-empty 'text'"),
                (f"runs/{run_id}/comment", {"text": "  "}, 400, "comment needs a non-empty 'text'"),
                (f"runs/{run_id}/comment", {"text": "x" * 20_001}, 400, "over the limit of 20,000"),
                (f"runs/{run_id}/pause", {"text": "hi"}, 400, "pause takes no 'text'"),
                (f"runs/{run_id}/stop", {"agentId": 3}, 400, "'agentId' must be a non-empty string"),
                (f"runs/{run_id}/stop", {"agentId": "zzzzzzzz"}, 400, "is not an agent of run"),
                (f"runs/{run_id}/stop", "[1]", 400, "must be a JSON object"),
                (f"runs/{run_id}/stop", "{", 400, "the request body"),
                (f"runs/{run_id}/stop", {}, 400, "completed: nothing to stop")]:
            got, message = await _refused(jp_fetch, path, payload)
            assert got == code and text in message, (path, got, message)
        from agentstack_lab.workspace import Workspace

        with Workspace.open(jp_root_dir, announce=False) as ws:
            assert ws.db.query("SELECT count(*) FROM interventions")[0][0] == 0   # nothing was queued
    jp_asyncio_loop.run_until_complete(body())


def _waiting_run(root: Path):
    return asyncio.create_subprocess_exec(*CLI, "--workspace", str(root), "agent", "run", ASKS_FOR_CODE,
                                          "--no-subagents", "--on-query", "wait", "--decision-timeout", "2m",
                                          cwd=root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


@pytest.mark.slow
def test_stop_from_rest_stops_a_run_of_another_process(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        proc = await _waiting_run(jp_root_dir)
        try:
            for _ in range(900):
                assert proc.returncode is None, "the run ended before it asked"
                found = (await _get(jp_fetch, "decisions"))["decisions"]
                if found:
                    break
                await asyncio.sleep(0.1)
            (d,) = found
            assert d["agentType"] and d["runPrompt"] == ASKS_FOR_CODE and d["executor"] in ("live", "subprocess")
            comment = await _get(jp_fetch, f"runs/{d['runId'][:8]}/comment", method="POST",
                                 body=json.dumps({"text": "look at the 2023 rows"}))
            assert comment == {"runId": d["runId"], "agentId": d["runId"], "action": "comment", "applied": "queued"}
            stop = await _get(jp_fetch, f"runs/{d['runId']}/stop", method="POST", body="{}")
            assert stop["applied"] == "queued"
            out, err = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
        runs = (await _get(jp_fetch, "runs"))["runs"]
        assert runs[0]["status"] == "stopped", (out.decode(), err.decode())
        from agentstack_lab.workspace import Workspace

        with Workspace.open(jp_root_dir, announce=False) as ws:
            rows = ws.db.query("SELECT action, surface, applied_at IS NOT NULL FROM interventions ORDER BY id")
        assert [tuple(r) for r in rows][-1] == ("stop", "lab", 1)
    jp_asyncio_loop.run_until_complete(body())
