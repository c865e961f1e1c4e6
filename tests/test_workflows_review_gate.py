"""The built-in workflows gated by a reviewer agent's verdict as well as their static checks.

Through the real CLI (``agentstack-lab workflow run``, nbclient, a kernel): a scripted reviewer's
FAIL on code or docs that pass the static checks makes the run exit 1 and the report names the
reviewer's findings and says the reviewer decided; a malformed verdict is an error naming the field.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agentstack_lab.workflows.model import PhaseResult, WorkflowReport
from agentstack_lab.workflows.schema import validate_report
from tests.test_workflows_notebooks import cli

CLEAN = '"""Averages."""\n\n\ndef mean(xs: list[float]) -> float:\n    """The mean of xs."""\n    return sum(xs) / len(xs)\n'
FINDING = {"severity": "high", "file": "stats.py", "line": 6, "claim": "mean([]) raises ZeroDivisionError",
           "evidence": "return sum(xs) / len(xs)"}
FAIL = {"verdict": "FAIL", "summary": "empty input crashes", "findings": [FINDING]}
PASS = {"verdict": "PASS", "summary": "looks right", "findings": []}


def _script(workdir, name: str, *verdicts) -> str:
    (workdir / name).write_text(json.dumps({"verdicts": list(verdicts)}))
    return name


@pytest.mark.slow
def test_reviewer_fail_on_code_that_passes_static_checks_fails_the_workflow(workdir):
    (workdir / "stats.py").write_text(CLEAN)
    proc = cli("run", "code_review", "-p", "target", "stats.py", "-p", "review_script",
               _script(workdir, "fail.json", FAIL), "--report", "r.json", "-o", "r.ipynb", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    report = validate_report(json.loads((workdir / "r.json").read_text()))
    assert report["verdict"] == "FAIL" and report["iterations"] == 3
    decision = report["decision"]
    assert decision["decidedBy"] == ["reviewer"] and decision["gates"] == {"static": "PASS", "reviewer": "FAIL"}
    assert decision["reviewer"]["verdict"] == "FAIL" and decision["reviewer"]["findings"] == [FINDING]
    assert decision["reviewer"]["provider"] == "scripted"
    adversarial = [p for p in report["phases"] if p["phase"] == "adversarial"]
    assert all(p["artifacts"]["gates"] == {"static": "PASS", "reviewer": "FAIL"} for p in adversarial)
    named = [f for f in adversarial[-1]["findings"] if f["claim"] == FINDING["claim"]]
    assert named and named[0]["file"] == "stats.py" and named[0]["line"] == 6
    assert named[0]["evidence"] == ["stats.py:6 [reviewer]"]
    assert "workflow verdict FAIL" in proc.stderr + proc.stdout

    ok = cli("run", "code_review", "-p", "target", "stats.py", "-p", "review_script",
             _script(workdir, "pass.json", PASS), "--report", "ok.json", cwd=workdir)
    assert ok.returncode == 0, ok.stderr
    passed = json.loads((workdir / "ok.json").read_text())
    assert passed["decision"]["decidedBy"] == ["static", "reviewer"] and passed["iterations"] == 1


@pytest.mark.slow
def test_static_fail_decides_even_when_the_reviewer_passes(workdir):
    (workdir / "risky.py").write_text("def run(code):\n    return eval(code)\n")
    proc = cli("run", "code_review", "-p", "target", "risky.py", "-p", "max_iterations", "1", "-p",
               "review_script", _script(workdir, "pass.json", PASS), "--report", "r.json", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    decision = json.loads((workdir / "r.json").read_text())["decision"]
    assert decision["decidedBy"] == ["static"] and decision["gates"] == {"static": "FAIL", "reviewer": "PASS"}


@pytest.mark.slow
def test_doc_sync_reviewer_fail_on_true_docs_and_malformed_verdict_is_an_error(workdir):
    proj = workdir / "proj"
    (proj / "sample").mkdir(parents=True)
    (proj / "sample" / "__init__.py").write_text('def greet(name):\n    return f"hello {name}"\n')
    (proj / "README.md").write_text("# Sample\n\nCall `sample.greet()` to say hello.\n")
    doc_finding = {"severity": "medium", "file": "README.md", "line": 3,
                   "claim": "the README never says what greet returns", "evidence": "Call `sample.greet()`"}
    proc = cli("run", "doc_sync", "-p", "target", str(proj), "-p", "max_iterations", "1", "-p", "review_script",
               _script(workdir, "docs.json", {"verdict": "FAIL", "summary": "thin", "findings": [doc_finding]}),
               "--report", "d.json", cwd=workdir)
    assert proc.returncode == 1, proc.stderr
    report = validate_report(json.loads((workdir / "d.json").read_text()))
    assert report["decision"]["decidedBy"] == ["reviewer"]
    assert report["decision"]["reviewer"]["findings"] == [doc_finding]

    bad = cli("run", "doc_sync", "-p", "target", str(proj), "-p", "review_script",
              _script(workdir, "bad.json", {"verdict": "FAIL", "findings": [{"severity": "severe", "claim": "x"}]}),
              "--report", "bad.json.out", cwd=workdir)
    assert bad.returncode == 2, bad.stderr  # the reviewer's reply decided nothing: an error, never PASS
    assert "field 'findings[0].severity' must be one of low, medium, high, got 'severe'" in bad.stderr
    assert json.loads((workdir / "bad.json.out").read_text())["verdict"] == "ERROR"


def test_report_decision_names_the_gates_that_decided():
    now = datetime.now(UTC)

    def report(verdict, gates, agent=None):
        art = {"gates": gates} | ({"agent": agent} if agent else {})
        return WorkflowReport(workflow="w", started_at=now, completed_at=now, verdict=verdict, iterations=1,
                              max_iterations=1, phases=[PhaseResult(phase="adversarial", artifacts=art)])

    agent = {**FAIL, "provider": "scripted", "offline": True, "runId": "r", "text": "..."}
    fail = report("FAIL", {"static": "PASS", "reviewer": "FAIL"}, agent).to_dict()
    validate_report(fail)
    assert fail["decision"] == {"decidedBy": ["reviewer"], "gates": {"static": "PASS", "reviewer": "FAIL"},
                                "reviewer": {"verdict": "FAIL", "summary": "empty input crashes",
                                             "findings": [FINDING], "provider": "scripted", "offline": True}}
    assert report("PASS", {"static": "PASS"}).to_dict()["decision"]["decidedBy"] == ["static"]
    assert report("ERROR", {"static": "FAIL"}).to_dict()["decision"]["decidedBy"] == []
    assert "decision" not in report("PASS", {}).to_dict()
