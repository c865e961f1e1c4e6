"""Shared vector index: one memory-mapped file set per database, read by every process that searches.

Why: the exact in-memory matrix (``memory.vector.index = "exact"``, see :mod:`.vectors`) costs every
searching process a private float32 copy of ``memory_vec`` (1M x 384: 1.5 GB, 3.0 GB resident while it
loads), 11.1 s before its first search and a 122 ms scan per query at 1M entries. Here the vectors are
written once, by whichever process first sees them in ``memory_vec_log``, into files next to the database
(``vectors/<db name>/gen-N/``) that every process maps read-only, so the page cache holds one copy:

* ``vec.f4`` (float32 rows, for exact rescoring), ``rid.i8`` and the filter codes ``ns.i4``,
  ``sess.i4``, ``agent.i4`` (slot order, append-only), ``dead.u1`` (1 = the slot's entry was deleted or
  rewritten; set in place, one byte);
* ``pq-train.faiss`` (the trained quantiser) and ``pq-<i>.faiss``: faiss ``IndexPQFastScan`` shards (product
  quantisation, 192 sub-quantisers of 4 bits: 96 bytes a row, 96 MB at 1M) over slots ``[i * shard, (i + 1) *
  shard)``, ``shard`` = :data:`SHARD_ROWS`; each process loads them (~0.1 s at 1M) and encodes the few slots
  appended since they were written;
* ``sq-train.faiss`` and ``sq-<i>.faiss``: the same shards' 8-bit scalar codes (faiss ``IndexScalarQuantizer``,
  384 bytes a row at 384 dims, 384 MB at 1M), each file made for a whole shard at once (a sparse file: the
  codes of later slots are a hole until written) so the writer writes a row's codes in place, in step with
  ``vec.f4``, and never rewrites a file; every process maps them read-only (``IO_FLAG_MMAP_IFC``: one copy in
  the page cache);
* ``state.json`` (replaced by atomic rename): the file ``format`` (:data:`FORMAT`; an index of another
  format is rebuilt from the ``memory_vec`` table on the next sync, with a warning in the log), generation, committed
  row count ``n``, the log position the files reflect, the highest rid in the files (``rid_top``: a
  changed rid above it is a new row and kills no slot) and the code tables. Readers never look past ``n``; a writer truncates anything past ``n``
  (a crashed append) before it appends. Writers serialise on ``lock`` (``flock``); readers never lock.

Who writes: the process that writes the rows, in a background thread (``VectorIndex.kick`` after every
commit, as the keyword index does, :mod:`.fts_file`), so no searcher pays for a bulk load: ``store_many``
runs at most one batch ahead of it, the thread encodes the PQ codes of every 4,096 rows appended
(:data:`PQ_TAIL`; a reader encodes at most those itself) and closing the memory catches up once more. A
search that finds the files behind the log and the lock taken (the thread appending) does not wait: it
searches the files and scans the rows logged since their position exactly (``VectorIndex._shared_refresh``).
Before this, the first search after a bulk load built the files: 24.8 s at 1M entries in the loading process.

Search, in three stages: the fast-scan ranks every slot by asymmetric PQ distance (SIMD table lookups, the
shards scanned by one C++ thread each: ~4.5 ms at 1M on 2 cores); each shard rescores its share of the best
:func:`coarse` candidates from their 8-bit codes (``faiss.IndexRefine``, in the same thread); the best
:func:`keep` of those that pass the filters are rescored exactly from ``vec.f4`` and the top ``k`` returned
with their exact cosine. The middle stage is what makes 16,000 candidates affordable at 1M: rescoring them
from the float32 rows cost ~0.8 us each (a page fault and 1.5 KB read per row: 9.7 ms for 12,000), from the
8-bit codes ~0.2 us. Measured at 1M rows (hash embedder, 200 in-corpus and 200 out-of-corpus queries,
``bench_coarse.py``, one thread, quiet machine): recall@10 0.999 / 0.995 at p50 7.0 / 7.3 ms, against
0.996 / 0.970 at 8.2 / 8.1 ms for the two stages before (3,000 candidates rescored from the float32 rows).
Unlike the float32 rows, the 8-bit codes a search touched stay mapped in the process: its resident set grows
with the searches to at most the files' size (384 MB at 1M), in page-cache pages shared with every other
process mapping them (two processes after 50 searches each: 472 MB RSS, 277 MB PSS added at 1M). Dropping
that mapping after each search (``madvise`` by address) kept it at ~106 MB but cost 0.5 ms to 20 ms a search
at 1M, depending on how long ago the pages were last read (measured 1, 7.6 and 20 ms on this virtual machine
within an hour), against ~6 ms for the whole search with them mapped. Measured at 1M rows (hash embedder, 100 3-word queries, one thread,
same run): 96 sub-quantisers (48-byte codes, format 1) gave recall@10 0.992 / 0.998 / 1.000 with 6,000 /
12,000 / 24,000 candidates (another query set: 0.983 at 6,000), 192 sub-quantisers 0.998 / 0.999 with
6,000 / 12,000; the scan costs ~1.5x more with 192, the rescoring ~2x less than with twice the candidates,
so 192 sub-quantisers won (scan + rescoring 47 vs 54 ms for 96 at 12,000, under load). For the middle stage
(1M rows, 12,000 candidates, 100 kept, out-of-corpus queries): 8-bit scalar codes 0.994 recall@10, 6-bit
0.994, 4-bit 0.963 at 50 kept; an 8-bit PQ of 96 sub-quantisers (96 bytes) 0.925 and of 192 0.987 (its
training took 203 s); one refine over all shards instead of one per shard cost ~2.5 ms more (not threaded). Measured alternatives that lost: IVF (1,024 lists over
the same PQ) at 3-6 ms but recall 0.76-0.84 with 16-128 probes (the hash embedder's vectors do not cluster);
Python threads over the shards (the faiss binding keeps the GIL: no faster than one after the other);
rescoring in two threads (11 vs 8 ms: the page faults contend); sign-bit codes (``np.packbits`` + ``np.bitwise_count``) reached only recall 0.57 with
16,000 candidates (the hash embedder leaves half the dimensions of a note at 0, whose sign says nothing),
0.91 when masked to the query's non-zero dimensions; faiss HNSW at ef 64 reached 0.84 (issue 15) on the
hash embedder's near-ties. Filters (namespace, session, agent) and deleted slots are a mask applied to the
candidates; a filter that keeps few rows is searched exactly over those rows, and when too few candidates
pass the search widens and finally scans the filtered rows exactly, so a search returns exactly
``min(k, rows passing)`` hits. After rescoring the process drops its mapping of the touched ``vec.f4``
pages (``MADV_DONTNEED``: they stay in the page cache), so its resident memory is the PQ codes, the 8-bit codes
it has read and the small per-row arrays, not the float32 rows.

Damage: a mapped file that is shorter than its committed rows (truncated by hand, a full disk, a restore)
would kill the process with SIGBUS on the first page past its end, so every refresh first checks the
files' sizes against ``n`` (six ``stat`` calls, microseconds) and a PQ shard that cannot be read counts
too: a damaged generation is never mapped, and the next sync rebuilds it from ``memory_vec``, as for
deleted or garbage files. (A file truncated between that check and the scan that follows, microseconds
later, can still fault; nothing short of reading without a mapping closes that window.)

Below :data:`PQ_MIN` rows there is no PQ: the mapped rows are scanned exactly. Compaction: when the log
was pruned past the files' position, more than a quarter of the rows changed at once, or a fifth of the
slots are dead, a writer builds a new generation from the ``memory_vec`` table (the source of truth) and renames
``state.json`` to it; processes still mapping the old one keep reading it until their next refresh.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import mmap
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["SharedIndex", "IndexDamaged", "IndexChanging", "PQ_MIN", "FORMAT", "coarse", "old_rids"]

PQ_MIN = 20_000         # rows from which a PQ fast-scan is built (below: exact scan of the mapped rows)
PQ_M = 192              # sub-quantisers (4 bits each): 96 bytes per row at 384 dims (2 dims each)
FORMAT = 4              # state.json "format": 1 = 96 sub-quantisers (48-byte codes), 2 = 192 (96-byte codes),
                        # 3 = 192 in shard files of SHARD_ROWS slots, 4 = 3 + the 8-bit scalar codes (sq-<i>.faiss)
SHARD_ROWS = 262_144    # slots per PQ shard file; a search scans the shards in parallel threads
PQ_TRAIN = 20_000       # training sample
PQ_TAIL = 4_096         # rows appended since the shards were written before a writer rewrites the last one
                        # (each reader encodes up to this many itself; a bulk load's batches are encoded as they come)
EXACT_ROWS = 20_000     # a filter keeping at most this many rows is searched exactly over them
_ARRAYS = (("vec", np.float32), ("rid", np.int64), ("ns", np.int32), ("sess", np.int32), ("agent", np.int32),
           ("dead", np.uint8))

Rows = tuple[np.ndarray, np.ndarray, list[tuple[str, str, str]]]   # rids, float32 vectors, (ns, sess, agent)


class IndexDamaged(Exception):
    """A file of the current generation is shorter than its committed rows, or a PQ shard cannot be read."""


class IndexChanging(Exception):
    """Compactions kept replacing the generation while this reader looked (answer this search another way)."""


def keep(k: int) -> int:
    """Rows kept after the 8-bit rescoring of the PQ candidates, rescored exactly from ``vec.f4`` (200 for k = 10)."""
    return max(200, 20 * k)


def coarse(n: int, k: int) -> int:
    """PQ candidates rescored from their 8-bit codes for a top-``k`` over ``n`` rows (16 sqrt(n), at least 3,000).

    Out-of-corpus queries (3 words in no note, ``bench_memory.ooc_queries``) need more than in-corpus ones.
    Measured with the 8-bit stage and 200 kept (``bench_coarse.py``, hash embedder, 200 queries of each kind,
    recall@10 in-corpus / out-of-corpus at p50 on one thread, quiet machine): at 1M rows 8,000 candidates
    0.998 / 0.987 (5.9 ms), 12,000 0.999 / 0.992 (6.5 ms), 16,000 0.999 / 0.995 (7.3 ms), 24,000
    0.999 / 0.996 (8.4 ms); at 100k 2,000 1.000 / 0.995 (1.4 ms), 3,000 1.000 / 0.997 (1.7 ms), 5,056
    1.000 / 0.998 (2.3 ms). 16 sqrt(n) is 5,056 at 100k, 16,000 at 1M, 32,000 at 4M.
    """
    return int(min(n, max(3000, 8 * k, 16 * int(n ** 0.5))))


def _faiss() -> Any:
    import faiss  # lazy: ~0.2 s import, only for memories large enough to need it

    faiss.omp_set_num_threads(1)   # one search per call; the caller's threads share the cores
    return faiss


class SharedIndex:
    """The shared index files of one database (writer side: :meth:`sync`; reader side: :meth:`search`)."""

    def __init__(self, directory: Path, dimensions: int, db_id: str):
        self.dir = directory
        self.dims = dimensions
        self.db_id = db_id
        self._state: dict[str, Any] | None = None
        self._state_key: tuple | None = None
        self._gen: int | None = None
        self._n = 0
        self._arr: dict[str, np.ndarray] = {}
        self._pq: list[Any] | None = None    # the PQ shards (faiss IndexPQFastScan), slot order
        self._sq: list[Any] = []             # their 8-bit codes (IndexScalarQuantizer over the mapped sq-<i>.faiss)
        self._refine: list[Any] = []         # faiss.IndexRefine(pq shard, sq shard): PQ candidates -> 8-bit rescoring
        self._multi: Any = None              # faiss.IndexShards over self._refine (threaded, successive ids)
        self._mask_cache: tuple[Any, np.ndarray | None] | None = None
        self._viewed: tuple | None = None
        self._last_shard: tuple[int, int, Any] | None = None   # writer side: (gen, shard, index) it last wrote
        self._sq_train: tuple[int, Any, bytes] | None = None   # writer side: (gen, trained quantiser, its empty file)

    # --- state ------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any] | None:
        """The current ``state.json`` (cached by inode and mtime), or None when there is none for this db."""
        path = self.dir / "state.json"
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self._state_key:
            try:
                state = json.loads(path.read_text())
            except (FileNotFoundError, ValueError):
                return None
            self._state, self._state_key = state, key
        s = self._state
        if s is None or s.get("db") != self.db_id or s.get("dims") != self.dims:
            return None
        return s

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.dir / f"state.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.dir / "state.json")

    @contextlib.contextmanager
    def _lock(self, wait: bool = True) -> Iterator[bool]:
        """The writers' lock (``flock``: between processes, and between threads: each opens the file itself)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "lock", "a+b") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # --- writer side --------------------------------------------------------------------------------
    def sync(self, top: int, changes: Callable[[int], tuple[list[int], bool]],
             fetch: Callable[[list[int]], Rows], read_all: Callable[[], Rows], *, wait: bool = True) -> bool:
        """Bring the files up to log position ``top`` (no-op when another process already did).

        ``changes(after)`` -> (rids changed after that log position, whether the log was pruned past it);
        ``fetch(rids)`` / ``read_all()`` -> the present rows from SQLite (same snapshot as ``top``).
        ``wait=False``: when another thread or process holds the writers' lock (it is appending), return
        False at once instead of waiting for it (the caller scans what is not indexed yet itself).
        """
        s = self.state()
        if s is not None and s["seq"] >= top and s.get("format", 1) == FORMAT and self.damage(s) is None:
            return True
        with self._lock(wait=wait) as locked:
            if not locked:
                return False
            s = self.state()
            damage = self.damage(s) if s is not None and s.get("format", 1) == FORMAT else None
            if s is not None and s["seq"] >= top and s.get("format", 1) == FORMAT and damage is None:
                return True
            if damage is not None:
                log.warning("memory: rebuilding the shared vector index %s from the database (%s)", self.dir, damage)
                self._forget()
            elif s is not None and s.get("format", 1) != FORMAT:
                log.warning("memory: rebuilding the shared vector index %s (format %s -> %s, %d rows)", self.dir,
                            s.get("format", 1), FORMAT, s["n"] - s["dead"])
            elif s is not None:
                rids, pruned = changes(s["seq"])
                if self.appendable(s, rids, pruned):
                    self._append(copy.deepcopy(s), top, rids, fetch)
                    return True
            self._rebuild(top, read_all(), s)
            return True

    @staticmethod
    def appendable(s: dict[str, Any], rids: list[int], pruned: bool) -> bool:
        """Whether generation ``s`` takes the changes ``rids`` as an append (else it is rebuilt, compacted)."""
        live = s["n"] - s["dead"]
        changed = old_rids(s, rids)     # rids above every rid in the files are new rows: they kill no slot
        dead = s["dead"] + len(changed)  # at most: each changed rid kills its old slot
        return not pruned and len(changed) <= max(2000, live // 4) and dead <= max(1024, s["n"] // 5)

    def append(self, seq: int, top: int, rids: list[int], rows: Rows) -> bool:
        """Append changes read beforehand: ``rids`` logged in ``(seq, top]``, ``rows`` their present rows.

        The background indexer (:class:`~agentstack_lab.memory.vectors.VectorIndex`) reads the changed rows
        in a short read of the database and writes the files after it, with no read open (an open read keeps
        SQLite from restarting the WAL). False, with nothing written, when the files are no longer at ``seq``
        (another writer moved them meanwhile), are damaged, or the changes call for a rebuild.
        """
        with self._lock():
            s = self.state()
            if (s is None or s.get("format", 1) != FORMAT or s["seq"] != seq or self.damage(s) is not None
                    or not self.appendable(s, rids, False)):
                return False
            self._append(copy.deepcopy(s), top, rids, lambda _: rows)
            return True

    def damage(self, s: dict[str, Any]) -> str | None:
        """What is wrong with generation ``s``'s files (None: each holds its ``n`` committed rows)."""
        n = s["n"]
        for name, dtype in _ARRAYS:
            short = _short(self._file(s, name), n * np.dtype(dtype).itemsize * (self.dims if name == "vec" else 1),
                           f" for {n:,} rows")
            if short:
                return short
        if s.get("pq"):
            folder = self._gen_dir(s["gen"])
            for i in range(-(-s["pq"] // s["shard"])):
                if not (folder / f"pq-{i}.faiss").is_file():
                    return f"pq-{i}.faiss is missing"
        if s.get("sq"):
            for i in range(-(-n // s["shard"])):
                short = _short(self._gen_dir(s["gen"]) / f"sq-{i}.faiss", s["sq_head"] + s["shard"] * s["sq_code"])
                if short:
                    return short
        return None

    def _forget(self) -> None:
        """Drop this process's view (its mappings) of the current generation."""
        self._gen, self._n, self._arr, self._pq, self._multi = None, 0, {}, None, None
        self._sq, self._refine = [], []
        self._viewed = self._mask_cache = None

    def _gen_dir(self, gen: int) -> Path:
        return self.dir / f"gen-{gen}"

    def _rebuild(self, top: int, rows: Rows, old: dict[str, Any] | None) -> None:
        gen = (old["gen"] + 1) if old else 1
        path = self._gen_dir(gen)
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        state = {"format": FORMAT, "db": self.db_id, "dims": self.dims, "gen": gen, "n": 0, "dead": 0, "seq": top,
                 "pq": 0, "sq": 0, "rid_top": 0, "codes": {"ns": {}, "sess": {"": 0}, "agent": {"": 0}}}
        for name, dtype in _ARRAYS:
            (path / f"{name}.{np.dtype(dtype).str[1:]}").touch()
        self._write_rows(state, rows)
        if state["n"] >= PQ_MIN:
            self._write_pq(state, train=True)
        self._write_state(state)
        for other in self.dir.glob("gen-*"):   # readers mapping an old generation keep their (unlinked) files
            if other != path:
                shutil.rmtree(other, ignore_errors=True)

    def _file(self, state: dict[str, Any], name: str) -> Path:
        dtype = dict(_ARRAYS)[name]
        return self._gen_dir(state["gen"]) / f"{name}.{np.dtype(dtype).str[1:]}"

    def _write_rows(self, state: dict[str, Any], rows: Rows) -> None:
        rids, vecs, meta = rows
        if len(rids) == 0:
            return
        codes = state["codes"]

        def code(kind: str, value: str) -> int:
            table = codes[kind]
            if value not in table:
                table[value] = len(table) + (1 if kind == "ns" else 0)
            return table[value]

        uniq = {m: (code("ns", m[0]), code("sess", m[1]), code("agent", m[2])) for m in set(meta)}
        c = np.array([uniq[m] for m in meta], dtype=np.int32).reshape(-1, 3)
        parts = {"vec": np.ascontiguousarray(vecs, dtype=np.float32), "rid": np.asarray(rids, dtype=np.int64),
                 "ns": c[:, 0], "sess": c[:, 1], "agent": c[:, 2], "dead": np.zeros(len(rids), dtype=np.uint8)}
        n = state["n"]
        for name, dtype in _ARRAYS:
            row_bytes = np.dtype(dtype).itemsize * (self.dims if name == "vec" else 1)
            with open(self._file(state, name), "r+b") as fh:
                fh.truncate(n * row_bytes)          # drop what a crashed writer left past n
                fh.seek(n * row_bytes)
                fh.write(np.ascontiguousarray(parts[name], dtype=dtype).tobytes())
        state["n"] = n + len(rids)
        state["rid_top"] = max(int(state.get("rid_top", 0)), int(np.max(rids)))

    def _append(self, state: dict[str, Any], top: int, rids: list[int], fetch: Callable[[list[int]], Rows]) -> None:
        """Write the changes into the files, then ``state``.

        ``state`` is a copy of the cached state: a write that fails (a full disk) leaves the cached state as the
        files' ``state.json`` says, and the next sync tries again.
        """
        n = state["n"]
        if rids:
            changed = old_rids(state, rids)
            dead = np.memmap(self._file(state, "dead"), dtype=np.uint8, mode="r+", shape=(n,)) \
                if n and changed else None
            if dead is not None:
                old = np.fromfile(self._file(state, "rid"), dtype=np.int64, count=n)
                hit = np.flatnonzero(np.isin(old, np.asarray(changed, dtype=np.int64)) & (dead == 0))
                dead[hit] = 1                        # one byte per slot: readers see 0 or 1
                dead.flush()
                state["dead"] += len(hit)
                del dead
            self._write_rows(state, fetch(rids))
            if state.get("sq"):
                self._write_sq(state)
        state["seq"] = top
        if state["n"] >= PQ_MIN and (state["pq"] == 0 or state["n"] - state["pq"] >= PQ_TAIL):
            self._write_pq(state, train=state["pq"] == 0)
        self._write_state(state)

    def _write_pq(self, state: dict[str, Any], *, train: bool) -> None:
        """Encode slots ``[state['pq'], n)`` into the shard files (all of them when ``train``).

        ``pq-train.faiss`` holds the trained, empty quantiser; shard ``i`` (``pq-<i>.faiss``) holds the codes
        of slots ``[i * shard, (i + 1) * shard)``. Only the shards that gain rows are rewritten: a full shard
        is never touched again, so an append at 1M rows rewrites one file of at most 25 MB.
        """
        faiss = _faiss()
        n = state["n"]
        vec = np.memmap(self._file(state, "vec"), dtype=np.float32, mode="r", shape=(n, self.dims))
        folder = self._gen_dir(state["gen"])
        if train:
            index = faiss.IndexPQFastScan(self.dims, PQ_M if self.dims % PQ_M == 0 else _sub(self.dims), 4,
                                          faiss.METRIC_INNER_PRODUCT)
            sample = np.random.default_rng(0).choice(n, size=min(n, PQ_TRAIN), replace=False)
            index.train(np.ascontiguousarray(vec[np.sort(sample)]))
            _write_index(faiss, index, folder / "pq-train.faiss")
            state["shard"], state["pq"] = SHARD_ROWS, 0
            self._train_sq(state, vec[np.sort(sample)])
        size, have = state["shard"], state["pq"]
        for i in range(have // size, -(-n // size)):
            lo, hi = i * size, min(n, (i + 1) * size)
            cached = self._last_shard
            if cached is not None and cached[:2] == (state["gen"], i) and cached[2].ntotal == have - lo and not train:
                index = cached[2]     # the shard this writer wrote last: not read back from its file
            else:
                index = faiss.read_index(str(folder / (f"pq-{i}.faiss" if lo < have else "pq-train.faiss")))
                if index.ntotal != max(0, min(have, hi) - lo):   # written by a writer that died before its state
                    index = faiss.read_index(str(folder / "pq-train.faiss"))
            for j in range(lo + index.ntotal, hi, 65_536):
                index.add(np.ascontiguousarray(vec[j:min(hi, j + 65_536)]))
            _write_index(faiss, index, folder / f"pq-{i}.faiss")
            self._last_shard = (state["gen"], i, index)
        state["pq"] = n

    def _train_sq(self, state: dict[str, Any], sample: np.ndarray) -> None:
        """Train the 8-bit scalar quantiser on ``sample`` (``sq-train.faiss``) and encode every slot."""
        faiss = _faiss()
        sq = faiss.IndexScalarQuantizer(self.dims, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        sq.train(np.ascontiguousarray(sample))
        _write_index(faiss, sq, self._gen_dir(state["gen"]) / "sq-train.faiss")
        empty = faiss.serialize_index(sq).tobytes()     # header + trained ranges + an empty codes vector
        self._sq_train = (state["gen"], sq, empty)
        state.update(sq=0, sq_head=len(empty), sq_code=int(sq.code_size))
        self._write_sq(state)

    def _write_sq(self, state: dict[str, Any]) -> None:
        """Encode slots ``[state['sq'], n)`` into the 8-bit shard files ``sq-<i>.faiss``.

        Each shard file is a faiss ``IndexScalarQuantizer`` file made for ``SHARD_ROWS`` slots at once (its
        header says so; the unwritten codes are a hole in a sparse file), so a row's codes are written in
        place at ``sq_head + slot * code_size`` and nothing is ever rewritten; readers map the file
        (``IO_FLAG_MMAP_IFC``) and look at the first rows of it their state counts.
        """
        faiss = _faiss()
        gen, n, size, cs = state["gen"], state["n"], state["shard"], state["sq_code"]
        folder = self._gen_dir(gen)
        if self._sq_train is None or self._sq_train[0] != gen:
            sq = faiss.read_index(str(folder / "sq-train.faiss"))
            self._sq_train = (gen, sq, faiss.serialize_index(sq).tobytes())
        _, sq, empty = self._sq_train
        vec = np.memmap(self._file(state, "vec"), dtype=np.float32, mode="r", shape=(n, self.dims))
        lo = state["sq"]
        while lo < n:
            i = lo // size
            hi = min(n, (i + 1) * size)
            path = folder / f"sq-{i}.faiss"
            if not path.exists():
                head = empty[:8] + struct.pack("<q", size) + empty[16:-8] + struct.pack("<Q", size * cs)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                with open(tmp, "wb") as fh:
                    fh.write(head)
                    fh.truncate(len(head) + size * cs)       # a hole: no disk for the slots not written yet
                os.replace(tmp, path)
            with open(path, "r+b") as fh:
                for j in range(lo, hi, 65_536):
                    fh.seek(state["sq_head"] + (j - i * size) * cs)
                    fh.write(sq.sa_encode(np.ascontiguousarray(vec[j:min(hi, j + 65_536)])).tobytes())
            lo = hi
        state["sq"] = n

    # --- reader side --------------------------------------------------------------------------------
    def _view(self, s: dict[str, Any]) -> None:
        """Map generation ``s['gen']`` up to ``s['n']`` rows; load / extend the PQ."""
        if s["gen"] != self._gen:
            self._forget()
            self._gen = s["gen"]
        n = s["n"]
        if n != self._n or not self._arr:
            arr = {}
            for name, dtype in _ARRAYS:
                shape = (n, self.dims) if name == "vec" else (n,)
                arr[name] = np.memmap(self._file(s, name), dtype=dtype, mode="r", shape=shape) if n else \
                    np.zeros(shape, dtype=dtype)
            self._arr, self._n = arr, n
        self._mask_cache = None      # dead flags change in place: recompute masks after every refresh
        if n < PQ_MIN or s["pq"] == 0 or s.get("sq", 0) < n:
            self._pq = self._multi = None
            self._sq, self._refine = [], []
            return
        faiss, folder, size = _faiss(), self._gen_dir(s["gen"]), s["shard"]
        if self._pq is None:
            self._pq = [faiss.read_index(str(folder / f"pq-{i}.faiss")) for i in range(-(-s["pq"] // size))]
            self._multi = faiss.IndexShards(self.dims, True, True)   # threaded, shard i's ids follow shard i-1's
        shards = self._pq
        have = sum(ix.ntotal for ix in shards)
        while have < n:                  # rows appended since the shard files were written: encode them here
            i = have // size
            if i == len(shards):
                shards.append(faiss.read_index(str(folder / "pq-train.faiss")))
            hi = min(n, (i + 1) * size)
            shards[i].add(np.ascontiguousarray(self._arr["vec"][have:hi]))
            have = hi
        for i, pq in enumerate(shards):  # each PQ shard's candidates rescored from its 8-bit codes (mapped)
            if i == len(self._sq):
                self._sq.append(faiss.read_index(str(folder / f"sq-{i}.faiss"), faiss.IO_FLAG_MMAP_IFC))
                self._sq[i].ntotal = pq.ntotal
                self._refine.append(faiss.IndexRefine(pq, self._sq[i]))
                self._multi.add_shard(self._refine[i])
            self._sq[i].ntotal = self._refine[i].ntotal = pq.ntotal
        self._multi.syncWithSubIndexes()

    def refresh(self) -> bool:
        """Follow ``state.json``; False when there is no index for this database yet."""
        s = self.state()
        if s is None:
            return False
        damage = self.damage(s)
        if damage is not None:   # never map (or keep mapping) a file shorter than its rows: SIGBUS
            self._forget()
            raise IndexDamaged(f"{self.dir}: {damage}")
        if self._state_key == self._viewed and self._arr:
            return True
        for _ in range(3):
            try:
                self._view(s)
                self._viewed = self._state_key
                return True
            except FileNotFoundError:    # a compaction replaced the generation meanwhile: read the state again
                self._state_key = None
                s = self.state()
                if s is None:
                    return False
            except (RuntimeError, ValueError) as exc:   # a shard faiss cannot read, a file shorter than mapped
                self._forget()
                raise IndexDamaged(f"{self.dir}: {exc}") from exc
        raise IndexChanging(f"{self.dir}: the shared vector index kept changing under this reader")

    @property
    def rows(self) -> int:
        """Live rows in this process's view."""
        return int(self._n - np.count_nonzero(self._arr["dead"])) if self._n else 0

    def _mask(self, namespace: str | None, session_id: str | None, agent_id: str | None,
              include_shared: bool) -> np.ndarray | None:
        """Slots passing the filter (None: every slot passes); an empty array when nothing can pass."""
        key = (namespace, session_id, agent_id, include_shared)
        if self._mask_cache is not None and self._mask_cache[0] == key:
            return self._mask_cache[1]
        a, codes = self._arr, self._state["codes"] if self._state else {}
        m: np.ndarray | None = None

        def both(x: np.ndarray) -> np.ndarray:
            return x if m is None else (m & x)

        if namespace is not None:
            code = codes["ns"].get(namespace)
            m = both(a["ns"] == code) if code is not None else np.zeros(self._n, dtype=bool)
        elif len(codes["sess"]) > 1:
            sess = a["sess"]
            code = codes["sess"].get(session_id or "", -1) if session_id else 0
            m = both((sess == 0) | (sess == code))
        if agent_id is not None:
            code = codes["agent"].get(agent_id, -1)
            own = a["agent"] == code
            m = both((own | (a["agent"] == 0)) if include_shared else own)
        if self._state and self._state["dead"]:
            m = both(a["dead"] == 0)
        self._mask_cache = (key, m)
        return m

    def search(self, q: np.ndarray, k: int, namespace: str | None = None, session_id: str | None = None,
               agent_id: str | None = None, include_shared: bool = True) -> list[tuple[int, float]]:
        """Top-``k`` ``(rid, cosine)`` among the slots passing the filter (call :meth:`refresh` first)."""
        n = self._n
        if n == 0:
            return []
        mask = self._mask(namespace, session_id, agent_id, include_shared)
        allowed = n if mask is None else int(np.count_nonzero(mask))
        if allowed == 0:
            return []
        k = min(k, allowed)
        try:
            if self._pq is None or allowed <= EXACT_ROWS:
                return self._exact(q, k, mask)
            want, scale = keep(k), n / allowed
            candidates = coarse(allowed, k)
            while True:
                fetch = min(n, int(candidates * scale) + k)
                ids = self._scan(q, fetch, min(fetch, int(want * scale) + k))
                ids = ids[(ids >= 0) & (ids < n)]
                if mask is not None:
                    ids = ids[mask[ids]]
                if len(ids) >= min(want, allowed):
                    return self._rescore(q, np.sort(ids), k)
                if fetch >= min(n, max(65_536, 4 * candidates)):
                    return self._exact(q, k, mask)
                scale *= 4
        finally:
            self._release()

    def _scan(self, q: np.ndarray, fetch: int, kept: int) -> np.ndarray:
        """The ``kept`` best slots by 8-bit distance among the ``fetch`` best by PQ distance.

        Each shard ranks its slots by PQ distance, rescores its share of the ``fetch`` best from their 8-bit
        codes (``faiss.IndexRefine``) and keeps its ``kept`` best; the shards run through a threaded
        ``faiss.IndexShards`` (one C++ thread per shard; the Python binding holds the GIL, so Python
        threads would scan one after the other), which merges their lists into the ``kept`` best.
        """
        assert self._pq is not None, "_scan runs only with the PQ shards loaded (see search)"
        kept = max(1, min(kept, self._n))
        for ref in self._refine:     # each shard's share of the PQ candidates
            ref.k_factor = max(1.0, fetch / len(self._refine) / kept)
        index = self._refine[0] if len(self._refine) == 1 else self._multi
        ids = index.search(q.reshape(1, -1), kept)[1][0]
        return ids[ids >= 0]

    def _rescore(self, q: np.ndarray, slots: np.ndarray, k: int) -> list[tuple[int, float]]:
        scores = self._arr["vec"][slots] @ q
        return self._top(scores, slots, k)

    def _exact(self, q: np.ndarray, k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        vec = self._arr["vec"]
        if mask is None:
            slots = np.arange(self._n)
            scores = np.asarray(vec @ q)
        else:
            slots = np.flatnonzero(mask)
            scores = vec[slots] @ q if len(slots) * 4 < self._n else np.asarray(vec @ q)[slots]
        return self._top(scores, slots, k)

    def _top(self, scores: np.ndarray, slots: np.ndarray, k: int) -> list[tuple[int, float]]:
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        rid = self._arr["rid"]
        return [(int(rid[slots[t]]), float(scores[t])) for t in top]

    def _release(self) -> None:
        """Unmap the float32 pages this search touched (they stay in the page cache for every process)."""
        vec = self._arr.get("vec")
        mm = getattr(vec, "_mmap", None)
        if isinstance(mm, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            with contextlib.suppress(OSError, ValueError):
                mm.madvise(mmap.MADV_DONTNEED)


def _short(path: Path, need: int, what: str = "") -> str | None:
    """Why ``path`` cannot hold ``need`` bytes (missing, or how short it is), or None when it can."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"{path.name} is missing"
    return f"{path.name} holds {size:,} bytes, {need:,} expected{what}" if size < need else None


def old_rids(state: dict[str, Any], rids: list[int]) -> list[int]:
    """Those of ``rids`` that may have a slot in the files (all of them for files without ``rid_top``)."""
    top = state.get("rid_top")
    return rids if top is None else [r for r in rids if r <= top]


def _write_index(faiss: Any, index: Any, path: Path) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, path)


def _sub(dims: int) -> int:
    """Sub-quantiser count for dimensions not divisible by :data:`PQ_M`: 2-4 dims each."""
    for m in (dims // 4, dims // 3, dims // 2):
        if m and dims % m == 0:
            return m
    return dims
