"""Binder and GitHub Actions files: they parse, name files that exist, and use options the CLI accepts.

Nothing is installed or built here; the notebooks themselves run offline in test_workflows_notebooks.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from agentstack_lab.cli.workflow import run_command
from agentstack_lab.workflows.catalog import resolve_notebook

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder"


def test_binder_installs_the_package_on_a_python_it_supports():
    lines = [ln.split("#", 1)[0].strip() for ln in (BINDER / "requirements.txt").read_text().splitlines()]
    # repo2docker runs `pip install -r binder/requirements.txt` from the repository root, so "." is the root
    assert "." in [ln for ln in lines if ln]
    assert (REPO / "pyproject.toml").is_file()
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime), runtime
    minor = int(runtime.split(".")[1])
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires.startswith(">=3.") and minor >= int(requires.split(".")[1])


@pytest.mark.slow
def test_binder_post_build_is_an_executable_valid_script_and_readme_names_real_notebooks():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK)
    assert subprocess.run(["bash", "-n", str(post)], capture_output=True).returncode == 0
    named = re.findall(r"`(notebooks/[\w/]+\.ipynb)`", (BINDER / "README.md").read_text())
    assert set(named) == {"notebooks/quickstart.ipynb", "notebooks/workflows/doc_sync.ipynb",
                          "notebooks/workflows/code_review.ipynb"}
    assert all((REPO / n).is_file() for n in named)


def _run_commands(text: str) -> list[list[str]]:
    joined = re.sub(r"\\\n\s*", " ", text)
    return [shlex.split(ln.strip())[3:] for ln in joined.splitlines()
            if ln.strip().startswith("agentstack-lab workflow run ")]


def test_github_actions_example_runs_real_notebooks_with_valid_options():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "agent-workflows.yml").read_text())
    steps = workflow["jobs"]["workflows"]["steps"]
    commands = [argv for step in steps for argv in _run_commands(step.get("run", ""))]
    assert len(commands) == 2
    for argv in commands:
        ctx = run_command.make_context("run", list(argv))  # raises on an unknown or malformed option
        # built-in names (they ship in the wheel) or paths of notebooks in the repository
        assert all(resolve_notebook(nb).is_file() or (REPO / nb).is_file() for nb in ctx.params["notebooks"])
        assert ctx.params["report"] and ctx.params["output"]
    assert {argv[0] for argv in commands} == {"doc_sync", "code_review"}
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "workflow-output/"
