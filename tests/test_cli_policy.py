"""The CLI's policies through the real command on a real workspace: exit codes (0 ok, 1 a check failed,
2 could not run), one-line errors, bugs kept with their traceback, checked numbers and text, ``--json``
on every read command, and config checks that name the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app

runner = CliRunner()


def invoke(*args, input=None):
    return runner.invoke(app, list(args), input=input)


def ok(*args, input=None) -> str:
    result = invoke(*args, input=input)
    assert result.exit_code == 0, (args, result.output, result.stderr)
    return result.stdout


def one_line(result, code: int, *parts: str) -> str:
    """The run exited ``code`` with exactly one ``error: ...`` line on stderr containing every part."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("agentstack-lab: using database")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
    assert "Traceback" not in result.output
    return lines[0]


# --- numbers and text are checked before anything happens ---------------------------------------
@pytest.mark.parametrize("args, parts", [
    (["memory", "search", "x", "--threshold", "nan"], ["--threshold must be a finite number", "nan"]),
    (["memory", "search", "x", "--threshold", "inf"], ["--threshold must be a finite number"]),
    (["memory", "search", "x", "--threshold", "-1"], ["--threshold must be between 0 and 1", "-1"]),
    (["memory", "search", "x", "--threshold", "5"], ["--threshold must be between 0 and 1", "5"]),
    (["memory", "search", "x", "--limit", "9223372036854775808"],
     ["--limit must be between 1 and 9223372036854775807", "9223372036854775808"]),
    (["memory", "search", "x", "--limit", "0"], ["--limit must be between 1"]),
    (["memory", "list", "--limit", "9223372036854775808"], ["--limit must be between 0 and 9223372036854775807"]),
    (["memory", "list", "--offset", "-1"], ["--offset must be between 0"]),
    (["agent", "run", "hi", "--timeout", "nan"], ["--timeout must be a finite number", "nan"]),
    (["agent", "run", "hi", "--timeout", "0"], ["--timeout must be > 0"]),
    (["agent", "watch", "--once", "--interval", "nan"], ["--interval must be a finite number"]),
    (["agent", "list", "--limit", "9223372036854775808"], ["--limit must be between 1"]),
])
def test_bad_numbers_are_one_line_exit_2_and_change_nothing(workdir, args, parts):
    one_line(invoke(*args), 2, *parts)
    assert not (workdir / ".agentstack").exists()   # refused before the workspace opened: no database made


def test_stdin_that_is_not_utf8_is_refused_before_the_workspace_opens(workdir):
    line = one_line(invoke("memory", "store", "k", input=b"caf\xe9 au lait"), 2, "standard input is not UTF-8")
    assert "0xe9 at offset 3" in line
    assert not (workdir / ".agentstack").exists()        # nothing was created, not even the database
    ok("memory", "store", "k", input="café au lait".encode())
    assert json.loads(ok("memory", "get", "k", "--json"))["content"] == "café au lait"


def test_memory_magic_checks_threshold_and_limit_with_the_same_rules():
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "agentstack_lab")
    try:
        for line, text in (("search x --threshold nan", "--threshold: expected a finite number between 0 and 1"),
                           ("search x --threshold 5", "--threshold: expected a finite number between 0 and 1"),
                           ("search x --limit 9223372036854775808", "--limit: expected an integer between 0"),
                           ("list --offset 99999999999999999999", "--offset: expected an integer between 0")):
            with pytest.raises(UsageError, match=text):
                shell.run_line_magic("memory", line)
        from agentstack_lab.notebook.args import MagicUsageError, parse_agent_line

        with pytest.raises(MagicUsageError, match="--timeout: expected a finite number of seconds > 0"):
            parse_agent_line("--timeout nan hi")
    finally:
        shell.run_line_magic("unload_ext", "agentstack_lab")
        InteractiveShell.clear_instance()


# --- expected failures vs bugs --------------------------------------------------------------------
def test_a_file_that_is_not_a_database_is_one_line_naming_it(workdir):
    bad = workdir / "notes.db"
    bad.write_text("this is a text file, not SQLite " * 10)
    one_line(invoke("--workspace", str(bad), "memory", "list"), 2, "cannot open the database", str(bad),
             "file is not a database")


def test_a_bug_keeps_its_traceback(workdir, monkeypatch, tmp_path):
    from agentstack_lab.memory.api import Memory

    def broken(self, *args, **kwargs):
        raise ZeroDivisionError("the planted bug")

    monkeypatch.setattr(Memory, "list", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    line = one_line(invoke("memory", "list"), 2, "internal error (ZeroDivisionError), a bug in agentstack-lab",
                    "traceback saved to", "--debug")
    assert "the planted bug" not in line          # not flattened to "Type: message"
    saved = Path(line.split("traceback saved to ")[1].split(";")[0])
    assert saved.parent == tmp_path and "Traceback" in saved.read_text() and "the planted bug" in saved.read_text()
    shown = invoke("--debug", "memory", "list")
    assert shown.exit_code == 2
    assert "Traceback (most recent call last)" in shown.stderr and "ZeroDivisionError: the planted bug" in shown.stderr
    assert shown.stderr.strip().splitlines()[-1].startswith("error: internal error (ZeroDivisionError)")
    verbose = invoke("-v", "memory", "list")
    assert verbose.exit_code == 2 and "Traceback" in verbose.stderr


@pytest.mark.slow
def test_console_script_exit_codes_in_a_real_process(workdir):
    def cli(*args, stdin=None):
        return subprocess.run([sys.executable, "-m", "agentstack_lab.cli", *args], cwd=workdir, input=stdin,
                              capture_output=True, timeout=60)

    assert cli("memory", "store", "k", "v").returncode == 0
    bad = cli("memory", "search", "x", "--threshold", "nan")
    assert bad.returncode == 2 and bad.stderr.decode().splitlines() == [
        "error: --threshold must be a finite number, got nan"]
    stdin = cli("memory", "store", "k2", stdin=b"\xff\xfe")
    assert stdin.returncode == 2 and b"standard input is not UTF-8" in stdin.stderr
    usage = cli("memory", "search")               # click's usage error: could not run
    assert usage.returncode == 2


# --- --json on every read command -----------------------------------------------------------------
def test_every_read_command_takes_json(workdir):
    ok("memory", "store", "plan", "ship the memory layer", "--tag", "work")
    assert json.loads(ok("memory", "get", "plan", "--json"))["key"] == "plan"
    assert json.loads(ok("memory", "search", "memory", "--json"))[0]["key"] == "plan"
    assert json.loads(ok("memory", "list", "--json"))[0]["tags"] == ["work"]
    sid = json.loads(ok("session", "start", "--name", "s", "--json"))["id"]
    assert json.loads(ok("session", "status", sid, "--json"))[0]["status"] == "active"
    assert [s["id"] for s in json.loads(ok("session", "active", "--json"))] == [sid]
    assert json.loads(ok("config", "show", "--json"))["memory"]["embedder"] == "hash"
    assert json.loads(ok("config", "validate", "--json"))["ok"] is True
    assert json.loads(ok("agent", "list", "--json")) == []
    watched = json.loads(ok("agent", "watch", "--once", "--json"))
    assert watched["agents"] == [] and isinstance(watched["seq"], int)
    run = json.loads(ok("agent", "run", "what is a monad?", "--json", "--no-subagents"))
    assert json.loads(ok("agent", "tree", run["runId"], "--json"))["id"] == run["tree"]["id"]
    watched = json.loads(ok("agent", "watch", "--once", "--json", "--run", run["runId"][:8]))
    root = next(a for a in watched["agents"] if a["id"] == run["tree"]["id"])
    assert root["status"] == "completed" and root["tokens"] > 0 and root["lastEvent"]["type"]
    flows = json.loads(ok("workflow", "list", "--json"))
    assert {f["name"] for f in flows} >= {"doc_sync", "code_review"} and all(Path(f["path"]).is_file() for f in flows)
    assert json.loads(ok("workflow", "schema"))["properties"]["verdict"]["enum"] == ["PASS", "FAIL", "ERROR"]


# --- checks exit 1 when the thing checked is bad, 2 when they cannot run --------------------------
def test_config_validate_names_unknown_provider_and_embedder(workdir):
    cfg = workdir / "agentstack.config.json"
    cfg.write_text(json.dumps({"providers": {"default": "antropic"}}))
    line = one_line(invoke("config", "validate"), 1, "providers.default: unknown provider 'antropic'; valid: ")
    assert "anthropic" in line and "scripted" in line and str(cfg) in line
    cfg.write_text(json.dumps({"memory": {"embedder": "bert"}}))
    line = one_line(invoke("config", "validate"), 1, "memory.embedder: unknown embedder 'bert'; valid: ")
    assert "hash" in line and "openai" in line
    failed = invoke("config", "validate", "--json")
    assert failed.exit_code == 1 and json.loads(failed.stdout)["ok"] is False
    cfg.write_text(json.dumps({"telemetry": {"enabled": True}}))   # a section nothing reads is not accepted
    one_line(invoke("config", "validate"), 1, "telemetry: unknown key")
    one_line(invoke("config", "validate", "nowhere.json"), 2, "nowhere.json: no such file")


def test_workflow_validate_exit_codes(workdir):
    from agentstack_lab.workflows.model import WorkflowConfig
    from agentstack_lab.workflows.runner import PhaseRunner

    report = PhaseRunner(WorkflowConfig(name="t", phases=("inventory",))).report()   # never run: ERROR
    assert report.verdict == "ERROR"
    (workdir / "r.json").write_text(json.dumps(report.to_dict()))
    assert json.loads(ok("workflow", "validate", "r.json", "--json")) == {"valid": True, "file": "r.json"}
    (workdir / "bad.json").write_text(json.dumps({**report.to_dict(), "verdict": "MAYBE"}))
    one_line(invoke("workflow", "validate", "bad.json"), 1, "bad.json: workflow report invalid at verdict")
    (workdir / "text.json").write_text("not json")
    one_line(invoke("workflow", "validate", "text.json"), 1, "text.json")
    one_line(invoke("workflow", "validate", "missing.json"), 2, "missing.json: cannot read")


def _notebook(path: Path, source: str = "x = 1") -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("args, parts", [
    (["-p", "import", "3"], ["bad parameter: parameter name 'import' is a Python keyword"]),
    (["-p", "class", "3"], ["'class' is a Python keyword"]),
    (["-r", "not-a-name", "3"], ["'not-a-name' is not a valid Python identifier"]),
    (["-y", "x: &a [*a]"], ["bad parameter: parameter 'x': value is nested too deeply"]),
    (["-p", "x", "9" * 5000], ["bad parameter: parameter 'x': integer with 5000 digits is too long"]),
    (["--report", "blocker/r.json"], ["--report blocker/r.json: blocker is not a folder"]),
    (["-o", "blocker/out.ipynb"], ["-o blocker/out.ipynb: blocker is not a folder"]),
    (["--report", "."], ["--report .: is a folder, expected a file"]),
    (["--timeout", "nan"], ["--timeout must be a finite number"]),
    (["--cell-timeout", "-1"], ["--cell-timeout must be > 0"]),
])
def test_workflow_run_could_not_run_is_exit_2_before_a_kernel_starts(workdir, args, parts):
    _notebook(workdir / "nb.ipynb")
    (workdir / "blocker").write_text("a file where a folder is needed")
    result = invoke("workflow", "run", "nb.ipynb", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(p in lines[0] for p in parts), lines
    assert not (workdir / "nb.executed.ipynb").exists()     # no kernel ran


@pytest.mark.slow
def test_unwritable_report_found_after_the_run_is_an_error_naming_the_path(workdir):
    import asyncio

    from agentstack_lab.workflows.execute import run_notebook

    nb = _notebook(workdir / "nb.ipynb")
    (workdir / "blocker").write_text("x")
    res = asyncio.run(run_notebook(nb, output=workdir / "out.ipynb", report_path=workdir / "blocker" / "r.json"))
    assert res.exit_code == 2 and res.status == "error"
    assert res.message.startswith(f"cannot write the report to {workdir / 'blocker' / 'r.json'}")
    assert res.report["verdict"] == "ERROR" and res.report["execution"]["exitCode"] == 2
    import nbformat

    saved = nbformat.read(workdir / "out.ipynb", 4)      # the executed notebook still says what happened
    assert saved.metadata.agentstack.workflow.report.execution.status == "error"


def test_a_phase_that_raises_reports_error_not_fail(workdir):
    import asyncio

    from agentstack_lab.workflows.api import Workflow
    from agentstack_lab.workflows.runner import PhaseError
    from agentstack_lab.workflows.schema import validate_report

    wf = Workflow("crashy", max_iterations=2, verbose=False)

    @wf.phase("adversarial")
    def adversarial(scope):
        if scope.iteration == 2:
            raise RuntimeError("checker crashed")
        scope.fail("first round fails")

    with pytest.raises(PhaseError):
        asyncio.run(wf.run(report_path=workdir / "r.json", display=False))
    report = validate_report(json.loads((workdir / "r.json").read_text()))
    assert report["verdict"] == "ERROR" and report["iterations"] == 2 and report["confidence"] == "low"
