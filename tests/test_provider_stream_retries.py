"""A stream that breaks before its first event is asked again (issue 26, item 12).

Each provider through its real SDK (anthropic, openai) or httpx (Ollama) against the loopback fake:
the 200 answer drops its connection, stalls, or carries invalid JSON before any event, then the next
request answers. Today's code made one request and the agent failed. Once an event was yielded a
retry would duplicate it, so a later break stays an error (the per-provider suites show that).
"""

from __future__ import annotations

import fakes_llm
import pytest
from fakes_llm import API_KEY, Drop, Malformed, Reply, Stall, StreamError

from agentstack_lab.providers.base import Message, ProviderError, ProviderRequest
from agentstack_lab.providers.complete import complete
from agentstack_lab.providers.registry import get_provider

pytest.importorskip("anthropic")
pytest.importorskip("openai")

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

PROVIDERS = ["anthropic", "openai", "ollama"]


def make(name: str, fake, **kw):
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5)
    if name == "anthropic":
        return get_provider("anthropic", api_key=API_KEY, base_url=fake.url, retry_delay=0.001, **kw)
    if name == "openai":
        return get_provider("openai", api_key=API_KEY, base_url=f"{fake.url}/v1", retry_delay=0.001, **kw)
    return get_provider("ollama", base_url=fake.url, retry_delay=0.001, **kw)


def ask() -> ProviderRequest:
    return ProviderRequest(messages=[Message(role="user", content="hi")])


BREAKS = {
    "drop": lambda: Drop(after=0),
    "stall": lambda: Stall(after=0, seconds=30),
    "bad-json": lambda: Malformed(after=0),
}


@pytest.mark.parametrize("brk", list(BREAKS))
@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_stream_that_breaks_before_its_first_event_is_asked_again(fake_llm, name, brk):
    fake_llm.queue(BREAKS[brk](), Reply(text="hello there"))
    timeout = 0.5 if brk == "stall" else 5
    done = await complete(make(name, fake_llm, timeout=timeout), ask())
    assert done.text == "hello there"
    assert len(fake_llm.requests) == 2, fake_llm.paths()


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_stream_that_keeps_breaking_gives_up_saying_how_often_it_tried(fake_llm, name):
    fake_llm.queue(Drop(after=0), Drop(after=0), Drop(after=0), Reply(text="too late"))
    with pytest.raises(ProviderError) as info:
        await complete(make(name, fake_llm, max_retries=2), ask())
    assert len(fake_llm.requests) == 3
    line = str(info.value)
    assert "\n" not in line and name in line and "gave up after 3 attempts" in line, line


def test_an_error_inside_an_ollama_stream_is_retried_like_the_others(fake_llm):
    async def go():
        fake_llm.queue(StreamError(message="model is loading"), Reply(text="loaded"))
        return await complete(make("ollama", fake_llm), ask())

    import asyncio

    assert asyncio.run(go()).text == "loaded"
    assert len(fake_llm.requests) == 2
