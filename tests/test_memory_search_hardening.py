"""Issue 9, items 3-5: hybrid search survives a failing embedder, absent things are not found,
big entries are bounded (embedder memory, ``memory.max_entry_bytes``)."""

from __future__ import annotations

import importlib
import json
import logging
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import fakes_llm
import numpy as np
import pytest
from fakes_llm import API_KEY, Status
from IPython.core.interactiveshell import InteractiveShell
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.config import Config
from agentstack_lab.embeddings import hashing
from agentstack_lab.embeddings.hashing import HashEmbedder
from agentstack_lab.memory import EmbedderFailedError, MemoryValidationError
from agentstack_lab.workspace import Workspace

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

NOTES = {"kettle": "the kettle in the kitchen boils water for tea every morning",
         "invoice": "send the quarterly invoice to the accounting department by friday",
         "garden": "plant tomatoes and basil in the garden beds after the last frost",
         "backup": "the nightly database backup runs at two and keeps seven days of snapshots",
         "meeting": "the product meeting moved to thursday afternoon in room four"}


def _openai(url: str, dims: int = 16) -> dict:
    return {"memory": {"embedder": "openai", "vector": {"dimensions": dims}},
            "providers": {"openai": {"api_key": API_KEY, "base_url": url, "max_retries": 0, "timeout": 5}}}


# --- item 3: the embedder fails ---------------------------------------------------------------------
def test_hybrid_search_falls_back_to_keywords_when_the_embedder_fails(fake_llm, tmp_path, caplog):
    root = tmp_path / "ws"
    with Workspace.open(root, config=Config.model_validate(_openai(f"{fake_llm.url}/v1")), announce=False) as ws:
        ws.memory.store_many(list(NOTES.items()))
        assert ws.memory.search("kettle").degraded is None
        fake_llm.queue(*[Status(500, "embedding backend exploded")] * 3)
        with caplog.at_level(logging.WARNING, logger="agentstack_lab.memory"):
            for _ in range(2):
                hits = ws.memory.search("kettle water")
                assert [h.key for h in hits] == ["kettle"] and hits[0].matched == {"fts"}
                assert hits.degraded.startswith("keyword only: embedder 'openai' failed: openai: 500")
                assert hits[0].degraded == hits.degraded and hits[0].to_dict()["degraded"] == hits.degraded
            assert ws.memory.search("zebra").degraded   # said even when nothing was found
            with pytest.raises(EmbedderFailedError) as info:   # queue now empty: vector mode needs a failure too
                fake_llm.queue(Status(500, "still down"))
                ws.memory.search("kettle", "vector")
        msg = str(info.value)
        assert msg.startswith("vector search: embedder 'openai' failed: openai: 500") and "\n" not in msg
        assert API_KEY not in msg
        warnings = [r for r in caplog.records if "keywords only" in r.getMessage()]
        assert len(warnings) == 1   # once per failure streak, not per call
        with caplog.at_level(logging.WARNING, logger="agentstack_lab.memory"):
            # the embedder works again (the fake's vectors are random but for equal texts: search the note itself)
            healthy = ws.memory.search(NOTES["kettle"])
        assert healthy.degraded is None and "vector" in healthy[0].matched
        assert any("works again" in r.getMessage() for r in caplog.records)
    # an unreachable embedder (connection refused) degrades the same way
    dead = Config.model_validate(_openai("http://127.0.0.1:9/v1"))
    with Workspace.open(root, config=dead, announce=False) as ws:
        hits = ws.memory.search("garden tomatoes")
        assert [h.key for h in hits] == ["garden"] and "cannot connect" in hits.degraded


def test_an_in_process_embedder_that_fails_degrades_the_same_way(tmp_path, monkeypatch):
    """The hash embedder runs before the FTS thread starts (search.py); its failure still leaves keywords."""
    with Workspace.open(tmp_path / "ws", announce=False) as ws:
        ws.memory.store_many(list(NOTES.items()))
        assert ws.memory.embedder.in_process and ws.memory.search("kettle water").degraded is None

        def broken(texts):
            raise RuntimeError("hash table on fire")

        monkeypatch.setattr(ws.memory.embedder, "embed", broken)
        hits = ws.memory.search("kettle water")
        assert [h.key for h in hits] == ["kettle"] and hits[0].matched == {"fts"}
        assert hits.degraded.startswith("keyword only: embedder 'hash' failed") and "on fire" in hits.degraded
        with pytest.raises(EmbedderFailedError, match="^vector search: embedder 'hash' failed"):
            ws.memory.search("kettle", "vector")


def test_cli_json_and_memory_magic_mark_a_degraded_search(fake_llm, workdir, capsys):
    (workdir / "agentstack.config.json").write_text(json.dumps(_openai(f"{fake_llm.url}/v1")))
    with Workspace.open(workdir, announce=False) as ws:
        ws.memory.store_many(list(NOTES.items()))
    fake_llm.queue(*[Status(500, "down")] * 4)
    result = CliRunner().invoke(app, ["memory", "search", "invoice", "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert [h["key"] for h in hits] == ["invoice"]
    assert hits[0]["degraded"].startswith("keyword only: embedder 'openai' failed") and hits[0]["matched"] == ["fts"]
    assert "warning: keyword only: embedder 'openai' failed" in result.stderr

    sh = InteractiveShell.instance()
    try:
        sh.run_line_magic("load_ext", "agentstack_lab")
        frame = sh.run_line_magic("memory", "search backup")
        assert list(frame["key"]) == ["backup"] and frame.attrs["degraded"].startswith("keyword only:")
        assert frame["degraded"].iloc[0] == frame.attrs["degraded"]
        assert "%memory search: keyword only: embedder 'openai' failed" in capsys.readouterr().out
        fake_llm.reset()
        healthy = sh.run_line_magic("memory", "search backup")
        assert "degraded" not in healthy.columns and healthy.attrs["degraded"] is None
        sh.run_line_magic("unload_ext", "agentstack_lab")
    finally:
        InteractiveShell.clear_instance()


# --- item 4: absent things are not found ---------------------------------------------------------------
def test_a_query_for_something_absent_finds_nothing(tmp_path):
    with Workspace.open(tmp_path / "ws", announce=False) as ws:
        ws.memory.store_many(list(NOTES.items()))
        for mode in ("hybrid", "vector"):
            for absent in ("zebra", "giraffe saxophone", "volcano", "zebra herds crossing savanna rivers during dry season"):
                assert ws.memory.search(absent, mode) == [], (mode, absent)
            assert ws.memory.search("kettle", mode)[0].key == "kettle"
            assert ws.memory.search("when does the nightly backup run", mode)[0].key == "backup"
        assert ws.memory.search("tomatos basil garden", "vector")[0].key == "garden"   # a typo still matches
    # the floor is configurable (memory.hybrid.min_vector_score); -1 lets everything through
    loose = Config.model_validate({"memory": {"hybrid": {"min_vector_score": -1}}})
    with Workspace.open(tmp_path / "ws", config=loose, announce=False) as ws:
        assert len(ws.memory.search("zebra", "vector")) == len(NOTES)


def _sentences() -> list[str]:
    """Real English: stdlib docstrings cut into sentences (what the floor was calibrated on)."""
    out: set[str] = set()
    for name in ("json", "csv", "argparse", "logging", "decimal", "textwrap", "difflib", "pathlib", "shutil",
                 "zipfile", "tarfile", "functools", "itertools", "collections", "subprocess", "threading"):
        mod = importlib.import_module(name)
        for obj in [mod, *(getattr(mod, n) for n in dir(mod) if not n.startswith("_"))]:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str):
                out.update(s for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())) if 40 <= len(s) <= 400)
    return sorted(out)


def test_hash_embedder_floor_is_above_the_background_of_unrelated_texts():
    """Measure, don't trust: p99 of unrelated (query, note) similarity stays under the floor."""
    rng = np.random.default_rng(7)
    notes = _sentences()
    rng.shuffle(notes)
    notes = notes[:400]
    emb = HashEmbedder()
    vecs = emb.embed(notes)
    words = sorted({w for s in notes for w in re.findall(r"[a-z]{4,}", s.lower())})
    short, phrase = [], []
    for i, note in enumerate(notes):
        own = set(re.findall(r"\w+", note.lower()))
        pool = [w for w in words if w not in own]
        q = " ".join(rng.choice(pool, size=int(rng.integers(1, 4)), replace=False))
        short.append(float(emb.embed([q])[0] @ vecs[i]))
        other = notes[(i + 1 + int(rng.integers(0, len(notes) - 1))) % len(notes)].split()
        ph = " ".join(w for w in other[:8] if w.lower().strip(".,;:()") not in own)
        if len(re.findall(r"\w+", ph)) > 3:
            phrase.append(float(emb.embed([ph])[0] @ vecs[i]))
    assert np.percentile(short, 99) < emb.similarity_floor("zebra") == emb.min_similarity
    assert np.percentile(phrase, 99) < emb.similarity_floor("red blue green gold") == emb.min_similarity_phrase
    assert len(phrase) > 200


# --- item 5: big entries ---------------------------------------------------------------------------------
def _text(chars: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list("abcdefghijklmnop"), size=rng.integers(3, 9))) for _ in range(2000)]
    return " ".join(rng.choice(words, size=chars // 5))[:chars]


def test_hash_embedder_memory_is_bounded_and_windows_agree_with_one_pass(monkeypatch):
    text = _text(4_000_000)
    emb = HashEmbedder()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        big = emb.embed([text])
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 120e6, f"peak {peak / 1e6:.0f} MB for a 4 MB entry (one pass took ~820 MB)"
    assert np.isclose(np.linalg.norm(big[0]), 1.0)
    small = _text(60_000, seed=1)
    one_pass = emb.embed([small])[0]
    monkeypatch.setattr(hashing, "WINDOW", 4096)   # the same text in ~15 windows
    assert float(emb.embed([small])[0] @ one_pass) > 0.9999
    assert np.array_equal(emb.embed(["short", "texts"]), HashEmbedder().embed(["short", "texts"]))


def test_max_entry_bytes_is_checked_on_every_write_before_any_work(tmp_path):
    cfg = Config.model_validate({"memory": {"max_entry_bytes": 1000}})
    with Workspace.open(tmp_path / "ws", config=cfg, announce=False) as ws:
        ws.memory.store("k", "fits")
        big = "é" * 501   # 501 characters, 1,002 bytes
        with pytest.raises(MemoryValidationError, match=r"content of 'k' is 1,002 bytes; the limit is 1,000"
                                                        r" \(memory.max_entry_bytes\)"):
            ws.memory.store("k", big)   # an update
        with pytest.raises(MemoryValidationError, match=r"item 1: content of 'b' is 1,001 bytes"):
            ws.memory.store_many([("a", "ok"), ("b", "x" * 1001)])
        s = ws.sessions.start("s")
        with pytest.raises(MemoryValidationError, match="limit is 1,000"):
            ws.memory.scoped(s.id).store("big", "y" * 2000)
        assert ws.memory.get("k").content == "fits" and ws.memory.stats() == {"memory": 1, "fts": 1, "vector": 1}
        ws.memory.store("edge", "z" * 1000)   # exactly the limit is fine
    assert Config().memory.max_entry_bytes == 10 * 1024 * 1024


@pytest.mark.slow
def test_max_entry_bytes_in_the_cli(workdir):
    (workdir / "agentstack.config.json").write_text(json.dumps({"memory": {"max_entry_bytes": 100}}))
    with Workspace.open(workdir, announce=False) as ws:
        ws.memory.count()
    script = Path(sys.executable).with_name("agentstack-lab")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
    out = subprocess.run([*cmd, "memory", "store", "notes", "-"], input="w" * 150, capture_output=True, text=True,
                         cwd=workdir, timeout=120)
    assert out.returncode in (1, 2) and out.stderr.strip() == \
        "error: content of 'notes' is 150 bytes; the limit is 100 (memory.max_entry_bytes)"
    with Workspace.open(workdir, announce=False) as ws:
        assert ws.memory.count() == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, 5, True, "0.5"])
def test_python_api_refuses_a_threshold_outside_0_to_1_in_one_line(tmp_path, bad):
    """The CLI checked ``--threshold``; the Python API took ``nan`` and silently returned nothing."""
    from agentstack_lab.memory.access import MemoryValidationError

    with Workspace.open(tmp_path, announce=False) as ws:
        ws.memory.store("k", "hello world")
        with pytest.raises(MemoryValidationError, match="threshold must be a number between 0 and 1"):
            ws.memory.search("hello", threshold=bad)
        assert [h.key for h in ws.memory.search("hello", threshold=0.5)] == ["k"]
