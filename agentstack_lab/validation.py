"""Checks for numbers and text that users type: one line naming the option, raised before anything changes.

Every surface takes numbers from text (CLI options, magic flags, MCP arguments) and the parsers
accept values that break later and far away: ``nan``/``inf`` pass ``float()`` and every ``<``
comparison is false for ``nan`` (a ``--threshold nan`` silently returned nothing); Python ints have
no upper bound while SQLite binds at most 2**63 - 1 (``--limit 9223372036854775808`` died with
``OverflowError``); stdin may not be UTF-8. The surfaces call these functions with the option's
name so the message says which flag was wrong. This module sits in the foundation (it imports only
:mod:`agentstack_lab.errors`), so the CLI and the notebook magics share it without importing each other.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

from agentstack_lab.errors import UsageError

__all__ = ["SQLITE_INT_MAX", "as_dict", "as_dicts", "check_float", "check_int", "check_threshold", "decode_utf8", "seconds_text", "excerpt", "typed_prompt"]

SQLITE_INT_MAX = 2**63 - 1  # the largest integer SQLite binds (a signed 64-bit int)


def check_float(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                above: float | None = None) -> float:
    """``value`` as a finite float within bounds, else :class:`~agentstack_lab.errors.UsageError` naming ``name``.

    Args:
        name: The option as the user typed it, e.g. ``"--timeout"``.
        value: The parsed value (a bool is not a number here).
        minimum: Smallest allowed value (inclusive).
        maximum: Largest allowed value (inclusive).
        above: Exclusive lower bound (``above=0`` means "> 0").
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise UsageError(f"{name} must be a finite number, got {value!r}")
    if above is not None and not number > above:
        raise UsageError(f"{name} must be > {above:g}, got {value!r}")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        low = "" if minimum is None else f"{minimum:g}"
        high = "" if maximum is None else f"{maximum:g}"
        bounds = f"between {low} and {high}" if low and high else f">= {low}" if low else f"<= {high}"
        raise UsageError(f"{name} must be {bounds}, got {value!r}")
    return number


def check_int(name: str, value: Any, *, minimum: int = 0, maximum: int = SQLITE_INT_MAX) -> int:
    """``value`` as an int in ``[minimum, maximum]`` (default: what SQLite can bind), else a UsageError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an integer, got {value!r}")
    if value < minimum or value > maximum:
        raise UsageError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def check_threshold(name: str, value: Any) -> float | None:
    """A search score threshold: ``None`` or a finite number in 0..1 (scores are normalised to that range)."""
    return None if value is None else check_float(name, value, minimum=0.0, maximum=1.0)


def decode_utf8(data: bytes, source: str = "standard input") -> str:
    """``data`` decoded as UTF-8, else a UsageError saying where the bad byte is."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "convert it first, e.g. with iconv") from None


def check_text(name: str, text: str) -> str:
    r"""``text`` if it can be stored as UTF-8, else a UsageError naming the first character that cannot.

    Bytes that were not UTF-8 arrive from the command line as ``\udc80``..``\udcff`` (Python's
    surrogateescape); other lone surrogates come from JSON such as ``"\ud800"``.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = ord(text[exc.start])
        if 0xDC80 <= char <= 0xDCFF:
            raise UsageError(f"{name} is not UTF-8 text (byte 0x{char - 0xDC00:02x} at character {exc.start}); "
                             "convert it first, e.g. with iconv") from None
        raise UsageError(f"{name} contains a lone surrogate (U+{char:04X} at character {exc.start}), "
                         "which is not text that can be stored") from None
    return text


def storable(text: str) -> str:
    r"""``text`` unchanged when it is valid UTF-8, else with each unstorable character escaped as ``\udXXX``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def seconds_text(seconds: float) -> str:
    """A duration for people: ``"40 ms"``, ``"1.0 s"``, ``"2 min 05 s"``, ``"1 h 02 min"`` (messages and events)."""
    seconds = float(seconds)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return f"{seconds} s"
    if abs(seconds) < 0.095:
        return f"{seconds * 1000:.0f} ms"
    if abs(seconds) < 59.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


_MARKS = re.compile(r"\*\*|__|`")  # Markdown strong emphasis and code spans: an excerpt is plain text
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*(\n|$)", re.M)
_KERNEL_VARIABLES = "\n\nKernel variables ("
_DESCRIBED = re.compile(r"^- `([A-Za-z_]\w*)`", re.M)


def excerpt(text: str | None, limit: int = 80) -> str:
    """One line of at most ``limit`` characters, from the first paragraph (code fences, backticks and ``**`` dropped).

    A cut line ends with an ellipsis.
    """
    text = _MARKS.sub("", _FENCE.sub("", (text or "").strip())).strip()
    first, *rest = text.split("\n\n", 1)
    flat = " ".join(first.split())
    if len(flat) <= limit:
        return flat + (" …" if rest and rest[0].strip() and flat else "")
    return flat[: limit - 1].rstrip() + "…"


def typed_prompt(prompt: str | None) -> str:
    """The prompt as the person typed it: ``@df`` again, without the kernel-variable descriptions appended.

    ``%agent How are sales doing in @df?`` sends the model ``How are sales doing in `df`?`` and a
    "Kernel variables" block describing ``df``; titles show what was typed.
    """
    text = prompt or ""
    cut = text.rfind(_KERNEL_VARIABLES)
    if cut < 0:
        return text
    names = _DESCRIBED.findall(text[cut:])
    head = text[:cut]
    for name in names:
        head = re.sub(rf"(?<![\w@`])`{re.escape(name)}`(?!`)", "@" + name, head)
    return head


def as_dict(value: object) -> dict[str, Any]:
    """``value`` if it is a dict (parsed JSON, a snapshot, a task's result), else ``{}``; typed for reading."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def as_dicts(value: object) -> list[dict[str, Any]]:
    """The dict items of ``value`` if it is a list or tuple (``children``, ``lost``), else ``[]``."""
    if not isinstance(value, list | tuple):
        return []
    return [cast("dict[str, Any]", v) for v in cast("list[object]", value) if isinstance(v, dict)]
