"""Bad input on the command line is one line and exit 2, changing nothing (issue 26, item 11).

Each case below was an "internal error ... a bug" or an exit 0 before. Real processes, real workspace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]

CASES = {
    "empty memory content": (["memory", "store", "k", ""], "content of 'k' is empty"),
    "empty search": (["memory", "search", ""], "the search query is empty"),
    "empty answer": (["decisions", "answer", "1234", ""], "the answer is empty"),
    "empty task": (["task", "create", ""], "the task input is empty"),
    "unknown task type": (["task", "create", "x", "--type", "nope"], "unknown agent type 'nope'"),
    "unknown risk": (["task", "create", "x", "--risk", "nope"], "unknown risk level 'nope'"),
    "empty identity": (["agent", "run", "hi", "--identity", "", "--no-subagents"], "identity"),
    "banana timeout": (["agent", "run", "hi", "--decision-timeout", "banana"], "decision_timeout"),
}


def run(folder: Path, args: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(folder), *args], capture_output=True, timeout=120, **kw)


def one_line(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode("utf-8", "replace") if isinstance(done.stderr, bytes) else done.stderr
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("agentstack-lab: using database")]
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, err)
    assert "internal error" not in lines[0] and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_changes_nothing(workdir, case):
    args, said = CASES[case]
    assert run(workdir, ["memory", "list"]).returncode == 0
    before = run(workdir, ["task", "list", "--json"]).stdout
    line = one_line(run(workdir, args, text=True))
    assert said in line, line
    assert run(workdir, ["task", "list", "--json"]).stdout == before
    assert json.loads(run(workdir, ["memory", "list", "--json"]).stdout) == []


def test_a_non_utf8_argument_is_one_line(workdir):
    line = one_line(run(workdir, [b"memory", b"store", b"caf\xe9", b"hello"]))
    assert "argument 5 ('caf?') is not UTF-8 text (byte 0xe9 at character 3)" in line, line


@pytest.mark.parametrize("content,said", [
    (b'{"agents": {"max_depth": 2}, "note": "caf\xe9"}', "not UTF-8 text (byte 0xe9 at offset 41)"),
    (b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nested too deeply to be a configuration"),
], ids=["not-utf8", "deep"])
def test_a_bad_config_file_is_one_line(workdir, content, said):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "agentstack.config.json").write_bytes(content)
    line = one_line(run(workdir, ["memory", "list"], text=True, cwd=workdir))
    assert "agentstack.config.json" in line and said in line, line


def test_review_output_into_a_missing_folder_is_made(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "f.py").write_text("print(1)\n")
    script = workdir / "script.json"
    script.write_text(json.dumps({"verdicts": [{"passed": True, "issues": []}]}))
    done = run(workdir, ["review", "run", str(workdir / "f.py"), "-o", str(workdir / "missing-dir" / "x.py"),
                         "--provider", "scripted", "--script", str(script)], text=True, cwd=workdir)
    assert "internal error" not in done.stderr, done.stderr
    assert (workdir / "missing-dir" / "x.py").read_text() == "print(1)\n"


def test_review_output_that_cannot_be_written_is_refused_before_the_review(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "f.py").write_text("print(1)\n")
    (workdir / "taken").write_text("a file, not a folder")
    line = one_line(run(workdir, ["review", "run", str(workdir / "f.py"), "-o", str(workdir / "taken" / "x.py")],
                        text=True, cwd=workdir))
    assert "--output" in line and "is not a folder" in line, line
    assert os.listdir(workdir / ".agentstack") if (workdir / ".agentstack").exists() else True
