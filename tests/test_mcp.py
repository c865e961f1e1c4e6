"""The MCP server through the real ``mcp`` client: ``agentstack-lab mcp`` spawned over stdio."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client  # noqa: E402

pytestmark = pytest.mark.slow

EXPECTED_TOOLS = {
    "agent_run", "agent_status", "agent_tree", "agent_list", "agent_stop", "agent_types",
    "memory_store", "memory_get", "memory_search", "memory_list", "memory_delete",
    "session_start", "session_end", "session_status", "session_active",
    "identity_create", "identity_transition", "identity_audit", "system_status",
    "decision_list", "decision_get", "decision_answer", "agent_intervene",
    "agent_spawn", "agent_update_status", "identity_get", "identity_list", "identity_update",
    "system_health", "system_config",
    "task_create", "task_assign", "task_complete", "task_list", "task_get", "task_get_relationships",
    "task_check_drift", "task_drift_metrics",
    "consensus_check", "consensus_list_pending", "consensus_get", "consensus_approve", "consensus_reject",
    "review_loop_start", "review_loop_status", "review_loop_abort", "review_loop_issues", "review_loop_list",
    "review_loop_get_code",
}


def _command() -> list[str]:
    script = Path(sys.executable).with_name("agentstack-lab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


@contextlib.asynccontextmanager
async def mcp_client(workspace: Path, *, log: str = "server.stderr", env: dict[str, str] | None = None):
    """A real ``agentstack-lab mcp`` server process on ``workspace``; its stderr goes to ``workspace/log``."""
    cmd = _command()
    if env is None and "PYTHONPATH" in os.environ:  # the server imports the code under test (mcp passes few vars)
        env = {**get_default_environment(), "PYTHONPATH": os.environ["PYTHONPATH"]}
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--workspace", str(workspace)],
                                   cwd=str(workspace), env=env)
    with open(workspace / log, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **args):
    """A successful tool call's structured result."""
    res = await session.call_tool(tool, args)
    assert not res.is_error, f"{tool} failed: {res.content[0].text}"
    return res.structured_content


async def error(session: ClientSession, tool: str, **args) -> str:
    """A failing tool call's one-line message."""
    res = await session.call_tool(tool, args)
    assert res.is_error, f"{tool} unexpectedly succeeded: {res.structured_content}"
    text = res.content[0].text
    assert "\n" not in text and "Traceback" not in text
    return text


def _ids(node: dict) -> list[tuple[str, str]]:
    return [(node["id"], node["status"])] + [x for c in node["children"] for x in _ids(c)]


async def test_tools_memory_agent_run_and_tree(workdir):
    async with mcp_client(workdir) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == EXPECTED_TOOLS

        stored = await call(s, "memory_store", key="plan", content="ship the kubernetes memory layer",
                            tags=["work"])
        assert stored["namespace"] == "default" and stored["version"] == 1
        await call(s, "memory_store", key="lunch", content="sandwiches on friday")
        hits = (await call(s, "memory_search", query="kubernetes"))["results"]
        assert hits[0]["key"] == "plan" and "fts" in hits[0]["matched"]
        assert [h["key"] for h in (await call(s, "memory_search", query="kubernetes", mode="fts"))["results"]] == ["plan"]
        for mode in ("fts", "vector", "hybrid"):   # stop words shared with both notes are no hit (issue 31)
            assert (await call(s, "memory_search", query="is the cluster on the vpn", mode=mode))["count"] == 0
        partial = (await call(s, "memory_search", query="kubernetes budget forecast", mode="fts"))["results"]
        assert [h["key"] for h in partial] == ["plan"] and partial[0]["score"] < 0.5   # one word of three
        assert (await call(s, "memory_search", query="kubernetes budget forecast", threshold=0.5))["count"] == 0
        assert (await call(s, "memory_get", key="plan"))["tags"] == ["work"]
        assert [e["key"] for e in (await call(s, "memory_list", tag="work"))["entries"]] == ["plan"]

        out = await call(s, "agent_run", prompt="what is a monad?", provider="scripted", wait=True)
        assert out["status"] == "completed" and out["done"] and "offline" in out["result"]
        assert len(out["tree"]["children"]) == 2
        logged = await call(s, "agent_tree", run_id=out["runId"][:8])  # a prefix is enough
        assert logged["runId"] == out["runId"]
        assert _ids(logged["tree"]) == _ids(out["tree"])
        assert logged["tree"]["result"] == out["result"]

        status = await call(s, "agent_status", agent_id=out["runId"])
        assert status["status"] == "completed" and status["lastEvent"]["text"] == "completed"
        assert status["inputTokens"] > 0 and not status["inThisProcess"]
        listed = await call(s, "agent_list", run_id=out["runId"])
        assert listed["count"] == 3 and {a["status"] for a in listed["agents"]} == {"completed"}
        assert "researcher" in {t["type"] for t in (await call(s, "agent_types"))["types"]}

        # system_status is derived from the database
        st = await call(s, "system_status")
        assert st["database"] == str(workdir / ".agentstack" / "agentstack.db")
        assert st["counts"]["memory"]["memory"] == 2 and st["counts"]["agents"] == {"completed": 3}
        assert st["counts"]["runs"] == 1 and st["counts"]["events"] > 10
        assert st["migrations"]["pending"] == [] and "engine_events" in st["migrations"]["applied"]
        assert st["embedder"]["name"] == "hash" and st["providers"]["available"]["scripted"]["available"]
        assert "ANTHROPIC_API_KEY" in st["providers"]["available"]["anthropic"]["detail"]


async def test_invalid_input_gives_one_clear_tool_error(workdir):
    async with mcp_client(workdir) as s:
        assert await error(s, "memory_search", query="x", limit=0) == \
            "invalid arguments for memory_search: limit: Input should be greater than or equal to 1"
        assert "prompt: Field required" in await error(s, "agent_run")
        assert "mode: Input should be 'hybrid', 'fts' or 'vector'" in await error(s, "memory_search", query="x",
                                                                                  mode="semantic")
        assert (await error(s, "memory_get", key="missing")).endswith("no entry 'missing' in namespace 'default'")
        assert "unknown agent type 'wizard'" in await error(s, "agent_run", prompt="hi", agent_type="wizard")
        assert "unknown provider 'nope'" in await error(s, "agent_run", prompt="hi", provider="nope")
        assert "no agent with id or name 'ghost'" in await error(s, "agent_status", agent_id="ghost")
        assert "no run 'ghost'" in await error(s, "agent_tree", run_id="ghost")
        assert "no session with id 'nope'" in await error(s, "session_end", session_id="nope")

        ident = await call(s, "identity_create", agent_type="coder", display_name="ada")
        assert ident["status"] == "created"
        assert (await call(s, "identity_transition", identity="ada", to="active"))["status"] == "active"
        assert (await call(s, "identity_transition", identity="ada", to="retired", reason="done"))["status"] == "retired"
        assert "cannot go from 'retired' to 'active'" in await error(s, "identity_transition", identity="ada", to="active")
        audit = await call(s, "identity_audit", identity=ident["agentId"])
        assert [a["action"] for a in audit["audit"]] == ["retired", "activated", "created"]
        assert "unknown agent type 'wizard'" in await error(s, "identity_create", agent_type="wizard")
        # nothing was changed by the failures
        assert (await call(s, "system_status"))["counts"]["agents"] == {}
        assert (await call(s, "memory_list"))["count"] == 0


async def test_session_isolation(workdir):
    async with mcp_client(workdir) as s:
        started_a = await call(s, "session_start", name="A")
        started_b = await call(s, "session_start", name="B")
        a, ta = started_a["id"], started_a["sessionToken"]
        b, tb = started_b["id"], started_b["sessionToken"]
        stored = await call(s, "memory_store", key="secret", content="the launch code is zebra", session_id=a,
                            session_token=ta)
        assert stored["namespace"] == f"session:{a}"
        hits = (await call(s, "memory_search", query="zebra", session_id=a, session_token=ta))["results"]
        assert [h["key"] for h in hits] == ["secret"]
        assert (await call(s, "memory_search", query="zebra", session_id=b, session_token=tb))["results"] == []
        assert (await call(s, "memory_search", query="zebra"))["results"] == []
        denied = await error(s, "memory_get", key="secret", namespace=f"session:{a}", session_id=b, session_token=tb)
        assert f"read denied: namespace 'session:{a}' belongs to another session" in denied
        assert "denied" in await error(s, "memory_store", key="x", content="y", namespace=f"session:{a}")
        assert "denied" in await error(s, "memory_get", key="secret", namespace=f"session:{a}")
        assert {x["id"] for x in (await call(s, "session_active"))["sessions"]} >= {a, b}
        # B's token is not A's
        assert "wrong session_token" in await error(s, "memory_get", key="secret", session_id=a, session_token=tb)
        ended = await call(s, "session_end", session_id=a, session_token=ta)
        assert ended["status"] == "ended" and ended["entries"] == 1 and "sessionToken" not in ended
        assert "has ended" in await error(s, "memory_search", query="zebra", session_id=a, session_token=ta)
        assert (await call(s, "session_status", session_id=a))["entries"] == 0


async def test_headless_run_fails_closed_and_other_process_runs_show(workdir):
    cmd = _command()
    # a run from another process (the CLI) is visible to the MCP server through the database
    done = subprocess.run([*cmd, "agent", "run", "what is a monad?", "--json"], cwd=workdir,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cli_run = json.loads(done.stdout)["runId"]
    async with mcp_client(workdir) as s:
        roots = (await call(s, "agent_list", roots_only=True))["agents"]
        assert [r["id"] for r in roots] == [cli_run] and roots[0]["status"] == "completed"
        assert (await call(s, "agent_tree", run_id=cli_run))["tree"]["status"] == "completed"
        assert "already completed" in await error(s, "agent_stop", agent_id=cli_run)

        out = await call(s, "agent_run", prompt="how are sales trending in df?", subagents=False, wait=True)
        assert out["status"] == "failed" and "approval" in out["error"] and "headless" in out["error"]
        out = await call(s, "agent_run", prompt="how are sales trending in df?", subagents=False,
                         auto_approve=True, wait=True)
        assert out["status"] == "completed" and "NameError" in out["result"]  # ran in a fresh subprocess
        started = await call(s, "agent_run", prompt="what is a monad?")
        assert started["done"] is False
        for _ in range(200):
            st = await call(s, "agent_status", agent_id=started["runId"])
            if st["status"] == "completed":
                break
            import anyio

            await anyio.sleep(0.05)
        assert st["status"] == "completed"
        assert "already completed" in await error(s, "agent_stop", agent_id=started["runId"])


async def test_agent_stop_reaches_runs_of_this_process_only(workdir):
    from agentstack_lab.agents.spawner import Spawner
    from agentstack_lab.mcp.tools import Toolbox
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.workspace import Workspace

    with Workspace.open(workdir) as ws:
        tb = Toolbox(ws)
        started = await tb.agent_run("what is a monad?", provider=ScriptedProvider(latency=0.3))
        run = tb.runs[started["run_id"]]
        while run.status != "running":
            await __import__("asyncio").sleep(0.01)
        stopped = await tb.agent_stop(started["run_id"], reason="enough")
        assert stopped["status"] == "stopped" and stopped["error"] == "enough"
        assert tb.agent_status(started["run_id"])["status"] == "stopped"  # the log was flushed
        assert tb.system_status()["runs_in_this_process"] == []

        sp = Spawner(ws.db)
        idle = sp.spawn("coder", name="helper")
        assert (await tb.agent_stop("helper"))["status"] == "stopped"
        with ws.db.transaction() as conn:  # a running agent of a run that lives in another process
            sp.upsert_many(conn, [{"id": "a-foreign", "name": "foreign", "type": "coder", "status": "running",
                                   "run_id": "r-foreign", "created_at": "2030-01-01T00:00:00+00:00",
                                   "updated_at": "2030-01-01T00:00:00+00:00", "depth": 0,
                                   "input_tokens": 0, "output_tokens": 0}])
        queued = await tb.agent_stop("a-foreign")  # its owner process applies it (tests/test_decisions_surfaces.py)
        assert queued["queued"] and "another process" in queued["note"]
        assert sp.get("a-foreign").status == "running" and sp.get(idle.id).status == "stopped"


async def test_a_session_id_is_not_enough_to_use_another_clients_session(workdir):
    """Two server processes on one workspace: B sees A's session id, but only A's token opens it."""
    async with mcp_client(workdir, log="a.stderr") as a:
        started = await call(a, "session_start", name="private")
        sid, token = started["id"], started["sessionToken"]
        assert len(token) >= 40
        await call(a, "memory_store", key="note", content="the vault code is walrus", session_id=sid,
                   session_token=token)
        async with mcp_client(workdir, log="b.stderr") as b:
            listed = (await call(b, "session_active"))["sessions"]
            assert [x["id"] for x in listed] == [sid] and not any("token" in k.lower() for x in listed for k in x)
            attempts = [("memory_get", {"key": "note"}), ("memory_search", {"query": "walrus"}),
                        ("memory_list", {}), ("memory_delete", {"key": "note"}),
                        ("memory_store", {"key": "note", "content": "overwritten"}), ("session_end", {}),
                        ("agent_run", {"prompt": "what is a monad?", "wait": True})]
            for tool, args in attempts:
                assert f"session '{sid}' is private: pass the session_token" in await error(b, tool, session_id=sid,
                                                                                             **args)
                wrong = await error(b, tool, session_id=sid, session_token="x" * len(token), **args)
                assert wrong.endswith(f"wrong session_token for session '{sid}'")
            # nothing changed: the entry, the session, no run
            st = await call(b, "session_status", session_id=sid)
            assert st["status"] == "active" and st["entries"] == 1 and "sessionToken" not in st
            assert (await call(b, "agent_list"))["count"] == 0
            entry = await call(a, "memory_get", key="note", session_id=sid, session_token=token)
            assert entry["content"] == "the vault code is walrus" and entry["version"] == 1

            # with the token, the other process may use the session (the token travels, the connection does not matter)
            got = await call(b, "memory_get", key="note", session_id=sid, session_token=token)
            assert got["content"] == "the vault code is walrus"
            hits = (await call(b, "memory_search", query="walrus", session_id=sid, session_token=token))["results"]
            assert [h["key"] for h in hits] == ["note"]
            assert (await call(b, "memory_list", session_id=sid, session_token=token))["count"] == 1
            run = await call(b, "agent_run", prompt="what is a monad?", wait=True, session_id=sid, session_token=token)
            assert run["status"] == "completed" and run["sessionId"] == sid
            assert (await call(b, "memory_delete", key="note", session_id=sid, session_token=token))["deleted"] == "note"
            assert (await call(b, "session_end", session_id=sid, session_token=token))["status"] == "ended"
            # an ended session takes no writes, from the process that started it either
            assert "has ended" in await error(a, "memory_store", key="late", content="too late", session_id=sid,
                                              session_token=token)

    # the token was shown once and is nowhere else: not in the database files (nor the vector index files beside
    # them), the event log, or the logs
    store = workdir / ".agentstack"
    for f in (f for f in store.rglob("*") if f.is_file()):
        assert token.encode() not in f.read_bytes(), f.name
    for log in ("a.stderr", "b.stderr"):
        assert token not in (workdir / log).read_text()
    from agentstack_lab.workspace import Workspace

    with Workspace.open(workdir, announce=False) as ws:
        assert ws.db.query("SELECT token_hash FROM sessions WHERE id = ?", [sid])[0][0] == \
            hashlib.sha256(token.encode()).hexdigest()
        events = ws.db.query("SELECT * FROM events")
        assert events and not any(token in str(cell) for row in events for cell in row)
        assert ws.db.query("SELECT count(*) FROM memory WHERE namespace = ?", [f"session:{sid}"])[0][0] == 0


async def test_empty_session_id_is_an_error_and_an_ended_session_takes_no_writes(workdir):
    async with mcp_client(workdir) as s:
        for tool, args in [("memory_store", {"key": "k", "content": "c"}), ("memory_get", {"key": "k"}),
                           ("memory_search", {"query": "c"}), ("memory_list", {}), ("memory_delete", {"key": "k"}),
                           ("agent_run", {"prompt": "hi"}), ("agent_list", {}), ("session_end", {})]:
            assert await error(s, tool, session_id="", **args) == \
                f"invalid arguments for {tool}: session_id: String should have at least 1 character"
        assert "session_token was given without session_id" in await error(s, "memory_store", key="k", content="c",
                                                                           session_token="t")
        started = await call(s, "session_start")
        sid, token = started["id"], started["sessionToken"]
        await call(s, "session_end", session_id=sid, session_token=token)
        assert f"session '{sid}' has ended" in await error(s, "memory_store", key="k", content="c", session_id=sid,
                                                            session_token=token)
        assert f"session '{sid}' has ended" in await error(s, "agent_run", prompt="what is a monad?", wait=True,
                                                            session_id=sid, session_token=token)
        assert "only an active session can end" in await error(s, "session_end", session_id=sid, session_token=token)
        # nothing was written anywhere by the refused calls
        st = await call(s, "system_status")
        assert st["counts"]["memory"]["memory"] == 0 and st["counts"]["agents"] == {}
        assert st["counts"]["events"] == 0


BROKEN_PLUGIN = '''
from agentstack_lab.plugins import hookimpl


def _broken(config=None, **overrides):
    raise RuntimeError("plugin bug: boom")


@hookimpl
def register_providers(register):
    register("broken", _broken)
'''


def _broken_plugin_env(folder: Path) -> dict[str, str]:
    """A real installed plugin (a dist-info with an entry point) whose provider factory has a bug."""
    folder.mkdir()
    (folder / "broken_provider.py").write_text(BROKEN_PLUGIN)
    dist = folder / "broken_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[agentstack_lab]\nbroken = broken_provider\n")
    return {"PYTHONPATH": str(folder)}


async def test_a_bug_is_logged_with_its_traceback_and_the_client_reads_one_line(workdir, tmp_path):
    async with mcp_client(workdir, env=_broken_plugin_env(tmp_path / "plugins")) as s:
        text = await error(s, "agent_run", prompt="hi", provider="broken")
        assert text.endswith("internal error (see server log)") and "boom" not in text
        # a broken provider does not take system_status down; the others are still reported
        st = await call(s, "system_status")
        assert st["providers"]["available"]["broken"] == {"available": False,
                                                          "detail": "internal error (see server log)"}
        assert st["providers"]["available"]["scripted"]["available"]
        # expected errors stay one clear line and are not logged as bugs
        assert "mode: Input should be 'hybrid', 'fts' or 'vector'" in await error(s, "memory_search", query="x",
                                                                                  mode="nope")
        assert "unknown agent type 'wizard'" in await error(s, "agent_run", prompt="hi", agent_type="wizard")
        assert (await error(s, "agent_run", prompt="   ")).endswith("prompt must be a non-empty string")
    log = (workdir / "server.stderr").read_text()
    assert "MCP tool agent_run failed with an unexpected error (a bug)\nTraceback (most recent call last)" in log
    assert "RuntimeError: plugin bug: boom" in log and "building provider 'broken' failed" in log
    assert "wizard" not in log


async def test_run_with_on_query_wait_is_answered_with_decision_answer(workdir):
    import asyncio

    async with mcp_client(workdir) as s:
        started = await call(s, "agent_run", prompt="how are sales trending in df?", subagents=False,
                             on_query="wait", decision_timeout=120)
        for _ in range(600):
            pending = (await call(s, "decision_list", run_id=started["runId"]))["decisions"]
            if pending:
                break
            await asyncio.sleep(0.05)
        (d,) = pending
        assert d["kind"] == "approval" and "df" in d["code"] and d["state"] == "pending"
        assert "action 'answer' needs text" in await error(s, "decision_answer", decision_id=d["id"], action="answer")
        done = await call(s, "decision_answer", decision_id=d["id"][:8], action="approve")
        assert done["state"] == "answered" and done["surface"] == "mcp" and done["answer"] == {"approved": True}
        late = await error(s, "decision_answer", decision_id=d["id"], action="reject")
        assert late.endswith(f": decision {d['id']} already answered (by mcp client, from MCP)")
        for _ in range(600):
            status = await call(s, "agent_status", agent_id=started["runId"])
            if status["status"] in ("completed", "failed", "stopped"):
                break
            await asyncio.sleep(0.05)
        assert status["status"] == "completed", status
        tree = (await call(s, "agent_tree", run_id=started["runId"]))["tree"]
        assert tree["metadata"]["answers"][-1]["source"] == "mcp"
