"""``agentstack-lab agent run/list/tree/watch``: exit codes, streaming, and runs of another process seen live."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app

runner = CliRunner()
SCRIPT = Path(sys.executable).with_name("agentstack-lab")

# A run in another process, the way a notebook kernel starts one (slowed down so it can be watched).
OTHER_PROCESS = textwrap.dedent("""
    import asyncio, sys
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.workspace import Workspace

    async def main():
        ws = Workspace.open(sys.argv[1])
        run = AgentRun("what is a monad?", workspace=ws, provider=ScriptedProvider(latency=float(sys.argv[2])),
                       options={"interactive": False}).start()
        print(run.id, flush=True)
        await run

    asyncio.run(main())
""")

# The README's terminal example (sent with the report; executed here line by line, `# exit N` = expected code).
README_SHELL = """\
agentstack-lab agent run "what is a monad?"
agentstack-lab agent run "how are sales trending in df?" --no-subagents   # exit 1
agentstack-lab agent run "how are sales trending in df?" --no-subagents --auto-approve
agentstack-lab agent list --runs
agentstack-lab agent tree "$(agentstack-lab agent list --runs --json | python -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
agentstack-lab agent watch --once
"""


def invoke(*args):
    return runner.invoke(app, list(args))


def one_line_error(result, expected: str, code: int = 2) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {expected}"), result.stderr
    assert "Traceback" not in result.output


def start_other_process(workspace: Path, latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(workspace), str(latency)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = proc.stdout.readline().strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", run_id), proc.stderr.read()
    return proc, run_id


def wait_for(predicate, timeout: float = 60.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting")


def listed(run_id: str) -> list[dict]:
    result = invoke("agent", "list", "--run", run_id, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_run_streams_and_exit_codes(workdir):
    ok = invoke("agent", "run", "what is a monad?")
    assert ok.exit_code == 0, ok.output
    assert re.search(r"● researcher-\w+ running", ok.stdout) and "offline demo answer" in ok.stdout
    assert "✔ completed" in ok.stdout

    closed = invoke("agent", "run", "how are sales trending in df?", "--no-subagents")
    one_line_error(closed, "approval required: an agent wants to run Python code, and `agent run` is headless, "
                           "so the run failed closed; rerun with --auto-approve", code=1)
    # the code never ran; its tool-call is closed by a tool-result carrying the refusal (issue 9, item 15)
    assert "⚙ python" in closed.stdout and "↳ python: HeadlessQueryError: " in closed.stdout

    approved = invoke("agent", "run", "how are sales trending in df?", "--no-subagents", "--auto-approve")
    assert approved.exit_code == 0, approved.output
    assert "⚙ python" in approved.stdout and "NameError: name 'df' is not defined" in approved.stdout

    as_json = invoke("agent", "run", "what is a monad?", "--json", "--type", "analyst")
    data = json.loads(as_json.stdout)
    assert as_json.exit_code == 0 and data["status"] == "completed" and data["tree"]["type"] == "analyst"
    assert len(data["tree"]["children"]) == 2 and "offline" in data["result"]

    runs = json.loads(invoke("agent", "list", "--runs", "--json").stdout)
    assert [r["status"] for r in runs] == ["completed", "completed", "failed", "completed"]
    tree = json.loads(invoke("agent", "tree", data["runId"][:8], "--json").stdout)
    assert tree["id"] == data["runId"] and [c["status"] for c in tree["children"]] == ["completed"] * 2
    assert "researcher-" in invoke("agent", "tree", data["runId"]).stdout


@pytest.mark.parametrize("args, message", [
    (["agent", "run", "hi", "--executor", "docker"], "--executor must be 'subprocess' or 'live'"),
    (["agent", "run", "hi", "--answer", "mood=happy"], "--answer expects KIND=TEXT"),
    (["agent", "run", "hi", "--type", "wizard"], "unknown agent type 'wizard'; known types: coder"),
    (["agent", "run", "hi", "--provider", "nope"], "unknown provider 'nope'; valid providers:"),
    (["agent", "run", "hi", "--provider", "anthropic"], "anthropic: no API key; set the ANTHROPIC_API_KEY"),
    (["agent", "run", "hi", "--session", "nope"], "no session with id 'nope'"),
    (["agent", "tree", "ghost"], "no run 'ghost' in this workspace"),
    (["agent", "list", "--status", "happy"], "--status must be one of"),
    (["agent", "watch", "--once", "--run", "ghost"], "no run 'ghost' in this workspace"),
])
def test_bad_input_is_one_line_and_changes_nothing(workdir, args, message):
    one_line_error(invoke(*args), message)
    assert json.loads(invoke("agent", "list", "--json").stdout) == []


@pytest.mark.slow
def test_list_and_watch_see_a_run_of_another_process(workdir):
    proc, run_id = start_other_process(workdir, latency=0.4)
    try:
        root = wait_for(lambda: next((a for a in listed(run_id) if a["id"] == run_id and a["status"] == "running"),
                                     None))
        assert root["type"] == "researcher" and root["parentId"] is None
        shown = invoke("agent", "watch", "--once", "--run", run_id[:8])
        assert shown.exit_code == 0 and re.search(rf"{run_id[:8]}\s.*researcher\s.*running", shown.stdout)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        proc.kill()
    agents = listed(run_id)
    assert len(agents) == 3 and {a["status"] for a in agents} == {"completed"}
    assert all(a["inputTokens"] > 0 for a in agents)
    shown = invoke("agent", "watch", "--once", "--run", run_id)
    assert shown.stdout.count("completed") >= 4  # three rows plus the summary line
    assert re.search(rf"{run_id[:8]}\s.*completed\s.*completed \(", shown.stdout)  # last event: completed, with age


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None or not SCRIPT.exists(), reason="needs tmux and the console script")
def test_watch_refreshes_live_in_a_terminal(workdir):
    sock = f"agentstack-test-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", sock]
    # tmux keeps its socket in $TMUX_TMPDIR (else /tmp/tmux-UID): inside this test's own temporary folder
    env = {**os.environ, "TMUX_TMPDIR": tempfile.gettempdir()}
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50",
                    f"{SCRIPT} -w {workdir} agent watch --interval 0.2; sleep 30"], check=True, env=env)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True, env=env).stdout

    try:
        wait_for(lambda: "no agents yet" in screen(), timeout=30)
        proc, run_id = start_other_process(workdir, latency=0.4)
        try:
            running = wait_for(lambda: re.search(rf"{run_id[:8]}\s.*running", screen()) and screen(), timeout=60)
            seq_running = int(re.search(r"seq (\d+)", running).group(1))
            done = wait_for(lambda: re.search(r"completed 3 ", screen()) and screen(), timeout=120)
            assert int(re.search(r"seq (\d+)", done).group(1)) > seq_running  # followed the log by seq
            assert re.search(rf"{run_id[:8]}\s.*researcher\s.*completed", done)
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()
        subprocess.run([*tmux, "send-keys", "C-c"], check=True, env=env)
        wait_for(lambda: "Watch stopped." in screen(), timeout=20)
        assert "Traceback" not in screen()
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, env=env)


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the console script")
def test_readme_terminal_example(workdir):
    lines = ['cd "$WORKDIR"']
    for raw in README_SHELL.splitlines():
        m = re.search(r"\s+# exit (\d+)\s*$", raw)
        cmd, expected = (raw[: m.start()], int(m.group(1))) if m else (raw, 0)
        lines.append(f"{cmd}\nrc=$?; [ $rc -eq {expected} ] || {{ echo \"exit $rc (expected {expected}): line "
                     f"{len(lines)}\" >&2; exit 1; }}")
    env = dict(os.environ, WORKDIR=str(workdir), PATH=f"{SCRIPT.parent}:{os.environ['PATH']}")
    proc = subprocess.run(["bash", "-c", "\n".join(lines)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "approval required" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert "3 agent(s)" in proc.stdout  # `agent list --runs`: the three runs above


# --- nothing waits silently (issue 25, item 4) -------------------------------------------------------
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


def _monitored(folder: Path, **monitoring) -> None:
    (folder / "agentstack.config.json").write_text(json.dumps({"monitoring": monitoring}))


@pytest.mark.slow
def test_monitor_intervention_fails_a_headless_run_closed(workdir):
    """`agent run` with monitoring.max_api_calls: 1 used to hang forever with no output; now it exits 1 at once."""
    _monitored(workdir, max_api_calls=1)
    done = subprocess.run([*CLI, "-w", str(workdir), "agent", "run", "what is a monad?", "--no-subagents"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the resource monitor paused an agent at its intervention (API calls 1/1)")
    assert "--on-query wait" in last and "Traceback" not in done.stderr
    rows = json.loads(subprocess.run([*CLI, "-w", str(workdir), "agent", "list", "--json"], capture_output=True,
                                     text=True, timeout=60).stdout)
    assert [r["status"] for r in rows] == ["failed"] and "intervention decision" in rows[0]["error"]


@pytest.mark.slow
def test_monitor_intervention_with_on_query_wait_names_the_decision_and_resumes(workdir):
    _monitored(workdir, max_api_calls=1, termination_at=100.0)
    proc = subprocess.Popen([*CLI, "-w", str(workdir), "agent", "run", "what is a monad?", "--no-subagents",
                             "--on-query", "wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        told = threading.Event()

        def read() -> None:  # the run says what it waits on, on its own output, before it waits
            for line in proc.stdout:
                lines.append(line)
                if "waiting for an answer" in line:
                    told.set()
                    return

        threading.Thread(target=read, daemon=True).start()
        assert told.wait(120), "".join(lines)  # before the fix: no line at all, the run hung silently
        asked = re.search(r"\? intervention decision ([0-9a-f-]{36}) from researcher-\w+: The resource monitor "
                          r"paused agent researcher \(\w+\): API calls 1/1", "".join(lines))
        assert asked, "".join(lines)
        decision = asked.group(1)
        assert f"agentstack-lab decisions answer {decision} resume" in lines[-1] and "agent resume" in lines[-1]
        answered = subprocess.run([*CLI, "-w", str(workdir), "decisions", "answer", decision, "resume"],
                                  capture_output=True, text=True, timeout=60)
        assert answered.returncode == 0, answered.stderr
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "✔ completed" in out
