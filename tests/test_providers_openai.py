"""The OpenAI provider through the real ``openai`` SDK against the loopback fake server."""

from __future__ import annotations

import time

import fakes_llm
import pytest
from fakes_llm import API_KEY, Malformed, Reply, Stall, Status, StreamError, Truncated, fake_vector

from agentstack_lab.providers.base import (
    AuthenticationError,
    MalformedStreamError,
    Message,
    MissingKeyError,
    ProviderError,
    ProviderRequest,
    ProviderTimeout,
    StopEvent,
    TextBlock,
    TextDeltaEvent,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    ToolUseEvent,
    UsageEvent,
)
from agentstack_lab.providers.complete import complete
from agentstack_lab.providers.registry import get_provider

pytest.importorskip("openai")

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

LOOKUP = ToolSpec(name="lookup", description="Look a word up.",
                  input_schema={"type": "object", "properties": {"word": {"type": "string"}}})


def make(fake, **kw):
    kw.setdefault("api_key", API_KEY)
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5)
    return get_provider("openai", base_url=f"{fake.url}/v1", retry_delay=0.001, **kw)


def ask(text="hi", **kw):
    return ProviderRequest(messages=[Message(role="user", content=text)], **kw)


async def test_streamed_text_in_order_with_usage(fake_llm):
    fake_llm.queue(Reply(text="one two three", usage=(30, 3)))
    events = [e async for e in make(fake_llm, model="gpt-test").stream(
        ask(system="sys", temperature=0.0, stop_sequences=["STOP"], max_tokens=50))]
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)] == ["one ", "two ", "three"]
    assert events[-2:] == [UsageEvent(input_tokens=30, output_tokens=3), StopEvent(reason="end_turn")]
    sent = fake_llm.requests[0].json
    assert sent["model"] == "gpt-test" and sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert sent["temperature"] == 0.0 and sent["stop"] == ["STOP"] and sent["max_completion_tokens"] == 50


async def test_tool_calls_round_trip(fake_llm):
    fake_llm.queue(Reply(text="Checking.", tool_calls=[("call_a", "lookup", {"word": "ox"}),
                                                       ("call_b", "lookup", {"word": "yak"})]),
                   Reply(text="Both are bovines."))
    provider = make(fake_llm)
    first = await complete(provider, ask("ox and yak?", tools=[LOOKUP]))
    assert first.stop_reason == "tool_use" and first.text == "Checking."
    assert first.tool_calls == [ToolUseEvent(id="call_a", name="lookup", input={"word": "ox"}),
                                ToolUseEvent(id="call_b", name="lookup", input={"word": "yak"})]
    follow = ask("ox and yak?", tools=[LOOKUP])
    follow.messages.extend([
        Message(role="assistant", content=[TextBlock(text="Checking."),
                                           *[ToolUseBlock(id=c.id, name=c.name, input=c.input) for c in first.tool_calls]]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="call_a", content="a bovine"),
                                      ToolResultBlock(tool_use_id="call_b", content="not found", is_error=True)]),
    ])
    final = await complete(provider, follow)
    assert final.text == "Both are bovines." and final.stop_reason == "end_turn"
    sent = fake_llm.requests[1].json
    assert sent["tools"][0] == {"type": "function", "function": {"name": "lookup", "description": "Look a word up.",
                                                                 "parameters": LOOKUP.input_schema}}
    assert sent["messages"][1:] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "ox"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "yak"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "a bovine"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Error: not found"},
    ]


async def test_forced_tool_choice(fake_llm):
    fake_llm.queue(Reply(tool_calls=[("c1", "lookup", {"word": "x"})]))
    await complete(make(fake_llm), ask(tools=[LOOKUP], tool_choice="lookup"))
    assert fake_llm.requests[0].json["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


@pytest.mark.parametrize("status", [429, 500, 529])
async def test_rate_limit_or_server_error_then_success_is_retried(fake_llm, status):
    fake_llm.queue(Status(status, "slow down", headers={"retry-after-ms": "5"}), Reply(text="ok now"))
    assert (await complete(make(fake_llm), ask())).text == "ok now"
    assert len(fake_llm.requests) == 2


async def test_retry_honours_retry_after(fake_llm):
    fake_llm.queue(Status(429, "slow down", headers={"retry-after-ms": "300"}), Reply(text="ok"))
    start = time.monotonic()
    await complete(make(fake_llm), ask())
    assert time.monotonic() - start >= 0.3


async def test_error_object_in_stream_is_retried_then_surfaces(fake_llm):
    fake_llm.queue(StreamError("server_error", "boom"), Reply(text="recovered"))
    assert (await complete(make(fake_llm), ask())).text == "recovered"
    fake_llm.queue(*[StreamError("server_error", "boom")] * 3)
    with pytest.raises(ProviderError, match="openai: error in stream: boom"):
        await complete(make(fake_llm), ask())


async def test_401_names_the_key_variable(fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-999")
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY") as info:
        await complete(get_provider("openai", base_url=f"{fake_llm.url}/v1"), ask())
    assert "sk-wrong-999" not in str(info.value)
    assert len(fake_llm.requests) == 1


def test_missing_key_for_the_openai_api_names_the_variable():
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        get_provider("openai")


async def test_local_compatible_server_needs_no_key(fake_llm):
    fake_llm.api_key = None
    out = await complete(get_provider("openai", base_url=f"{fake_llm.url}/v1"), ask())
    assert out.text == "ok"


async def test_stalled_stream_times_out(fake_llm):
    fake_llm.queue(Stall(after=2, seconds=30))
    start = time.monotonic()
    with pytest.raises(ProviderTimeout, match="openai"):
        await complete(make(fake_llm, timeout=0.5), ask())
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("behaviour", [Malformed(after=2), Truncated(after=2)], ids=["bad-json", "truncated"])
async def test_malformed_or_truncated_stream_is_clear(fake_llm, behaviour):
    fake_llm.queue(behaviour)
    with pytest.raises(MalformedStreamError, match="openai"):
        await complete(make(fake_llm), ask())


async def test_embeddings(fake_llm):
    provider = make(fake_llm)
    vectors = await provider.embed(["alpha", "beta"], dimensions=16)
    assert len(vectors) == 2 and len(vectors[0]) == 16
    assert vectors[0] == pytest.approx(fake_vector("alpha", 16))
    sent = fake_llm.requests[0]
    assert sent.path == "/v1/embeddings"
    assert sent.json["model"] == "text-embedding-3-small" and sent.json["input"] == ["alpha", "beta"]
