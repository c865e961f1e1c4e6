"""OpenAI / Ollama / local embedders through the embedder registry, against the fake servers."""

from __future__ import annotations

import importlib.util
import sys

import fakes_llm
import numpy as np
import pytest
from fakes_llm import API_KEY, Status, fake_vector

from agentstack_lab.config import Config
from agentstack_lab.embeddings import get_embedder, list_embedders
from agentstack_lab.embeddings.remote import EmbedderDimensionError
from agentstack_lab.providers.base import AuthenticationError, MissingKeyError

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm


def config_for(fake, embedder: str, dims: int) -> Config:
    return Config.model_validate({
        "memory": {"embedder": embedder, "vector": {"dimensions": dims}},
        "providers": {"openai": {"api_key": API_KEY, "base_url": f"{fake.url}/v1", "max_retries": 1},
                      "ollama": {"base_url": fake.url, "max_retries": 1}},
    })


def test_registered_alongside_the_hash_embedder():
    assert {"hash", "openai", "ollama", "local"} <= set(list_embedders())


def test_openai_embedder_shortens_and_normalises(fake_llm):
    emb = get_embedder("openai", dimensions=16, config=config_for(fake_llm, "openai", 16))
    out = emb.embed(["apples", "pears"])
    assert out.shape == (2, 16) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert np.allclose(out[0], fake_vector("apples", 16), atol=1e-6)
    assert fake_llm.requests[0].json["dimensions"] == 16
    assert (emb.name, emb.model, emb.dimensions) == ("openai", "text-embedding-3-small", 16)


async def test_openai_embedder_works_inside_a_running_loop(fake_llm):
    emb = get_embedder("openai", dimensions=8, config=config_for(fake_llm, "openai", 8))
    assert emb.embed(["from a notebook cell"]).shape == (1, 8)  # sync call while this test's loop runs


def test_openai_embedder_errors_are_clear(fake_llm):
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        get_embedder("openai", dimensions=8)
    fake_llm.api_key = "other"
    emb = get_embedder("openai", dimensions=8, config=config_for(fake_llm, "openai", 8))
    with pytest.raises(AuthenticationError, match="providers.openai.api_key"):
        emb.embed(["x"])
    with pytest.raises(TypeError, match="not a single string"):
        emb.embed("x")


def test_ollama_embedder_and_dimension_mismatch(fake_llm):
    fake_llm.ollama_dims = 24
    emb = get_embedder("ollama", dimensions=24, config=config_for(fake_llm, "ollama", 24))
    assert emb.embed(["a", "b"]).shape == (2, 24)
    wrong = get_embedder("ollama", dimensions=384, config=config_for(fake_llm, "ollama", 384))
    with pytest.raises(EmbedderDimensionError) as info:   # one line naming the embedder and the fix
        wrong.embed(["a"])
    assert str(info.value) == ("embedder ollama (model 'all-minilm') returned vectors of dimension 24, config says "
                               "384; set memory.vector.dimensions = 24 (on a fresh database) or pick another model")


def test_ollama_embedder_retries_then_succeeds(fake_llm):
    fake_llm.queue(Status(503, "loading model", headers={"retry-after": "0"}))
    emb = get_embedder("ollama", dimensions=8, config=config_for(fake_llm, "ollama", 8))
    assert emb.embed(["a"]).shape == (1, 8)
    assert len(fake_llm.requests) == 2


def test_workspace_memory_uses_the_ollama_embedder(fake_llm, tmp_path):
    from agentstack_lab.workspace import Workspace

    fake_llm.ollama_dims = 32
    ws = Workspace.open(tmp_path / "proj", config=config_for(fake_llm, "ollama", 32))
    try:
        ws.memory.store("k1", "the churn rate rose in March")
        ws.memory.store("k2", "an unrelated note about lunch")
        hits = ws.memory.search("the churn rate rose in March", mode="vector", limit=1)
        assert [h.key for h in hits] == ["k1"]
        assert any(r.path == "/api/embed" for r in fake_llm.requests)
    finally:
        ws.close()


@pytest.mark.slow  # loads PyTorch and a model: seconds
@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="sentence-transformers not installed (optional extra: agentstack-lab[local-embeddings])")
def test_local_minilm_embedder():
    emb = get_embedder("local", dimensions=384)
    out = emb.embed(["a cat sat on the mat", "a kitten rested on the rug", "quarterly tax filing"])
    assert out.shape == (3, 384)
    assert out[0] @ out[1] > out[0] @ out[2]


def test_local_embedder_without_the_extra_names_it(monkeypatch):
    # where the extra is installed (make test installs it), hide it: a None entry makes the import fail
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=r"pip install 'agentstack-lab\[local-embeddings\]'"):
        get_embedder("local", dimensions=384)
