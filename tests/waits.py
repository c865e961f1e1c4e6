"""Waiting on a condition with a deadline, instead of sleeping and hoping it happened: the wait ends as
soon as ``predicate()`` is true (returning its value) and fails naming ``what`` when the deadline passes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(predicate: Callable[[], T], what: str, *, timeout: float = 30.0, every: float = 0.01) -> T:
    """Call ``predicate`` every ``every`` seconds until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)
    return value


async def apoll(predicate: Callable[[], T], what: str, *, timeout: float = 30.0, every: float = 0.01) -> T:
    """:func:`poll` for a coroutine: the event loop keeps running (timers, callbacks) between the checks."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(every)
    return value
