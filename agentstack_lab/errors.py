"""One root for every error a user can cause or fix: :class:`AgentstackError`.

Surfaces (magics, CLI, MCP, the server extension) catch this root and show its message as one
line. Anything else that escapes is a bug: it is logged with its traceback (the CLI shows it with
``-v``), never flattened to ``Type: message``. Subclasses live next to the code that raises them
and may also derive from a builtin (``ValueError``, ``KeyError``, ...) so callers that caught the
builtin keep working.

This module imports nothing from the package: every layer may import it.
"""

from __future__ import annotations

__all__ = ["AgentstackError", "UsageError", "NotFoundError", "message"]


class AgentstackError(Exception):
    """An expected failure with a message meant for the user (one line)."""


class UsageError(AgentstackError, ValueError):
    """Bad input: a flag, an option value, a parameter. Nothing was changed."""


class NotFoundError(AgentstackError, KeyError):
    """A named thing (run, agent, decision, task, entry) does not exist."""

    def __str__(self) -> str:  # KeyError quotes its argument; a message reads better plain
        return str(self.args[0]) if self.args else ""


def message(exc: BaseException) -> str:
    """The one-line message of an expected error (``KeyError`` quoting removed, first line only)."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return text
