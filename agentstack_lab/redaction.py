"""Secret values kept out of everything a tool returns: redact first, truncate after.

A tool output over 8,000 characters reaches the model as head + tail. Cutting before redacting
left a 58-character key that straddled the cut with 30 characters intact, in 4 events, the
database and the model's request. :func:`clip` therefore redacts the whole text and only then
cuts it; :func:`redact_cut` also hides the start of a secret at the end of text that was capped
before it reached us (a pipe read stopped at 1,000,000 characters).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["SECRET_HINTS", "REDACTED", "secret_values", "redact", "redact_cut", "clip", "public_message"]

SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
REDACTED = "***"
MIN_SECRET = 8  # shorter values are not treated as secrets (too many false hits)
MIN_PARTIAL = 4  # a cut-off start of a secret this long or longer is hidden too


def secret_values(extra: Any = ()) -> list[str]:
    """Values of secret-looking environment variables plus ``extra`` secrets (str or ``SecretStr``).

    Only values of 8+ characters that are not paths count; longest first, for :func:`redact`.
    """
    found = {v for k, v in os.environ.items() if any(h in k.upper() for h in SECRET_HINTS)}
    for item in extra:
        item = item.get_secret_value() if hasattr(item, "get_secret_value") else item
        if isinstance(item, str):
            found.add(item)
    return sorted({v.strip() for v in found if len(v.strip()) >= MIN_SECRET and not v.startswith("/")},
                  key=len, reverse=True)


def redact(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (str, or dicts/lists of them) with every secret replaced by ``***``."""
    if not secrets:
        return value
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v, secrets) for v in value)
    return value


def redact_cut(text: str, secrets: Sequence[str]) -> str:
    """:func:`redact`, and hide a trailing start of a secret (text that was cut right after it)."""
    text = redact(text, secrets)
    for s in secrets:
        for n in range(min(len(s) - 1, len(text)), MIN_PARTIAL - 1, -1):
            if text.endswith(s[:n]):
                return text[:-n] + REDACTED
    return text


def clip(text: str, limit: int, secrets: Sequence[str] = (), *, marker: str = "\n…(truncated)…\n") -> str:
    """``text`` redacted, then cut to head + tail of ``limit // 2`` characters each if longer than ``limit``."""
    text = redact(text, secrets)
    return text if len(text) <= limit else text[: limit // 2] + marker + text[-(limit // 2):]


def public_message(exc: BaseException) -> str:
    """The one line a surface shows for ``exc`` (:func:`agentstack_lab.errors.message`), secrets replaced.

    An error may quote a value that came from the environment (a config value of ``${ANTHROPIC_API_KEY}``
    named as an unknown provider, a DSN with its password): every surface shows errors through this.
    """
    from agentstack_lab.errors import message

    return redact(message(exc), secret_values())
