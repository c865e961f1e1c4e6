"""CLI providers (claude-code, gemini-cli, codex) against fake executables put on PATH."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time

import pytest
from pydantic import BaseModel

from agentstack_lab.providers.base import (
    Message,
    ProviderError,
    ProviderRequest,
    ProviderTimeout,
    ProviderUnavailable,
    StopEvent,
    TextDeltaEvent,
    ToolSpec,
)
from agentstack_lab.providers.cli import check_cli_providers
from agentstack_lab.providers.complete import complete, structured
from agentstack_lab.providers.registry import get_provider

FAKE = textwrap.dedent('''\
    #!{python}
    """A fake coding-agent CLI: records its argv and stdin, then acts on the prompt."""
    import json, os, subprocess, sys, time
    prompt = sys.stdin.read()
    log = os.environ["FAKE_CLI_LOG"]
    with open(log, "a") as f:
        f.write(json.dumps({{"argv": sys.argv, "stdin": prompt}}) + "\\n")
    if "PLEASE FAIL" in prompt:
        sys.stderr.write("fatal: not logged in\\n")
        sys.exit(3)
    if "PLEASE HANG" in prompt:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(log + ".pids", "w") as f:
            f.write(json.dumps([os.getpid(), child.pid]))
        print("thinking...", flush=True)
        time.sleep(60)
    if "JSON" in prompt:
        print('{{"answer": "forty-two", "confidence": 0.9}}')
        sys.exit(0)
    for word in ("hello", " from", " " + os.path.basename(sys.argv[0])):
        sys.stdout.write(word)
        sys.stdout.flush()
        time.sleep(0.01)
''')


@pytest.fixture
def fake_clis(tmp_path, monkeypatch):
    """Fake `claude`, `gemini` and `codex` executables first on PATH; returns the call log reader."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("claude", "gemini", "codex"):
        exe = bindir / name
        exe.write_text(FAKE.format(python=sys.executable))
        exe.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLI_LOG", str(log))

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    calls.log = log
    return calls


def ask(text, **kw):
    return ProviderRequest(messages=[Message(role="user", content=text)], **kw)


def test_check_cli_providers(fake_clis, tmp_path):
    found = check_cli_providers()
    assert found == {"claude-code": str(tmp_path / "bin" / "claude"), "gemini-cli": str(tmp_path / "bin" / "gemini"),
                     "codex": str(tmp_path / "bin" / "codex")}


def test_missing_binary_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert check_cli_providers() == {"claude-code": None, "gemini-cli": None, "codex": None}
    with pytest.raises(ProviderUnavailable, match="`claude` executable is not on PATH.*npm install"):
        get_provider("claude-code")


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "binary", "argv"), [
    ("claude-code", "claude", ["--print", "--output-format", "text", "--model", "m1"]),
    ("gemini-cli", "gemini", ["--model", "m1"]),
    ("codex", "codex", ["exec", "--skip-git-repo-check", "--model", "m1", "-"]),
])
async def test_success_streams_stdout_with_prompt_on_stdin(fake_clis, kind, binary, argv):
    provider = get_provider(kind, model="m1")
    events = [e async for e in provider.stream(ask("what is 'x; rm -rf ~' $(whoami)?", system="Be terse."))]
    text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    assert text == f"hello from {binary}"
    assert events[-1] == StopEvent(reason="end_turn")
    [call] = fake_clis()
    assert call["argv"][1:] == argv  # an argument list: the prompt never reaches argv or a shell
    assert call["stdin"] == "Be terse.\n\nUser: what is 'x; rm -rf ~' $(whoami)?\n"


@pytest.mark.slow
async def test_nonzero_exit_surfaces_stderr(fake_clis):
    with pytest.raises(ProviderError, match=r"claude-code: `claude` exited with status 3: fatal: not logged in"):
        await complete(get_provider("claude-code"), ask("PLEASE FAIL"))


@pytest.mark.slow
async def test_timeout_kills_the_child_and_its_children(fake_clis):
    provider = get_provider("gemini-cli", timeout=1.5)
    start = time.monotonic()
    with pytest.raises(ProviderTimeout, match=r"gemini-cli: no answer within 1.5 s; the `gemini` process was killed"):
        await complete(provider, ask("PLEASE HANG"))
    assert time.monotonic() - start < 15
    pids = json.loads((fake_clis.log.parent / (fake_clis.log.name + ".pids")).read_text())
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (killed, not yet reaped by its parent) counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Answer(BaseModel):
    answer: str
    confidence: float


@pytest.mark.slow
async def test_structured_output_through_a_cli(fake_clis):
    value, _ = await structured(get_provider("codex"), ask("Give JSON please"), Answer)
    assert value == Answer(answer="forty-two", confidence=0.9)
    assert "matching this JSON schema" in fake_clis()[0]["stdin"]


def test_config_timeout_is_used(fake_clis):
    from agentstack_lab.providers.registry import get_provider as gp

    provider = gp("codex", config={"cli": {"timeout": 7.0}})
    assert provider.timeout == 7.0


@pytest.mark.slow
async def test_tool_specs_are_not_forced_on_the_cli(fake_clis):
    spec = ToolSpec(name="python", description="d", input_schema={"type": "object"})
    out = await complete(get_provider("claude-code"), ask("hi", tools=[spec]))
    assert out.text == "hello from claude" and "JSON schema" not in fake_clis()[0]["stdin"]


@pytest.mark.slow
async def test_a_run_on_a_cli_agent_shows_unknown_tokens_and_says_once_max_tokens_cannot_hold(fake_clis, ws):
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.state import token_text
    from agentstack_lab.notebook.tree import tree_to_text

    run = AgentRun("say hello", workspace=ws, provider=get_provider("claude-code"),
                   options={"subagents": False, "max_tokens": 50, "interactive": False})
    assert await run == "hello from claude"  # not stopped by a budget it cannot measure
    tree = run.tree
    assert tree["ownUsage"] == {"inputTokens": 0, "outputTokens": 0, "basis": "unknown"}
    assert token_text(tree["usage"], "this agent") == "tokens unknown (this agent)"
    assert "tokens unknown (this agent)" in tree_to_text(tree) and " 0 tokens" not in tree_to_text(tree)
    notes = [n for n in tree["metadata"]["notes"] if "max_tokens" in n]
    assert notes == ["max_tokens=50 cannot be enforced: claude-code reports no token usage (the tree's figures "
                     "are unknown)"]
