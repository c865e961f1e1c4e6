"""The adversarial review loop: reviewer verdicts decide, the coder revises, state lives in the database.

The agents run through the real engine (``AgentRun``) with the scripted provider playing the
reviewer's JSON verdicts and the coder's revisions; status, issues, code and abort are read from
the workspace database, including from another process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

from agentstack_lab.errors import NotFoundError, UsageError
from agentstack_lab.workflows.review_loop import ReviewLoops, ReviewScript, ask_reviewer
from agentstack_lab.workflows.verdict import ReviewVerdict, VerdictError, extract_code, parse_verdict
from agentstack_lab.workspace import Workspace

BUGGY = "def total(xs):\n    return sum(xs) / len(xs)\n"
FIXED = "def total(xs):\n    return sum(xs)\n"
FAIL = {"verdict": "FAIL", "summary": "total() averages",
        "findings": [{"severity": "high", "file": "calc.py", "line": 2, "claim": "total() divides by len(xs)",
                      "evidence": "return sum(xs) / len(xs)"}]}
PASS = {"verdict": "PASS", "summary": "fine", "findings": []}


# --- the verdict ----------------------------------------------------------------------------------------

def test_verdict_parses_from_fenced_or_bare_json_and_round_trips():
    v = parse_verdict("Here you go:\n```json\n" + json.dumps(FAIL) + "\n```\nThanks")
    assert v.verdict == "FAIL" and v.findings[0].line == 2 and v.findings[0].file == "calc.py"
    assert ReviewVerdict.from_wire(v.to_wire()) == v
    assert parse_verdict("sure " + json.dumps(PASS)).passed
    with pytest.raises(AttributeError):
        v.verdict = "PASS"  # frozen


@pytest.mark.parametrize("reply, field", [
    ("", "reply is empty"),
    ("looks good to me", "no JSON object"),
    ('{"verdict": "PASS",}', "not valid JSON"),
    ('{"summary": "ok"}', "missing field 'verdict'"),
    ('{"verdict": "OK"}', "field 'verdict' must be PASS or FAIL, got 'OK'"),
    ('{"verdict": "FAIL", "findings": []}', "field 'findings' is empty but verdict is FAIL"),
    ('{"verdict": "FAIL", "findings": [{"severity": "high", "claim": "x"}, {"severity": "urgent", "claim": "y"}]}',
     "field 'findings[1].severity' must be one of low, medium, high, got 'urgent'"),
    ('{"verdict": "FAIL", "findings": [{"severity": "low", "claim": ""}]}', "field 'findings[0].claim'"),
    ('{"verdict": "FAIL", "findings": [{"severity": "low", "claim": "c", "line": "7"}]}',
     "field 'findings[0].line' must be a non-negative integer, got '7'"),
    ('{"verdict": "PASS", "score": 3}', "unknown field 'score'"),
])
def test_malformed_verdicts_name_the_field(reply, field):
    with pytest.raises(VerdictError) as info:
        parse_verdict(reply)
    assert field in str(info.value) and "\n" not in str(info.value)


def test_extract_code_takes_the_first_fence_or_the_whole_reply():
    assert extract_code("Fixed:\n```python\nx = 1\n```\n") == "x = 1\n"
    assert extract_code("x = 2") == "x = 2\n"
    with pytest.raises(VerdictError, match="coder's reply is empty"):
        extract_code("  ")


def test_review_script_from_file_and_bad_scripts(workdir):
    (workdir / "s.json").write_text(json.dumps({"verdicts": [FAIL, PASS], "revisions": [FIXED]}))
    script = ReviewScript.coerce(str(workdir / "s.json"))
    assert script.verdicts == (FAIL, PASS) and script.revisions == (FIXED,)
    for bad, msg in [({"verdicts": []}, "at least one"), ({"verdicts": [PASS], "extra": 1}, "unknown field 'extra'"),
                     ({"verdicts": [3]}, "object or a string"), (str(workdir / "nope.json"), "not found")]:
        with pytest.raises(UsageError, match=msg):
            ReviewScript.coerce(bad)


# --- the loop ---------------------------------------------------------------------------------------------

async def test_loop_passes_after_one_revision(ws):
    loops = ReviewLoops(ws)
    loop = loops.start(BUGGY, path="calc.py", script={"verdicts": [FAIL, PASS], "revisions": [f"```python\n{FIXED}```"]})
    assert loops.status(loop.id).status == "running"  # the row exists as soon as start returns
    state = await loop
    assert (state.status, state.verdict, state.iteration, state.error) == ("passed", "PASS", 2, None)
    assert loops.get_code(loop.id) == FIXED
    reviews = loops.reviews(loop.id)
    assert [r["verdict"] for r in reviews] == ["FAIL", "PASS"]
    assert reviews[0]["code"] == BUGGY and reviews[1]["code"] == FIXED  # the reviewer saw the revision
    assert reviews[0]["coder_run_id"] and reviews[1]["coder_run_id"] is None
    issues = loops.issues(loop.id)
    assert [(i.iteration, i.severity, i.file, i.line, i.claim) for i in issues] == [
        (1, "high", "calc.py", 2, "total() divides by len(xs)")]
    # the agents ran through the engine: their rows are in the agents table, typed reviewer and coder
    rows = ws.db.query("SELECT type, status FROM agents WHERE run_id IN (?, ?, ?)",
                       (reviews[0]["reviewer_run_id"], reviews[0]["coder_run_id"], reviews[1]["reviewer_run_id"]))
    assert sorted(map(tuple, rows)) == [("coder", "completed"), ("reviewer", "completed"), ("reviewer", "completed")]
    assert [s.id for s in loops.list()] == [loop.id] and loops.list(status="running") == []


async def test_loop_fails_after_max_iterations(ws):
    loops = ReviewLoops(ws)
    state = await loops.run(BUGGY, path="calc.py", max_iterations=3, script={"verdicts": [FAIL], "revisions": [BUGGY]})
    assert (state.status, state.verdict, state.iteration) == ("failed", "FAIL", 3)
    assert "still found 1 problem(s) after 3 review(s)" in state.error
    assert [i.iteration for i in loops.issues(state.id)] == [1, 2, 3]
    assert len(loops.issues(state.id, iteration=2)) == 1


async def test_malformed_reviewer_output_ends_the_loop_in_error_never_pass(ws):
    loops = ReviewLoops(ws)
    bad = json.dumps({"verdict": "FAIL", "findings": [{"severity": "critical", "claim": "x"}]})
    state = await loops.run(BUGGY, script={"verdicts": [bad]})
    assert state.status == "error" and state.verdict is None
    assert "field 'findings[0].severity' must be one of low, medium, high, got 'critical'" in state.error


async def test_abort_stops_a_running_loop_at_once(ws):
    started = asyncio.Event()

    async def slow_reviewer(request):
        from agentstack_lab.providers.demo import demo_reply

        if request.metadata.get("step") != "main":
            return demo_reply(request)
        started.set()
        await asyncio.sleep(30)
        return json.dumps(PASS)

    from agentstack_lab.providers.scripted import ScriptedProvider

    loops = ReviewLoops(ws)
    loop = loops.start(BUGGY, provider=ScriptedProvider(slow_reviewer))
    await asyncio.wait_for(started.wait(), 10)
    t0 = asyncio.get_running_loop().time()
    loops.abort(loop.id[:8])  # a prefix is enough
    state = await asyncio.wait_for(loop.wait(), 10)
    assert state.status == "aborted" and asyncio.get_running_loop().time() - t0 < 5
    assert [tuple(r) for r in ws.db.query("SELECT status FROM agents WHERE type = 'reviewer'")] == [("stopped",)]
    with pytest.raises(UsageError, match="already ended"):
        loops.abort(loop.id)


@pytest.mark.slow
async def test_status_and_abort_from_another_process(ws, workdir):
    """Another process reads the running loop and aborts it through the database; the owner stops."""
    started = asyncio.Event()

    async def slow(request):
        from agentstack_lab.providers.demo import demo_reply

        if request.metadata.get("step") != "main":
            return demo_reply(request)
        started.set()
        await asyncio.sleep(60)
        return json.dumps(PASS)

    from agentstack_lab.providers.scripted import ScriptedProvider

    loops = ReviewLoops(ws)
    loop = loops.start(BUGGY, path="calc.py", provider=ScriptedProvider(slow))
    await asyncio.wait_for(started.wait(), 10)
    script = textwrap.dedent(f"""
        from agentstack_lab.workspace import Workspace
        from agentstack_lab.workflows.review_loop import ReviewLoops
        with Workspace.open({str(ws.db_path)!r}, announce=False) as ws:
            loops = ReviewLoops(ws)
            s = loops.status({loop.id[:6]!r})
            print(s.status, s.path, loops.get_code(s.id) == {BUGGY!r}, [x.id for x in loops.list(status='running')])
            print(loops.abort(s.id).abort_requested)
    """)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().split("\n")[:2] == [f"running calc.py True ['{loop.id}']", "True"]
    state = await asyncio.wait_for(loop.wait(), 10)
    assert state.status == "aborted"


def test_bad_input_is_refused_before_anything_is_written(ws):
    loops = ReviewLoops(ws)
    with pytest.raises(UsageError, match="code must be a non-empty string"):
        loops.start("  ")
    with pytest.raises(UsageError, match="max_iterations must be an integer from 1 to 50, got 0"):
        loops.start(BUGGY, max_iterations=0)
    with pytest.raises(Exception, match="unknown agent type 'critic'"):
        loops.start(BUGGY, reviewer_type="critic")
    with pytest.raises(UsageError, match="needs provider 'scripted'"):
        loops.start(BUGGY, provider="anthropic", script={"verdicts": [PASS]})
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):  # a missing key fails before a row is written
        loops.start(BUGGY, provider="anthropic")
    with pytest.raises(Exception, match="unknown provider 'nope'"):
        loops.start(BUGGY, provider="nope")
    with pytest.raises(NotFoundError, match="no review loop 'abcd1234'"):
        loops.status("abcd1234")
    assert loops.list() == []


@pytest.mark.slow
def test_a_loop_whose_process_died_reads_as_error(ws, workdir):
    """A loop left ``running`` by a killed process is not running forever."""
    from agentstack_lab.workflows.review_store import ReviewStore

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(proc.stdout)
    store = ReviewStore(ws.db)
    store.create("dead-loop-1", kind="code", path=None, code=BUGGY, max_iterations=3, provider="scripted")
    ws.db.execute("UPDATE review_loops SET owner_pid = ? WHERE id = 'dead-loop-1'", (dead_pid,))
    state = ReviewLoops(ws).status("dead-loop-1")
    assert state.status == "error" and f"pid {dead_pid}" in state.error


async def test_ask_reviewer_offline_passes_and_says_no_model_reviewed(ws):
    out = await ask_reviewer(ws, BUGGY, context="Static check findings:\n- calc.py:2 divides (medium)\n")
    assert out.verdict.passed and out.offline and "no model was called" in out.verdict.summary
    assert "calc.py:2 divides" in out.verdict.summary


def test_loops_from_a_workspace_opened_by_path(workdir):
    with Workspace.open(workdir, announce=False) as w:
        assert ReviewLoops(w).list() == []


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "review", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_cli_review_run_exit_codes_and_reads(workdir):
    (workdir / "calc.py").write_text(BUGGY)
    (workdir / "loop.json").write_text(json.dumps({"verdicts": [FAIL, PASS], "revisions": [FIXED]}))
    (workdir / "always.json").write_text(json.dumps({"verdicts": [FAIL]}))
    ok = _cli("run", "calc.py", "--script", "loop.json", "--json", cwd=workdir)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert (out["status"], out["iteration"], out["issues"][0]["claim"]) == ("passed", 2, "total() divides by len(xs)")
    failed = _cli("run", "calc.py", "--script", "always.json", "-n", "2", cwd=workdir)
    assert failed.returncode == 1 and "FAILED after 2 of 2 review(s)" in failed.stdout
    loop_id = out["id"]
    assert _cli("code", loop_id[:8], cwd=workdir).stdout == FIXED
    status = _cli("status", loop_id, cwd=workdir).stdout
    assert "passed" in status and "1. FAIL: 1 finding(s)" in status and "2. PASS" in status
    issues = json.loads(_cli("issues", loop_id, "--json", cwd=workdir).stdout)
    assert [(i["iteration"], i["line"]) for i in issues] == [(1, 2)]
    listed = json.loads(_cli("list", "--json", cwd=workdir).stdout)
    assert [s["status"] for s in listed] == ["failed", "passed"]
    for args, message in [(("abort", loop_id), "has already ended (passed)"),
                          (("status", "zzzz9999"), "no review loop 'zzzz9999'"),
                          (("run", "missing.py"), "no such file: missing.py"),
                          (("list", "--status", "done"), "unknown review loop status 'done'")]:
        bad = _cli(*args, cwd=workdir)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, (args, bad.stderr)
