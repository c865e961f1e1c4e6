"""Helpers shared by the network providers: keys, retries with backoff, error wording."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import random
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from agentstack_lab.errors import AgentstackError
from agentstack_lab.providers.base import (
    MalformedStreamError,
    MissingKeyError,
    ProviderTimeout,
    StreamDropped,
)

__all__ = ["secret", "resolve_key", "retry_after_seconds", "backoff_delay", "with_retries", "RETRY_STATUSES",
           "missing_extra", "MissingExtraError", "run_sync", "LoopClients", "close_loop_clients",
           "stream_with_retries", "stream_broke"]

T = TypeVar("T")
S = TypeVar("S")

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def secret(value: Any) -> str | None:
    """The plain string behind a ``SecretStr`` (or a str), ``None`` when empty."""
    if value is None:
        return None
    if hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    value = str(value).strip()
    return value or None


def resolve_key(explicit: Any, env_var: str, provider: str, *, required: bool = True) -> tuple[str | None, str]:
    """Find an API key: explicit (override or config) first, then ``env_var``.

    Returns the key and where it came from (for error messages; never the key itself).

    Raises:
        MissingKeyError: No key was found and ``required`` is true.
    """
    key = secret(explicit)
    if key:
        return key, f"providers.{provider}.api_key"
    key = secret(os.environ.get(env_var))
    if key:
        return key, env_var
    if required:
        raise MissingKeyError(
            f"{provider}: no API key; set the {env_var} environment variable "
            f"(or providers.{provider}.api_key in the config)"
        )
    return None, env_var


class MissingExtraError(AgentstackError, ImportError):
    """An optional SDK is not installed; the message names the extra to install."""


def missing_extra(package: str, extra: str) -> ImportError:
    """An ImportError telling the user which extra to install."""
    return MissingExtraError(f"the {extra} provider needs the {package!r} package: pip install 'agentstack-lab[{extra}]'")


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds asked for by ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date), if any."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def backoff_delay(attempt: int, base: float, retry_after: float | None = None, cap: float = 30.0) -> float:
    """Exponential backoff with jitter; a server's ``retry-after`` wins when given."""
    if retry_after is not None:
        return min(retry_after, 60.0)
    return min(cap, base * (2**attempt)) * (0.75 + random.random() * 0.25)


async def with_retries(
    attempt_fn: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    base_delay: float,
    should_retry: Callable[[BaseException], tuple[bool, float | None]],
) -> T:
    """Run ``attempt_fn``, retrying what ``should_retry`` accepts, up to ``max_retries`` times.

    ``should_retry(exc)`` returns (retry?, server-requested delay or None).
    """
    attempt = 0
    while True:
        try:
            return await attempt_fn()
        except Exception as exc:
            retry, after = should_retry(exc)
            if not retry or attempt >= max_retries:
                raise
            await asyncio.sleep(backoff_delay(attempt, base_delay, after))
            attempt += 1


# SDK clients opened on each loop, so that whoever ends a loop can close them first.
_OPENED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Any]] = weakref.WeakKeyDictionary()


class LoopClients:
    """One SDK client per event loop: httpx clients (and their connections) belong to the loop that opened them."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        """The client of the running loop, created on first use."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._factory()
            _OPENED.setdefault(loop, []).append(client)
        return client


def stream_broke(exc: BaseException) -> bool:
    """A stream that dropped, stalled or carried unparsable data (worth a fresh request before its first event)."""
    return isinstance(exc, StreamDropped | ProviderTimeout | MalformedStreamError)


async def stream_with_retries(
    open_stream: Callable[[], Awaitable[S]],
    events: Callable[[S], AsyncIterator[T]],
    *,
    retryable: Callable[[BaseException], bool],
    max_retries: int,
    base_delay: float,
) -> AsyncIterator[T]:
    """Yield ``events(await open_stream())``; a retryable failure before the first event opens a fresh stream.

    At most ``max_retries`` fresh streams; ``retryable(exc)`` says which failures are worth one.

    Errors from ``open_stream`` are raised as they are (the SDK or :func:`with_retries` retried those). Once an
    event has been yielded a retry would duplicate it, so a later failure is raised as is.
    """
    tries = 0
    while True:
        opened = await open_stream()
        yielded = False
        try:
            async for item in events(opened):
                yielded = True
                yield item
            return
        except Exception as exc:
            if yielded or not retryable(exc):
                raise
            if tries >= max_retries:
                if tries and isinstance(exc, AgentstackError) and len(exc.args) == 1:
                    raise type(exc)(f"{exc} (gave up after {tries + 1} attempts)") from exc
                raise
            await asyncio.sleep(backoff_delay(tries, base_delay))
            tries += 1


async def close_loop_clients() -> None:
    """Close the SDK clients opened on the running loop (call it before that loop ends)."""
    for client in _OPENED.pop(asyncio.get_running_loop(), []):
        with contextlib.suppress(Exception):
            await client.close()


async def _then_close(coro: Awaitable[T]) -> T:
    try:
        return await coro
    finally:
        await close_loop_clients()


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop (Jupyter).

    With no running loop it uses ``asyncio.run``; inside one it runs on a short-lived worker
    thread with its own loop, so sync callers (e.g. embedders used by the memory store) work
    from notebooks and engine tasks alike. SDK clients opened on that loop are closed with it.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_then_close(coro))
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentstack-sync") as pool:
        return pool.submit(asyncio.run, _then_close(coro)).result()
