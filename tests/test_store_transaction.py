"""SQLiteDatabase.transaction(): a failed COMMIT rolls back and leaves the connection usable."""

import pytest

from agentstack_lab.store.connection import SQLiteDatabase, sqlite


def test_failed_commit_rolls_back_and_closes_the_transaction(tmp_path):
    db = SQLiteDatabase(tmp_path / "t.db", migrate=False)
    db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    db.execute("CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER"
               " REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite.IntegrityError):   # the deferred foreign key fails at COMMIT
        with db.transaction() as conn:
            conn.execute("INSERT INTO child (id, parent) VALUES (1, 42)")
    assert not db.conn.in_transaction
    assert db.query("SELECT count(*) FROM child")[0][0] == 0
    with db.transaction() as conn:                # the next transaction starts normally
        conn.execute("INSERT INTO parent (id) VALUES (42)")
        conn.execute("INSERT INTO child (id, parent) VALUES (1, 42)")
    assert db.query("SELECT count(*) FROM child")[0][0] == 1
    db.close()


_CLOSE_WHILE_READING = r"""
import sys, threading, time
from agentstack_lab.store.connection import SQLiteDatabase

db = SQLiteDatabase(sys.argv[1], migrate=False)
rows, slow = [], ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)"
                  " SELECT count(*), sum(i % 7) FROM n")
for trial in range(60):
    started = threading.Event()

    def read():
        conn = db.conn                 # this thread's connection, opened on first use
        started.set()
        rows.append(conn.execute(slow).fetchone()[0])

    t = threading.Thread(target=read)
    t.start()
    started.wait()
    time.sleep(0.002)                  # the query is running in the other thread
    db.close()                         # from this thread
    t.join()
assert rows == [200000] * 60, rows
db.execute("SELECT 1")                 # closing leaves the database usable: a new connection
with db.transaction() as conn:         # and no connection of a finished thread holds a lock
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
db.close()
print("ok")
"""


@pytest.mark.slow
def test_closing_while_another_thread_reads_waits_for_its_query_instead_of_crashing(tmp_path):
    """CPython's sqlite3 frees a connection's statements on close() even mid-step in another thread.

    Closing every thread's connection from the closing thread crashed this script with SIGSEGV
    (exit -11) within its 60 tries; close() now leaves another thread's connection to be closed when
    that thread is done with it, so each query finishes with its full answer.
    """
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _CLOSE_WHILE_READING, str(tmp_path / "t.db")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip() == "ok"


def test_close_closes_an_idle_threads_connection_at_once(tmp_path):
    """Connections of a finished thread and of an idle live one are closed by close(): no handle stays open."""
    import os
    import threading

    path = tmp_path / "t.db"

    def handles() -> int:
        return sum(os.readlink(f"/proc/self/fd/{fd}") == str(path) for fd in os.listdir("/proc/self/fd")
                   if os.path.exists(f"/proc/self/fd/{fd}"))

    db = SQLiteDatabase(path, migrate=False)
    db.execute("CREATE TABLE t (x)")
    started, stop = threading.Event(), threading.Event()

    def use(wait: bool) -> None:
        try:
            db.execute("INSERT INTO t VALUES (1)")
        finally:
            started.set()
        if wait:
            stop.wait(30)

    finished = threading.Thread(target=use, args=(False,))
    finished.start()
    finished.join()
    idle = threading.Thread(target=use, args=(True,))
    started.clear()
    idle.start()
    started.wait(30)
    assert handles() == 3            # this thread's, the finished thread's, the idle thread's
    db.close()
    assert handles() == 0
    stop.set()
    idle.join()
