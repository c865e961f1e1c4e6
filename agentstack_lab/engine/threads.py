"""``fork`` and ``wait`` for agent code running in a worker thread, bridged back to the run's loop.

The live executor runs model-written code in a thread so the kernel's loop (and the widget's
comms) stays responsive; ``fork(prompt, type=None)`` and ``wait(handle, timeout=None)`` called
from that code hop to the run's loop with ``asyncio.run_coroutine_threadsafe`` and block the
thread, never the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from agentstack_lab.engine.options import AgentRunError
from agentstack_lab.engine.state import AgentNode

__all__ = ["fork_from_thread", "wait_from_thread"]


def fork_from_thread(loop: asyncio.AbstractEventLoop,
                     spawn: Callable[[str, str | None], str]) -> Callable[..., str]:
    """``fork(prompt, type=None)``: starts a child with ``spawn(prompt, type)`` on ``loop``; returns its id."""

    def fork(prompt: str, type: str | None = None) -> str:  # noqa: A002 - the seed's spelling
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("fork(prompt): prompt must be a non-empty string")

        async def go() -> str:
            return spawn(prompt, type)

        return asyncio.run_coroutine_threadsafe(go(), loop).result()

    return fork


def wait_from_thread(loop: asyncio.AbstractEventLoop, nodes: Mapping[str, AgentNode]) -> Callable[..., str]:
    """``wait(handle, timeout=None)``: the child's result, or an ``AgentRunError`` if it did not complete."""

    def wait(handle: Any, timeout: float | None = None) -> str:
        agent_id = getattr(handle, "id", handle)
        node = nodes.get(agent_id)
        if node is None:
            raise ValueError(f"wait(): no agent {agent_id!r} in this run")

        async def go() -> None:
            if node.task is not None:
                await asyncio.shield(node.task)

        try:
            asyncio.run_coroutine_threadsafe(go(), loop).result(timeout)
        except TimeoutError:
            raise TimeoutError(f"wait(): agent {node.name} is still {node.status} after {timeout:g}s") from None
        if node.status != "completed":
            raise AgentRunError(f"forked agent {node.name} {node.status}: {node.error}")
        return node.result or ""

    return wait
