"""The provider registry (plugin hook, config, overrides) and structured output over a real SDK."""

from __future__ import annotations

import sys
import types

import fakes_llm
import pytest
from fakes_llm import API_KEY, Reply
from pydantic import BaseModel, Field

from agentstack_lab.config import Config
from agentstack_lab.plugins import hookimpl, load_plugins
from agentstack_lab.providers.base import Message, MissingKeyError, ProviderRequest, ToolUseEvent
from agentstack_lab.providers.complete import StructuredOutputError, structured
from agentstack_lab.providers.registry import UnknownProviderError, get_provider, list_providers
from agentstack_lab.workspace import Workspace

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

BUILTINS = {"scripted", "anthropic", "openai", "ollama", "claude-code", "gemini-cli", "codex", "acp"}


def test_builtins_are_listed():
    assert BUILTINS <= set(list_providers())


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(UnknownProviderError) as info:
        get_provider("gpt-9000")
    message = str(info.value)
    assert message.startswith("unknown provider 'gpt-9000'; valid providers: ")
    assert all(name in message for name in BUILTINS)


def test_scripted_is_the_default_and_ignores_a_model_name():
    provider = get_provider(None, model="whatever")
    assert provider.name == "scripted"
    cfg = Config.model_validate({"providers": {"default": "ollama", "ollama": {"model": "phi4"}}})
    provider = get_provider(None, config=cfg)
    assert provider.name == "ollama" and provider.model == "phi4"


def test_config_section_with_overrides_on_top():
    cfg = Config.model_validate({"providers": {"anthropic": {
        "api_key": "sk-ant-from-config", "model": "claude-from-config", "base_url": "http://127.0.0.1:9",
        "timeout": 12.5, "max_retries": 1}}})
    provider = get_provider("anthropic", config=cfg, model="claude-override")
    assert (provider.model, provider.base_url, provider.timeout, provider.max_retries) == (
        "claude-override", "http://127.0.0.1:9", 12.5, 1)
    assert "sk-ant-from-config" not in repr(provider) and "sk-ant-from-config" not in repr(cfg)


def test_keys_from_env_and_missing_keys(monkeypatch):
    with pytest.raises(MissingKeyError, match="set the ANTHROPIC_API_KEY environment variable"):
        get_provider("anthropic", config=Config())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert get_provider("openai").name == "openai"


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic -> ImportError
    monkeypatch.delitem(sys.modules, "agentstack_lab.providers.anthropic", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'agentstack-lab\[anthropic\]'"):
        get_provider("anthropic", api_key="x")


def test_an_outside_plugin_registers_a_provider_like_the_builtins(tmp_path):
    class Echo:
        name = "echo"

        def __init__(self, config=None, **settings):
            self.config = config
            self.settings = settings

        async def stream(self, request):  # pragma: no cover - not called
            yield

    plugin = types.SimpleNamespace(register_providers=hookimpl(lambda register: register("echo", Echo)))
    pm = load_plugins()
    pm.register(plugin, name="test-echo-plugin")
    with Workspace.open(tmp_path, announce=False, plugins=pm) as ws:
        assert BUILTINS | {"echo"} == set(ws.providers.names())
        assert ws.get_provider("echo", flavour="x").settings == {"flavour": "x"}
        assert ws.get_provider("echo").config is ws.config
    assert "echo" not in list_providers()  # the plugin is that workspace's, not the process's


class Plan(BaseModel):
    subquestions: list[str] = Field(max_length=4)
    confident: bool


async def test_structured_retries_once_with_the_error_then_succeeds(fake_llm):
    fake_llm.queue(Reply(tool_calls=[("toolu_a", "respond", {"subquestions": ["a"]})]),  # missing "confident"
                   Reply(tool_calls=[("toolu_b", "respond", {"subquestions": ["a", "b"], "confident": True})]))
    provider = get_provider("anthropic", api_key=API_KEY, base_url=fake_llm.url)
    value, completion = await structured(provider, ProviderRequest(messages=[Message(role="user", content="plan")]), Plan)
    assert value == Plan(subquestions=["a", "b"], confident=True)
    assert completion.usage.input_tokens == 22  # both calls counted
    first, second = (r.json for r in fake_llm.requests)
    assert first["tool_choice"] == {"type": "tool", "name": "respond"}
    assert first["tools"][0]["input_schema"]["required"] == ["subquestions", "confident"]
    feedback = second["messages"][-1]["content"][0]
    assert feedback["type"] == "tool_result" and feedback["tool_use_id"] == "toolu_a" and feedback["is_error"]
    assert "confident" in feedback["content"] and "Field required" in feedback["content"]


async def test_structured_fails_clearly_after_one_retry(fake_llm):
    bad = Reply(tool_calls=[("toolu_x", "respond", {"subquestions": "not a list", "confident": "maybe"})])
    fake_llm.queue(bad, bad, Reply(text="never reached"))
    provider = get_provider("openai", api_key=API_KEY, base_url=f"{fake_llm.url}/v1")
    with pytest.raises(StructuredOutputError, match=r"openai: reply did not match Plan after a retry"):
        await structured(provider, ProviderRequest(messages=[Message(role="user", content="plan")]), Plan)
    assert len(fake_llm.requests) == 2


async def test_structured_with_a_function_provider():
    from agentstack_lab.providers.scripted import ScriptedProvider

    seen = []

    def fn(request):
        seen.append(request)
        if len(seen) == 1:
            return [ToolUseEvent(id="t1", name="respond", input={"subquestions": [], "confident": "??"})]
        return [ToolUseEvent(id="t2", name="respond", input={"subquestions": ["x"], "confident": False})]

    value, _ = await structured(ScriptedProvider(fn), ProviderRequest(messages=[Message(role="user", content="q")]), Plan)
    assert value.subquestions == ["x"] and len(seen) == 2
