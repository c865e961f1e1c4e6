"""The Anthropic provider through the real ``anthropic`` SDK against the loopback fake server."""

from __future__ import annotations

import time

import fakes_llm
import pytest
from fakes_llm import API_KEY, Malformed, Reply, Stall, Status, StreamError, Truncated

from agentstack_lab.providers.base import (
    AuthenticationError,
    MalformedStreamError,
    Message,
    MissingKeyError,
    ProviderError,
    ProviderRequest,
    ProviderTimeout,
    StopEvent,
    TextDeltaEvent,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    ToolUseEvent,
    UsageEvent,
)
from agentstack_lab.providers.complete import complete
from agentstack_lab.providers.registry import get_provider

pytest.importorskip("anthropic")

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

WEATHER = ToolSpec(name="weather", description="Weather for a city.",
                   input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


def make(fake, **kw):
    kw.setdefault("api_key", API_KEY)
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5)
    return get_provider("anthropic", base_url=fake.url, retry_delay=0.001, **kw)


async def events_of(provider, request):
    return [ev async for ev in provider.stream(request)]


async def test_streamed_text_arrives_in_order_with_usage_and_stop(fake_llm):
    fake_llm.queue(Reply(text="The sky is blue today.", usage=(21, 9)))
    provider = make(fake_llm, model="claude-test-model")
    events = await events_of(provider, ProviderRequest(system="Be brief.", messages=[Message(role="user", content="Sky?")],
                                                       temperature=0.2, stop_sequences=["END"], max_tokens=100))
    texts = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert texts == ["The ", "sky ", "is ", "blue ", "today."]
    assert events[-2:] == [UsageEvent(input_tokens=21, output_tokens=9), StopEvent(reason="end_turn")]
    sent = fake_llm.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.json["model"] == "claude-test-model" and sent.json["stream"] is True
    assert sent.json["system"] == "Be brief." and "temperature" not in sent.json
    assert sent.json["stop_sequences"] == ["END"] and sent.json["max_tokens"] == 100
    assert API_KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])


async def test_tool_use_round_trip(fake_llm):
    fake_llm.queue(Reply(text="Let me check.", tool_calls=[("toolu_1", "weather", {"city": "Paris", "n": [1, 2]})]),
                   Reply(text="It is sunny in Paris."))
    provider = make(fake_llm)
    request = ProviderRequest(messages=[Message(role="user", content="Weather in Paris?")], tools=[WEATHER])
    first = await complete(provider, request)
    assert first.text == "Let me check."
    assert first.tool_calls == [ToolUseEvent(id="toolu_1", name="weather", input={"city": "Paris", "n": [1, 2]})]
    assert first.stop_reason == "tool_use"
    call = first.tool_calls[0]
    follow = ProviderRequest(messages=[
        *request.messages,
        Message(role="assistant", content=[ToolUseBlock(id=call.id, name=call.name, input=call.input)]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=call.id, content="sunny, 24C")]),
    ], tools=[WEATHER])
    final = await complete(provider, follow)
    assert final.text == "It is sunny in Paris." and final.stop_reason == "end_turn"
    assert final.usage.input_tokens == 11 and final.usage.output_tokens == 7
    sent = fake_llm.requests[1].json
    assert sent["tools"] == [{"name": "weather", "description": "Weather for a city.", "input_schema": WEATHER.input_schema}]
    assert sent["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris", "n": [1, 2]}}]}
    assert sent["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 24C"}]}


async def test_forced_tool_choice_is_sent(fake_llm):
    fake_llm.queue(Reply(tool_calls=[("toolu_9", "weather", {"city": "Oslo"})]))
    out = await complete(make(fake_llm), ProviderRequest(messages=[Message(role="user", content="x")],
                                                         tools=[WEATHER], tool_choice="weather"))
    assert fake_llm.requests[0].json["tool_choice"] == {"type": "tool", "name": "weather"}
    assert out.tool_calls[0].input == {"city": "Oslo"}


@pytest.mark.parametrize("status", [529, 429, 503])
async def test_overloaded_or_rate_limited_then_success_is_retried(fake_llm, status):
    fake_llm.queue(Status(status, "Overloaded", headers={"retry-after-ms": "5"}), Reply(text="finally"))
    out = await complete(make(fake_llm), ProviderRequest(messages=[Message(role="user", content="hi")]))
    assert out.text == "finally"
    assert fake_llm.paths() == ["/v1/messages", "/v1/messages"]


async def test_overloaded_error_event_in_stream_is_retried(fake_llm):
    fake_llm.queue(StreamError("overloaded_error", "Overloaded"), Reply(text="second try"))
    out = await complete(make(fake_llm), ProviderRequest(messages=[Message(role="user", content="hi")]))
    assert out.text == "second try" and len(fake_llm.requests) == 2


async def test_retries_give_up_with_a_clear_error(fake_llm):
    fake_llm.queue(*[Status(529, "Overloaded", headers={"retry-after-ms": "1"})] * 3)
    with pytest.raises(ProviderError, match="529.*overloaded_error: Overloaded"):
        await complete(make(fake_llm, max_retries=2), ProviderRequest(messages=[Message(role="user", content="hi")]))
    assert len(fake_llm.requests) == 3


async def test_401_is_an_authentication_error_naming_the_variable(fake_llm, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key-123")
    provider = get_provider("anthropic", base_url=fake_llm.url, max_retries=2)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY") as info:
        await complete(provider, ProviderRequest(messages=[Message(role="user", content="hi")]))
    assert "wrong-key-123" not in str(info.value)
    assert len(fake_llm.requests) == 1  # not retried


def test_missing_key_fails_at_construction_naming_the_variable():
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        get_provider("anthropic")


async def test_stalled_stream_times_out(fake_llm):
    fake_llm.queue(Stall(after=4, seconds=30))
    provider = make(fake_llm, timeout=0.5)
    got = []
    start = time.monotonic()
    with pytest.raises(ProviderTimeout, match="0.5 s"):
        async for ev in provider.stream(ProviderRequest(messages=[Message(role="user", content="hi")])):
            got.append(ev)
    assert time.monotonic() - start < 10
    assert [e.text for e in got] == ["partial "]  # what arrived before the stall was streamed


@pytest.mark.parametrize("behaviour", [Malformed(after=4), Truncated(after=4)], ids=["bad-json", "truncated"])
async def test_malformed_or_truncated_stream_is_a_clear_error(fake_llm, behaviour):
    # after the first text delta (frame 4): a retry would repeat it, so the break is the answer
    fake_llm.queue(behaviour)
    with pytest.raises(MalformedStreamError, match="anthropic"):
        await complete(make(fake_llm), ProviderRequest(messages=[Message(role="user", content="hi")]))


def test_key_never_in_repr():
    provider = get_provider("anthropic", api_key="sk-ant-secret-value")
    assert "secret" not in repr(provider) and provider.model == "claude-sonnet-4-6"
