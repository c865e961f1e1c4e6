import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app

runner = CliRunner()


def run(*args, input=None):
    result = runner.invoke(app, list(args), input=input)
    return result


def ok(*args, input=None):
    result = run(*args, input=input)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def test_memory_round_trip_via_cli(workdir):
    assert "stored default/plan (version 1)" in ok("memory", "store", "plan", "ship the kubernetes memory layer",
                                                   "--tag", "work", "--metadata", '{"p": 1}')
    ok("memory", "store", "notes", "-", input="read from standard input about kubernetes\n")
    got = json.loads(ok("memory", "get", "plan", "--json"))
    assert got["content"] == "ship the kubernetes memory layer" and got["tags"] == ["work"] and got["metadata"] == {"p": 1}
    assert "ship the kubernetes memory layer" in ok("memory", "get", "plan")
    hits = json.loads(ok("memory", "search", "kubernetes", "--json"))
    assert {h["key"] for h in hits} == {"plan", "notes"} and all("fts" in h["matched"] for h in hits)
    assert [h["key"] for h in json.loads(ok("memory", "search", "kubernetes", "--mode", "fts", "--limit", "1",
                                            "--json"))] in (["plan"], ["notes"])
    assert "plan" in ok("memory", "search", "kubernetes")            # rich table
    listed = json.loads(ok("memory", "list", "--json"))
    assert [e["key"] for e in listed] == ["notes", "plan"]
    assert "plan" in ok("memory", "list", "--tag", "work")
    assert "deleted plan" in ok("memory", "delete", "plan")
    assert [e["key"] for e in json.loads(ok("memory", "list", "--json"))] == ["notes"]


@pytest.mark.parametrize("args, message", [
    (["memory", "get", "missing"], "error: no entry 'missing' in namespace 'default'"),
    (["memory", "delete", "missing"], "error: no entry 'missing' in namespace 'default'"),
    (["memory", "search", "x", "--mode", "semantic"], "error: mode must be 'hybrid', 'fts' or 'vector'"),
    (["memory", "store", "k", "v", "--metadata", "{bad"], "error: --metadata is not valid JSON"),
    (["memory", "get", "k", "--namespace", "session:abc"], "error: read denied: namespace 'session:abc'"),
    (["session", "end", "nope"], "error: no session with id 'nope'"),
    (["memory", "list", "--session", "nope"], "error: no session with id 'nope'"),
])
def test_errors_are_one_line_and_exit_2(workdir, args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith(message)
    assert "Traceback" not in result.output


def test_sessions_via_cli(workdir):
    sid = ok("session", "start", "--name", "demo").strip()
    ok("memory", "store", "private", "session secret", "--session", sid)
    ok("memory", "store", "public", "shared fact")
    assert [h["key"] for h in json.loads(ok("memory", "search", "secret", "--session", sid, "--json"))] == ["private"]
    assert json.loads(ok("memory", "search", "session secret", "--json")) == []
    status = json.loads(ok("session", "status", sid, "--json"))
    assert status[0]["entries"] == 1 and status[0]["status"] == "active"
    assert [s["id"] for s in json.loads(ok("session", "active", "--json"))] == [sid]
    assert "removed 1 memory entry" in ok("session", "end", sid)
    assert json.loads(ok("session", "active", "--json")) == []
    assert json.loads(ok("session", "status", sid, "--json"))[0]["status"] == "ended"
    result = run("session", "end", sid)
    assert result.exit_code == 2 and "already ended" in result.stderr


def test_config_show_masks_secrets_and_validate_names_field(workdir, monkeypatch):
    monkeypatch.setenv("SECRET_FOR_TEST", "sk-live-123456")
    (workdir / "agentstack.config.json").write_text(json.dumps(
        {"providers": {"anthropic": {"api_key": "${SECRET_FOR_TEST}"}}}))
    shown = ok("config", "show", "--json")
    assert "sk-live-123456" not in shown and json.loads(shown)["providers"]["anthropic"]["api_key"] == "***"
    assert "sk-live-123456" not in ok("config", "show")
    assert ok("config", "validate").startswith("ok: ")
    (workdir / "agentstack.config.json").write_text('{"memory": {"vector": {"dimensions": "x"}}}')
    result = run("config", "validate")
    assert result.exit_code == 1 and "memory.vector.dimensions: expected int" in result.stderr
    result = run("memory", "list")   # a command that needs the config cannot run: 2
    assert result.exit_code == 2 and "memory.vector.dimensions: expected int" in result.stderr


@pytest.mark.slow
def test_console_script_one_line_error(workdir):
    def cli(*args):
        return subprocess.run([sys.executable, "-c", "from agentstack_lab.cli import main; main()", *args],
                              capture_output=True, text=True, timeout=60, cwd=workdir)

    first = cli("memory", "get", "x")       # creates the database: its path is shown once
    db = workdir.resolve() / ".agentstack" / "agentstack.db"
    assert first.returncode == 2
    assert first.stderr.splitlines() == [f"agentstack-lab: using database {db} (new)",
                                         "error: no entry 'x' in namespace 'default'"]
    again = cli("memory", "get", "x")       # an existing database: the error line alone
    assert again.returncode == 2 and again.stderr.splitlines() == ["error: no entry 'x' in namespace 'default'"]
    assert again.stdout == ""


def test_config_validate_json(workdir):
    assert json.loads(ok("config", "validate", "--json")) == {"ok": True, "file": None}
    (workdir / "agentstack.config.json").write_text('{"agents": {"max_depth": 1}}')
    assert json.loads(ok("config", "validate", "--json"))["file"].endswith("agentstack.config.json")
    result = run("config", "validate", "--json", str(workdir / "missing.json"))
    assert result.exit_code == 2 and result.stderr.strip().endswith("missing.json: no such file")


def test_ended_session_takes_no_new_entries_via_cli(workdir):
    sid = ok("session", "start").strip()
    ok("session", "end", sid)
    result = run("memory", "store", "late", "written after the end", "--session", sid)
    assert result.exit_code == 2 and "has ended" in result.stderr
    result = run("agent", "run", "hi", "--session", sid)
    assert result.exit_code == 2 and "has ended" in result.stderr
    from agentstack_lab.workspace import Workspace

    with Workspace.open(announce=False) as ws:   # nothing was left in the ended session's namespace
        assert ws.db.query("SELECT count(*) FROM memory WHERE namespace = ?", (f"session:{sid}",))[0][0] == 0
