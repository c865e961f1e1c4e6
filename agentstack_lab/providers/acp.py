"""ACP agents as providers: ``provider: acp`` makes an Agent Client Protocol agent the model of the tree's agents.

Config ``providers.acp.command`` names the agent (``["npx", "@zed-industries/claude-code-acp"]``,
``["gemini", "--experimental-acp"]``, or another agentstack-lab: ``["agentstack-lab", "acp"]``). Each model
call starts the agent, opens a session in ``providers.acp.cwd`` (default: the current folder), sends the
conversation as one prompt (as the CLI providers do; a structured step asks for JSON) and streams:

* its message chunks are our text deltas;
* its tool calls appear in the calling agent's tree (``acp:execute``, ``acp:edit``, ...), with their output;
* its permission requests are the run's decisions (``approval``), answerable from any surface and subject
  to ``on_query`` and ``auto_approve`` -- "allow" picks the agent's allow-once option, "reject" its reject;
* stopping the run cancels the session (``session/cancel``) and ends the process;
* the prompt's ``usage`` is recorded (an agent that reports none: tokens unknown, not zero).

A missing command, an agent that exits or breaks the protocol, and a timeout are one-line provider errors.
Needs the ``acp`` extra (the ``agent-client-protocol`` SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentstack_lab.providers.base import (
    AGENT_CALLS,
    AgentCalls,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    ProviderTimeout,
    ProviderUnavailable,
    StopEvent,
    TextDeltaEvent,
    UsageEvent,
)
from agentstack_lab.providers.cli import render_prompt

__all__ = ["AcpProvider"]

_FAILED = StopEvent(reason="failed")
"""Put on the queue when a permission request failed: the stream raises the failure without waiting."""
_STOP = {"end_turn": "end_turn", "max_tokens": "max_tokens", "max_turn_requests": "max_tokens",
         "refusal": "refusal", "cancelled": "cancelled"}


def _content_text(content: Any) -> str:
    """The text of an ACP tool call's content list (text blocks, diffs named, terminals named)."""
    parts: list[str] = []
    for item in content or []:
        kind = getattr(item, "type", None)
        if kind == "content":
            block = item.content
            parts.append(block.text if getattr(block, "type", None) == "text" else f"[{block.type}]")
        elif kind == "diff":
            parts.append(f"[diff of {item.path}]")
        elif kind == "terminal":
            parts.append(f"[terminal {item.terminal_id}]")
    return "\n".join(parts)


class _Host:
    """Our side of the connection: collects the agent's text, relays its tool calls and permission requests."""

    def __init__(self, calls: AgentCalls | None, label: str):
        self.calls, self.label = calls, label
        self.queue: asyncio.Queue[ProviderEvent] = asyncio.Queue()
        self.failure: BaseException | None = None
        self.titles: dict[str, str] = {}

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        kind = update.session_update
        if kind == "agent_message_chunk" and getattr(update.content, "type", None) == "text":
            self.queue.put_nowait(TextDeltaEvent(text=update.content.text))
        elif kind == "tool_call":
            self.titles[update.tool_call_id] = update.title
            if self.calls is not None:
                self.calls.tool_call(update.tool_call_id, update.title, update.kind or "other",
                                     update.raw_input if update.raw_input is not None else _content_text(update.content))
        elif kind == "tool_call_update" and update.status in ("completed", "failed") and self.calls is not None:
            output = update.raw_output if update.raw_output is not None else _content_text(update.content)
            self.calls.tool_result(update.tool_call_id, output,
                                   f"{self.label}: the tool call failed" if update.status == "failed" else None)

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **_: Any) -> Any:
        from acp import schema as s

        title = tool_call.title or self.titles.get(tool_call.tool_call_id) or "a tool call"
        allowed = False
        try:
            if self.calls is not None:
                allowed = await self.calls.approve(f"{self.label}: {title}", {
                    "agentTool": title, "toolCallId": tool_call.tool_call_id, "kind": tool_call.kind,
                    "input": tool_call.raw_input, "options": [o.name for o in options]})
        except BaseException as exc:   # a headless run failing closed, or a stop: the stream raises it at once
            self.failure = exc
            self.queue.put_nowait(_FAILED)
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
        wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        chosen = next((o for k in wanted for o in options if o.kind == k), None)
        if chosen is None:
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
        return s.RequestPermissionResponse(outcome=s.AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    async def read_text_file(self, **_: Any) -> Any:
        raise ProviderError(f"{self.label}: this host offers no file system (the agent's capabilities say so)")

    write_text_file = read_text_file


class AcpProvider:
    """An ACP agent as a provider (see the module docstring).

    Args:
        command: The agent's command and arguments (a list, or one string split like a shell would).
        cwd: The session's folder (default: the current one).
        timeout: Seconds for one model call; on expiry the session is cancelled and the agent stopped.
        env: Extra environment variables for the agent.
    """

    def __init__(self, command: Sequence[str] | str = (), *, cwd: str | Path | None = None, timeout: float = 600.0,
                 env: Mapping[str, str] | None = None, model: str | None = None) -> None:
        argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
        if not argv:
            raise ProviderUnavailable('acp: no agent command; set providers.acp.command, e.g. ["agentstack-lab", "acp"]')
        self.name = "acp"
        self.command = argv
        self.cwd = Path(cwd).resolve() if cwd is not None else None
        self.timeout = float(timeout)
        self.env = dict(env or {})
        self.label = _label(argv)

    def __repr__(self) -> str:
        return f"AcpProvider({shlex.join(self.command)!r})"

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        try:
            from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
            from acp import schema as s
        except ImportError:
            raise ProviderUnavailable("acp: needs the ACP SDK: pip install 'agentstack-lab[acp]'") from None
        binary = shutil.which(self.command[0])
        if binary is None:
            raise ProviderUnavailable(f"acp: command {self.command[0]!r} not found (providers.acp.command)")
        host = _Host(AGENT_CALLS.get(), self.label)
        cwd = self.cwd or Path.cwd().resolve()
        prompt = render_prompt(request)
        env = {**os.environ, **self.env}

        async def call(err: Any) -> Any:
            # _Host offers no terminals (its capabilities say so): the SDK answers those "method not found"
            async with spawn_agent_process(host, binary, *self.command[1:], cwd=cwd, env=env,  # pyright: ignore[reportArgumentType]
                                           transport_kwargs={"stderr": err.fileno()}) as (conn, _proc):
                await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=s.ClientCapabilities(),
                                      client_info=s.Implementation(name="agentstack-lab", title="agentstack-lab",
                                                                   version=_version()))
                session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
                try:
                    return await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
                except asyncio.CancelledError:   # our run stopped (or timed out): the agent is told, then ends
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.cancel(session_id=session.session_id), 2)
                    raise

        with tempfile.TemporaryFile() as err:
            task = asyncio.ensure_future(call(err))
            deadline = asyncio.get_running_loop().time() + self.timeout
            try:
                while True:
                    getter = asyncio.ensure_future(host.queue.get())
                    left = deadline - asyncio.get_running_loop().time()
                    await asyncio.wait({task, getter}, timeout=max(left, 0), return_when=asyncio.FIRST_COMPLETED)
                    if getter.done():
                        event = getter.result()
                        if event is _FAILED and host.failure is not None:
                            raise host.failure
                        yield event
                        continue
                    getter.cancel()
                    if not task.done():
                        raise ProviderTimeout(f"acp: {self.label} did not answer within {self.timeout:g} s")
                    break
                while not host.queue.empty():
                    if (event := host.queue.get_nowait()) is not _FAILED:
                        yield event
                if host.failure is not None:
                    raise host.failure
                response = task.result()
            except (ProviderError, asyncio.CancelledError):
                raise
            except Exception as exc:
                if host.failure is not None and exc is not host.failure:
                    raise host.failure from None
                if exc is host.failure:
                    raise
                raise ProviderError(f"acp: {self.label} {_why(exc, err)}") from None
            finally:
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
        usage = response.usage
        if usage is not None:
            yield UsageEvent(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        yield StopEvent(reason=_STOP.get(response.stop_reason, str(response.stop_reason)))


def _label(argv: list[str]) -> str:
    """The agent's name in messages: its program, or the script/package a runner (python, npx, ...) starts."""
    words = [a for a in argv if not a.startswith("-")]
    name = Path(words[0]).name
    if re.fullmatch(r"(python[\d.]*|node|npx|uvx|pipx|bunx|deno|uv)", name) and len(words) > 1:
        name = words[1].rstrip("/").rsplit("/", 1)[-1]
    return name


def _version() -> str:
    from agentstack_lab._version import __version__

    return __version__


def _why(exc: BaseException, err: Any) -> str:
    """Why the agent failed, in one line: its error, else the last line it wrote to stderr."""
    err.seek(0)
    lines = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    said = f" (its last words: {lines[-1].strip()[:300]})" if lines else ""
    message = str(getattr(exc, "message", None) or exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, ConnectionError | BrokenPipeError | EOFError) or "closed" in message.lower():
        return f"ended before it answered{said}"
    return f"failed: {message}{said}"
