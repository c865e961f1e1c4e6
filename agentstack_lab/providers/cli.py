"""Coding-agent CLIs as providers: ``claude --print``, ``gemini`` and ``codex exec``.

Each call runs the binary as an asyncio subprocess with an argument list (never a shell string);
the conversation goes in on stdin and stdout streams back as text. A timeout kills the child and
its process group; a non-zero exit surfaces stderr. The CLIs use their own tools and login, so
our tool specs are not passed through, except that a forced tool (structured output) becomes an
instruction to reply with JSON matching its schema.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agentstack_lab.providers.base import (
    Message,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    ProviderTimeout,
    ProviderUnavailable,
    StopEvent,
    TextBlock,
    TextDeltaEvent,
    ToolResultBlock,
    ToolUseBlock,
)
from agentstack_lab.validation import seconds_text

__all__ = ["CliSpec", "CLI_SPECS", "CliProvider", "cli_provider", "check_cli_providers", "render_prompt"]


@dataclass(frozen=True)
class CliSpec:
    binary: str
    args: tuple[str, ...]
    install: str
    model_flag: str = "--model"
    trailing: tuple[str, ...] = ()  # after the model flag (e.g. codex's "-" = read stdin)


CLI_SPECS: dict[str, CliSpec] = {
    "claude-code": CliSpec("claude", ("--print", "--output-format", "text"),
                           "npm install -g @anthropic-ai/claude-code"),
    "gemini-cli": CliSpec("gemini", (), "npm install -g @google/gemini-cli"),
    "codex": CliSpec("codex", ("exec", "--skip-git-repo-check"), "npm install -g @openai/codex", trailing=("-",)),
}


def check_cli_providers() -> dict[str, str | None]:
    """Which CLI providers are installed: name → path of the binary on PATH, or ``None``."""
    return {name: shutil.which(spec.binary) for name, spec in CLI_SPECS.items()}


def _block_text(b: Any) -> str:
    if isinstance(b, TextBlock):
        return b.text
    if isinstance(b, ToolUseBlock):
        return f"[called tool {b.name} with {json.dumps(b.input)}]"
    if isinstance(b, ToolResultBlock):
        return f"[tool {'error' if b.is_error else 'result'}: {b.content}]"
    return str(b)


def render_prompt(request: ProviderRequest) -> str:
    """Flatten a request into one prompt: system text, the turns, and any JSON-reply instruction."""
    parts = [request.system.strip()] if request.system.strip() else []
    turns: list[Message] = request.messages
    if len(turns) == 1 and turns[0].role == "user" and not parts:
        parts.append(turns[0].text() if isinstance(turns[0].content, list) else turns[0].content)
    else:
        for m in turns:
            text = m.content if isinstance(m.content, str) else "\n".join(_block_text(b) for b in m.content)
            parts.append(f"{'User' if m.role == 'user' else 'Assistant'}: {text}")
    forced = next((t for t in request.tools if t.name == request.tool_choice), None)
    if forced is not None:
        parts.append("Reply with only a JSON object (no prose, no code fence) matching this JSON schema:\n"
                     + json.dumps(forced.input_schema))
    return "\n\n".join(parts) + "\n"


class CliProvider:
    """One coding-agent CLI run per request.

    Args:
        kind: ``"claude-code"``, ``"gemini-cli"`` or ``"codex"``.
        timeout: Seconds for the whole call; on expiry the child (and its group) is killed.
        model: Passed as ``--model`` when given.
        binary: Path or name of the executable (default: the CLI's usual name on PATH).
        extra_args: More arguments for the CLI, as a list.

    Raises:
        ProviderUnavailable: The binary is not installed (message says how to install it).
    """

    def __init__(self, kind: str, *, timeout: float = 300.0, model: str | None = None, binary: str | None = None,
                 extra_args: list[str] | tuple[str, ...] = ()) -> None:
        if kind not in CLI_SPECS:
            raise ValueError(f"unknown CLI provider {kind!r}; valid: {', '.join(CLI_SPECS)}")
        self.name = kind
        self.spec = CLI_SPECS[kind]
        self.timeout = float(timeout)
        self.model = model
        self.extra_args = tuple(extra_args)
        wanted = binary or self.spec.binary
        path = shutil.which(wanted)
        if path is None:
            raise ProviderUnavailable(f"{kind}: the `{wanted}` executable is not on PATH "
                                      f"(install it with `{self.spec.install}`)")
        self.path = path

    def __repr__(self) -> str:
        return f"CliProvider({self.name!r}, path={self.path!r})"

    def argv(self, request: ProviderRequest) -> list[str]:
        """The argument list for one call (the prompt itself goes on stdin)."""
        args = [self.path, *self.spec.args]
        model = request.model or self.model
        if model:
            args += [self.spec.model_flag, model]
        return [*args, *self.extra_args, *self.spec.trailing]

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Run the CLI and stream its stdout as text; stop when it exits."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        proc = await asyncio.create_subprocess_exec(
            *self.argv(request), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        stderr_task = asyncio.ensure_future(proc.stderr.read())  # type: ignore[union-attr]
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(render_prompt(request).encode())  # type: ignore[union-attr]
                await proc.stdin.drain()  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                chunk = await asyncio.wait_for(proc.stdout.read(4096), remaining)  # type: ignore[union-attr]
                text = decoder.decode(chunk, final=not chunk)
                if text:
                    yield TextDeltaEvent(text=text)
                if not chunk:
                    break
            code = await asyncio.wait_for(proc.wait(), max(0.01, deadline - loop.time()))
            stderr = (await stderr_task).decode("utf-8", "replace").strip()
            if code != 0:
                tail = "\n".join(stderr.splitlines()[-20:]) or "(no stderr)"
                raise ProviderError(f"{self.name}: `{self.spec.binary}` exited with status {code}: {tail}")
            yield StopEvent(reason="end_turn")
        except TimeoutError:
            raise ProviderTimeout(f"{self.name}: no answer within {seconds_text(self.timeout)}; "
                                  f"the `{self.spec.binary}` process was killed") from None
        finally:
            await _kill(proc)
            if not stderr_task.done():
                stderr_task.cancel()
            with contextlib.suppress(BaseException):
                await stderr_task


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the child's whole process group if it is still running, and reap it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def cli_provider(kind: str, **settings: Any) -> CliProvider:
    """Build a CLI provider from ``providers.cli`` settings plus overrides."""
    return CliProvider(kind, **settings)
