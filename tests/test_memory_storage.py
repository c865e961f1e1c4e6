"""Storage layout choices made for store_many speed: page size, FTS5 hashsize, plain vector table, old layouts."""

import threading

import pytest

from agentstack_lab.config import Config
from agentstack_lab.store.connection import PAGE_SIZE
from agentstack_lab.workspace import Workspace

PLAIN = Config.from_dict({"memory": {"vector": {"cache": False}}})


def _texts(n):
    return [f"note {i} about {['kettles', 'rivers', 'ledgers', 'comets'][i % 4]} and item{i % 7}" for i in range(n)]


def _fill(ws):
    """Entries in two shared namespaces, two sessions and with/without an agent (some via store_many)."""
    a, b = ws.sessions.start("a"), ws.sessions.start("b")
    ws.memory.store_many([{"key": f"k{i}", "content": t, "namespace": f"ns{i % 2}",
                           "agent_id": None if i % 3 else "ag"} for i, t in enumerate(_texts(120))])
    ws.memory.scoped(a.id).store_many([(f"a{i}", t) for i, t in enumerate(_texts(80))])
    ws.memory.scoped(b.id).store("b0", _texts(1)[0])
    return a, b


def _same_hits(ws, ws_plain, a):
    query = "note about kettles item3"
    for scope, kwargs in [(None, {}), (None, {"namespace": "ns1"}), (None, {"agent_id": "ag"}),
                          (None, {"agent_id": "ag", "include_shared": False}), (a.id, {}),
                          (a.id, {"namespace": "ns0"})]:
        got = []
        for w in (ws, ws_plain):
            mem = w.memory.scoped(scope) if scope else w.memory
            got.append(sorted((r.key, round(r.score, 4)) for r in mem.search(query, "vector", limit=200, **kwargs)))
        assert got[0] == got[1], (scope, kwargs)
        keys = {k for k, _ in got[0]}
        assert keys, (scope, kwargs)
        if scope is None and "namespace" not in kwargs:
            assert not any(k.startswith(("a", "b")) for k in keys)   # no session entries without the session
        if scope == a.id and not kwargs:
            assert any(k.startswith("a") for k in keys) and not any(k.startswith("b") for k in keys)
    return True


def test_new_database_layout(tmp_path):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store("k", "kettles")
        assert ws.db.query("PRAGMA page_size")[0][0] == PAGE_SIZE
        fts = ws.memory.backend.fts_index   # the full-text index: its own file beside the database
        assert fts.query("SELECT v FROM memory_fts_config WHERE k = 'hashsize'")[0][0] == 8 * 1024 * 1024
        assert fts.path == ws.db.path.parent / "fts" / ws.db.path.name and fts.path.is_file()
        assert not ws.db.query("SELECT 1 FROM sqlite_master WHERE name LIKE 'memory_fts%'")
        sql = ws.db.query("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'")[0][0]
        assert "vec0" not in sql and "embedding BLOB" in sql
        assert len(ws.db.query("SELECT embedding FROM memory_vec")[0][0]) == 4 * ws.memory.index.dimensions


def test_sqlite_vec_knn_filters_match_the_matrix(tmp_path):
    """``memory.vector.cache = false``: sqlite-vec's ``vec_distance_cosine`` in SQL, the filters in the query."""
    with Workspace.open(tmp_path / "w", announce=False) as ws, \
            Workspace.open(tmp_path / "w", config=PLAIN, announce=False) as plain:
        a, _ = _fill(ws)
        assert _same_hits(ws, plain, a)
        ws.memory.store("k3", "moved to another agent", namespace="ns1", agent_id="other")   # content and agent change
        ws.memory.store("k4", _texts(5)[4], namespace="ns0", agent_id="ag")               # agent only: no vector write
        assert ws.memory.stats() == {"memory": 201, "fts": 201, "vector": 201}
        assert _same_hits(ws, plain, a)
        own = {r.key for r in plain.memory.search("note", "vector", agent_id="ag", include_shared=False, limit=200)}
        assert "k4" in own and "k3" not in own


@pytest.mark.parametrize("meta", [False, True], ids=["lean-vec0", "vec0-with-metadata"])
def test_vectors_in_an_older_vec0_table_move_to_the_plain_table_once(tmp_path, caplog, meta):
    """Databases made before the plain table kept vectors in a sqlite-vec vec0 table (with or without
    namespace/session/agent columns): the next open moves every row, and searches give the same hits."""
    folder = tmp_path / "w"
    with Workspace.open(folder, announce=False) as ws:
        a, _ = _fill(ws)
        before = ws.db.query("SELECT rid, embedding FROM memory_vec ORDER BY rid")
        d = ws.memory.index.dimensions
        # the background indexer has taken every write before the table goes: an older database had no
        # indexer reading its vectors while they were being replaced (it would skip the missing rows)
        ws.memory.index.wait_for(ws.db.query("SELECT seq FROM sqlite_sequence WHERE name = 'memory_vec_log'")[0][0])
        ws.db.execute("DROP TABLE memory_vec")
        extra = ", namespace text, session text, agent text" if meta else ""
        ws.db.execute(f"CREATE VIRTUAL TABLE memory_vec USING vec0(rid integer primary key, embedding float[{d}]"
                      f" distance_metric=cosine{extra}, chunk_size=256)")
        cols = "rid, embedding, namespace, session, agent" if meta else "rid, embedding"
        marks = ", ".join("?" * len(cols.split(",")))
        ws.db.conn.executemany(f"INSERT INTO memory_vec ({cols}) VALUES ({marks})",
                               [(r[0], r[1], "x", "", "") if meta else (r[0], r[1]) for r in before])
    with caplog.at_level("WARNING"), Workspace.open(folder, announce=False) as ws, \
            Workspace.open(folder, config=PLAIN, announce=False) as plain:
        assert ws.memory.stats() == {"memory": 201, "fts": 201, "vector": 201}   # memory opens: the move
        assert "moving 201 vectors" in caplog.text
        assert ws.db.query("SELECT rid, embedding FROM memory_vec ORDER BY rid") == before
        assert "vec0" not in ws.db.query("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'")[0][0]
        assert not ws.db.query("SELECT name FROM sqlite_master WHERE name LIKE 'memory_vec_%' AND name != 'memory_vec_log'")
        assert ws.memory.stats() == {"memory": 201, "fts": 201, "vector": 201}
        assert _same_hits(ws, plain, a)
    caplog.clear()
    with caplog.at_level("WARNING"), Workspace.open(folder, announce=False) as ws:
        assert ws.memory.stats()["vector"] == 201 and "moving" not in caplog.text


@pytest.mark.parametrize("n", [63, 64, 500])
def test_store_many_around_the_bulk_threshold(tmp_path, n):
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_texts(n))])
        ws.memory.store_many([(f"k{i}", t + " changed") for i, t in enumerate(_texts(n))])
        assert ws.memory.stats() == {"memory": n, "fts": n, "vector": n}
        assert ws.memory.search('"comets and item2"', "fts", limit=1)[0].content.endswith("changed")
        assert [r.key for r in ws.memory.search("kett*", "fts", limit=3)]
        assert ws.db.query("PRAGMA integrity_check")[0][0] == "ok"
        assert ws.db.query("SELECT count(*) FROM memory_vec")[0][0] == n


def test_a_batch_larger_than_one_vector_block_keeps_each_rows_vector(tmp_path, monkeypatch):
    """add_block inserts vectors in blocks of BLOCK_ROWS (vectors.py): every row gets its own entry's vector."""
    import numpy as np

    from agentstack_lab.memory import vectors
    monkeypatch.setattr(vectors, "BLOCK_ROWS", 7)
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        texts = _texts(100)
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(texts)])
        rows = ws.db.query("SELECT m.key, v.embedding FROM memory m JOIN memory_vec v ON v.rid = m.rid")
        assert len(rows) == 100
        want = np.asarray(ws.memory.embedder.embed(texts), dtype=np.float32)
        for key, blob in rows:
            assert np.array_equal(np.frombuffer(blob, dtype=np.float32), want[int(key[1:])]), key


def test_the_full_text_index_merges_16_segments_at_a_time(tmp_path):
    """FTS5's automerge is 16 in the index file (fts_file.py: 24 -> 15 us an entry over the last tenth of 1M)."""
    from agentstack_lab.memory.fts_file import AUTOMERGE
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store("k", "a note")
        fts = ws.memory.backend.fts_index
        fts.catch_up()
        assert fts.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'automerge'").fetchone()[0] == AUTOMERGE == 16


@pytest.mark.parametrize("mixed", [False, True])
def test_a_bulk_batch_keeps_each_rows_namespace_metadata_and_agent(tmp_path, mixed):
    """A bulk batch that shares namespace, metadata and agent sends them once (sqlite.py); a mixed one per row."""
    def item(i):
        if not mixed:
            return {"key": f"k{i}", "content": f"note {i} about kettles", "namespace": "bulk",
                    "metadata": {"src": "feed"}, "agent_id": "loader"}
        return {"key": f"k{i}", "content": f"note {i} about kettles", "namespace": ("a", "b")[i % 2],
                "metadata": {"n": i} if i % 3 else None, "agent_id": ("x", None, "y")[i % 3]}
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        assert ws.memory.store_many([item(i) for i in range(200)]) == 200
        for i in (0, 1, 2, 137, 199):
            want = item(i)
            got = ws.memory.get(want["key"], namespace=want["namespace"])
            assert (got.content, got.agent_id, got.metadata) == (want["content"], want["agent_id"],
                                                                 want["metadata"] or {})
        assert ws.memory.stats() == {"memory": 200, "fts": 200, "vector": 200}


@pytest.mark.parametrize("mixed", [False, True])
def test_a_bulk_batch_keeps_any_text_byte_for_byte(tmp_path, mixed):
    """The packed columns of a bulk insert (sqlite.py _packed: one UTF-8 blob a column, sliced by byte offsets)
    give back every text as stored, NULL agents as NULL, whatever the characters."""
    odd = ["héllo wörld", "emoji 😀 and 中文", "nul\x00inside", " ", 'tab\tnew\nline "quote" \\ back', "\u2028sep",
           "x" * 5000]
    items = [{"key": f"k{i}-{j}-ключ", "content": t, "namespace": ("a", "b")[i % 2] if mixed else "a",
              "agent_id": (None, "ag", "😀")[(i + j) % 3] if mixed else None,
              "metadata": {"i": i, "t": t} if mixed and j % 2 else None}
             for i in range(12) for j, t in enumerate(odd)]
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        assert ws.memory.store_many(items) == len(items) == 84
        for it in items:
            e = ws.memory.get(it["key"], namespace=it["namespace"])
            assert (e.content, e.agent_id, e.metadata) == (it["content"], it["agent_id"], it["metadata"] or {}), it
        types = ws.db.query("SELECT DISTINCT typeof(key), typeof(namespace), typeof(content), typeof(content_hash),"
                            " typeof(metadata) FROM memory")
        assert [tuple(r) for r in types] == [("text",) * 5]
        assert ws.db.query("SELECT count(*) FROM memory WHERE agent_id IS NULL")[0][0] == (28 if mixed else 84)
        assert {h.key for h in ws.memory.search("emoji", "fts", limit=20)} == {it["key"] for it in items if "emoji" in it["content"]}


def test_a_bulk_write_checkpoints_the_wal_on_a_background_thread(tmp_path, monkeypatch):
    """store_many's commit skips SQLite's automatic checkpoint (two fsyncs in the calling thread); one PASSIVE
    checkpoint runs on the database's background thread instead, and close() waits for it."""
    from agentstack_lab.store import connection

    ran = []
    original = connection.SQLiteDatabase._checkpoint

    def spy(self):
        ran.append(threading.current_thread().name)
        original(self)

    monkeypatch.setattr(connection.SQLiteDatabase, "_checkpoint", spy)
    with Workspace.open(tmp_path / "w", announce=False) as ws:
        ws.memory.store_many([(f"k{i}", t) for i, t in enumerate(_texts(500))])
        assert ws.db.query("PRAGMA wal_autocheckpoint")[0][0] == connection.AUTOCHECKPOINT   # restored
        ws.memory.store("one", "a single entry")          # below the bulk threshold: no background checkpoint
    assert ran and all(name.startswith("agentstack-wal") for name in ran) and len(ran) <= 2
    conn = connection.connect(tmp_path / "w" / ".agentstack" / "agentstack.db")
    busy, frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and frames == done
    assert conn.execute("SELECT count(*) FROM memory").fetchone()[0] == 501
