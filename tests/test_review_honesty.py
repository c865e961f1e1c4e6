"""Review honesty: a reviewer that called no model decides nothing, and reports count what happened once.

Through the surfaces: ``agentstack-lab workflow run`` (nbclient, a kernel), ``agentstack-lab review run``,
``agentstack-lab agent run`` with consensus enabled, and ``AgentRun`` for a consensus review that fails.
No API key is set (conftest), so ``provider auto`` is the offline scripted provider.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from agentstack_lab.workflows.schema import validate_report
from tests.test_workflows_notebooks import cli

CLEAN = '"""Averages."""\n\n\ndef mean(xs: list[float]) -> float:\n    """The mean of xs."""\n    return sum(xs) / len(xs)\n'
RISKY = "def run(code):\n    return eval(code)\n"


def _warnings(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.lower().startswith("warning:")]


@pytest.mark.slow
def test_offline_reviewer_is_skipped_never_a_deciding_gate(workdir):
    (workdir / "stats.py").write_text(CLEAN)
    proc = cli("run", "code_review", "-p", "target", "stats.py", "--report", "r.json", "-o", "r.ipynb", cwd=workdir)
    assert proc.returncode == 0, proc.stderr  # the static checks passed; the reviewer decided nothing
    report = validate_report(json.loads((workdir / "r.json").read_text()))
    decision = report["decision"]
    assert decision["gates"] == {"static": "PASS", "reviewer": "SKIPPED"}
    assert decision["decidedBy"] == ["static"]
    assert decision["reviewer"]["skipped"] is True and "no model" in decision["reviewer"]["reason"]
    assert report["confidence"] != "high"
    warned = _warnings(proc)
    assert len(warned) == 1 and "reviewer gate was skipped" in warned[0], proc.stdout + proc.stderr

    # a static FAIL still decides, and the skipped reviewer is not named among the deciders
    (workdir / "risky.py").write_text(RISKY)
    bad = cli("run", "code_review", "-p", "target", "risky.py", "-p", "max_iterations", "2", "--report", "b.json",
              cwd=workdir)
    assert bad.returncode == 1, bad.stderr
    assert json.loads((workdir / "b.json").read_text())["decision"]["decidedBy"] == ["static"]
    assert len(_warnings(bad)) == 1  # one line for the run, not one per iteration


def _review_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "review", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_review_run_without_a_model_is_not_a_pass(workdir):
    (workdir / "calc.py").write_text(RISKY)
    proc = _review_cli("run", "calc.py", "--json", cwd=workdir)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # nothing was decided: never exit 0 "passed"
    out = json.loads(proc.stdout)
    assert out["status"] == "error" and out["verdict"] is None and "no model reviewed" in out["error"]
    warned = _warnings(proc)
    assert len(warned) == 1 and "skipped" in warned[0]


@pytest.mark.slow
def test_an_identical_finding_repeated_over_iterations_counts_once(workdir):
    (workdir / "risky.py").write_text(RISKY)
    proc = cli("run", "code_review", "-p", "target", "risky.py", "-p", "max_iterations", "3", "-p", "agent", "False",
               "--report", "r.json", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    report = validate_report(json.loads((workdir / "r.json").read_text()))
    assert report["iterations"] == 3
    listed = [f for p in report["phases"] for f in p["findings"] if f["claim"] == "no dynamic code execution"]
    assert len(listed) == 4  # analysis and three adversarial passes each saw it...
    assert report["summary"]["findingsTotal"] == 1  # ...but it is one finding
    assert report["summary"]["findingsBySeverity"] == {"low": 0, "medium": 0, "high": 1}
    assert "1 findings: 1 high" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_reports_of_generic_notebooks_carry_no_doc_sync_counters(workdir):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1 + 1")]
    nbformat.write(nb, workdir / "plain.ipynb")
    proc = cli("run", "plain.ipynb", "--report", "r.json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    summary = validate_report(json.loads((workdir / "r.json").read_text()))["summary"]
    assert set(summary) == {"findingsTotal", "findingsBySeverity"}

    doc = cli("run", "doc_sync", "-p", "agent", "False", "--report", "d.json", cwd=workdir)
    assert doc.returncode == 1, doc.stderr  # the built-in sample has broken claims
    counters = json.loads((workdir / "d.json").read_text())["summary"]
    assert {"documentsScanned", "documentsUpdated", "sectionsRemoved"} <= set(counters)


CONSENSUS = {"consensus": {"enabled": True, "require_for_risk_levels": ["high"],
                           "high_risk_patterns": ["caveats or risks"]}}


@pytest.mark.slow
def test_default_adversarial_consensus_works_with_the_offline_provider(workdir):
    (workdir / "consensus.json").write_text(json.dumps(CONSENSUS))
    proc = subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "agent", "run", "--provider", "scripted",
                           "--json", "should we ship on fridays?"], cwd=workdir, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "AGENTSTACK_CONFIG": str(workdir / "consensus.json")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from agentstack_lab.tasks.consensus import Consensus
    from agentstack_lab.workspace import Workspace

    with Workspace.open(workdir, announce=False) as ws:
        rows = ws.db.query("SELECT id FROM consensus_checkpoints")
        assert len(rows) == 1
        cp = Consensus(ws.db, ws.config.consensus, None).get(rows[0][0])
        assert cp.reviewer_strategy == "adversarial" and cp.status == "approved" and cp.rejected_ids == []
        assert "No model reviewed this plan" in cp.decision["feedback"]
        types = sorted(r[0] for r in ws.db.query("SELECT type FROM agents WHERE parent_id IS NOT NULL"))
    assert "researcher" in types and "reviewer" in types  # the plan ran: no subtask was silently rejected


def _failing_review(request):
    from agentstack_lab.providers.demo import demo_reply

    if (request.metadata or {}).get("step") == "consensus_review":
        raise RuntimeError("reviewer model unavailable")
    return demo_reply(request)


@pytest.mark.parametrize("on_query", ["fail", "auto"])
async def test_a_failed_consensus_review_never_completes_with_every_subtask_silently_rejected(tmp_path, on_query):
    from agentstack_lab.config import Config
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.options import AgentRunError
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.workspace import Workspace

    cfg = Config.from_dict(CONSENSUS)
    with Workspace.open(tmp_path / "p", config=cfg, announce=False) as ws:
        run = AgentRun("should we ship on fridays?", workspace=ws, provider=ScriptedProvider(_failing_review),
                       options={"interactive": False, "final_question": False, "on_query": on_query})
        if on_query == "fail":
            with pytest.raises(AgentRunError, match="adversarial review failed: RuntimeError: reviewer model"):
                await run
            assert run.status != "completed"
        else:
            await run
            kids = [k["type"] for k in run.tree["children"]]
            assert "researcher" in kids and "reviewer" in kids  # the policy approved: the plan ran
            status, decision = ws.db.query("SELECT status, decision FROM consensus_checkpoints")[0]
            assert status == "approved" and "on_query=auto" in json.loads(decision)["feedback"]


async def test_a_failed_review_under_on_query_wait_asks_a_person_like_every_decision(tmp_path):
    """The review failed and ``on_query`` is ``wait``: the checkpoint is a question every surface shows (a
    ``user-query`` event naming the error), and the run's ``decision_timeout`` applies to it."""
    from agentstack_lab.config import Config
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.options import AgentRunError
    from agentstack_lab.providers.scripted import ScriptedProvider
    from agentstack_lab.workspace import Workspace

    cfg = Config.from_dict(CONSENSUS)
    with Workspace.open(tmp_path / "p", config=cfg, announce=False) as ws:
        run = AgentRun("should we ship on fridays?", workspace=ws, provider=ScriptedProvider(_failing_review),
                       options={"interactive": False, "final_question": False, "on_query": "wait",
                                "decision_timeout": "1s"})
        started = time.monotonic()
        with pytest.raises(AgentRunError, match="expired"):
            await run
        assert time.monotonic() - started < 60   # the run's 1 s, not the checkpoint's own 300 s
        asked = [e for e in run.events if e.type == "user-query" and e.kind == "consensus"]
        assert len(asked) == 1 and "adversarial review failed: RuntimeError: reviewer model" in asked[0].prompt
        assert [r[0] for r in ws.db.query("SELECT state FROM decisions WHERE kind = 'consensus'")] == ["expired"]
