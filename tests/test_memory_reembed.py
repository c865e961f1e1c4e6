"""Embedders: the model is configurable, a mismatch is one line and keeps keyword search, `memory reembed`.

Through the CLI (typer's runner in the test's working folder, whose ``agentstack.config.json`` changes the
embedder), the Python API and ``%memory`` in an in-process IPython shell; OpenAI and Ollama against the
loopback fakes of ``tests/fakes_llm.py``.
"""

from __future__ import annotations

import json
import threading

import fakes_llm
import pytest
from fakes_llm import API_KEY
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.config import Config, ConfigError
from agentstack_lab.memory.vectors import EmbedderMismatchError
from agentstack_lab.workspace import Workspace, release_shell

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm
runner = CliRunner()
NOTES = [(f"n{i}", f"note {i}: the kubernetes cluster runs service {i}" if i % 3 == 0
          else f"note {i}: a recipe for lentil soup number {i}") for i in range(600)]


def _config(workdir, **memory) -> None:
    (workdir / "agentstack.config.json").write_text(json.dumps({"memory": memory}))


def _with(backend_config: dict, **memory) -> Config:
    """``backend_config`` (SQLite, or a fresh PostgreSQL database) with ``memory`` settings added."""
    return Config.model_validate({**backend_config, "memory": {**backend_config.get("memory", {}), **memory}})


def cli(*args: str) -> tuple[int, str, str]:
    out = runner.invoke(app, list(args))
    return out.exit_code, out.stdout, out.stderr


# --- the model is configurable ---------------------------------------------------------------------------
@pytest.mark.parametrize("embedder, path, model", [("openai", "/v1/embeddings", "text-embedding-3-large"),
                                                   ("ollama", "/api/embed", "nomic-embed-text")])
def test_the_configured_model_reaches_the_wire(fake_llm, tmp_path, embedder, path, model):
    fake_llm.ollama_dims = 16
    cfg = Config.model_validate({
        "memory": {"embedder": embedder, "embedder_model": model, "vector": {"dimensions": 16}},
        "providers": {"openai": {"api_key": API_KEY, "base_url": f"{fake_llm.url}/v1", "max_retries": 0},
                      "ollama": {"base_url": fake_llm.url, "max_retries": 0}}})
    with Workspace.open(tmp_path / "w", config=cfg, announce=False) as ws:
        assert ws.embedder.model == model
        ws.memory.store("k", "the churn rate rose in March")
        assert [h.key for h in ws.memory.search("the churn rate rose in March", "vector")] == ["k"]
        row = ws.db.query("SELECT embedder, model, dimensions FROM vector_index")[0]
        assert tuple(row) == (embedder, model, 16)
    sent = [r.json for r in fake_llm.requests if r.path == path]
    assert sent and all(body["model"] == model for body in sent)


def test_the_hash_embedder_has_no_other_model(tmp_path):
    cfg = Config.model_validate({"memory": {"embedder_model": "text-embedding-3-large"}})
    with Workspace.open(tmp_path / "w", config=cfg, announce=False) as ws, pytest.raises(ConfigError) as info:
        _ = ws.embedder
    assert str(info.value).startswith("memory.embedder_model: the hash embedder has one model, 'hash-ngram-v1'")


# --- a dimension mismatch ---------------------------------------------------------------------------------
def test_a_mismatch_is_one_line_and_keyword_search_and_list_keep_working(workdir):
    for key, text in NOTES[:10]:
        assert cli("memory", "store", key, text)[0] == 0
    _config(workdir, vector={"dimensions": 128})
    code, out, _ = cli("memory", "list", "--json")
    assert code == 0 and len(json.loads(out)) == 10
    code, out, err = cli("memory", "search", "kubernetes", "--mode", "fts", "--json")
    assert code == 0 and {h["key"] for h in json.loads(out)} == {"n0", "n3", "n6", "n9"}
    code, out, err = cli("memory", "search", "kubernetes", "--json")        # hybrid: keywords, with a warning
    assert code == 0 and {h["key"] for h in json.loads(out)} == {"n0", "n3", "n6", "n9"}
    assert err.startswith("warning: keyword only: ") and "dimension 384" in err and "dimension 128" in err
    for args in (("search", "kubernetes", "--mode", "vector"), ("store", "new", "text")):
        code, out, err = cli("memory", *args)
        line = err.strip()
        assert code != 0 and "\n" not in line and "Traceback" not in err, err
        assert "memory was embedded by 'hash' (model 'hash-ngram-v1') with dimension 384, the configured embedder" \
               " 'hash' (model 'hash-ngram-v1') gives dimension 128" in line
        assert "agentstack-lab memory reembed" in line
    assert cli("memory", "get", "new")[0] != 0          # the refused store wrote nothing


# --- memory reembed ---------------------------------------------------------------------------------------
def test_reembed_through_the_cli_resumes_after_an_interruption(workdir):
    with Workspace.open(workdir, announce=False) as ws:
        ws.memory.store_many(NOTES)
    _config(workdir, vector={"dimensions": 96})
    stop = threading.Event()
    with Workspace.open(workdir, announce=False) as ws:
        first = ws.memory.reembed(batch_size=100, progress=lambda done, total: done >= 200 and stop.set(), stop=stop)
        assert (first.finished, first.embedded, first.total) == (False, 200, 600)
        with pytest.raises(EmbedderMismatchError):   # stopped: the old vectors are still the memory's
            ws.memory.search("kubernetes", "vector")
    code, out, err = cli("memory", "reembed", "--batch-size", "100", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert (got["finished"], got["resumed"], got["embedded"], got["total"]) == (True, True, 400, 600)
    assert (got["embedder"], got["model"], got["dimensions"]) == ("hash", "hash-ngram-v1", 96)
    assert "re-embedding" in err and "600/600" in err and "100%" in err      # the progress bar, on stderr
    code, out, err = cli("memory", "search", "kubernetes cluster service", "--mode", "vector", "--json")
    assert code == 0 and err == "" and json.loads(out)
    assert all(int(h["key"][1:]) % 3 == 0 for h in json.loads(out))
    code, out, _ = cli("memory", "reembed")                # again: every entry, nothing to resume
    assert code == 0 and out.strip() == "re-embedded 600 entries with hash (model 'hash-ngram-v1', dimension 96)"
    with Workspace.open(workdir, announce=False) as ws:
        assert ws.memory.stats() == {"memory": 600, "fts": 600, "vector": 600}
        assert ws.db.query("SELECT count(*) FROM memory_reembed_vec")[0][0] == 0


def test_reembed_resumes_after_the_embedder_failed_midway(tmp_path, monkeypatch, backend, backend_config):
    root = tmp_path / "w"
    with Workspace.open(root, config=_with(backend_config), announce=False) as ws:
        ws.memory.store_many(NOTES[:300])
    cfg = _with(backend_config, vector={"dimensions": 64})
    with Workspace.open(root, config=cfg, announce=False) as ws:
        real, calls = ws.embedder.embed, []

        def flaky(texts):
            calls.append(len(texts))
            if len(calls) == 3:
                raise ConnectionError("embedder went away")
            return real(texts)

        monkeypatch.setattr(ws.embedder, "embed", flaky)
        with pytest.raises(ConnectionError):
            ws.memory.reembed(batch_size=50)
        monkeypatch.setattr(ws.embedder, "embed", real)
        again = ws.memory.reembed(batch_size=50)
        assert (again.finished, again.resumed, again.embedded) == (True, True, 200)
        assert ws.memory.stats() == {"memory": 300, "fts": 300, "vector": 300}
        assert all(int(h.key[1:]) % 3 == 0 for h in ws.memory.search("kubernetes cluster service", "vector", limit=5))


def test_the_memory_is_searchable_and_writable_throughout_a_reembed(tmp_path, backend, backend_config):
    root = tmp_path / "w"
    with Workspace.open(root, config=_with(backend_config), announce=False) as old:
        old.memory.store_many(NOTES)
        new_cfg = _with(backend_config, vector={"dimensions": 48})
        seen: list[tuple] = []
        with Workspace.open(root, config=new_cfg, announce=False) as new:
            def during(done: int, total: int) -> None:
                if 0 < done < total and not seen:
                    # a process with the old embedder: vectors still answer, and it may write
                    hits = old.memory.search("kubernetes cluster service", "vector", limit=3)
                    old.memory.store("late", "a late note about the kubernetes cluster autoscaler")
                    old.memory.store("n0", "note 0 now says: lentil soup with cumin")    # changed content
                    old.memory.delete("n1")
                    # a process with the new embedder: keyword search answers, and says so
                    mixed = new.memory.search("kubernetes", limit=3)
                    seen.append((len(hits), mixed.degraded is not None, len(mixed)))
            result = new.memory.reembed(batch_size=64, progress=during)
            assert seen == [(3, True, 3)] and result.finished and result.total == 600
            assert new.memory.stats() == {"memory": 600, "fts": 600, "vector": 600}
            assert "late" in [h.key for h in new.memory.search("autoscaler kubernetes", "vector", limit=3)]
            assert "n0" in [h.key for h in new.memory.search("lentil soup with cumin", "vector", limit=5)]
            new.memory.store("after", "written with the new embedder")
        # the old-embedder process follows: keyword only now, and its writes are refused in one line
        assert old.memory.search("kubernetes", limit=1).degraded.startswith("keyword only: ")
        with pytest.raises(EmbedderMismatchError, match="dimension 48, the configured embedder 'hash'"):
            old.memory.store("x", "y")


# --- %memory reembed --------------------------------------------------------------------------------------
def test_memory_magic_keeps_working_on_a_mismatch_and_reembeds_in_the_background(shell, tmp_path, capsys):
    root = tmp_path / "w"
    with Workspace.open(root, announce=False) as ws:
        ws.memory.store_many(NOTES[:300])
    magics = shell.magics_manager.registry["AgentstackMagics"]
    kernel_ws = Workspace.open(root, config=Config.model_validate({"memory": {"vector": {"dimensions": 32}}}),
                               announce=False)
    shell._agentstack_lab_workspace = kernel_ws   # the kernel's workspace (workspace.for_shell)
    try:
        assert len(shell.run_line_magic("memory", "list --limit 5")) == 5
        frame = shell.run_line_magic("memory", "search kubernetes --limit 3")
        assert len(frame) == 3 and frame.attrs["degraded"].startswith("keyword only: ")
        from agentstack_lab.notebook.memory_magic import MemoryError_

        with pytest.raises(MemoryError_) as info:
            shell.run_line_magic("memory", "search kubernetes --mode vector")
        assert "\n" not in str(info.value) and "dimension 384" in str(info.value)
        assert shell.run_line_magic("memory", "reembed --batch-size 50") is None   # returns at once
        job = magics.reembedding
        result = job.wait(timeout=120)
        assert job.done and result.finished and result.total == 300
        assert "re-embedded 300 entries with hash" in repr(job) and "<progress" not in job._repr_html_()
        frame = shell.run_line_magic("memory", "search kubernetes cluster service --mode vector --limit 3")
        assert len(frame) == 3 and not frame.attrs["degraded"]
        assert shell.run_line_magic("memory", "reembed --wait") is None
        assert magics.reembedding.result.finished and not magics.reembedding.result.resumed
    finally:
        release_shell(shell)


@pytest.mark.slow
def test_ctrl_c_stops_the_cli_reembed_and_the_next_run_resumes(workdir):
    import os
    import signal
    import subprocess
    import sys
    import time

    with Workspace.open(workdir, announce=False) as ws:
        ws.memory.store_many([(f"m{i}", f"entry {i} about topic {i % 17}") for i in range(3000)])
    _config(workdir, vector={"dimensions": 40})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "agentstack_lab.cli", "memory", "reembed", "--batch-size", "1"],
                            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with Workspace.open(workdir, announce=False) as ws:   # wait until it has made some vectors (no sleep-and-hope)
        deadline = time.monotonic() + 120
        while ws.db.query("SELECT count(*) FROM memory_reembed_vec")[0][0] < 10:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "memory reembed: interrupted; run it again to resume where it stopped" in err
    code, out, err = cli("memory", "reembed", "--json")
    got = json.loads(out)
    assert code == 0 and got["finished"] and got["resumed"] and 0 < got["embedded"] < 3000 - 9
