"""The Agent Client Protocol surface: ``agentstack-lab acp`` serves our recursive agent to ACP hosts over stdio.

jupyter-ai 3.x's chat, Zed, marimo and JetBrains host ACP agents; :class:`LabAgent` is ours (sessions, prompts
streamed as message chunks, a plan of subagents and tool calls, approvals as permission requests backed by
persisted decisions, cancel, load; :mod:`agentstack_lab.acp.agent`). :func:`serve` runs it on this process's stdin and stdout; anything else that
writes to stdout (a print in a plugin, a child process) goes to stderr instead, so the protocol stays clean.
Needs the ``acp`` extra (``pip install 'agentstack-lab[acp]'``, the ``agent-client-protocol`` SDK).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

__all__ = ["serve"]


def _require_sdk() -> None:
    try:
        import acp  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        raise ImportError("agentstack-lab acp needs the ACP SDK: pip install 'agentstack-lab[acp]' "
                          "(the agent-client-protocol package)") from None


async def _streams(out_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Read stdin; write the protocol to ``out_fd`` (the real stdout, kept aside)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    class _Out(asyncio.streams.FlowControlMixin, asyncio.Protocol):   # drain() waits while the pipe is full
        pass

    protocol = _Out()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, os.fdopen(out_fd, "wb", buffering=0))
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def _serve(workspace: str | Path | None) -> None:
    from acp import run_agent

    from agentstack_lab.acp.agent import LabAgent

    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints (ours, a plugin's, a child's) land on stderr, never inside the protocol
    sys.stdout = sys.stderr
    reader, writer = await _streams(out_fd)
    agent = LabAgent(workspace=workspace)
    try:   # unstable protocol on: forms (elicitation/create) for questions, when the host has them
        # LabAgent leaves out session modes, config options, fork and resume: the SDK answers those "method not found"
        await run_agent(agent, writer, reader, use_unstable_protocol=True)  # pyright: ignore[reportArgumentType]
    finally:
        agent.close()


def serve(workspace: str | Path | None = None) -> None:
    """Serve ACP on stdin/stdout until the host closes stdin.

    ``workspace`` fixes the workspace of every session; without it each session's ``cwd`` picks it.
    """
    _require_sdk()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(workspace))
