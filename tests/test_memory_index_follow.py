"""The shared vector index follows writes in a background thread of the writing process (memory/vectors.py):
a search right after a write never waits for the indexer, closing catches up, a fresh process finds the
files current, and a crashed append is cut off."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from agentstack_lab.memory import index as shared_index
from agentstack_lab.memory.vectors import VectorFilter
from agentstack_lab.workspace import Workspace


@pytest.fixture
def small_pq(monkeypatch):
    """The PQ from 3,000 rows in shards of 1,500 (the real thresholds are 20,000 and 262,144)."""
    monkeypatch.setattr(shared_index, "PQ_MIN", 3000)
    monkeypatch.setattr(shared_index, "SHARD_ROWS", 1500)
    monkeypatch.setattr(shared_index, "PQ_TAIL", 2000)
    monkeypatch.setattr(shared_index, "PQ_TRAIN", 3000)
    monkeypatch.setattr(shared_index, "EXACT_ROWS", 300)


def _corpus(n, seed=0):
    rng = np.random.default_rng(seed)
    vocab = ["".join(rng.choice(list("abcdefghijklmnop"), size=rng.integers(3, 8))) for _ in range(3000)]
    return [" ".join(vocab[w] for w in row) for row in rng.integers(0, len(vocab), size=(n, 20))]


def _top(ws) -> int:
    return ws.db.query("SELECT seq FROM sqlite_sequence WHERE name = 'memory_vec_log'")[0][0]


def _caught_up(ws):
    """Wait (on the indexer's condition) until the shared files hold every committed write; their state."""
    ws.memory.index.wait_for(_top(ws))
    assert ws.memory.index.error is None
    return ws.memory.index.shared_index().state()


def test_the_files_follow_writes_without_a_search(tmp_path, small_pq):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_corpus(4000))])
        state = _caught_up(ws)
        assert state["n"] == 4000 and state["seq"] == _top(ws) and state["pq"] > 0   # built, PQ included
        ws.memory.delete("k3")
        ws.memory.store("k4", "an otter floats on its back")          # rewritten: its old slot dies
        state = _caught_up(ws)
        assert state["n"] == 4001 and state["dead"] == 2
        assert ws.memory.index.shared_index().refresh() and ws.memory.index.shared_index().rows == 3999


def test_a_search_during_an_append_scans_the_unindexed_rows_exactly(tmp_path, small_pq):
    """While another writer holds the index's lock, a search answers from the files plus the rows logged since
    (the same top-k as a search of the caught-up index), and the files stay where they were."""
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        m = ws.memory
        m.store_many([(f"k{i}", t) for i, t in enumerate(_corpus(4000))])
        before = _caught_up(ws)
        sh = m.index.shared_index()
        queries = m.embedder.embed(["otter floats back", *[" ".join(t.split()[3:6]) for t in _corpus(20, 5)]])
        with sh._lock():                                          # the indexer is mid-append (as another process)
            m.store_many([(f"n{i}", t) for i, t in enumerate(_corpus(600, 5))])
            m.store("k7", "an otter floats on its back")          # an entry rewritten since the files' position
            m.delete("k8")
            during = [m.index.search(q, VectorFilter(), 10) for q in queries]
            assert sh.state()["seq"] == before["seq"]            # nothing was appended meanwhile
            assert m.search("otter floats back", "vector", limit=1)[0].key == "k7"
        after = _caught_up(ws)
        assert after["n"] == 4000 + 600 + 1 and after["seq"] == _top(ws)
        rid8 = ws.db.query("SELECT max(rid) FROM memory")[0][0] + 1   # (k8 is gone: no rid of it may come back)
        for q, hits in zip(queries, during, strict=True):
            now = m.index.search(q, VectorFilter(), 10)
            assert [r for r, _ in hits] == [r for r, _ in now]
            assert np.allclose([s for _, s in hits], [s for _, s in now], atol=1e-5)
        keys = {r[0] for r in ws.db.query("SELECT rid FROM memory")}
        assert all(r in keys for hits in during for r, _ in hits) and rid8 not in keys


@pytest.mark.slow   # a fresh process
def test_close_catches_up_and_a_fresh_process_finds_the_files_current(tmp_path, small_pq):
    folder = tmp_path / "w"
    with Workspace.open(folder, announce=False) as ws:
        index = ws.memory.index
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_corpus(3500))])
        ws.memory.store("late", "a heron waits in the shallow water")
        top = _top(ws)
    assert not index._worker                                     # closed: the thread was joined
    state = index.shared_index().state()
    assert state["seq"] == top and state["n"] == 3501            # every write kicked before close is in the files
    code = """
        import sys
        from agentstack_lab.workspace import Workspace
        with Workspace.open(sys.argv[1], announce=False) as ws:
            sh = ws.memory.index.shared_index()
            before = sh.state()["seq"]
            print(ws.memory.search("heron waits shallow water", "vector", limit=1)[0].key, before, sh.state()["seq"])
    """
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(folder)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr
    key, before, after = p.stdout.split()
    assert key == "late" and int(before) == int(after) == top   # the fresh process had nothing to index


def test_a_crashed_append_is_cut_off_by_the_background_indexer(tmp_path, small_pq):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_corpus(500))])
        state = _caught_up(ws)
        sh = ws.memory.index.shared_index()
        gen = sh.dir / f"gen-{state['gen']}"
        for name in ("vec.f4", "rid.i8", "ns.i4"):                 # a writer that died mid-append
            with open(gen / name, "ab") as fh:
                fh.write(b"\xff" * 4096)
        ws.memory.store("late", "a late arrival about pelicans")
        state = _caught_up(ws)
        assert state["n"] == 501
        assert (gen / "vec.f4").stat().st_size == 501 * 384 * 4 and (gen / "rid.i8").stat().st_size == 501 * 8
        assert ws.memory.search("late arrival pelicans", "vector", limit=1)[0].key == "late"
        assert len(ws.memory.index.search(np.ones(384, np.float32), VectorFilter(), 4096)) == 501


def test_a_shard_written_by_a_writer_that_died_before_its_state_is_encoded_again(tmp_path, small_pq):
    import faiss

    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_corpus(4000))])
        state = _caught_up(ws)
        gen = ws.memory.index.shared_index().dir / f"gen-{state['gen']}"
        last = state["pq"] // state["shard"]                      # the shard the next append grows
        shard = faiss.read_index(str(gen / f"pq-{last}.faiss"))
        shard.add(np.random.default_rng(1).standard_normal((300, 384)).astype(np.float32))   # codes of rows never committed
        faiss.write_index(shard, str(gen / f"pq-{last}.faiss"))
    with Workspace.open(tmp_path / "w", announce=False) as ws:     # the next writer (its own process state)
        ws.memory.store_many([(f"n{i}", t) for i, t in enumerate(_corpus(2500, 3))])
        state = _caught_up(ws)
        assert state["pq"] == state["n"] == 6500
        vec = np.fromfile(gen / "vec.f4", dtype=np.float32).reshape(-1, 384)
        for i in range(-(-state["pq"] // state["shard"])):         # every shard holds the codes of its own rows
            want = faiss.read_index(str(gen / "pq-train.faiss"))
            want.add(vec[i * state["shard"]:min(state["pq"], (i + 1) * state["shard"])])
            got = faiss.read_index(str(gen / f"pq-{i}.faiss"))
            assert bytes(faiss.serialize_index(got)) == bytes(faiss.serialize_index(want)), i


def test_a_failed_append_leaves_the_state_as_the_files_say_and_the_next_one_catches_up(tmp_path, small_pq, monkeypatch):
    """A write that fails mid-append (a full disk here) must not leave the cached state claiming rows the files do
    not hold: the state stays as state.json says, the search answers, and the next append writes everything."""
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_corpus(4000))])
        before = dict(_caught_up(ws))
        real = shared_index.SharedIndex._write_sq
        calls, full = [], [True]

        def full_disk(self, state):
            calls.append(1)
            if full[0]:
                raise OSError(28, "No space left on device")
            return real(self, state)

        monkeypatch.setattr(shared_index.SharedIndex, "_write_sq", full_disk)
        ws.memory.store("otter", "an otter floats on its back holding a stone")
        ws.memory.index.wait_for(_top(ws))
        assert calls and isinstance(ws.memory.index.error, OSError)
        sh = ws.memory.index.shared_index()
        assert sh.state()["n"] == before["n"] == 4000 and sh.damage(sh.state()) is None
        assert ws.memory.search("otter floats holding a stone", "vector", limit=1)[0].key == "otter"   # in SQL
        assert ws.memory.index.shared
        full[0] = False
        ws.memory.store("heron", "a heron waits in the shallow water")   # the disk has room again
        state = _caught_up(ws)
        assert state["n"] == state["sq"] == 4002 and ws.memory.index.shared_index().damage(state) is None


def test_a_failed_append_does_not_change_the_cached_state(tmp_path, small_pq, monkeypatch):
    """The writer's own cached state stays what state.json says when an append fails: the retry writes over the
    failed rows instead of after them (which would leave a second slot for each)."""
    rng = np.random.default_rng(0)
    mat = rng.standard_normal((3502, 384)).astype(np.float32)
    rids, meta = np.arange(len(mat), dtype=np.int64), [("default", "", "")]
    sh = shared_index.SharedIndex(tmp_path / "idx", 384, db_id="x")
    sh.sync(1, lambda after: ([], False), None, lambda: (rids[:3500], mat[:3500], meta * 3500))
    new = ([3500, 3501], (rids[3500:], mat[3500:], meta * 2))
    monkeypatch.setattr(shared_index.SharedIndex, "_write_sq", lambda self, state: (_ for _ in ()).throw(
        OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        sh.append(1, 2, new[0], new[1])
    assert (sh.state()["n"], sh.state()["seq"]) == (3500, 1)
    monkeypatch.undo()
    small = ("PQ_MIN", "SHARD_ROWS", "PQ_TAIL", "PQ_TRAIN", "EXACT_ROWS")   # undo reset these too: set them again
    for name, value in zip(small, (3000, 1500, 2000, 3000, 300), strict=True):
        monkeypatch.setattr(shared_index, name, value)
    assert sh.append(1, 2, new[0], new[1])
    assert (sh.state()["n"], sh.state()["sq"]) == (3502, 3502) and sh.damage(sh.state()) is None
    assert sh.refresh() and sh.rows == 3502 and sh.search(mat[3501], 1)[0][0] == 3501
