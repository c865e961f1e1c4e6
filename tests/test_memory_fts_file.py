"""The full-text index in its own file (memory/fts_file.py): it follows the change log, survives losing it,
refuses to serve another database's entries, a bulk load never runs more than a batch ahead of it, and
writing it holds no read of the workspace file."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from agentstack_lab.memory import vectors
from agentstack_lab.memory.fts_file import FtsFile
from agentstack_lab.store.connection import sqlite
from agentstack_lab.workspace import Workspace


def _keys(ws, query: str) -> set[str]:
    return {h.key for h in ws.memory.search(query, "fts", limit=100)}


def test_search_catches_up_with_every_committed_change_before_it_answers(tmp_path):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        m, fts = ws.memory, ws.memory.backend.fts_index
        fts.kick = lambda: None          # no background indexing: only the search's own catch-up
        m.store_many([(f"n{i}", f"walrus note {i}") for i in range(100)])
        m.store("n5", "an otter now")
        m.delete("n7")
        behind = fts.query("SELECT seq FROM fts_state")[0][0]
        assert behind == 0                                    # nothing indexed yet
        assert _keys(ws, "walrus") == {f"n{i}" for i in range(100)} - {"n5", "n7"}
        assert _keys(ws, "otter") == {"n5"}
        assert m.stats() == {"memory": 99, "fts": 99, "vector": 99}


def test_a_lost_index_file_is_rebuilt_from_memory(tmp_path):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"n{i}", f"heron note {i}") for i in range(300)])
        path = ws.memory.backend.fts_index.path
        assert _keys(ws, "heron") and path.is_file()
    shutil.rmtree(path.parent)
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        assert len(_keys(ws, "heron")) == 100   # the first 100 of 300 (limit)
        assert ws.memory.stats()["fts"] == 300


def test_an_index_of_another_database_is_rebuilt_not_searched(tmp_path, caplog):
    with Workspace.open(tmp_path / "a", announce=False) as a:
        a.memory.store_many([(f"a{i}", f"pelican from a {i}") for i in range(80)])
        assert _keys(a, "pelican")
        foreign = a.memory.backend.fts_index.path
    with Workspace.open(tmp_path / "b", announce=False) as b:
        b.memory.store_many([(f"b{i}", f"puffin from b {i}") for i in range(80)])
        assert _keys(b, "puffin")
        mine = b.memory.backend.fts_index.path
    for suffix in ("", "-wal", "-shm"):
        src = foreign.with_name(foreign.name + suffix)
        if src.exists():
            shutil.copy(src, mine.with_name(mine.name + suffix))
    with Workspace.open(tmp_path / "b", announce=False) as b, caplog.at_level(logging.WARNING):
        assert _keys(b, "pelican") == set() and len(_keys(b, "puffin")) == 80
    assert "another database's" in caplog.text


def test_an_index_left_behind_by_a_pruned_log_is_rebuilt(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(vectors, "LOG_KEEP", 50)
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        m, fts = ws.memory, ws.memory.backend.fts_index
        m.store("first", "an ibis")
        assert _keys(ws, "ibis") == {"first"}
        fts.kick = lambda: None
        m.store_many([(f"n{i}", f"stork note {i}") for i in range(300)])   # prunes the log to its last 50
        m.store("first", "a crane")
        with caplog.at_level(logging.WARNING):
            assert _keys(ws, "crane") == {"first"} and _keys(ws, "ibis") == set()
        assert "behind the change log's start" in caplog.text
        assert m.stats()["fts"] == 301


def test_a_bulk_load_runs_at_most_one_batch_ahead_of_the_index(tmp_path):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        m, fts = ws.memory, ws.memory.backend.fts_index
        held = []
        for b in range(4):
            m.store_many([(f"b{b}-{i}", f"gannet {b} {i}") for i in range(500)])
            held.append(fts.query("SELECT seq FROM fts_state")[0][0])
        assert all(h >= 500 * i for i, h in enumerate(held))   # batch i returns once batch i-1 is indexed


@pytest.mark.slow
def test_another_process_writes_are_searchable_at_once(tmp_path):
    folder = tmp_path / "shared"
    with Workspace.open(folder, announce=False) as ws:
        ws.memory.store("here", "a kestrel here")
        assert _keys(ws, "kestrel") == {"here"}
        code = textwrap.dedent(f"""
            from agentstack_lab.workspace import Workspace
            with Workspace.open({str(folder)!r}, announce=False) as ws:
                ws.memory.store_many([(f"there-{{i}}", f"a kestrel there {{i}}") for i in range(200)])
        """)
        subprocess.run([sys.executable, "-c", code], check=True, timeout=100)
        assert len(ws.memory.search("kestrel", "fts", limit=500)) == 201


def _hook_index_writes(fts, before=None, inside=None):
    """Run ``before()`` ahead of each write transaction of the index file and ``inside()`` just before its commit."""
    original = fts.transaction

    @contextlib.contextmanager
    def transaction():
        if before is not None:
            before()
        with original() as conn:
            yield conn
            if inside is not None:
                inside()
    fts.transaction = transaction


def test_the_index_is_written_with_no_read_of_the_workspace_file_open(tmp_path):
    """A read of the workspace file open while the index is written keeps SQLite from restarting its WAL
    (fts_file.py: it grew to 2 GB over a 1M bulk load); a TRUNCATE checkpoint needs no reader at all."""
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        m, fts = ws.memory, ws.memory.backend.fts_index
        fts.kick = lambda: None
        m.store_many([(f"n{i}", f"grebe note {i}") for i in range(500)])
        checkpoints = []

        def truncate():
            other = sqlite.connect(ws.db.path, timeout=5)   # the package's SQLite, not the stdlib's
            try:
                for _ in range(500):   # (1, -1, -1): the background checkpoint of store_many runs; not a reader
                    got = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    if tuple(got) != (1, -1, -1):
                        break
                    time.sleep(0.01)
                checkpoints.append(tuple(got))
            finally:
                other.close()
        _hook_index_writes(fts, inside=truncate)
        assert len(_keys(ws, "grebe")) == 100
        assert checkpoints and checkpoints[0][0] == 0, checkpoints        # 0: not blocked by a reader
        assert (ws.db.path.parent / (ws.db.path.name + "-wal")).stat().st_size == 0


def test_an_index_moved_by_another_process_between_read_and_write_is_read_again(tmp_path):
    """The changes are read in one transaction and written in another; if another process advanced the
    index in between, what was read is dropped and the catch-up starts over (no entry indexed twice)."""
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        m, fts = ws.memory, ws.memory.backend.fts_index
        fts.kick = lambda: None
        m.store_many([(f"n{i}", f"plover note {i}") for i in range(300)])
        other = FtsFile(ws.db.path)   # another process's view of the same index file
        calls = []

        def race():
            calls.append(1)
            if len(calls) == 1:
                m.store_many([(f"late{i}", f"plover late {i}") for i in range(100)])
                m.delete("n3")
                other.catch_up()
        _hook_index_writes(fts, before=race)
        rounds, once = [], fts._catch_up_once
        fts._catch_up_once = lambda: rounds.append(once()) or rounds[-1]
        try:
            assert len(ws.memory.search("plover", "fts", limit=1000)) == 399
        finally:
            other.close()
        assert len(calls) == 1 and rounds[0] is None   # dropped, then the index was found at the log's end
        assert m.stats() == {"memory": 399, "fts": 399, "vector": 399}


def test_a_write_closed_at_once_is_in_the_index_file(tmp_path):
    """A process that stores and exits before the background thread ran (under load: `memory store`) still
    leaves its entry in the index file, so a read-only workspace can search it afterwards."""
    import threading

    with Workspace.open(tmp_path / "w", announce=False) as ws:
        fts = ws.memory.backend.fts_index
        closing = threading.Event()

        class LateWake(threading.Event):   # the thread wakes only once close() has begun: the race, every time
            def wait(self, timeout=None):
                closing.wait(30)
                return super().wait(timeout)

        fts._wake = LateWake()
        real_close = fts.close

        def close():
            closing.set()
            real_close()

        fts.close = close
        ws.memory.store("k", "the churn rate rose in March")
    index = sqlite.connect(str(tmp_path / "w" / ".agentstack" / "fts" / "agentstack.db"))
    try:
        assert index.execute("SELECT count(*) FROM memory_fts").fetchone()[0] == 1
    finally:
        index.close()
