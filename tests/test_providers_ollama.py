"""The Ollama provider (plain HTTP, NDJSON) against the loopback fake server."""

from __future__ import annotations

import socket
import time

import fakes_llm
import pytest
from fakes_llm import Malformed, Reply, Stall, Status, StreamError, Truncated, fake_vector

from agentstack_lab.providers.base import (
    AuthenticationError,
    MalformedStreamError,
    Message,
    ProviderError,
    ProviderRequest,
    ProviderTimeout,
    ProviderUnavailable,
    StopEvent,
    TextDeltaEvent,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    UsageEvent,
)
from agentstack_lab.providers.complete import complete
from agentstack_lab.providers.ollama import ollama_base_url
from agentstack_lab.providers.registry import get_provider

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

CALC = ToolSpec(name="python", description="Run Python.",
                input_schema={"type": "object", "properties": {"code": {"type": "string"}}})


def make(fake, **kw):
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5)
    return get_provider("ollama", base_url=fake.url, retry_delay=0.001, **kw)


def ask(text="hi", **kw):
    return ProviderRequest(messages=[Message(role="user", content=text)], **kw)


async def test_streamed_text_in_order_with_usage(fake_llm):
    fake_llm.queue(Reply(text="local models are fun", usage=(12, 4)))
    events = [e async for e in make(fake_llm, model="qwen-test").stream(
        ask(system="sys", temperature=0.1, stop_sequences=["##"], max_tokens=64))]
    assert "".join(e.text for e in events if isinstance(e, TextDeltaEvent)) == "local models are fun"
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)][0] == "local "
    assert events[-2:] == [UsageEvent(input_tokens=12, output_tokens=4), StopEvent(reason="end_turn")]
    sent = fake_llm.requests[0]
    assert sent.path == "/api/chat"
    assert sent.json["model"] == "qwen-test" and sent.json["stream"] is True
    assert sent.json["options"] == {"num_predict": 64, "temperature": 0.1, "stop": ["##"]}
    assert sent.json["messages"][0] == {"role": "system", "content": "sys"}


async def test_tool_round_trip(fake_llm):
    fake_llm.queue(Reply(tool_calls=[("", "python", {"code": "df.shape"})]), Reply(text="df has 3 rows."))
    provider = make(fake_llm)
    first = await complete(provider, ask("shape of df?", tools=[CALC]))
    assert first.stop_reason == "tool_use"
    [call] = first.tool_calls
    assert call.name == "python" and call.input == {"code": "df.shape"} and call.id
    follow = ask("shape of df?", tools=[CALC])
    follow.messages.extend([Message(role="assistant", content=[ToolUseBlock(id=call.id, name=call.name, input=call.input)]),
                            Message(role="user", content=[ToolResultBlock(tool_use_id=call.id, content="(3, 2)")])])
    final = await complete(provider, follow)
    assert final.text == "df has 3 rows."
    sent = fake_llm.requests[1].json
    assert sent["tools"][0]["function"]["name"] == "python"
    assert sent["messages"][1:] == [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "python", "arguments": {"code": "df.shape"}}}]},
        {"role": "tool", "content": "(3, 2)", "tool_name": "python"},
    ]


@pytest.mark.parametrize("status", [429, 503, 529])
async def test_busy_then_success_is_retried(fake_llm, status):
    fake_llm.queue(Status(status, "server busy", headers={"retry-after": "0"}), Reply(text="done"))
    assert (await complete(make(fake_llm), ask())).text == "done"
    assert len(fake_llm.requests) == 2


async def test_retries_exhausted_is_a_clear_error(fake_llm):
    fake_llm.queue(*[Status(503, "server busy", headers={"retry-after": "0"})] * 3)
    with pytest.raises(ProviderError, match="ollama: 503: server busy"):
        await complete(make(fake_llm, max_retries=2), ask())


async def test_401_names_the_key_variable(fake_llm):
    fake_llm.ollama_key = "right"
    with pytest.raises(AuthenticationError, match="OLLAMA_API_KEY"):
        await complete(make(fake_llm, api_key="wrong"), ask())
    assert (await complete(make(fake_llm, api_key="right"), ask())).text == "ok"


async def test_unknown_model_says_how_to_pull(fake_llm):
    fake_llm.queue(Status(404, "model 'nope' not found"))
    with pytest.raises(ProviderError, match="model 'nope' not found.*ollama pull"):
        await complete(make(fake_llm), ask())


async def test_not_running_is_a_clear_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port now
    provider = get_provider("ollama", base_url=f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(ProviderUnavailable, match=f"Ollama is not running at http://127.0.0.1:{port}"):
        await complete(provider, ask())


async def test_stalled_stream_times_out(fake_llm):
    fake_llm.queue(Stall(after=2, seconds=30))
    start = time.monotonic()
    with pytest.raises(ProviderTimeout, match="ollama"):
        await complete(make(fake_llm, timeout=0.5), ask())
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("behaviour", [Malformed(after=1), Truncated(after=1)], ids=["bad-json", "truncated"])
async def test_malformed_or_truncated_stream_is_clear(fake_llm, behaviour):
    fake_llm.queue(behaviour)
    with pytest.raises(MalformedStreamError, match="ollama"):
        await complete(make(fake_llm), ask())


async def test_error_line_in_stream(fake_llm):
    fake_llm.queue(*[StreamError(message="out of memory")] * 3)   # retried like a broken stream, then given up
    with pytest.raises(ProviderError, match=r"out of memory \(gave up after 3 attempts\)"):
        await complete(make(fake_llm), ask())


async def test_embed(fake_llm):
    fake_llm.ollama_dims = 12
    vectors = await make(fake_llm).embed(["a", "b", "c"])
    assert [len(v) for v in vectors] == [12, 12, 12]
    assert vectors[2] == pytest.approx(fake_vector("c", 12))
    assert fake_llm.requests[0].json == {"model": "all-minilm", "input": ["a", "b", "c"]}


def test_base_url_resolution(monkeypatch):
    assert ollama_base_url() == "http://localhost:11434"
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0")
    assert ollama_base_url() == "http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:9999")
    assert ollama_base_url() == "http://gpu-box:9999"
    assert ollama_base_url("https://ollama.example/") == "https://ollama.example"
