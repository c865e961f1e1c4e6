"""Memory benchmark: insert rate, FTS / vector / hybrid latency and vector recall, with peers in the same run.

Peers, all over the same vectors in the same run: numpy exact brute force (one BLAS thread), faiss
flat (the exact-scan limit), faiss HNSW and usearch HNSW (the ANN indexes a user would pick, with their
recall; each built within ``--ann-budget`` seconds or reported "not built" with the reason), sqlite-vec's
own KNN (``memory.vector.cache = false``), the exact in-process matrix (``memory.vector.index =
"exact"``) and, at 10k only, the design seed's algorithm (load every row, cosine in a Python loop).
Fresh processes: two at once open the memory and search; first search time and the peak resident
memory (RSS and PSS from ``/proc/self/smaps_rollup``) each added over its state before searching.

``--embedder local`` runs the whole table with the local MiniLM embedder (``all-MiniLM-L6-v2``, extra
``local-embeddings``) instead of the default hash embedder. MiniLM embeds only hundreds of notes a second on
this CPU, so each corpus is embedded once, before ``store_many``, timed as the embedding rate, and
``store_many`` is then given those vectors (it still writes memory, FTS and vector rows as usual).
``--corpus english`` replaces the random Zipf words with one-sentence English notes made from small word
lists and grammar templates (a corpus a sentence model can read; recall is measured either way).

    .venv/bin/python benchmarks/bench_memory.py --sizes 100000,1000000
    .venv/bin/python benchmarks/bench_memory.py --sizes 100000 --peers lancedb,chroma   # + LanceDB, Chroma: memory_peers.py
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_memory.py --embedder local --corpus english --sizes 100000
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):   # one BLAS thread, before numpy
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from agentstack_lab.config import Config  # noqa: E402
from agentstack_lab.workspace import Workspace  # noqa: E402

BATCH = 10_000   # entries per store_many call
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF = 32, 40, (64, 256)   # faiss HNSW peer: graph degree, build and search beam
USEARCH_DTYPE, USEARCH_M, USEARCH_EF_ADD = "f16", 16, 64       # usearch peer (f16 built 2.5x faster than i8 here)


def corpus(n: int, seed: int = 0) -> list[str]:
    """Synthetic notes: 20-30 words from a Zipf-distributed 30k-word vocabulary (deterministic)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(30_000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    words = rng.choice(len(vocab), size=(n, 30), p=p)
    lens = rng.integers(20, 31, size=n)
    return [" ".join(vocab[w] for w in row[:k]) for row, k in zip(words, lens, strict=True)]


# --corpus english: small word lists (no download) assembled by grammar templates into 20-30-word notes
_SUBJECTS = ("the team", "our manager", "the new intern", "a customer", "the support desk", "my neighbour",
             "the finance group", "the night shift", "the design lead", "a supplier", "the landlord", "the doctor",
             "the project owner", "the build server", "the sales office", "an old friend", "the auditor",
             "the kitchen staff", "the school board", "the research lab", "the city council", "the mechanic",
             "the volunteer group", "a reporter", "the tenant", "the pilot", "the legal team", "the gardener")
_VERBS = ("reviewed", "postponed", "approved", "rejected", "moved", "cancelled", "booked", "repaired",
          "delivered", "checked", "updated", "discussed", "planned", "signed", "ordered", "painted", "cleaned",
          "tested", "shipped", "measured", "questioned", "photographed", "rebuilt", "scheduled", "replaced",
          "borrowed", "returned", "translated", "summarised", "printed")
_ADJECTIVES = ("quarterly", "broken", "urgent", "small", "expensive", "annual", "late", "blue", "quiet",
               "heavy", "shared", "secure", "temporary", "wooden", "digital", "monthly", "noisy", "fragile",
               "overdue", "detailed", "spare", "cheap", "public", "private", "frozen", "ancient", "modern")
_OBJECTS = ("budget", "invoice", "roof", "contract", "server", "meeting", "report", "delivery", "window",
            "laptop", "schedule", "garden fence", "tax filing", "database", "bicycle", "prescription",
            "train ticket", "birthday party", "insurance claim", "kitchen sink", "marketing plan", "printer",
            "lease", "visa application", "conference talk", "water heater", "payroll run", "website",
            "lab sample", "wedding menu", "car battery", "shipping label", "museum visit", "press release")
_PLACES = ("in the office", "at the warehouse", "near the station", "in the basement", "at the clinic",
           "on the second floor", "in the garden", "at the airport", "by the river", "in the city centre",
           "at the school", "in the data centre", "at home", "in the workshop", "at the bank")
_TIMES = ("on Monday", "last week", "before lunch", "after the holidays", "this morning", "in March",
          "at the end of the month", "yesterday evening", "next Friday", "during the storm", "over the weekend",
          "in the spring", "before the audit", "after midnight")
_REASONS = ("because the price went up", "since the forecast changed", "after a long discussion",
            "so the deadline can hold", "because nobody had the key", "to keep the customer happy",
            "as the rules require", "while the power was out", "before anyone noticed", "for the second time")
_TEMPLATES = ("{S} {V} the {A} {O} {P} {T}.", "{T}, {S} {V} the {O} {R}.", "{S} {V} a {A} {O} {P}.",
              "the {A} {O} was {V} by {S} {T}.", "{S} {V} the {O} {P} {R}.", "{P}, {S} {V} the {A} {O}.")


def english(n: int, seed: int = 0) -> list[str]:
    """Notes of one English sentence (8-16 words) from the word lists and templates (deterministic).

    One sentence, not the zipf corpus' 20-30 words: MiniLM's cost grows with the tokens (160 one-sentence
    notes per CPU-second here); many near-duplicates (the lists are small). Prefix-stable, so an embedding
    cache of a larger size serves every smaller one.
    """
    rng = np.random.default_rng(seed)
    lists = {"S": _SUBJECTS, "V": _VERBS, "A": _ADJECTIVES, "O": _OBJECTS, "P": _PLACES, "T": _TIMES, "R": _REASONS}
    draws = rng.integers(0, 2**31, size=(n, len(lists) + 1))   # one row per note: english(n)[:m] == english(m)
    out = []
    for row in draws:
        words = {k: v[row[j] % len(v)] for j, (k, v) in enumerate(lists.items())}
        sentence = _TEMPLATES[row[-1] % len(_TEMPLATES)].format(**words)
        out.append(sentence[0].upper() + sentence[1:])
    return out


CORPORA = {"zipf": (corpus, "synthetic 20-30-word notes over a Zipf 30k-word random-letter vocabulary"),
           "english": (english, "English notes of one template sentence (8-16 words) from small word lists")}


def queries(docs: list[str], n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(docs), size=n, replace=False):
        words = docs[i].split()
        start = rng.integers(0, max(1, len(words) - 3))
        out.append(" ".join(words[start:start + 3]))
    return out


_OTHER_WORDS = ("volcano", "penguin", "orchestra", "glacier", "satellite", "harbour", "lantern", "meadow",
                "tornado", "violin", "dolphin", "pyramid", "compass", "saffron", "telescope", "walrus", "cathedral",
                "avalanche", "quartz", "jungle", "submarine", "tapestry", "canyon", "falcon", "orchid", "galaxy",
                "marathon", "igloo", "lagoon", "puzzle", "raccoon", "sculpture", "thunder", "vineyard", "zeppelin")


def ooc_queries(docs: list[str], n: int, seed: int = 2) -> list[str]:
    """Out-of-corpus queries: 3 words none of which is in any note (most real questions use other words).

    Zipf corpus: random-letter words not in its vocabulary; English corpus: English words outside its lists.
    """
    vocab = {w.strip(".,").lower() for d in docs[:200_000] for w in d.split()}
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    other = [w for w in _OTHER_WORDS if w not in vocab]
    english_corpus = docs[0][:1].isupper()
    out: list[str] = []
    while len(out) < n:
        if english_corpus:
            words = [str(w) for w in rng.choice(other, size=3, replace=False)]
        else:
            words = ["".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(3)]
        if not any(w in vocab for w in words):
            out.append(" ".join(words))
    return out


def pct(times: list[float]) -> tuple[float, float]:
    a = np.array(times) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def timed(fn, qs) -> tuple[list[float], list]:
    times, outs = [], []
    for q in qs:
        t = time.perf_counter()
        outs.append(fn(q))
        times.append(time.perf_counter() - t)
    return times, outs


def seed_algorithm(ws: Workspace, qvec: np.ndarray, k: int = 10) -> list[int]:
    """The design seed's vector search: load all rows with embeddings, cosine in a loop, sort."""
    rows = ws.db.query("SELECT rid, embedding FROM memory_vec")
    q = [float(x) for x in qvec]
    scored = []
    for rid, blob in rows:
        v = np.frombuffer(blob, dtype=np.float32).tolist()
        dot = na = nb = 0.0
        for a, b in zip(q, v, strict=True):
            dot += a * b
            na += a * a
            nb += b * b
        scored.append((dot / (math.sqrt(na) * math.sqrt(nb) or 1.0), rid))
    scored.sort(reverse=True)
    return [rid for _, rid in scored[:k]]


def step(what: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {what}", flush=True)


class _Reuse:
    """The configured embedder, answering texts embedded beforehand from that table (embed once, reuse)."""

    in_process = True   # a table lookup: store_many may "embed" while it writes, as with the hash embedder

    def __init__(self, inner, texts: list[str], vectors: np.ndarray):
        self.inner, self.name, self.model, self.dimensions = inner, inner.name, inner.model, inner.dimensions
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors

    def embed(self, texts):
        rows = [self._row.get(t, -1) for t in texts]
        if min(rows, default=0) >= 0:
            return self._vectors[rows]
        return self.inner.embed(texts)   # queries: the real model


def _config(embedder: str, **vector) -> Config:
    return Config.from_dict({"memory": {"embedder": embedder, "vector": vector}})


def _embed_once(embedder, docs: list[str], threads: int, cache: Path | None = None,
                batch: int = 2_000) -> tuple[np.ndarray, float | None]:
    """Every note embedded once (torch on ``threads`` threads), with the rate; progress every 20,000 notes.

    ``cache``: a folder of ``batch``-note chunks (``NNNNNNN.npy``, by first note) of this embedder and corpus,
    read where present and written as they are made, so a run that stops (or a larger size: the corpora
    are prefix-stable) does not embed them again. The rate is over the notes embedded in this run
    (None when the cache held them all).
    """
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(threads)   # the parent pinned BLAS to one thread for the searches
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    parts, made, spent = [], 0, 0.0
    for i in range(0, len(docs), batch):
        chunk = docs[i:i + batch]
        path = cache / f"{i:07d}.npy" if cache is not None else None
        if path is not None and path.exists() and len(got := np.load(path)) >= len(chunk):
            parts.append(got[:len(chunk)])
            continue
        t = time.perf_counter()
        parts.append(embedder.embed(chunk))
        spent += time.perf_counter() - t
        made += len(chunk)
        if path is not None and len(chunk) == batch:
            np.save(path.with_suffix(".tmp.npy"), parts[-1])
            os.replace(path.with_suffix(".tmp.npy"), path)
        done = min(len(docs), i + batch)
        if done % (batch * 10) == 0 or done == len(docs):
            step(f"embedded {done:,} / {len(docs):,} ({made / spent:,.0f}/s over the {made:,} made in this run)")
    rate = made / spent if made else None
    if torch is not None:
        torch.set_num_threads(1)   # query embedding inside the timed searches: one thread, like the searches
    return np.concatenate(parts), rate


def bench(n: int, n_queries: int, folder: Path, ann: bool, budget: float, embedder: str = "hash",
          corpus_name: str = "zipf", save: Path | None = None, embed_threads: int = 1,
          embed_cache: Path | None = None, peers: tuple[str, ...] = ()) -> dict:
    docs = CORPORA[corpus_name][0](n)
    qs = queries(docs, n_queries)
    res: dict = {"n": n}
    with Workspace.open(folder, config=_config(embedder), announce=False) as ws:
        mem = ws.memory
        reuse = embedder != "hash"   # slow model: embed once, before store_many, and reuse the vectors
        if reuse:
            step("embedding the corpus once")
            cache = embed_cache / f"{embedder}-{corpus_name}" if embed_cache is not None else None
            vectors, res["embed_rate"] = _embed_once(mem.embedder, docs, embed_threads, cache)
            mem.embedder = _Reuse(mem.embedder, docs, vectors)
            del vectors
        items = [{"key": f"doc-{i}", "content": d} for i, d in enumerate(docs)]
        step("store_many")
        t, cpu = time.perf_counter(), time.thread_time()
        last = (t, 0)
        fresh = None
        for i in range(0, n, BATCH):   # BATCH entries per store_many call (one transaction each)
            if i >= n - max(BATCH, n // 10) and last[1] == 0:
                last = (time.perf_counter(), i)
            if fresh is None and i >= max(BATCH, n - 10 * BATCH):   # a fresh process, ready when the load ends
                fresh = _fresh_child(folder, embedder)
            mem.store_many(items[i:i + BATCH])
        loaded = time.perf_counter()
        res.update(first_search(ws, fresh or _fresh_child(folder, embedder), qs[0], folder))
        fts_t = time.perf_counter()
        mem.search(qs[0], "fts", limit=1)   # inside the timing: until the last batch is searchable by keyword too
        searches = fts_t - loaded   # the first vector searches (and their peer) are left out of both rates
        res["insert_s"] = time.perf_counter() - t - searches
        res["insert_rate"] = n / res["insert_s"]
        res["insert_last_rate"] = (n - last[1]) / (time.perf_counter() - last[0] - searches)   # the last 10%
        res["insert_main_cpu_rate"] = n / (time.thread_time() - cpu)   # the calling thread's CPU only
        if not reuse:
            sample = docs[:min(n, 100_000)]
            t = time.perf_counter()
            for i in range(0, len(sample), 10_000):
                mem.embedder.embed(sample[i:i + 10_000])
            res["embed_rate"] = len(sample) / (time.perf_counter() - t)
        assert mem.stats() == {"memory": n, "fts": n, "vector": n}
        if reuse:
            mem.embedder = mem.embedder.inner   # searches embed their queries with the model itself
        docs_kept = docs[:200_000]   # the out-of-corpus queries avoid their words
        del items, docs

        found = {}
        for mode in ("fts", "vector", "hybrid"):
            mem.search(qs[1], mode)                       # warm
            times, found[mode] = timed(lambda q, m=mode: mem.search(q, m, limit=10), qs)
            res[mode] = pct(times)

        step("peers")
        # exact reference: numpy over the very same vectors (one BLAS thread)
        rids, mat, _ = mem.index._read_all(ws.db.conn)
        qvecs = mem.embedder.embed(qs)
        if save is not None:   # for benchmarks/bench_coarse.py: the same vectors without embedding them again
            save.mkdir(parents=True, exist_ok=True)
            np.save(save / f"{embedder}-{corpus_name}-{n}-rows.npy", mat)
            np.save(save / f"{embedder}-{corpus_name}-{n}-queries.npy", qvecs)

        def top10_of(q):
            s = mat @ q
            top = np.argpartition(-s, 9)[:10]
            top = top[np.argsort(-s[top])]
            return rids[top], s[top]

        def top10(i):
            return top10_of(qvecs[i])

        def exact(i):
            return top10(i)[0].tolist()

        times, truth = timed(exact, range(len(qs)))
        res["numpy"] = pct(times)
        times, ours = timed(lambda i: [rid for rid, _ in mem.index.search(qvecs[i], _all(), 10)], range(len(qs)))
        res["index"] = pct(times)
        res["recall"] = _recall(ours, truth)
        # out-of-corpus queries (words in no note): the same bare comparison, and the latency through Memory.search
        qs_out = ooc_queries(docs_kept, len(qs))
        qvecs_out = mem.embedder.embed(qs_out)
        if save is not None:
            np.save(save / f"{embedder}-{corpus_name}-{n}-queries-ooc.npy", qvecs_out)
        truth_out = [top10_of(qvecs_out[i])[0].tolist() for i in range(len(qs_out))]
        times, ours = timed(lambda i: [rid for rid, _ in mem.index.search(qvecs_out[i], _all(), 10)],
                            range(len(qs_out)))
        res["index_ooc"], res["recall_ooc"] = pct(times), _recall(ours, truth_out)
        times, _ = timed(lambda q: mem.search(q, "vector", limit=10), qs_out)
        res["vector_ooc"] = pct(times)
        rid_of = dict(ws.db.query("SELECT key, rid FROM memory"))
        # Memory.search leaves out hits under the embedder's similarity floor for the query (vector_floor): its
        # reference is numpy exact's top-10 above that floor (a query with none there scores 1.0 for none)
        from agentstack_lab.memory.search import vector_floor

        def floored(i):
            got, scores = top10(i)
            return got[scores >= vector_floor(mem.embedder, qs[i], mem.config.hybrid.min_vector_score)].tolist()

        res["search_recall"] = _recall_floored([[rid_of[h.key] for h in hits] for hits in found["vector"]],
                                               [floored(i) for i in range(len(qs))])
        res.update(faiss_peers(mat, rids, qvecs, truth, ann, budget))
        # --- peers a user would pick instead of ours (--peers): benchmarks/memory_peers.py ---
        if peers:
            from memory_peers import run_peers

            text_of = dict(ws.db.query("SELECT rid, content FROM memory"))
            res["peers"] = run_peers(peers, folder / "peers", mat, rids, [text_of[r] for r in rids.tolist()],
                                     qvecs, qs, truth, budget)
            del text_of
        # --- end of the peers ---

        # peer: sqlite-vec in SQL (cache = false: vec_distance_cosine over the table, ORDER BY ... LIMIT k);
        # 10 queries from 500k on (~1 s each)
        few = range(min(len(qs), 10 if n >= 500_000 else len(qs)))
        plain = _config(embedder, cache=False)
        with Workspace.open(folder, config=plain, announce=False) as ws2:
            idx = ws2.memory.index
            times, knn = timed(lambda i: [r for r, _ in idx.search(qvecs[i], _all(), 10)], few)
            res["sqlite_vec"] = pct(times)
            res["sqlite_vec_recall"] = _recall(knn, [truth[i] for i in few])
        if n <= 10_000:
            few = range(min(5, len(qs)))
            times, seeded = timed(lambda i: seed_algorithm(ws, qvecs[i]), few)
            res["seed"] = pct(times)
            res["seed_recall"] = _recall(seeded, [truth[i] for i in few])
    step("fresh processes")
    # fresh processes: first search, and resident memory added with two processes searching at once
    for kind in ("shared", "exact"):
        res[f"procs_{kind}"] = two_processes(folder, kind, qs[:50], embedder)
    return res


def _budgeted(add, n: int, budget: float, chunk: int = 50_000) -> tuple[float | None, str | None]:
    """Build an ANN index chunk by chunk; stop when the rate so far projects past ``budget`` seconds.

    Returns (build seconds, None) or (None, "not built: <reason>").
    """
    t = time.perf_counter()
    for i in range(0, n, chunk):
        add(i, min(n, i + chunk))
        spent = time.perf_counter() - t
        done = min(n, i + chunk)
        if done < n and spent * n / done > budget:   # insertion only gets slower as the graph grows
            return None, (f"not built: {done:,} rows took {spent:.0f} s, {n:,} would take > {spent * n / done / 60:.0f}"
                          f" min (budget {budget / 60:.0f} min)")
    return time.perf_counter() - t, None


def faiss_peers(mat: np.ndarray, rids: np.ndarray, qvecs: np.ndarray, truth: list, ann: bool,
                budget: float) -> dict:
    """faiss flat (the exact-scan limit), faiss HNSW and usearch HNSW (the ANN a user would pick), same vectors.

    Searches on one thread; builds on every core, each within ``budget`` seconds or reported as not built.
    """
    import faiss

    out: dict = {}
    faiss.omp_set_num_threads(1)
    flat = faiss.IndexFlatIP(mat.shape[1])
    flat.add(mat)
    qs = range(len(qvecs))
    times, got = timed(lambda i: rids[flat.search(qvecs[i:i + 1], 10)[1][0]].tolist(), qs)
    out["faiss_flat"], out["faiss_flat_recall"] = pct(times), _recall(got, truth)
    flat.reset()
    cores = os.cpu_count() or 1
    if ann:
        faiss.omp_set_num_threads(cores)    # the build may use every core
        step("faiss HNSW build")
        hnsw = faiss.IndexHNSWFlat(mat.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        out["hnsw_build_s"], out["hnsw_not_built"] = _budgeted(lambda a, b: hnsw.add(mat[a:b]), len(mat), budget)
        faiss.omp_set_num_threads(1)
        if out["hnsw_not_built"] is None:
            for ef in HNSW_EF:
                hnsw.hnsw.efSearch = ef
                times, got = timed(lambda i: rids[hnsw.search(qvecs[i:i + 1], 10)[1][0]].tolist(), qs)
                out[f"hnsw_{ef}"], out[f"hnsw_{ef}_recall"] = pct(times), _recall(got, truth)
        hnsw.reset()
    else:
        out["hnsw_not_built"] = "not built: above --ann-max (its build is the slowest step: see the 100k row)"
    step("usearch build")
    try:
        from usearch.index import Index
    except ImportError:
        out["usearch_not_built"] = "not built: usearch is not installed (pip install 'agentstack-lab[bench]')"
        return out
    idx = Index(ndim=mat.shape[1], metric="ip", dtype=USEARCH_DTYPE, connectivity=USEARCH_M,
                expansion_add=USEARCH_EF_ADD)
    keys = np.arange(len(mat), dtype=np.uint64)
    out["usearch_build_s"], out["usearch_not_built"] = _budgeted(
        lambda a, b: idx.add(keys[a:b], mat[a:b], threads=cores), len(mat), budget)
    if out["usearch_not_built"] is None:
        for ef in HNSW_EF:
            idx.expansion_search = ef
            times, got = timed(lambda i: rids[idx.search(qvecs[i], 10, threads=1).keys.astype(np.int64)].tolist(), qs)
            out[f"usearch_{ef}"], out[f"usearch_{ef}_recall"] = pct(times), _recall(got, truth)
    return out


_CHILD = """
import json, os, sys, time
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[v] = "1"
from agentstack_lab.config import Config
from agentstack_lab.workspace import Workspace

def mem_kb():
    out = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if parts[0] in ("Rss:", "Pss:"):
            out[parts[0][:-1]] = int(parts[1])
    return out

folder, kind, go, embedder = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
qs = json.loads(sys.stdin.read())
cfg = Config.from_dict({"memory": {"embedder": embedder, "vector": {"index": kind}}})
with Workspace.open(folder, config=cfg, announce=False) as ws:
    ws.memory.embedder.embed(["warm up"])   # a model embedder is loaded before the baseline
    import faiss, numpy  # noqa: F401 - imported by the search anyway: count the libraries as baseline
    before = mem_kb()
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.01)
    t = time.perf_counter()
    ws.memory.search(qs[0], "vector")
    first = time.perf_counter() - t
    peak = mem_kb()
    times = []
    for q in qs:
        t = time.perf_counter()
        ws.memory.search(q, "vector")
        times.append(time.perf_counter() - t)
        m = mem_kb()
        peak = {k: max(peak[k], m[k]) for k in m}
    print(json.dumps({"first_s": first, "rss_mb": (peak["Rss"] - before["Rss"]) / 1024,
                      "pss_mb": (peak["Pss"] - before["Pss"]) / 1024, "p50_ms": sorted(times)[len(times) // 2] * 1000}))
"""


_FIRST = """
import json, os, sys, time
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[v] = "1"
from agentstack_lab.config import Config
from agentstack_lab.workspace import Workspace

folder, go, embedder = sys.argv[1], sys.argv[2], sys.argv[3]
query = sys.stdin.readline().strip()
with Workspace.open(folder, config=Config.from_dict({"memory": {"embedder": embedder}}), announce=False) as ws:
    ws.memory.embedder.embed(["warm up"])   # a model embedder is loaded before the clock starts
    import faiss  # noqa: F401 - imported by the search anyway
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.002)
    t = time.perf_counter()
    ws.memory.search(query, "vector")
    print(json.dumps({"first_s": time.perf_counter() - t}), flush=True)
"""


def _fresh_child(folder: Path, embedder: str):
    """A fresh process that opens the memory, then waits for ``folder/go-first`` to search once (see first_search)."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", _FIRST, str(folder), str(folder / "go-first"), embedder],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def first_search(ws: Workspace, child, query: str, folder: Path) -> dict:
    """The first vector search right after the bulk load, in the loading process and in a fresh one, at once.

    The fresh process was started during the last batches and has opened the memory; both search as soon as
    the last ``store_many`` returned. Also how far the shared index files were behind the change log then.
    """
    import json

    child.stdin.write(query + "\n")
    child.stdin.close()
    t = time.perf_counter()
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError(f"benchmark child exited before searching (code {child.wait()})")
    waited = time.perf_counter() - t
    state = ws.memory.index.shared_index().state() or {"seq": 0}
    top = ws.db.query("SELECT seq FROM sqlite_sequence WHERE name = 'memory_vec_log'")[0][0]
    (folder / "go-first").touch()
    t = time.perf_counter()
    ws.memory.search(query, "vector")
    out = {"first_loading_s": time.perf_counter() - t, "behind": top - state["seq"], "child_wait_s": waited}
    out["first_fresh_s"] = json.loads(child.stdout.readline())["first_s"]
    child.wait()
    (folder / "go-first").unlink()
    # peer: what that first search paid before the files followed writes, building them from the database
    from agentstack_lab.memory.index import SharedIndex

    idx = ws.memory.index
    peer = SharedIndex(folder / "rebuild-peer", idx.dimensions, db_id="peer")
    t = time.perf_counter()
    with idx._log_snapshot() as (conn, top):
        peer.sync(top, lambda after: ([], True), lambda rids: idx._fetch(conn, rids), lambda: idx._read_all(conn))
    out["rebuild_s"] = time.perf_counter() - t
    shutil.rmtree(folder / "rebuild-peer")
    return out


def two_processes(folder: Path, kind: str, qs: list[str], embedder: str = "hash") -> dict:
    """Two fresh processes open the memory and search at once: first search time, peak RSS/PSS added."""
    import json
    import subprocess
    import sys

    go = folder / f"go-{kind}"
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(folder), kind, str(go), embedder],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.stdin.write(json.dumps(qs))
        p.stdin.close()
    for p in procs:   # both opened, embedder loaded and baseline taken, before either searches
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"benchmark child exited before searching (code {p.wait()})")
    go.touch()
    outs = [json.loads(p.stdout.read()) for p in procs]
    for p in procs:
        p.wait()
    go.unlink()
    return {key: max(o[key] for o in outs) for key in outs[0]}


def _all():
    from agentstack_lab.memory.vectors import VectorFilter

    return VectorFilter()


def _recall_floored(got: list[list[int]], truth: list[list[int]]) -> float:
    """Recall where a query's reference may hold fewer than 10 (or no) hits: an empty one counts 1.0."""
    return float(np.mean([len(set(g) & set(t)) / len(t) if t else float(not g)
                          for g, t in zip(got, truth, strict=True)]))


def _recall(got: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True)]))


def _rate(rate: float | None) -> str:
    return "(cached)" if rate is None else f"{rate:,.0f}"


def report(results: list[dict], about: str = "hash (hash-ngram-v1, 384 dims); corpus: zipf") -> str:
    def f(r, key):
        return f"{r[key][0]:.2f} / {r[key][1]:.2f}" if key in r else "—"

    out = [f"Embedder: {about}", "",
           "End to end through `Memory.search` (shared index, the default; recall@10 of its vector mode against"
           " numpy exact's top-10 over the same vectors, less the hits under the embedder's similarity floor,"
           " which `Memory.search` leaves out):", "",
           "| entries | store_many entries/s (main-thread CPU) | last 10% entries/s | embedding alone entries/s |"
           " FTS p50/p95 ms | vector p50/p95 ms | hybrid p50/p95 ms | recall@10 |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        out.append(f"| {r['n']:,} | {r['insert_rate']:,.0f} ({r['insert_main_cpu_rate']:,.0f}) |"
                   f" {r['insert_last_rate']:,.0f} | {_rate(r['embed_rate'])} |"
                   f" {f(r, 'fts')} | {f(r, 'vector')} | {f(r, 'hybrid')} | {r['search_recall']:.3f} |")
    out += ["", "First vector search right after the bulk load (the loading process and a fresh one that opened the"
            " memory during the last batches, searching at once; rows the index files were behind then), and"
            " recall@10 of the bare shared index against numpy exact on in-corpus queries (3 words of a note) and"
            " out-of-corpus ones (3 words in no note):", "",
            "| entries | first search s, loading process | first search s, fresh process | log rows behind |"
            " building the files from the database s (the first search before) |"
            " in-corpus recall@10 | index p50 ms | out-of-corpus recall@10 | index p50 ms | out-of-corpus Memory.search vector p50 ms |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        out.append(f"| {r['n']:,} | {r['first_loading_s']:.2f} | {r['first_fresh_s']:.2f} | {r['behind']:,} |"
                   f" {r['rebuild_s']:.1f} |"
                   f" {r['recall']:.3f} | {r['index'][0]:.2f} | {r['recall_ooc']:.3f} | {r['index_ooc'][0]:.2f} |"
                   f" {r['vector_ooc'][0]:.2f} |")
    out += ["", "Bare top-10 over pre-embedded queries, one thread (ratio = p50 / shared index p50):", "",
            "| entries | peer | p50 / p95 ms | × shared index | recall@10 |", "|---:|---|---:|---:|---:|"]
    for r in results:
        base = r["index"][0]
        rows = [("shared index (PQ, 8-bit, exact rescoring)", "index", r["recall"]), ("numpy exact", "numpy", 1.0),
                ("faiss flat", "faiss_flat", r.get("faiss_flat_recall"))]
        rows += [(f"faiss HNSW M={HNSW_M} ef={ef}", f"hnsw_{ef}", r.get(f"hnsw_{ef}_recall")) for ef in HNSW_EF]
        rows += [(f"usearch HNSW {USEARCH_DTYPE} M={USEARCH_M} ef={ef}", f"usearch_{ef}", r.get(f"usearch_{ef}_recall"))
                 for ef in HNSW_EF]
        rows += [("sqlite-vec in SQL (cache = false)", "sqlite_vec", r["sqlite_vec_recall"]), ("seed algorithm", "seed", r.get("seed_recall"))]
        for name, key, rec in rows:
            if key in r:
                out.append(f"| {r['n']:,} | {name} | {f(r, key)} | {r[key][0] / base:.2f}x |"
                           f" {rec if rec is None else format(rec, '.3f')} |")
        for name, key in (("faiss HNSW", "hnsw"), ("usearch HNSW", "usearch")):
            if r.get(f"{key}_build_s") is not None:
                out.append(f"| {r['n']:,} | ({name} build, all cores, ms) | {r[f'{key}_build_s'] * 1000:,.0f} | | |")
            elif r.get(f"{key}_not_built"):
                out.append(f"| {r['n']:,} | {name} | {r[f'{key}_not_built']} | | |")
        if "peers" in r:   # --peers: LanceDB / Chroma rows (benchmarks/memory_peers.py)
            from memory_peers import bare_rows

            out += bare_rows(r["n"], r["peers"], base)
    if any("peers" in r for r in results):
        from memory_peers import cost_table

        out += cost_table(results)
    out += ["", "Two fresh processes searching at once (50 vector searches each; worst of the two):", "",
            "| entries | path | first search s | vector p50 ms | RSS added MB | PSS added MB |",
            "|---:|---|---:|---:|---:|---:|"]
    for r in results:
        for kind in ("shared", "exact"):
            p = r[f"procs_{kind}"]
            out.append(f"| {r['n']:,} | {kind} | {p['first_s']:.2f} | {p['p50_ms']:.1f} | {p['rss_mb']:,.0f} |"
                       f" {p['pss_mb']:,.0f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated entry counts")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ann-max", type=int, default=200_000,
                        help="largest size at which the faiss HNSW peer is built (its build is the slowest step)")
    parser.add_argument("--ann-budget", type=float, default=900,
                        help="seconds an ANN peer's build may take (projected from its first rows); else 'not built'")
    parser.add_argument("--embedder", default="hash",
                        help="memory.embedder for the whole run: hash (default) or local (MiniLM, extra local-embeddings)")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="zipf", help="zipf (default) or english")
    parser.add_argument("--embed-threads", type=int, default=os.cpu_count() or 1,
                        help="torch threads while a model embedder embeds the corpus (default: every core; on a"
                             " loaded machine 1 was faster here)")
    parser.add_argument("--embed-cache", type=Path, default=None,
                        help="folder keeping a model embedder's corpus vectors between runs (resumable; see _embed_once)")
    parser.add_argument("--peers", default="",
                        help="embedded vector stores to measure beside ours, comma-separated: lancedb,chroma"
                             " (extra bench; see benchmarks/memory_peers.py); Chroma's build keeps to --ann-budget")
    parser.add_argument("--save-vectors", type=Path, default=None,
                        help="folder to save each size's row and query vectors in (.npy, for bench_coarse.py)")
    args = parser.parse_args(argv)
    from memory_peers import parse_peers

    try:
        peers = tuple(parse_peers(args.peers))
    except ValueError as exc:
        parser.error(str(exc))
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs; load average at start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}", flush=True)
    from agentstack_lab.embeddings import get_embedder

    model = get_embedder(args.embedder)   # the name and model only (a plugin embedder would need a workspace)
    about = (f"{args.embedder} ({model.model}, {model.dimensions} dims)"
             f"{'; each note embedded once, before store_many (see below)' if args.embedder != 'hash' else ''};"
             f" corpus: {args.corpus} ({CORPORA[args.corpus][1]}); queries: 3 consecutive words of a note")
    del model
    print(f"embedder: {about}", flush=True)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix=f"bench-memory-{n}-"))
        try:
            print(f"building {n:,} entries ...", flush=True)
            results.append(bench(n, min(args.queries, n), folder, n <= args.ann_max, args.ann_budget,
                                 args.embedder, args.corpus, args.save_vectors, args.embed_threads, args.embed_cache,
                                 peers))
            print(report(results[-1:], about), flush=True)   # each size as soon as it is done
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"\n{os.cpu_count()} CPUs; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)")
    print(report(results, about))
    print("\nstore_many: wall-clock rate over"
          f" calls of {BATCH:,} entries each (one transaction per call, fresh keys);"
          " in brackets the rate the calling thread's CPU time allows (the embedder runs in a second thread, the"
          " full-text index is written by a third; the timing ends with a keyword search that finds the last batch).")
    if args.embedder != "hash":
        print(f"{args.embedder}: every note was embedded once before store_many (the embedding column, torch on"
              f" {args.embed_threads} thread(s));"
              " store_many was handed those vectors, so its rate is the storing cost alone: a user's store_many"
              " runs at about the embedding rate. Vector and hybrid latency include embedding the query with the"
              " model (one thread).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
