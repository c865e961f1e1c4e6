"""``agentstack-lab acp`` through the ACP SDK's own client: a real agent process over stdio.

The client side is the SDK's ``spawn_agent_process`` (as hosts built on it, jupyter-ai's ACP client among
them, talk to agents); every message the agent sends is checked against the SDK's schema models again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block  # noqa: E402
from acp import schema as s  # noqa: E402
from acp.connection import StreamDirection, StreamEvent  # noqa: E402

pytestmark = pytest.mark.slow

PROMPT = "How are sales trending in df?"  # the offline demo: three subagents, one of them asks to run Python


def _command() -> list[str]:
    script = Path(sys.executable).with_name("agentstack-lab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


class Host:
    """A minimal ACP host: records every update, answers permission requests as told (or never)."""

    def __init__(self, answer: str | list[str] | None = "approve"):
        self.answer = answer   # a list: one answer per request, in turn
        self.updates: list[Any] = []
        self.asked: list[s.RequestPermissionRequest] = []
        self.asked_event = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list[s.PermissionOption], session_id: str,
                                 tool_call: s.ToolCallUpdate, **_: Any) -> s.RequestPermissionResponse:
        self.asked.append(s.RequestPermissionRequest(options=options, session_id=session_id, tool_call=tool_call))
        self.asked_event.set()
        if isinstance(self.answer, list):
            return s.RequestPermissionResponse(outcome=s.AllowedOutcome(outcome="selected",
                                                                        option_id=self.answer.pop(0)))
        if self.answer is None:
            await asyncio.Event().wait()  # never answers; the agent cancels the request when it is settled
        if self.answer == "cancelled":
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
        return s.RequestPermissionResponse(outcome=s.AllowedOutcome(outcome="selected", option_id=self.answer))

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def message(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))

    def on_connect(self, conn: Any) -> None:
        pass


# what the agent may send a host, by JSON-RPC method (requests and notifications) and by the request answered
_AGENT_SENDS = {"session/update": s.SessionNotification, "session/request_permission": s.RequestPermissionRequest}
_RESPONSES = {"initialize": s.InitializeResponse, "session/new": s.NewSessionResponse,
              "session/prompt": s.PromptResponse, "session/load": s.LoadSessionResponse}


class Wire:
    """Every raw message on the connection; each one the agent sent is validated against the ACP schema."""

    def __init__(self) -> None:
        self.sent: dict[int, str] = {}
        self.checked = 0

    def __call__(self, event: StreamEvent) -> None:
        msg = event.message
        if event.direction is StreamDirection.OUTGOING:
            if "method" in msg and "id" in msg:
                self.sent[msg["id"]] = msg["method"]
            return
        if "method" in msg:
            _AGENT_SENDS[msg["method"]].model_validate(msg["params"])   # an unknown method fails too
        elif "result" in msg and self.sent.get(msg["id"]) in _RESPONSES:
            _RESPONSES[self.sent[msg["id"]]].model_validate(msg["result"])
        self.checked += 1


def _env() -> dict[str, str]:
    return {**os.environ}


@contextlib.asynccontextmanager
async def agent(host: Host, folder: Path, wire: Wire | None = None):
    cmd = _command()
    with open(folder.parent / "acp.stderr", "a") as err:
        async with spawn_agent_process(host, cmd[0], *cmd[1:], "acp", cwd=folder, env=_env(),
                                       transport_kwargs={"stderr": err},
                                       observers=[wire] if wire else []) as (conn, proc):
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                         client_info=s.Implementation(name="test-host", title="Test Host",
                                                                      version="1"))
            yield conn, init
        await asyncio.wait_for(proc.wait(), 30)


def cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_command(), "-w", str(workdir), *args], capture_output=True, text=True, timeout=120)


async def test_a_prompt_streams_a_plan_tool_calls_an_approval_and_usage(workdir):
    host, wire = Host(answer="approve"), Wire()
    async with agent(host, workdir, wire) as (conn, init):
        assert init.agent_capabilities.load_session is True
        assert init.agent_capabilities.prompt_capabilities.image is False
        session = await conn.new_session(cwd=str(workdir))
        done = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)]), 120)
    assert done.stop_reason == "end_turn"
    assert done.usage is not None and done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    # the root's answer streamed as message chunks
    assert len(host.of("agent_message_chunk")) > 1 and "offline" in host.message()
    # one plan entry per subagent, all completed at the end
    plans = host.of("plan")
    assert len(plans[-1].entries) == 3 and {e.status for e in plans[-1].entries} == {"completed"}
    assert any(e.status == "in_progress" for p in plans for e in p.entries)
    # fork calls for the subagents, a python call with its code and its output
    started = host.of("tool_call")
    forks = [c for c in started if c.tool_call_id.startswith("fork-")]
    python = [c for c in started if c.kind == "execute"]
    assert len(forks) == 3 and len(python) == 1
    assert "```python" in python[0].content[0].content.text
    finished = {u.tool_call_id: u for u in host.of("tool_call_update") if u.status in ("completed", "failed")}
    assert set(finished) >= {c.tool_call_id for c in forks} | {python[0].tool_call_id}
    assert finished[python[0].tool_call_id].content[0].content.text.strip()
    # the approval was a permission request about that tool call, naming our decision
    (asked,) = host.asked
    assert asked.tool_call.tool_call_id == python[0].tool_call_id
    assert {o.kind for o in asked.options} == {"allow_once", "allow_always", "reject_once"}
    meta = asked.tool_call.field_meta["agentstack-lab"]
    decision = json.loads(cli(workdir, "decisions", "show", meta["decisionId"], "--json").stdout)
    assert decision["state"] == "answered" and decision["surface"] == "acp"
    # the run is ours: listed with its origin, the host's name
    listed = json.loads(cli(workdir, "agent", "list", "--run", meta["runId"], "--json").stdout)
    assert listed and all(a["status"] == "completed" for a in listed)
    from agentstack_lab.server.control import run_extras  # what the Agents panel lists a run with
    from agentstack_lab.workspace import Workspace

    with Workspace.open(workdir, announce=False) as ws:
        assert run_extras(ws.db, [meta["runId"]])[meta["runId"]]["origin"] == "acp:Test Host"
        ((row,),) = ws.db.query("SELECT metadata FROM agents WHERE id = ?", (meta["runId"],))
    recorded = json.loads(row)
    assert recorded["executor"] == "subprocess" and recorded["options"]["executor"] == "subprocess"  # no notebook kernel
    assert wire.checked > 20


async def test_an_approval_answered_in_another_process_answers_the_hosts_request(workdir):
    host = Host(answer=None)   # the host never answers: the terminal does
    async with agent(host, workdir) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)]))
        await asyncio.wait_for(host.asked_event.wait(), 120)
        decision_id = host.asked[0].tool_call.field_meta["agentstack-lab"]["decisionId"]
        answered = await asyncio.to_thread(cli, workdir, "decisions", "approve", decision_id)
        assert answered.returncode == 0, answered.stderr
        done = await asyncio.wait_for(turn, 120)
    assert done.stop_reason == "end_turn"
    notes = [c.content.text for u in host.of("tool_call_update") for c in (u.content or [])]
    assert any(n.startswith("Approved from the terminal by ") for n in notes), notes
    plans = host.of("plan")
    assert {e.status for e in plans[-1].entries} == {"completed"}


async def test_a_request_the_host_cancels_fails_closed_and_the_run_goes_on(workdir):
    host = Host(answer="cancelled")
    async with agent(host, workdir) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        done = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)]), 120)
        meta = host.asked[0].tool_call.field_meta["agentstack-lab"]
    assert done.stop_reason == "end_turn"
    decision = json.loads(cli(workdir, "decisions", "show", meta["decisionId"], "--json").stdout)
    assert decision["state"] == "answered" and decision["answer"]["approved"] is False
    assert "(request cancelled)" in decision["answeredBy"]


async def test_cancel_stops_the_run_and_the_turn_says_cancelled(workdir):
    host = Host(answer=None)
    async with agent(host, workdir) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)]))
        await asyncio.wait_for(host.asked_event.wait(), 120)
        await conn.cancel(session_id=session.session_id)
        done = await asyncio.wait_for(turn, 60)
        run_id = host.asked[0].tool_call.field_meta["agentstack-lab"]["runId"]
    assert done.stop_reason == "cancelled"
    listed = json.loads(cli(workdir, "agent", "list", "--run", run_id, "--json").stdout)
    assert all(a["status"] in ("stopped", "completed", "failed") for a in listed)
    assert any(a["status"] == "stopped" for a in listed)


async def test_load_replays_a_past_session_in_a_new_process(workdir):
    first = Host(answer="approve")
    async with agent(first, workdir) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)]), 120)
    again = Host()
    async with agent(again, workdir) as (conn, _):
        await conn.load_session(cwd=str(workdir), session_id=session.session_id)
        with pytest.raises(RequestError) as missing:
            await conn.load_session(cwd=str(workdir), session_id="no-such-session")
    assert "no session 'no-such-session'" in str(missing.value.data or missing.value)
    (asked,) = again.of("user_message_chunk")
    assert asked.content.text == PROMPT
    assert again.message() == first.message()
    assert [e.status for e in again.of("plan")[-1].entries] == [e.status for e in first.of("plan")[-1].entries]
    assert len(again.of("tool_call")) == len(first.of("tool_call"))


async def test_bad_requests_are_one_line_and_change_nothing(workdir):
    host = Host()
    async with agent(host, workdir) as (conn, _):
        for cwd, said in (("relative/path", "cwd must be an absolute path"),
                          (str(workdir / "missing"), "is not a folder")):
            with pytest.raises(RequestError) as bad:
                await conn.new_session(cwd=cwd)
            text = json.dumps(bad.value.data) if bad.value.data else str(bad.value)
            assert said in text and "\\n" not in text and "Traceback" not in text
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="nope", prompt=[text_block("hi")])
        assert "no session 'nope'" in str(unknown.value.data or unknown.value)
        session = await conn.new_session(cwd=str(workdir))
        with pytest.raises(RequestError) as empty:
            await conn.prompt(session_id=session.session_id, prompt=[text_block("  ")])
        assert "the prompt is empty" in str(empty.value.data or empty.value)
    assert not host.updates
    assert not list((workdir / "missing").parent.glob("missing*"))


# --- in this process: the agent on a socket pair, for what the offline demo never does (ask a question) ---------

def _asks_once(request):
    from agentstack_lab.providers.demo import demo_reply

    if (request.metadata or {}).get("step") == "clarify" and not any(
            "Which region" in str(m.content) for m in request.messages):
        return {"needs_clarification": True, "question": "Which region?"}
    return demo_reply(request)


class FormHost(Host):
    """A host that supports forms (``elicitation/create``) and fills one in, or declines it."""

    def __init__(self, fill: str | None):
        super().__init__()
        self.fill = fill
        self.forms: list[tuple[str, Any]] = []

    async def create_elicitation(self, message: str, mode: Any, **_: Any) -> Any:
        self.forms.append((message, mode))
        if self.fill is None:
            return s.DeclineElicitationResponse(action="decline")
        return s.AcceptElicitationResponse(action="accept", content={"answer": self.fill})


_CELLS = ["x = 5", "y = 7", "open('one.txt', 'w').write('1')"]   # rebinds, rebinds, then a file write


def _three_cells(request):
    from agentstack_lab.providers.demo import demo_reply, tool_call

    meta = request.metadata or {}
    if meta.get("step") == "subquestions":
        return {"subquestions": []}
    if meta.get("step") != "main":
        return demo_reply(request)
    ran = sum(1 for m in request.messages if not isinstance(m.content, str)
              for b in m.content if type(b).__name__ == "ToolResultBlock")
    return [tool_call("python", {"code": _CELLS[ran]})] if ran < len(_CELLS) else "Done: x, y and one.txt."


@contextlib.asynccontextmanager
async def in_process(host: Host, folder: Path, script=_asks_once):
    import socket

    from acp import connect_to_agent, run_agent

    from agentstack_lab.acp.agent import LabAgent
    from agentstack_lab.providers.scripted import ScriptedProvider

    a, b = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=a)
    host_reader, host_writer = await asyncio.open_connection(sock=b)
    lab = LabAgent(provider=ScriptedProvider(script))
    serving = asyncio.ensure_future(run_agent(lab, agent_writer, agent_reader, use_unstable_protocol=True))
    conn = connect_to_agent(host, host_writer, host_reader, use_unstable_protocol=True)
    caps = s.ClientCapabilities(elicitation=s.ElicitationCapabilities(form=s.ElicitationFormCapabilities()))
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps
                              if isinstance(host, FormHost) else None)
        yield conn, lab
    finally:
        lab.close()
        await conn.close()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


@pytest.mark.parametrize("fill", ["Europe", None], ids=["form-filled", "form-declined"])
async def test_a_question_is_a_form_when_the_host_has_forms_else_the_next_prompt_answers(workdir, fill):
    host = FormHost(fill)
    async with in_process(host, workdir) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        first = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Sales?")]), 60)
        ((message, mode),) = host.forms
        assert "Which region?" in message and mode.requested_schema.required == ["answer"]
        if fill is None:   # declined: the turn ends with the question; the next prompt is the answer
            assert first.stop_reason == "end_turn" and "**The agent asks** (clarification): Which region?" in host.message()
            assert not host.of("plan")
            second = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                        prompt=[text_block("Europe")]), 60)
            assert second.stop_reason == "end_turn"
        else:
            assert first.stop_reason == "end_turn" and "The agent asks" not in host.message()
    assert len(host.of("plan")[-1].entries) == 2 and "offline" in host.message()


async def test_without_forms_a_question_ends_the_turn_and_the_next_prompt_answers_it(workdir):
    host = Host()
    async with in_process(host, workdir) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        first = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Sales?")]), 60)
        assert first.stop_reason == "end_turn" and "Which region?" in host.message() and not host.of("plan")
        second = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Europe")]), 60)
    assert second.stop_reason == "end_turn" and len(host.of("plan")[-1].entries) == 2


async def test_always_allow_saves_a_rule_for_code_like_this_as_other_surfaces_do(workdir):
    """The host's allow_always on a code approval is "Always allow code like this" for the session: a rule for
    the code's classes (rebinds), so the next rebinding cell runs unasked and a file write is asked again."""
    host = Host(answer=["approve-always", "approve"])
    async with in_process(host, workdir, _three_cells) as (conn, _):
        session = await conn.new_session(cwd=str(workdir))
        done = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                  prompt=[text_block("Set x and y, write one.txt")]), 120)
    assert done.stop_reason == "end_turn" and "Done" in host.message()
    asked = [a.tool_call.content[0].content.text for a in host.asked]
    assert len(asked) == 2 and "x = 5" in asked[0] and "one.txt" in asked[1]     # y = 7 was not asked
    always = next(o for o in host.asked[0].options if o.kind == "allow_always")
    assert always.name == "Always allow code like this (this session)"
    rules = json.loads(cli(workdir, "approval", "rules", "--json").stdout)
    assert [(r["scope"], r["sessionId"], r["only"]) for r in rules] == [("session", session.session_id, ["rebinds"])]
