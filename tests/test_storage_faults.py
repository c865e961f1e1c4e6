"""The workspace database under faults, through the CLI (issue 26, item 3).

A foreign SQLite file at the workspace path is refused before anything is written to it; a read-only
workspace can still be read, and a write says the file system is read-only; a full disk, a damaged
database and a file that is no database are one clear line each (exit 2), never "internal error".
The read-only and full-disk trials use a real tmpfs (as root).
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_event_log_durability import fill, small_disk

pytestmark = pytest.mark.slow  # every test here starts a process

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


def cli(ws: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(ws), *args], capture_output=True, text=True, timeout=120, input=stdin)


def one_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stderr)
    assert "internal error" not in lines[0] and "a bug" not in lines[0], lines[0]
    return lines[0]


def test_a_foreign_sqlite_file_is_refused_before_anything_is_written(workdir):
    db = workdir / ".agentstack" / "agentstack.db"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    line = one_line(cli(workdir, "memory", "list"))
    assert "another program's SQLite database (tables customers)" in line and "left untouched" in line, line
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["agentstack.db"]   # no -wal, -shm, no tables added
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["customers"]
    conn.close()


def test_a_file_that_is_no_database_and_a_damaged_one_are_one_line_each(workdir):
    assert cli(workdir, "memory", "store", "k", "the churn rate rose in March").returncode == 0
    db = workdir / ".agentstack" / "agentstack.db"
    data = bytearray(db.read_bytes())
    for offset in range(16_384 * 2, len(data), 997):     # scribble over every page past the first two
        data[offset:offset + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))
    for extra in db.parent.glob("agentstack.db-*"):
        extra.unlink()
    line = one_line(cli(workdir, "memory", "search", "churn"))
    assert f"the database {db} is damaged" in line and "restore it from a backup" in line, line

    db.write_bytes(b"these are my notes, not a database\n" * 200)
    line = one_line(cli(workdir, "memory", "list"))
    assert "file is not a database" in line and str(db) in line, line


def test_a_read_only_workspace_can_be_read_and_a_write_says_why(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        ws = disk / "ws"
        assert cli(ws, "memory", "store", "k", "the churn rate rose in March").returncode == 0
        assert cli(ws, "agent", "run", "summarise 1, 2", "--no-subagents").returncode == 0
        remount = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remount.stderr.strip()}")
        try:
            found = cli(ws, "memory", "search", "churn")
            assert found.returncode == 0 and "churn rate" in found.stdout, found.stderr
            listed = cli(ws, "agent", "list", "--json")
            assert listed.returncode == 0 and "summarise" in listed.stdout, listed.stderr
            line = one_line(cli(ws, "memory", "store", "k2", "more"))
            assert "read-only" in line and "reading works" in line, line
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=False)


def test_a_full_disk_is_one_line(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        ws = disk / "ws"
        assert cli(ws, "memory", "store", "k", "the churn rate rose in March").returncode == 0
        filler = fill(disk)
        try:
            line = one_line(cli(ws, "memory", "store", "k2", stdin="word " * 200_000))
        finally:
            filler.unlink()
        assert "the disk is full" in line, line
        assert cli(ws, "memory", "store", "k2", "now it fits").returncode == 0
