"""Record/replay: a tree recorded against the fake Anthropic server (real SDK) replays offline.

Through ``RunOptions(record=…)`` / ``RunOptions(replay=…)``: the replay runs with no API key in the
environment or the config and asks the fake server nothing, and gives the same normalised event
stream under shuffled scheduling (each replayed call first sleeps a random few milliseconds, so the
four parallel subagents finish in a different order every time), ten times in a row. A changed
prompt is a clear error naming the agent and the first differing field; a tool whose result changed
is named in that error; secrets planted in the prompt, in the model's tool input and by the real
provider's key never reach the cassette's bytes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path

import fakes_llm
import pytest
from fakes_llm import API_KEY, Reply

from agentstack_lab.engine import AgentRun, RunOptions
from agentstack_lab.errors import AgentstackError, UsageError
from agentstack_lab.providers.cassette import (
    CassetteError,
    RecordingProvider,
    ReplayProvider,
    load_cassette,
)
from agentstack_lab.providers.registry import get_provider

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

ROOT_PROMPT = "Compare four sorting algorithms"
SUBS = ["How fast is quicksort?", "How fast is mergesort?", "How fast is heapsort?", "How fast is timsort?"]
PLANTED = "sk-planted-0123456789abcdefghij"  # the value of a secret-looking env var, put in the prompt
IN_CODE = "tok-in-code-9876543210zyxw"  # a secret-looking env var's value the model writes into its code
PROBE = "REPLAY14_PROBE"  # a plain env var the python tool prints: change it and the tool result changes


def _forced(body) -> str | None:
    choice = body.get("tool_choice")
    return choice.get("name") if isinstance(choice, dict) else None


def _first_user_text(body) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def model(body):
    """Answers each step from the request alone: four subquestions for the root, none below it."""
    text = _first_user_text(body)
    if _forced(body) == "respond":
        props = set(body["tools"][0]["input_schema"].get("properties", {}))
        if "needs_clarification" in props:
            return Reply(tool_calls=[("t_c", "respond", {"needs_clarification": False})])
        if "subquestions" in props:
            subs = [{"question": q, "agent_type": "researcher"} for q in SUBS] if ROOT_PROMPT in text else []
            return Reply(tool_calls=[("t_s", "respond", {"subquestions": subs})])
        return Reply(tool_calls=[("t_q", "respond", {"has_question": False})])
    if SUBS[0] in text and not any(isinstance(m["content"], list) and any(b.get("type") == "tool_result"
                                   for b in m["content"]) for m in body["messages"]):
        code = f"import os\nprint('n =', 2 ** 10, os.environ.get({PROBE!r}), {IN_CODE!r})"
        return Reply(tool_calls=[("t_py", "python", {"code": code})])
    for q in SUBS:
        if q in text:
            return Reply(text=f"Answer about {q.split()[2]}: O(n log n).")
    return Reply(text="Summary: all four are O(n log n) on average.")


def _normalise(events) -> list[tuple]:
    """Per-agent event sequences keyed by the agent's prompt, ids and times removed, agents sorted."""
    prompts: dict[str, str] = {}
    for ev in events:
        if type(ev).__name__ == "AgentState" and "prompt" in ev.state:
            prompts.setdefault(ev.agent_id, ev.state["prompt"])
    per_agent: dict[str, list] = {}
    for ev in events:
        d = {k: v for k, v in vars(ev).items() if k != "agent_id"}
        if "state" in d:
            d["state"] = {k: v for k, v in d["state"].items()
                          if k in ("status", "type", "prompt", "depth", "result", "error")}
        line = json.dumps(d, sort_keys=True, default=str)
        seq = per_agent.setdefault(prompts.get(ev.agent_id, "?"), [])
        if not (seq and seq[-1] == line and d["type"] == "agent-state"):
            # a parent re-announces its state when a child ends (resources, subagents: left out above), as
            # often as the scheduling makes children end apart; repeats of the same visible state collapse
            seq.append(line)
    return sorted((k, tuple(v)) for k, v in per_agent.items())


class Shuffled:
    """Delays each call by a random few milliseconds: a different scheduling order every run."""

    def __init__(self, inner, rng):
        self.inner, self.rng, self.name = inner, rng, inner.name

    def __getattr__(self, item):  # record_tool_result, secrets
        return getattr(self.inner, item)

    async def stream(self, request):
        await asyncio.sleep(self.rng.uniform(0, 0.02))
        async for ev in self.inner.stream(request):
            yield ev


def _opts(**kw) -> RunOptions:
    return RunOptions(interactive=False, auto_approve=True, executor="subprocess", max_children=4, **kw)


def _redact(text: str) -> str:
    return text.replace(PLANTED, "***")


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setenv("REPLAY14_SERVICE_TOKEN", PLANTED)
    monkeypatch.setenv("REPLAY14_OTHER_SECRET", IN_CODE)
    monkeypatch.setenv(PROBE, "probe-1")


def _record(fake_llm, ws, path, prompt=f"{ROOT_PROMPT} (token {PLANTED})") -> AgentRun:
    fake_llm.queue(*[model] * 60)
    provider = get_provider("anthropic", api_key=API_KEY, base_url=fake_llm.url, timeout=5)
    return AgentRun(prompt, workspace=ws, options=_opts(record=str(path)), provider=provider)


def _replay(ws, path, prompt=f"{ROOT_PROMPT} (token {PLANTED})", rng=None) -> AgentRun:
    """A replay asked for by name ("anthropic"): with no key anywhere, only a replay can run it."""
    run = AgentRun(prompt, workspace=ws, options=_opts(replay=str(path)), provider="anthropic")
    if rng is not None:
        run._core.provider = Shuffled(run._core.provider, rng)
    return run



@pytest.mark.slow
async def test_a_recorded_tree_replays_offline_the_same_ten_times_under_shuffled_scheduling(fake_llm, ws, planted,
                                                                                             tmp_path):
    path = tmp_path / "tree.jsonl"
    run = _record(fake_llm, ws, path)
    await run
    assert run.tree["status"] == "completed" and len(run.tree["children"]) == 4
    calls = len(fake_llm.requests)
    tools: list[dict] = []
    header, entries = load_cassette(path, tools)
    assert header["provider"] == "anthropic" and len(entries) == calls
    assert [t["tool"] for t in tools] == ["python"] and "n = 1024 probe-1" in tools[0]["output"]
    expected = _normalise(run.events)

    assert "ANTHROPIC_API_KEY" not in os.environ and ws.config.providers.anthropic.api_key is None
    with pytest.raises(AgentstackError, match="ANTHROPIC_API_KEY"):  # the real provider could not even be built
        ws.get_provider("anthropic")
    for seed in range(10):
        again = _replay(ws, path, rng=random.Random(seed))
        await again
        assert again.provider.name == "replay:anthropic"
        assert _normalise(again.events) == expected, f"replay {seed} differs"
        assert again.provider.tool_mismatches == []
    assert len(fake_llm.requests) == calls   # the replays asked the network nothing


@pytest.mark.slow
async def test_secrets_planted_in_the_request_never_reach_the_cassette(fake_llm, ws, planted, tmp_path):
    path = tmp_path / "tree.jsonl"
    await _record(fake_llm, ws, path, prompt=f"{ROOT_PROMPT} (token {PLANTED}, key {API_KEY})")
    sent = json.dumps([r.json for r in fake_llm.requests])
    assert PLANTED in sent and API_KEY in sent and IN_CODE in sent  # the requests really carried them
    raw = path.read_bytes()
    for secret in (PLANTED, IN_CODE, API_KEY):
        assert secret.encode() not in raw, secret
    assert b"***" in raw and b"n = 1024 probe-1" in raw


@pytest.mark.slow
async def test_a_changed_prompt_names_the_agent_and_the_first_difference(fake_llm, ws, planted, tmp_path):
    path = tmp_path / "tree.jsonl"
    await _record(fake_llm, ws, path)
    changed = _replay(ws, path, prompt="Compare five sorting algorithms")
    with pytest.raises(AgentstackError) as info:
        await changed
    msg = str(info.value)
    assert "has no reply for agent researcher (step clarify)" in msg, msg
    assert "first difference at messages[0].content" in msg and "four" in msg and "five" in msg, msg


@pytest.mark.slow
async def test_a_changed_tool_result_is_named_in_the_miss(fake_llm, ws, planted, tmp_path, monkeypatch):
    path = tmp_path / "tree.jsonl"
    await _record(fake_llm, ws, path)
    monkeypatch.setenv(PROBE, "probe-2")
    again = _replay(ws, path)
    await again.wait(raise_on_error=False)
    quick = next(c for c in again.tree["children"] if c["prompt"] == SUBS[0])
    assert quick["status"] == "failed", quick
    assert "the python tool result of agent researcher differs from the recording at output" in quick["error"]
    assert "probe-1" in quick["error"] and "probe-2" in quick["error"]
    assert "first difference at messages[2].content[0].content" in quick["error"], quick["error"]


@pytest.mark.slow
async def test_new_episodes_replays_what_it_has_and_records_the_rest_to_a_copy(fake_llm, ws, planted, tmp_path):
    path, grown = tmp_path / "tree.jsonl", tmp_path / "grown.jsonl"
    await _record(fake_llm, ws, path)
    before = path.read_bytes()
    fake_llm.queue(*[model] * 30)
    calls = len(fake_llm.requests)
    provider = get_provider("anthropic", api_key=API_KEY, base_url=fake_llm.url, timeout=5)
    other = AgentRun("How fast is quicksort?", workspace=ws, provider=provider,
                     options=_opts(replay=str(path), record=str(grown), replay_mode="new_episodes"))
    await other
    assert other.tree["status"] == "completed"
    assert path.read_bytes() == before  # the reviewed cassette is left alone
    new = len(fake_llm.requests) - calls
    assert new > 0 and len(load_cassette(grown)[1]) == len(load_cassette(path)[1]) + new


@pytest.mark.slow
async def test_wrappers_directly_new_episodes_appends_in_place(fake_llm, ws, tmp_path):
    path = tmp_path / "tree.jsonl"
    fake_llm.queue(*[model] * 60)
    provider = get_provider("anthropic", api_key=API_KEY, base_url=fake_llm.url, timeout=5)
    await AgentRun(ROOT_PROMPT, workspace=ws, options=_opts(),
                   provider=RecordingProvider(provider, path, redact=_redact))
    before = len(load_cassette(path)[1])
    fake_llm.queue(*[model] * 30)
    other = AgentRun("How fast is quicksort?", workspace=ws, options=_opts(),
                     provider=ReplayProvider(path, mode="new_episodes", inner=provider, redact=_redact))
    await other
    assert len(load_cassette(path)[1]) > before


@pytest.mark.parametrize(("kw", "error"), [
    ({"replay_mode": "sometimes"}, "replay_mode must be one of strict, new_episodes, got 'sometimes'"),
    ({"replay": "nope.jsonl"}, "RunOptions.replay: cassette nope.jsonl does not exist"),
    ({"record": "."}, "RunOptions.record: . is a folder"),
    ({"record": "notes.txt/y.jsonl"}, "RunOptions.record: cannot write a cassette under notes.txt"),
    ({"record": "a.jsonl", "replay": "b.jsonl"}, "record and replay together need replay_mode='new_episodes'"),
])
def test_bad_cassette_options_are_one_line_and_write_nothing(kw, error):
    Path("notes.txt").write_text("a file, not a folder")
    if "replay" in kw and "record" in kw:
        Path("b.jsonl").write_text('{"cassette": 1}\n')
    before = sorted(Path.cwd().iterdir())
    with pytest.raises(UsageError) as info:
        RunOptions(**kw)
    assert error in str(info.value) and "\n" not in str(info.value)
    assert sorted(Path.cwd().iterdir()) == before


def test_replay_mode_none_is_strict():
    assert RunOptions(replay_mode="none").replay_mode == "strict"


def test_a_bad_cassette_is_one_clear_line(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(CassetteError, match="does not exist"):
        ReplayProvider(missing)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"cassette": 1}\n{"key": "k", "request": {}, "events": [{"type": "nope"}]}\n')
    with pytest.raises(CassetteError, match=r"bad.jsonl:2: unknown event type 'nope'"):
        ReplayProvider(bad)
    with pytest.raises(CassetteError, match="replay mode must be one of"):
        ReplayProvider(bad, mode="sometimes")
