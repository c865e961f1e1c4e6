"""``agentstack-lab mcp`` through the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, pinned by
tests/tools/mcp-inspector/package-lock.json; ``make test`` installs it with ``make mcp-inspector``).

The Inspector is another client than the Python SDK the other MCP tests use: it reads the advertised
capabilities, lists tools and prompts, calls tools, and reports a server's JSON-RPC errors and tool errors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_mcp import _command

pytestmark = pytest.mark.slow

INSPECTOR = Path(__file__).parent / "tools" / "mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture
def inspect(workdir):
    """Run one Inspector CLI method against a fresh ``agentstack-lab mcp`` on ``workdir``: (exit code, stdout JSON,
    the Inspector's error envelope or None)."""
    if not INSPECTOR.exists():
        pytest.skip("the MCP Inspector is not installed (make test-tools, which make test runs, installs it)")
    if shutil.which("node") is None:
        pytest.skip("node missing: the MCP Inspector needs Node")
    server = [*_command(), "mcp", "--workspace", str(workdir)]
    env_args = ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"] if "PYTHONPATH" in os.environ else []

    def run(method: str, *args: str) -> tuple[int, dict | None, dict | None]:
        # the server command before the method's options: --tool-arg / --prompt-args take every word after them
        done = subprocess.run([str(INSPECTOR), "--cli", "--format", "json", *env_args, *server, "--method", method,
                               *args], cwd=workdir, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in done.stderr, done.stderr  # the server's stderr is passed through
        envelopes = [json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"error"')]
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, \
            envelopes[-1]["error"] if envelopes else None

    return run


def test_the_inspector_sees_what_the_server_advertises_and_serves(inspect):
    code, out, err = inspect("initialize")
    assert code == 0 and err is None, err
    init = out["result"]
    assert init["serverInfo"]["name"] == "agentstack-lab" and init["protocolVersion"] == "2025-11-25"
    assert init["capabilities"] == {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}

    code, out, _ = inspect("tools/list")
    names = {t["name"] for t in out["result"]["tools"]}
    assert code == 0 and {"agent_run", "memory_store", "memory_get", "review_loop_start"} <= names
    schema = next(t for t in out["result"]["tools"] if t["name"] == "memory_store")["inputSchema"]
    assert {"key", "content"} <= set(schema["required"])

    code, out, _ = inspect("prompts/list")
    assert code == 0 and [p["name"] for p in out["result"]["prompts"]] == ["ask_agents", "recall", "review_code"]
    code, out, _ = inspect("prompts/get", "--prompt-name", "recall", "--prompt-args", "topic=kubernetes")
    assert code == 0 and out["result"]["messages"][0]["content"]["text"].endswith("Topic: kubernetes")


def test_the_inspector_calls_a_tool_and_reports_the_errors(inspect):
    code, out, err = inspect("tools/call", "--tool-name", "memory_store",
                             "--tool-args-json", json.dumps({"key": "plan", "content": "ship the memory layer"}))
    assert code == 0 and err is None and out["result"]["isError"] is False
    assert out["result"]["structuredContent"]["key"] == "plan" and out["result"]["structuredContent"]["version"] == 1
    code, out, _ = inspect("tools/call", "--tool-name", "memory_get", "--tool-args-json", json.dumps({"key": "plan"}))
    assert code == 0 and out["result"]["structuredContent"]["content"] == "ship the memory layer"

    # an expected failure of a real tool: a tool result with isError, which the Inspector exits non-zero on
    code, out, err = inspect("tools/call", "--tool-name", "memory_get", "--tool-args-json", json.dumps({"key": "nope"}))
    assert code != 0 and err["code"] == "tool_is_error"
    assert out["result"]["content"][0]["text"].endswith("no entry 'nope' in namespace 'default'")
    # an unknown tool: the Inspector checks tools/list first and refuses it (the server's own -32602 for the
    # call itself is checked on the wire in tests/test_mcp_protocol.py)
    code, out, err = inspect("tools/call", "--tool-name", "nope")
    assert code != 0 and out is None and err["code"] == "tool_not_found"
    # an unknown prompt: the server's JSON-RPC error, its one line as the Inspector's message
    code, out, err = inspect("prompts/get", "--prompt-name", "nope")
    assert code != 0 and out is None and err["message"] == "unknown prompt 'nope'"
    code, out, err = inspect("prompts/get", "--prompt-name", "recall")
    assert code != 0 and err["message"] == "invalid arguments for prompt recall: topic: required"
