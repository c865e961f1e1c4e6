"""The offline scripted provider: function-driven, canned turns, and the demo behaviour."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from agentstack_lab.providers.base import (
    Message,
    ProviderRequest,
    StopEvent,
    TextDeltaEvent,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    UsageEvent,
)
from agentstack_lab.providers.complete import complete, structured
from agentstack_lab.providers.demo import OFFLINE_TAG, find_variable
from agentstack_lab.providers.scripted import ScriptedProvider, ScriptExhaustedError, tool_call


def req(text="hi", **meta):
    return ProviderRequest(messages=[Message(role="user", content=text)], metadata=meta)


async def test_function_driven_text_streams_in_chunks_with_usage_and_stop():
    p = ScriptedProvider(lambda r: "hello there world")
    events = [e async for e in p.stream(req())]
    texts = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert "".join(texts) == "hello there world" and len(texts) == 3
    assert isinstance(events[-1], StopEvent) and events[-1].reason == "end_turn"
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usage) == 1 and usage[0].output_tokens > 0
    assert p.requests[0].messages[0].content == "hi"


async def test_function_may_be_async_and_return_events():
    async def fn(r):
        return [TextDeltaEvent(text="a"), tool_call("python", {"code": "1"})]

    c = await complete(ScriptedProvider(fn), req())
    assert c.text == "a" and c.tool_calls[0].name == "python" and c.stop_reason == "tool_use"


async def test_turns_replay_in_order_then_fail_clearly():
    p = ScriptedProvider(turns=["one", [TextDeltaEvent(text="two")]])
    assert (await complete(p, req())).text == "one"
    assert (await complete(p, req())).text == "two"
    with pytest.raises(ScriptExhaustedError, match="all 2 turns used"):
        await complete(p, req(step="main"))


async def test_dict_reply_answers_structured_output():
    class Out(BaseModel):
        x: int

    p = ScriptedProvider(turns=[{"x": "not an int"}, {"x": 3}])
    value, _ = await structured(p, req(), Out)
    assert value.x == 3 and p.requests[0].tool_choice == "respond"


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="unknown behaviour"):
        ScriptedProvider(behaviour="chatty")
    with pytest.raises(TypeError, match="callable"):
        ScriptedProvider(fn="nope")
    with pytest.raises(ValueError, match="latency"):
        ScriptedProvider(latency=-1)


async def test_latency_is_per_call_and_calls_overlap():
    p = ScriptedProvider(lambda r: "x", latency=0.2)
    t = time.perf_counter()
    await asyncio.gather(*(complete(p, req()) for _ in range(5)))
    assert time.perf_counter() - t < 0.9  # concurrent, not 5 x 0.2 s serial


def test_find_variable():
    assert find_variable("how are sales trending in df?") == "df"
    assert find_variable("look at `orders` please") == "orders"
    assert find_variable("summarise sales_2024 by month") == "sales_2024"
    assert find_variable("what is the capital of France") is None


async def test_demo_is_deterministic_and_offline():
    p = ScriptedProvider()
    tools = [ToolSpec(name="python", description="", input_schema={})]
    ask = ProviderRequest(messages=[Message(role="user", content="trend in df?")], tool_choice="respond",
                          metadata={"step": "subquestions", "depth": 0})
    sub1, sub2 = await complete(p, ask), await complete(p, ask)
    assert sub1.tool_calls[0].input == sub2.tool_calls[0].input
    assert [s["agent_type"] for s in sub1.tool_calls[0].input["subquestions"]] == ["analyst", "researcher", "reviewer"]
    main = await complete(p, ProviderRequest(messages=[Message(role="user", content="trend in df?")],
                                             tools=tools, metadata={"step": "main"}))
    assert OFFLINE_TAG in main.text and main.tool_calls[0].name == "python"
    assert "df" in main.tool_calls[0].input["code"]
    call = main.tool_calls[0]
    follow = ProviderRequest(tools=tools, metadata={"step": "main"}, messages=[
        Message(role="user", content="trend in df?"),
        Message(role="assistant", content=[ToolUseBlock(id=call.id, name="python", input=call.input)]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=call.id, content="DataFrame\n  count 3")]),
    ])
    final = await complete(p, follow)
    assert OFFLINE_TAG in final.text and "count 3" in final.text and not final.tool_calls
