"""Secrets never reach logs, events, outputs or the database, proven end to end.

A recognisable fake key (``sk-ant-TESTSECRET-<random>``) is set as ``ANTHROPIC_API_KEY`` and
``OPENAI_API_KEY``; the config reads it with ``"${ANTHROPIC_API_KEY}"``. Runs go through the real
Anthropic SDK against the loopback fake server (a 401 and a successful run with a python tool call
on both executors), the CLI, the MCP ``system_status`` tool and a config type error on an
interpolated field. Then every byte of the test's files (workspace database, ``-wal``, ``-shm``),
the ``events`` table, DEBUG logs of every logger, CLI outputs and exception texts are scanned.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import traceback
from pathlib import Path

import fakes_llm
import pytest
from fakes_llm import Reply
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.events import to_wire
from tests.notebook_helpers import run_cells

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

MARKER = "TESTSECRET"
HEADER_NAMES = ("x-api-key", "authorization", "anthropic-version", "x-stainless", "user-agent")
runner = CliRunner()


@pytest.fixture
def key(monkeypatch, fake_llm) -> str:
    """A fresh fake key in both env vars; the fake server accepts only this key."""
    value = f"sk-ant-{MARKER}-{secrets.token_hex(16)}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", value)
    monkeypatch.setenv("OPENAI_API_KEY", value)
    fake_llm.api_key = value
    return value


@pytest.fixture
def config_file(workdir, fake_llm, key) -> Path:
    """``agentstack.config.json`` reading the key from the environment, pointed at the fake server."""
    path = workdir / "agentstack.config.json"
    path.write_text(json.dumps({"providers": {
        "default": "anthropic",
        "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": fake_llm.url, "timeout": 5,
                      "max_retries": 0, "model": "claude-fake"},
        "openai": {"api_key": "${OPENAI_API_KEY}", "base_url": f"{fake_llm.url}/v1"}}}))
    return path


@pytest.fixture
def debug_logs(caplog):
    """Capture DEBUG records of every logger, the SDK and HTTP ones included."""
    caplog.set_level(logging.DEBUG)
    for name in ("anthropic", "anthropic._base_client", "openai", "httpx", "httpx2", "httpcore", "httpcore2", "uvicorn", "agentstack_lab"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def assert_clean(text: str | bytes, key: str, where: str) -> None:
    """Neither the key, its random part, nor the marker appear in ``text``."""
    blob = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    for needle in (key, key.rsplit("-", 1)[1], MARKER):
        assert needle.encode() not in blob, f"secret ({needle[:12]}…) leaked into {where}"


def assert_files_clean(root: Path, key: str) -> list[Path]:
    """Scan every byte of every file under ``root``; return the database files seen."""
    dbs = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            assert_clean(path.read_bytes(), key, str(path))
            if path.name.endswith((".db", ".db-wal", ".db-shm")):
                dbs.append(path)
    return dbs


def assert_logs_clean(caplog, key: str) -> None:
    assert caplog.records, "no log records were captured at DEBUG"
    for rec in caplog.records:
        assert_clean(f"{rec.name} {rec.getMessage()} {rec.args!r} {rec.exc_text or ''}", key, f"log {rec.name}")
    assert_clean(caplog.text, key, "the captured log text")


def assert_events_clean(ws, key: str) -> list[dict]:
    """The ``events`` table: no key, no provider request headers."""
    rows = [dict(zip(("seq", "run_id", "agent_id", "type", "payload"), r, strict=True)) for r in
            ws.db.query("SELECT seq, run_id, agent_id, type, payload FROM events ORDER BY seq")]
    assert rows, "the run logged no events"
    dumped = json.dumps(rows, default=str)
    assert_clean(dumped, key, "the events table")
    lowered = dumped.lower()
    for header in HEADER_NAMES:
        assert header not in lowered, f"provider request header {header!r} in the events table"
    return rows


def exception_text(exc: BaseException) -> str:
    """str, repr and the full chained traceback of ``exc``."""
    return f"{exc}\n{exc!r}\n" + "".join(traceback.format_exception(exc))


def model(code: str):
    """A fake model that skips clarification/subquestions, runs ``code`` once, then answers."""
    def behaviour(body):
        choice = body.get("tool_choice") or {}
        if choice.get("name") == "respond":
            props = set(body["tools"][0]["input_schema"].get("properties", {}))
            if "needs_clarification" in props:
                return Reply(tool_calls=[("t_c", "respond", {"needs_clarification": False})])
            if "subquestions" in props:
                return Reply(tool_calls=[("t_s", "respond", {"subquestions": []})])
            return Reply(tool_calls=[("t_q", "respond", {"has_question": False})])
        done = any(isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])
                   for m in body["messages"])
        if not done and any(t["name"] == "python" for t in body.get("tools", [])):
            return Reply(text="Let me check. ", tool_calls=[("toolu_1", "python", {"code": code})])
        return Reply(text="All done.")
    return behaviour


def tool_results(run) -> list:
    return [ev for ev in run.events if ev.type == "tool-result"]


def assert_run_events_clean(run, key: str) -> None:
    from agentstack_lab.events import to_wire

    dumped = json.dumps([to_wire(ev) for ev in run.events], default=str)
    assert_clean(dumped, key, "the run's events")
    for header in HEADER_NAMES:
        assert header not in dumped.lower(), f"provider request header {header!r} in the run's events"


def assert_requests_clean(fake, key: str) -> None:
    """What the model was sent (bodies) never carries the key; the key is only in the auth header."""
    assert fake.requests
    for req in fake.requests:
        assert_clean(json.dumps(req.json), key, f"a request body to {req.path}")
        given = req.headers.get("x-api-key") or req.headers.get("authorization", "").removeprefix("Bearer ")
        assert given == key  # sanity: the key really went out, in the auth header only


# --- the engine on the real Anthropic SDK ----------------------------------------------------------

PROBE = ("import os, sys\n"
         "print('env', sorted(k for k in os.environ if 'KEY' in k.upper() or 'ANTHROPIC' in k or 'OPENAI' in k))\n"
         "print('values', any(('TEST' + 'SECRET') in v for v in os.environ.values()))\n"
         "os.getpid()")


async def test_401_names_the_source_never_the_key(fake_llm, config_file, key, debug_logs, tmp_path):
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.providers.base import AuthenticationError, Message, ProviderRequest
    from agentstack_lab.providers.complete import complete
    from agentstack_lab.workspace import Workspace

    fake_llm.api_key = "some-other-key"  # the server now rejects our key with a 401 authentication_error
    ws = Workspace.open(config_file.parent)
    try:
        provider = ws.get_provider("anthropic")
        assert_clean(repr(provider), key, "repr(provider)")
        with pytest.raises(AuthenticationError) as info:
            await complete(provider, ProviderRequest(messages=[Message(role="user", content="hi")]))
        text = exception_text(info.value)
        assert "rejected the API key (401)" in str(info.value)
        assert "providers.anthropic.api_key" in str(info.value)  # where the key came from, not the key
        assert_clean(text, key, "the AuthenticationError and its chained SDK exception")

        run = AgentRun("hello?", workspace=ws, options={"interactive": False, "subagents": False})
        assert await run.wait(raise_on_error=False) is None
        assert run.status == "failed" and "rejected the API key" in (run.error or "")
        assert_clean(exception_text(run.failure) if run.failure else "", key, "the run's failure")
        assert_clean(json.dumps(run.tree, default=str), key, "the run's tree")
        assert_run_events_clean(run, key)
        assert_events_clean(ws, key)
        assert_files_clean(tmp_path, key)  # while the database is open: .db, -wal, -shm
    finally:
        ws.close()
    assert_files_clean(tmp_path, key)
    assert_logs_clean(debug_logs, key)


@pytest.mark.parametrize("executor", [pytest.param("subprocess", marks=pytest.mark.slow), "live"])
async def test_run_with_python_tool_keeps_the_key_out(fake_llm, config_file, key, debug_logs, tmp_path, executor):
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.workspace import Workspace

    # The model's code reads os.environ; in the live kernel it even prints the key outright.
    code = PROBE if executor == "subprocess" else PROBE.replace(
        "os.getpid()", "print(os.environ['ANTHROPIC_API_KEY'])\nos.environ['OPENAI_API_KEY']")
    fake_llm.queue(*[model(code)] * 10)
    ws = Workspace.open(config_file.parent)
    try:
        run = AgentRun("check the environment", workspace=ws,
                       options={"interactive": False, "subagents": False, "auto_approve": True, "executor": executor})
        assert "All done." in await run
        assert run.executor.name == executor
        (res,) = tool_results(run)
        assert res.error is None, res.error
        stdout = res.output["stdout"]
        if executor == "subprocess":
            # the isolated interpreter does not carry the key, under any variable name
            assert "env []" in stdout and "values False" in stdout, stdout
        else:
            assert "env [" in stdout and "values True" in stdout  # the user's own environment, as expected
            assert "***" in stdout and res.output["result"] == "'***'"  # printed and returned key: redacted
        assert_run_events_clean(run, key)
        rows = assert_events_clean(ws, key)
        assert {"tool-call", "tool-result", "agent-completed"} <= {r["type"] for r in rows}
        assert_requests_clean(fake_llm, key)
        assert_files_clean(tmp_path, key)
    finally:
        ws.close()
    assert_files_clean(tmp_path, key)
    assert_logs_clean(debug_logs, key)


def fragments(secret: str, n: int = 12) -> list[str]:
    """Every ``n``-character piece of ``secret`` (any longer leak contains one)."""
    return [secret[i:i + n] for i in range(len(secret) - n + 1)]


def assert_no_fragment(blob: str | bytes, secret: str, where: str) -> None:
    data = blob if isinstance(blob, bytes) else blob.encode("utf-8", "surrogatepass")
    for piece in fragments(secret):
        assert piece.encode() not in data, f"{len(piece)} characters of the secret ({piece[:4]}…) leaked into {where}"


async def test_a_key_straddling_the_model_cut_is_redacted_before_truncation(fake_llm, config_file, key, tmp_path):
    """Issue 9, item 9: a tool output over 8,000 characters is cut to head + tail for the model.

    The key is printed twice, once across the head cut (character 4,000 of the model's text) and
    once across the tail cut; no 12-character piece of it may reach the events, the database
    files or the model's request.
    """
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.executors import ExecResult
    from agentstack_lab.engine.tools import MODEL_LIMIT
    from agentstack_lab.workspace import Workspace

    k, half = len(key), MODEL_LIMIT // 2
    # The model's text is "stdout:\n" + stdout; stdout = x*n1 + key + y*n2 + key + z*n3 + "\n".
    n1, n2 = half - len("stdout:\n") - k // 2, 5000
    n3 = half - 1 - (k - k // 2)
    code = (f"k = __import__('os').environ['ANTHROPIC_API_KEY']\n"
            f"print('x' * {n1} + k + 'y' * {n2} + k + 'z' * {n3})")
    stdout = "x" * n1 + key + "y" * n2 + key + "z" * n3 + "\n"
    naive = ExecResult(stdout=stdout).to_text(MODEL_LIMIT)  # cut without redaction: both cuts split a key
    assert sum(piece in naive for piece in fragments(key)) >= 2 * (k // 2 - 11), "the test no longer straddles"
    fake_llm.queue(*[model(code)] * 10)
    ws = Workspace.open(config_file.parent)
    try:
        run = AgentRun("print the key", workspace=ws, options={
            "interactive": False, "subagents": False, "auto_approve": True, "executor": "live"})
        assert "All done." in await run
        (res,) = tool_results(run)
        assert res.output["stdout"].count("***") == 2 and "…(truncated)…" in res.output["text"]
        assert_no_fragment(json.dumps([to_wire(e) for e in run.events]), key, "the run's events")
        assert_no_fragment(json.dumps([list(r) for r in ws.db.query("SELECT * FROM events")]), key,
                           "the events table")
        for req in fake_llm.requests:
            assert_no_fragment(json.dumps(req.json), key, f"a request body to {req.path}")
        sent = [b for req in fake_llm.requests for m in req.json["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"]
        assert sent, "the tool result never reached the model"
    finally:
        ws.close()
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file():
            assert_no_fragment(path.read_bytes(), key, str(path))


@pytest.mark.parametrize("executor", ["live", pytest.param("subprocess", marks=pytest.mark.slow)])
async def test_a_secret_straddling_the_output_cap_is_redacted_before_it(executor):
    """Captured streams are capped at MAX_OUTPUT characters; the secrets the run passes are hidden first."""
    from agentstack_lab.engine.capture import MAX_OUTPUT
    from agentstack_lab.engine.executors import ExecContext, LiveKernelExecutor, SubprocessExecutor

    secret = f"sk-planted-{secrets.token_hex(20)}"
    code = f"import sys\nsys.stdout.write('x' * {MAX_OUTPUT - 20} + {secret!r} + 'y' * 100)"
    runner_ = LiveKernelExecutor(namespace={}) if executor == "live" else SubprocessExecutor(timeout=60)
    result = await runner_.run(code, context=ExecContext(secrets=(secret,)))
    assert result.error is None, result.error
    assert result.stdout.endswith("…(output truncated)…") and len(result.stdout) <= MAX_OUTPUT + 30
    assert_no_fragment(result.stdout, secret, f"the {executor} executor's capped stdout")
    assert_no_fragment(result.to_text(), secret, "the model's text")


def test_redact_cut_hides_a_secret_cut_off_at_the_end():
    from agentstack_lab.redaction import clip, redact_cut

    secret = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
    assert redact_cut("head " + secret[:20], [secret]) == "head ***"
    assert redact_cut("head sk-a plain", [secret]) == "head sk-a plain"  # not at the end: left alone
    text = "a" * 90 + secret + "b" * 90
    clipped = clip(text, 100, [secret])
    assert "***" in text.replace(secret, "***") and not any(p in clipped for p in fragments(secret, 4)[1:])


def test_subprocess_executor_env_drops_secret_values_under_any_name(monkeypatch, key):
    """Not only ``*_KEY`` names: any variable holding a known secret value is dropped."""
    from agentstack_lab.engine.executors import SubprocessExecutor

    monkeypatch.setenv("MY_LLM_CREDS", key)
    monkeypatch.setenv("AGENTSTACK_HARMLESS", "visible")
    env = SubprocessExecutor._env()
    assert "AGENTSTACK_HARMLESS" in env
    assert_clean(json.dumps(env), key, "the subprocess environment")


# --- CLI and MCP -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_config_and_agent_run(fake_llm, config_file, key, debug_logs, tmp_path):
    outputs = []

    def invoke(*args, code=0):
        result = runner.invoke(app, list(args))
        outputs.append(result)
        assert result.exit_code == code, (args, result.output, result.stderr)
        assert_clean(result.stdout + result.stderr, key, f"`agentstack-lab {' '.join(args)}`")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            assert_clean(exception_text(result.exception), key, f"the exception of {args}")
        return result

    shown = json.loads(invoke("config", "show", "--json").stdout)
    assert shown["providers"]["anthropic"]["api_key"] == "***"
    assert shown["providers"]["openai"]["api_key"] == "***"
    assert "***" in invoke("config", "show").stdout
    assert invoke("config", "validate").stdout.startswith("ok:")

    fake_llm.queue(*[model(PROBE)] * 10)
    out = invoke("agent", "run", "check the environment", "--provider", "anthropic", "--no-subagents",
                 "--auto-approve", "--executor", "subprocess").stdout
    assert "All done." in out and "values False" in out
    ran = json.loads(invoke("agent", "run", "again, as JSON", "--no-subagents", "--auto-approve", "--json").stdout)
    assert ran["status"] == "completed"
    assert_requests_clean(fake_llm, key)

    fake_llm.api_key = "some-other-key"
    failed = invoke("agent", "run", "rejected?", "--no-subagents", code=1)
    assert "rejected the API key" in failed.stderr

    from agentstack_lab.workspace import Workspace

    with Workspace.open(config_file.parent) as ws:
        runs = {r[0] for r in ws.db.query("SELECT DISTINCT run_id FROM events")}
        assert len(runs) == 3
        assert_events_clean(ws, key)
        for table in ("agents", "sessions", "memory"):
            assert_clean(json.dumps(ws.db.query(f"SELECT * FROM {table}"), default=str), key, f"table {table}")
    assert_files_clean(tmp_path, key)
    assert_logs_clean(debug_logs, key)


def test_mcp_system_status(fake_llm, config_file, key, tmp_path):
    from agentstack_lab.mcp.tools import Toolbox
    from agentstack_lab.workspace import Workspace

    with Workspace.open(config_file.parent) as ws:
        status = Toolbox(ws).system_status()
        assert status["providers"]["default"] == "anthropic"
        assert status["providers"]["available"]["anthropic"]["available"] is True
        assert_clean(json.dumps(status, default=str), key, "system_status")
    assert_files_clean(tmp_path, key)


# --- a notebook executed in a real kernel (nbclient) ----------------------------------------------

@pytest.mark.slow
def test_executed_notebook_never_holds_the_key(fake_llm, config_file, key, tmp_path):
    """``%agent`` in a real kernel whose environment holds the key: live-executor code prints it, a 401 follows."""
    import nbformat

    code = "import os\nprint(os.environ['ANTHROPIC_API_KEY'])\nos.environ['OPENAI_API_KEY']"
    fake_llm.queue(*[model(code)] * 10)
    cells = ["%load_ext agentstack_lab",
             "r = %agent --wait --auto-approve --no-subagents print the environment\nprint(r.status)",
             "print(len(os.environ['ANTHROPIC_API_KEY']) > 20, len(r.events_frame(full=True)))",
             "r.events_frame(full=True).to_dict('records')",
             # a fresh workspace re-reads ${ANTHROPIC_API_KEY}, now a key the server rejects with a 401
             "os.environ['ANTHROPIC_API_KEY'] = 'rejected-' + os.environ['ANTHROPIC_API_KEY'][:3]",
             "from agentstack_lab.engine import AgentRun\nfrom agentstack_lab.workspace import Workspace\n"
             "ws2 = Workspace.open(announce=False)\n"
             "run = AgentRun('hello?', workspace=ws2, options={'interactive': False, 'subagents': False})\n"
             "await run.wait(raise_on_error=False)\nprint(run.status, run.error)\nws2.close()"]
    nb = run_cells(cells, config_file.parent, store_widget_state=True)
    text = nbformat.writes(nb)
    errors = [o for c in nb.cells for o in c.outputs if o["output_type"] == "error"]
    assert not errors, errors
    outs = ["".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in c.outputs) for c in nb.cells]
    assert "completed" in outs[1], outs
    assert outs[2].startswith("True"), outs  # the kernel really held the key
    assert "failed" in outs[5] and "rejected the API key" in outs[5], outs
    assert "***" in outs[3]  # the printed key: redacted in the run's events
    assert_clean(text, key, "the executed notebook (outputs and widget state)")
    nbformat.write(nb, tmp_path / "executed.ipynb")
    assert_files_clean(tmp_path, key)


# --- config errors on interpolated values -----------------------------------------------------------

@pytest.mark.parametrize(("section", "field", "expected"), [
    ("memory", {"vector": {"dimensions": "${ANTHROPIC_API_KEY}"}}, "memory.vector.dimensions: expected int"),
    ("agents", {"executor": "${ANTHROPIC_API_KEY}"}, "agents.executor: expected 'live' or 'subprocess'"),
    ("providers", {"anthropic": {"timeout": "x${OPENAI_API_KEY:-none}"}}, "providers.anthropic.timeout: expected number"),
])
def test_config_type_error_never_echoes_an_interpolated_value(workdir, key, section, field, expected):
    from agentstack_lab.config import ConfigError, load_config

    path = workdir / "agentstack.config.json"
    path.write_text(json.dumps({section: field}))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(expected), message
    assert "from ${" in message  # says the value came from the environment, without showing it
    assert_clean(exception_text(info.value), key, "the ConfigError")

    result = runner.invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 1 and expected in result.stderr
    assert_clean(result.stdout + result.stderr, key, "`config validate` of a bad file")


def test_config_type_error_still_echoes_a_literal_value(workdir):
    from agentstack_lab.config import ConfigError, load_config

    path = workdir / "agentstack.config.json"
    path.write_text(json.dumps({"memory": {"vector": {"dimensions": "many"}}}))
    with pytest.raises(ConfigError, match=r"memory\.vector\.dimensions: expected int, got 'many'"):
        load_config(path)


def test_our_code_does_not_turn_on_sdk_debug_logging(config_file, key):
    """The SDKs log request options at DEBUG; nothing in agentstack_lab sets their loggers to DEBUG."""
    from agentstack_lab.workspace import Workspace

    with Workspace.open(config_file.parent) as ws:
        ws.get_provider("anthropic")._client  # noqa: B018 - build the provider (imports the SDK)
        for name in ("anthropic", "openai", "httpx", "httpx2", "httpcore", "httpcore2"):
            assert logging.getLogger(name).level in (logging.NOTSET, logging.WARNING, logging.INFO, logging.ERROR), name
    root = Path(__file__).resolve().parents[1] / "agentstack_lab"
    for src in root.rglob("*.py"):
        text = src.read_text()
        for needle in ("ANTHROPIC_LOG", "OPENAI_LOG", "setup_logging", "http.client.HTTPConnection.debuglevel"):
            assert needle not in text, f"{src}: {needle}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
