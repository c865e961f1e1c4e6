"""``agentstack-lab task ...``: a round trip through the CLI (typer runner, and one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app

runner = CliRunner()


def ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def bad(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == "" and "Traceback" not in result.output
    [line] = result.stderr.strip().splitlines()
    return line


def test_task_cli_round_trip(workdir):
    (workdir / "agentstack.config.json").write_text(json.dumps({"drift": {"enabled": True, "behavior": "prevent"}}))
    root = ok("task", "create", "summarise the churn report", "--type", "researcher").strip()
    child = ok("task", "create", "compute churn by month", "--type", "analyst", "--parent", root).strip()
    assert "repeats ancestor task" in bad("task", "create", "summarise the churn report", "--parent", child)
    assert ok("task", "assign", child, "agent-7").strip() == f"{child} running (agent agent-7)"
    assert ok("task", "complete", child, "12% in March").strip() == f"{child} completed"
    got = json.loads(ok("task", "get", child, "--json"))
    assert (got["status"], got["output"], got["parentId"], got["depth"]) == ("completed", "12% in March", root, 1)
    listed = json.loads(ok("task", "list", "--parent", root, "--json"))
    assert [t["id"] for t in listed] == [child]
    other = ok("task", "create", "draft the board slide").strip()
    ok("task", "relate", other, "depends_on", child)
    assert "already exists" in bad("task", "relate", other, "depends_on", child)
    assert "itself" in bad("task", "relate", other, "supersedes", other)
    assert "cannot go from 'completed' to 'running'" in bad("task", "assign", child, "agent-8")
    assert "no task with id 'nope'" in bad("task", "get", "nope")
    rels = json.loads(ok("task", "relationships", child, "--json"))
    assert sorted((r["fromTaskId"], r["relationshipType"]) for r in rels) == sorted(
        [(root, "parent_of"), (other, "depends_on")])
    assert "parent_of" in ok("task", "relationships", child)
    metrics = json.loads(ok("task", "drift-metrics", "--json"))
    assert (metrics["metrics"]["totalEvents"], metrics["metrics"]["preventedCount"]) == (1, 1)
    assert "1 events, 0 warned, 1 prevented" in ok("task", "drift-metrics")
    assert len(json.loads(ok("task", "list", "--json"))) == 3  # the prevented task was never created


@pytest.mark.slow
def test_task_cli_error_is_one_line_in_a_real_process(workdir):
    proc = subprocess.run([sys.executable, "-m", "agentstack_lab.cli", "task", "complete", "nope"],
                          capture_output=True, text=True, cwd=workdir, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == "error: no task with id 'nope'"
    assert "Traceback" not in proc.stderr
