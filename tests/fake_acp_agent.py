"""A fake ACP agent written with the SDK, for ``provider: acp`` tests (run as a script; its mode from $FAKE_ACP).

``answer``: streams three chunks, runs one tool call of its own after a permission request, reports usage.
``crash``: streams one chunk, says "boom" on stderr and exits 3. ``hang``: streams one chunk, then waits
until cancelled, and a session/cancel writes "cancelled SESSION" to $FAKE_ACP_MARK. Structured steps (a prompt asking
for JSON) get the JSON that asks nothing.
"""

import asyncio
import os
import sys
from pathlib import Path

import acp
from acp import schema as s

MODE = os.environ.get("FAKE_ACP", "answer")


class Fake:
    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, **_):
        return s.InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd, **_):
        return s.NewSessionResponse(session_id=f"fake-{os.getpid()}")

    async def say(self, sid, text):
        await self.conn.session_update(session_id=sid, update=s.AgentMessageChunk(
            session_update="agent_message_chunk", content=s.TextContentBlock(type="text", text=text)))

    async def prompt(self, prompt, session_id, **_):
        text = "".join(b.text for b in prompt if b.type == "text")
        if "Reply with only a JSON object" in text:
            for key, reply in (("needs_clarification", '{"needs_clarification": false, "question": null}'),
                               ("has_question", '{"has_question": false, "question": null}'),
                               ("subquestions", '{"subquestions": []}')):
                if f'"{key}"' in text:
                    await self.say(session_id, reply)
                    return s.PromptResponse(stop_reason="end_turn")
        await self.say(session_id, "Looking ")
        if MODE == "crash":
            print("boom", file=sys.stderr, flush=True)
            os._exit(3)
        if MODE == "hang":
            await asyncio.Event().wait()
        await self.conn.session_update(session_id=session_id, update=s.ToolCallStart(
            session_update="tool_call", tool_call_id="t1", title="ls data/", kind="execute", status="pending",
            raw_input={"command": "ls data/"}))
        answer = await self.conn.request_permission(session_id=session_id, tool_call=s.ToolCallUpdate(
            tool_call_id="t1", title="ls data/"), options=[
            s.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            s.PermissionOption(option_id="no", name="Reject", kind="reject_once")])
        allowed = getattr(answer.outcome, "option_id", None) == "yes"
        await self.conn.session_update(session_id=session_id, update=s.ToolCallProgress(
            session_update="tool_call_update", tool_call_id="t1", status="completed" if allowed else "failed",
            raw_output={"stdout": "sales.csv"} if allowed else {"error": "not allowed"}))
        await self.say(session_id, "at the data: ")
        await self.say(session_id, "sales.csv is there." if allowed else "I was not allowed to look.")
        return s.PromptResponse(stop_reason="end_turn",
                                usage=s.Usage(input_tokens=120, output_tokens=30, total_tokens=150))

    async def cancel(self, session_id, **_):
        Path(os.environ["FAKE_ACP_MARK"]).write_text(f"cancelled {session_id}")


asyncio.run(acp.run_agent(Fake()))
