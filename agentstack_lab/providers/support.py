"""Helpers shared by the network providers: keys, retries with backoff, error wording."""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentstack_lab.providers.base import MissingKeyError

__all__ = ["secret", "resolve_key", "retry_after_seconds", "backoff_delay", "with_retries", "RETRY_STATUSES",
           "missing_extra", "run_sync"]

T = TypeVar("T")

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


def missing_extra(package: str, extra: str) -> ImportError:
    """An ImportError telling the user which extra to install."""
    return ImportError(f"the {extra} provider needs the {package!r} package: pip install 'agentstack-lab[{extra}]'")


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


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop (Jupyter).

    With no running loop it uses ``asyncio.run``; inside one it runs on a short-lived worker
    thread with its own loop, so sync callers (e.g. embedders used by the memory store) work
    from notebooks and engine tasks alike.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentstack-sync") as pool:
        return pool.submit(asyncio.run, coro).result()  # type: ignore[arg-type]
