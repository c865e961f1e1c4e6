"""MCP 2025-11-25 protocol errors and capabilities of ``agentstack-lab mcp``, through the real stdio client
and as raw JSON-RPC lines on the server process's stdin and stdout."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from test_mcp import _command, call, mcp_client  # noqa: E402

pytestmark = pytest.mark.slow

INVALID_PARAMS, METHOD_NOT_FOUND, INTERNAL = -32602, -32601, -32603


async def _refused(request, code: int = INVALID_PARAMS) -> str:
    """A request the server answers with a JSON-RPC error ``code``: its one-line message."""
    with pytest.raises(MCPError) as refused:
        await request
    assert refused.value.code == code, refused.value.error
    assert "\n" not in refused.value.message and "Traceback" not in refused.value.message
    return refused.value.message


async def test_unknown_names_and_cursors_are_json_rpc_invalid_params(workdir):
    async with mcp_client(workdir) as s:
        assert await _refused(s.call_tool("nope", {})) == "unknown tool 'nope'"
        assert await _refused(s.get_prompt("nope")) == "unknown prompt 'nope'"
        assert await _refused(s.get_prompt("recall")) == "invalid arguments for prompt recall: topic: required"
        assert await _refused(s.get_prompt("recall", {"topic": "  "})) == \
            "invalid arguments for prompt recall: topic: required"
        assert await _refused(s.get_prompt("recall", {"topic": "x", "depth": "2"})) == \
            "invalid arguments for prompt recall: depth: not an argument of this prompt"
        bogus = types.PaginatedRequestParams(cursor="bogus")
        assert (await _refused(s.list_tools(params=bogus))).startswith("invalid cursor for tools/list")
        assert (await _refused(s.list_prompts(params=bogus))).startswith("invalid cursor for prompts/list")
        # resources are not served at all: JSON-RPC's method-not-found, cursor or not
        assert await _refused(s.list_resources(), METHOD_NOT_FOUND) == "Method not found"
        assert await _refused(s.list_resources(params=bogus), METHOD_NOT_FOUND) == "Method not found"
        assert await _refused(s.list_resource_templates(), METHOD_NOT_FOUND) == "Method not found"

        # a known tool's bad arguments stay a tool execution error the model can correct
        res = await s.call_tool("memory_search", {"query": "x", "limit": 0})
        assert res.is_error and res.content[0].text.startswith("invalid arguments for memory_search: limit:")
        # and the connection serves on: whole lists without a cursor, the real prompts
        listed = await s.list_tools()
        assert listed.next_cursor is None and "memory_store" in {t.name for t in listed.tools}
        await call(s, "memory_store", key="plan", content="ship the kubernetes memory layer")
        prompts = await s.list_prompts()
        assert prompts.next_cursor is None
        assert {p.name: [a.name for a in p.arguments or []] for p in prompts.prompts} == \
            {"ask_agents": ["question"], "recall": ["topic"], "review_code": ["code"]}
        got = await s.get_prompt("recall", {"topic": "kubernetes"})
        (msg,) = got.messages
        assert msg.role == "user" and "memory_search" in msg.content.text and msg.content.text.endswith("kubernetes")
    log = (workdir / "server.stderr").read_text()
    assert "Traceback" not in log and "ERROR" not in log, log


async def test_initialize_advertises_what_is_served(workdir):
    async with mcp_client(workdir) as s:
        caps = s.initialize_result.capabilities
        assert caps.tools is not None and caps.tools.list_changed is False
        assert caps.prompts is not None and caps.prompts.list_changed is False
        assert caps.resources is None and caps.logging is None and caps.completions is None
        # each advertised capability answers; each absent one is method-not-found
        assert (await s.list_tools()).tools and (await s.list_prompts()).prompts
        await _refused(s.list_resources(), METHOD_NOT_FOUND)
        await _refused(s.complete(types.PromptReference(name="recall"), {"name": "topic", "value": "k"}),
                       METHOD_NOT_FOUND)


def _raw_session(workdir: Path, requests: list[tuple[str, dict]]) -> tuple[dict, list[dict], str]:
    """``initialize`` at 2025-11-25, then ``requests`` as raw lines: the initialize result, each reply, stderr."""
    cmd = _command()
    env = {**os.environ}
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(requests, 1)]
    with open(workdir / "raw.stderr", "w") as err:
        proc = subprocess.Popen([*cmd, "mcp", "--workspace", str(workdir)], cwd=workdir, env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        replies = []
        assert proc.stdin and proc.stdout
        for line in lines:  # one at a time: each reply is read before the next request is sent
            proc.stdin.write(json.dumps(line) + "\n")
            proc.stdin.flush()
            if "id" in line:
                replies.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    init, *answers = replies
    assert [a["id"] for a in answers] == list(range(1, len(requests) + 1))
    return init["result"], answers, (workdir / "raw.stderr").read_text()


def test_the_wire_form_of_the_errors_and_capabilities(workdir):
    init, answers, stderr = _raw_session(workdir, [
        ("tools/call", {"name": "invalid_tool_name", "arguments": {}}),
        ("prompts/get", {"name": "nope"}),
        ("tools/list", {"cursor": "eyJwYWdlIjogMn0="}),
        ("prompts/list", {"cursor": ""}),
        ("resources/read", {"uri": "file:///etc/passwd"}),
        ("tools/call", {"name": "memory_get", "arguments": {"key": "missing"}}),
        ("logging/setLevel", {"level": "debug"}),
    ])
    assert init["protocolVersion"] == "2025-11-25"
    assert init["capabilities"] == {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}
    assert answers[0] == {"jsonrpc": "2.0", "id": 1,
                          "error": {"code": INVALID_PARAMS, "message": "unknown tool 'invalid_tool_name'"}}
    assert answers[1]["error"] == {"code": INVALID_PARAMS, "message": "unknown prompt 'nope'"}
    assert [a["error"]["code"] for a in answers[2:5]] == [INVALID_PARAMS, INVALID_PARAMS, METHOD_NOT_FOUND]
    assert set(answers[2]) == {"jsonrpc", "id", "error"} and set(answers[2]["error"]) == {"code", "message"}
    # an expected failure of a known tool is a result with isError, not a protocol error
    assert answers[5]["result"]["isError"] is True and "no entry 'missing'" in answers[5]["result"]["content"][0]["text"]
    assert answers[6]["error"]["code"] == METHOD_NOT_FOUND  # logging is not advertised, nor served
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr


async def test_a_handler_bug_is_internal_error_with_the_traceback_in_the_log(tmp_path, caplog):
    """Any handler's unexpected exception: -32603 with one fixed line; its text goes to the log only."""
    from agentstack_lab.mcp.server import INTERNAL_ERROR, build_server
    from agentstack_lab.workspace import Workspace

    class Ctx:
        request_id, method, params = 7, "prompts/get", {"name": "recall", "arguments": {"topic": "the kubernetes layer"}}

    async def buggy(ctx):
        raise RuntimeError(f"render failed for {ctx.params['arguments']['topic']}")

    with Workspace.open(tmp_path, announce=False) as ws:
        server = build_server(ws)
        (guard,) = [m for m in server.middleware if getattr(m, "__name__", "") == "_protocol_errors"]
        with caplog.at_level(logging.ERROR, logger="agentstack_lab.mcp.server"), pytest.raises(MCPError) as bug:
            await guard(Ctx(), buggy)
    assert (bug.value.code, bug.value.message) == (INTERNAL, INTERNAL_ERROR)
    assert "the kubernetes layer" not in str(bug.value.error)
    (record,) = caplog.records
    assert "prompts/get failed with an unexpected error (a bug)" in record.getMessage()
    assert "render failed for the kubernetes layer" in caplog.text  # the traceback is in the server log
