"""Record/replay through the surfaces: ``agent run`` and ``workflow run`` as subprocesses, ``%agent`` in a kernel.

Each records against the fake Anthropic server (real SDK; the key and base URL in the child's
environment), then replays with no key anywhere, asking the server nothing, to the same result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fakes_llm
import pytest
from fakes_llm import API_KEY
from test_cassette import ROOT_PROMPT, SUBS, model
from typer.testing import CliRunner

from agentstack_lab.cli import app
from tests.notebook_helpers import async_run_cells

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


def _env(fake=None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    if fake is not None:
        env.update(ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=fake.url)
    return env


def _cli(*args, fake=None, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=cwd, env=_env(fake), capture_output=True, text=True, timeout=600)


def _shape(tree: dict) -> tuple:
    return (tree["prompt"], tree["status"], tree.get("result"), tuple(sorted(_shape(c) for c in tree["children"])))


@pytest.mark.slow
def test_agent_run_records_then_replays_with_no_key(fake_llm, tmp_path):
    fake_llm.queue(*[model] * 60)
    cassette = tmp_path / "cassettes" / "run.jsonl"
    args = ["agent", "run", ROOT_PROMPT, "--provider", "anthropic", "--auto-approve", "--json"]
    rec = _cli(*args, "--record", str(cassette), fake=fake_llm, cwd=tmp_path)
    assert rec.returncode == 0, rec.stderr[-2000:]
    recorded = json.loads(rec.stdout)
    assert len(recorded["tree"]["children"]) == 4 and cassette.is_file()
    calls = len(fake_llm.requests)

    no_key = _cli(*args, cwd=tmp_path)  # the same command without the key cannot run...
    assert no_key.returncode == 2 and "ANTHROPIC_API_KEY" in no_key.stderr
    rep = _cli(*args, "--replay", str(cassette), cwd=tmp_path)  # ...but replays
    assert rep.returncode == 0, rep.stderr[-2000:]
    replayed = json.loads(rep.stdout)
    assert _shape(replayed["tree"]) == _shape(recorded["tree"]) and replayed["result"] == recorded["result"]
    assert {c["prompt"] for c in replayed["tree"]["children"]} == set(SUBS)
    assert len(fake_llm.requests) == calls  # the replay asked the network nothing

    changed = _cli("agent", "run", "Compare five sorting algorithms", "--auto-approve", "--replay", str(cassette),
                   cwd=tmp_path)
    assert changed.returncode == 1
    assert "has no reply for agent researcher (step clarify): first difference at messages[0].content" in \
        changed.stderr, changed.stderr[-2000:]
    assert "Traceback" not in changed.stderr + changed.stdout


runner = CliRunner()


@pytest.mark.parametrize(("args", "message"), [
    (["--replay-mode", "sometimes"], "RunOptions.replay_mode must be one of strict, new_episodes"),
    (["--replay", "nope.jsonl"], "RunOptions.replay: cassette nope.jsonl does not exist"),
    (["--record", "a.jsonl", "--replay", "have.jsonl"],
     "RunOptions: record and replay together need replay_mode='new_episodes'"),
    (["--record", "."], "RunOptions.record: . is a folder"),
])
def test_agent_run_bad_cassette_options_are_one_line(args, message):
    Path("have.jsonl").write_text('{"cassette": 1}\n')
    before = sorted(p.name for p in Path.cwd().iterdir())
    result = runner.invoke(app, ["agent", "run", "hi", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {message}"), result.stderr
    assert sorted(p.name for p in Path.cwd().iterdir()) == before  # no workspace, no cassette


@pytest.mark.parametrize(("args", "message"), [
    (["--replay", "nope.jsonl"], "error: cassette nope.jsonl does not exist"),
    (["--replay", "notes.txt"], "error: notes.txt:1: not JSON"),
    (["--record", "a.jsonl", "--replay", "have.jsonl"], "error: --record with --replay needs --replay-mode new_episodes"),
    (["--replay-mode", "new_episodes"], "error: --replay-mode needs --replay"),
    (["--replay", "have.jsonl", "-p", "cassette", "x"], "error: give either --record/--replay or -p cassette"),
])
def test_workflow_run_bad_cassette_options_are_one_line(args, message):
    Path("have.jsonl").write_text('{"cassette": 1}\n')
    Path("notes.txt").write_text("not json at all\n")
    result = runner.invoke(app, ["workflow", "run", "code_review", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1].startswith(message), result.stderr


def _reviewer(body):
    """The fake model as a reviewer: no questions, a review that names what it was shown."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("name") == "respond":
        return model(body)
    listing = body["messages"][0]["content"]
    n = listing.count("\n- ")
    return fakes_llm.Reply(text=json.dumps({"verdict": "PASS", "findings": [],
                                            "summary": f"Reviewer (recorded): {n} static finding(s) seen."}))


@pytest.mark.slow
def test_workflow_run_replays_a_recorded_real_model_review(fake_llm, tmp_path):
    fake_llm.queue(*[_reviewer] * 40)
    cassette, report = tmp_path / "review.jsonl", tmp_path / "report.json"
    rec = _cli("workflow", "run", "code_review", "--record", str(cassette), "--report", str(report),
               fake=fake_llm, cwd=tmp_path)
    assert rec.returncode == 0, rec.stderr[-3000:]
    recorded = json.loads(report.read_text())
    calls = len(fake_llm.requests)
    assert calls > 0 and "Reviewer (recorded)" in json.dumps(recorded)

    rep = _cli("workflow", "run", "code_review", "--replay", str(cassette), "--report", str(report), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr[-3000:]
    replayed = json.loads(report.read_text())
    def notes(report):  # the reviewer gate's outcome in each adversarial pass
        return [p["artifacts"]["agent"] for p in report["phases"] if "agent" in p.get("artifacts", {})]

    assert [n["text"] for n in notes(replayed)] == [n["text"] for n in notes(recorded)] != []
    assert {(n["provider"], n["offline"]) for n in notes(recorded)} == {("anthropic", False)}
    assert {(n["provider"], n["offline"]) for n in notes(replayed)} == {("replay:anthropic", True)}
    assert replayed["verdict"] == recorded["verdict"] and len(fake_llm.requests) == calls

    sample = tmp_path / "other.py"
    sample.write_text("def f(x):\n    try:\n        return 1 / x\n    except:\n        return None\n")
    miss = _cli("workflow", "run", "code_review", "--replay", str(cassette), "-p", "target", str(sample),
                cwd=tmp_path)
    assert miss.returncode == 2, miss.stderr[-3000:]
    assert "has no reply for agent reviewer" in miss.stderr + miss.stdout, miss.stderr[-3000:]


@pytest.mark.slow
async def test_agent_magic_replays_in_a_real_kernel(fake_llm, ws, tmp_path):
    from agentstack_lab.engine import AgentRun, RunOptions
    from agentstack_lab.providers.registry import get_provider

    fake_llm.queue(*[model] * 60)
    cassette = tmp_path / "tree.jsonl"
    provider = get_provider("anthropic", api_key=API_KEY, base_url=fake_llm.url, timeout=5)
    recorded = await AgentRun(ROOT_PROMPT, workspace=ws, provider=provider, options=RunOptions(
        interactive=False, auto_approve=True, executor="subprocess", record=str(cassette)))
    calls = len(fake_llm.requests)
    flags = f"--wait --auto-approve --executor subprocess --provider anthropic --replay {cassette}"
    cells = ["%load_ext agentstack_lab",
             f"r = %agent {flags} {ROOT_PROMPT}\nprint(r.status, r.provider.name, len(r.tree['children']))\n"
             "print(r.result)",
             f"%agent {flags} Compare five sorting algorithms"]
    work = tmp_path / "nb"
    work.mkdir()
    nb = await async_run_cells(cells, work, timeout=300)

    def text(cell) -> str:
        return "".join(o.get("text", "") + json.dumps(o.get("data", {})) + "".join(o.get("traceback", []))
                       + o.get("evalue", "") for o in cell.outputs)

    out = text(nb.cells[1])
    assert "completed replay:anthropic 4" in out and recorded in out, out
    assert "has no reply for agent researcher (step clarify)" in text(nb.cells[2])
    assert len(fake_llm.requests) == calls
