"""Worker threads of a run: ``fork``/``wait`` for agent code in a thread, and :func:`thread_call`.

The live executor runs model-written code in a thread so the kernel's loop (and the widget's
comms) stays responsive; ``fork(prompt, type=None)`` and ``wait(handle, timeout=None)`` called
from that code hop to the run's loop with ``asyncio.run_coroutine_threadsafe`` and block the
thread, never the loop.

:func:`thread_call` is ``asyncio.to_thread`` for the database calls of a run (its interventions loop, the
agents' memory tools): a cancelled ``to_thread`` returns at once while its thread goes on, and whoever awaited
the run may close the workspace right after; a database closed under a read in another thread crashed the
kernel (SIGSEGV). So a call under way is waited for before the cancellation goes on: nothing of a run
touches the database after the run ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Mapping
from typing import Any, cast

from agentstack_lab.engine.options import AgentRunError
from agentstack_lab.engine.state import AgentNode
from agentstack_lab.validation import seconds_text

__all__ = ["fork_from_thread", "wait_from_thread", "thread_call"]


async def thread_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``asyncio.to_thread(fn, *args, **kwargs)``; when cancelled, the call in the thread is waited for first."""
    call = asyncio.ensure_future(asyncio.to_thread(functools.partial(fn, *args, **kwargs)))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await call
        raise


def fork_from_thread(loop: asyncio.AbstractEventLoop,
                     spawn: Callable[[str, str | None], str]) -> Callable[..., str]:
    """``fork(prompt, type=None)``: starts a child with ``spawn(prompt, type)`` on ``loop``; returns its id."""

    def fork(prompt: str, type: str | None = None) -> str:  # noqa: A002 - the seed's spelling
        if not isinstance(cast(object, prompt), str) or not prompt.strip():   # code the model wrote passes anything
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
            raise TimeoutError(f"wait(): agent {node.name} is still {node.status} after {seconds_text(timeout) if timeout is not None else 'waiting'}") from None
        if node.status != "completed":
            raise AgentRunError(f"forked agent {node.name} {node.status}: {node.error}")
        return node.result or ""

    return wait
