"""Nothing waits silently (issue 25, item 4): a headless run that waits on a person says so, once per
decision, naming the decision and how to answer it — `agent run --json`, a queue `worker` and
`workflow run`, each a real OS process answered from another (`decisions approve`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from agentstack_lab.decisions import Decisions
from agentstack_lab.decisions.announce import PendingAnnouncer, waiting_line
from agentstack_lab.store.connection import SQLiteDatabase

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
ASKS_FOR_CODE = "how are sales trending in df?"   # the scripted provider wants to run Python for this one
WAITING = re.compile(r"\? approval decision ([0-9a-f-]{36}) \(run [0-9a-f]{8}\): .*\n.*"
                     r"waiting for an answer: agentstack-lab decisions approve \1")


def _lines_until_waiting(stream, lines: list[str], told: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        if "waiting for an answer" in line:
            told.set()


def _answer_when_told(proc: subprocess.Popen, stream, folder: Path, timeout: float = 120) -> tuple[str, str]:
    """Read ``stream`` until the waiting line, approve the decision it names from another process."""
    lines: list[str] = []
    told = threading.Event()
    reader = threading.Thread(target=_lines_until_waiting, args=(stream, lines, told), daemon=True)
    reader.start()
    assert told.wait(timeout), f"no waiting line; the process said: {''.join(lines)}"
    found = WAITING.search("".join(lines))
    assert found, "".join(lines)
    approved = subprocess.run([*CLI, "-w", str(folder), "decisions", "approve", found.group(1)],
                              capture_output=True, text=True, timeout=60)
    assert approved.returncode == 0, approved.stderr
    proc.wait(timeout=timeout)
    reader.join(timeout=10)
    return found.group(1), "".join(lines)


@pytest.mark.slow
def test_agent_run_json_names_the_decision_it_waits_on_on_stderr(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([*CLI, "-w", str(workdir), "agent", "run", ASKS_FOR_CODE, "--no-subagents", "--json",
                             "--on-query", "wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        decision, err = _answer_when_told(proc, proc.stderr, workdir)
        out = proc.stdout.read()
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err.count(f"? approval decision {decision}") == 1    # announced once
    assert json.loads(out)["status"] == "completed"   # stdout stays the JSON document alone


@pytest.mark.slow
def test_a_worker_says_which_decision_its_task_waits_on(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    added = subprocess.run([*CLI, "-w", str(workdir), "queue", "add", ASKS_FOR_CODE, "--no-subagents",
                            "--on-query", "wait"], capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    proc = subprocess.Popen([*CLI, "-w", str(workdir), "worker", "--until-empty"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        decision, err = _answer_when_told(proc, proc.stderr, workdir)
        out = proc.stdout.read()
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert re.search(rf"worker \S+: \? approval decision {decision}", err), err
    assert "completed 1, failed 0" in out


@pytest.mark.slow
def test_workflow_run_names_the_decision_its_notebook_waits_on(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import pandas as pd\ndf = pd.DataFrame({'sales': [1, 2, 3]})"),
        nbformat.v4.new_code_cell("%load_ext agentstack_lab"),
        nbformat.v4.new_code_cell(f"%agent --wait --no-subagents --on-query wait {ASKS_FOR_CODE}"),
    ])
    nbformat.write(nb, workdir / "asks.ipynb")
    proc = subprocess.Popen([*CLI, "workflow", "run", "asks.ipynb", "-o", "out.ipynb", "--cwd", str(workdir)],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        decision, err = _answer_when_told(proc, proc.stderr, workdir, timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err.count(f"approval decision {decision}") == 1


def test_the_announcer_says_each_pending_decision_once_for_its_runs(tmp_path):
    db = SQLiteDatabase(tmp_path / "a.db")
    store = Decisions(db)
    lines: list[str] = []
    ours: set[str] = {"run-a"}
    announcer = PendingAnnouncer(db, lines.append, runs=ours, grace=0.0)
    mine = store.create(kind="approval", prompt="run this code?\n  print(1)", run_id="run-a", code="print(1)")
    store.create(kind="clarification", prompt="which year?", run_id="run-b")
    assert announcer.check() == [store.get(mine.id)]
    assert announcer.check() == []   # once
    assert lines == [waiting_line(store.get(mine.id))]
    assert "run this code? print(1)" in lines[0] and f"decisions approve {mine.id}" in lines[0]
    ours.add("run-b")                # a run the worker started since
    assert [d.kind for d in announcer.check()] == ["clarification"]
    assert lines[-1].endswith(f"agentstack-lab decisions answer {lines[-1].split()[3]} TEXT")
    answered = store.create(kind="approval", prompt="again?", run_id="run-a")
    store.approve(answered.id)
    assert announcer.check() == []   # answered before it was seen: nothing to say
    late = PendingAnnouncer(db, lines.append, grace=60.0)
    assert late.check() == []        # not yet waited long enough for the grace


def test_the_announcer_waits_for_a_database_that_does_not_exist_yet(tmp_path):
    path = tmp_path / "later.db"
    lines: list[str] = []
    announcer = PendingAnnouncer(lambda: SQLiteDatabase(path) if path.exists() else None, lines.append, grace=0.0, poll=0.05)
    with announcer:
        time.sleep(0.2)
        assert not path.exists()     # it never creates the workspace it watches
        Decisions(SQLiteDatabase(path)).create(kind="final", prompt="is this the answer?", run_id="r")
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(lines) == 1 and "? final decision" in lines[0]
