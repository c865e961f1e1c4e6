"""Kernel variables as prompt context: ``{name}`` interpolation and ``@name`` descriptions.

``{name}`` is replaced by ``str(value)`` (``{{`` and ``}}`` give literal braces); ``@name``
attaches a compact description of the variable (a DataFrame's shape, dtypes and head; an array's
shape and dtype; a function's signature and docstring; otherwise a bounded repr). Nothing heavy is
imported: DataFrames and arrays are recognised by duck typing.
"""

from __future__ import annotations

import inspect
import re
import reprlib
from collections.abc import Mapping
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["UnknownVariableError", "build_prompt", "describe", "interpolate", "attached_names"]

MAX_REPR = 600
MAX_STR = 2000

_INTERP = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)\}")
_ATTACH = re.compile(r"(?<![\w@.`])@([A-Za-z_]\w*)")


class UnknownVariableError(AgentstackError, NameError):
    """A ``{name}`` or ``@name`` in a prompt is not defined in the kernel."""


def _lookup(namespace: Mapping[str, Any], name: str, syntax: str) -> Any:
    if name not in namespace:
        raise UnknownVariableError(f"unknown variable {syntax}: {name!r} is not defined in the kernel")
    return namespace[name]


def interpolate(prompt: str, namespace: Mapping[str, Any]) -> str:
    """Replace each ``{name}`` with the value's ``str()`` (bounded); ``{{``/``}}`` are literal braces."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        text = str(_lookup(namespace, m.group(1), "{" + m.group(1) + "}"))
        return text if len(text) <= MAX_STR else text[:MAX_STR] + f"… [{len(text) - MAX_STR} more characters]"

    return _INTERP.sub(sub, prompt)


def attached_names(prompt: str) -> list[str]:
    """The distinct ``@name`` references of a prompt, in order."""
    return list(dict.fromkeys(_ATTACH.findall(prompt)))


def _qualname(obj: Any) -> str:
    cls = type(obj)
    module = cls.__module__.split(".")[0]
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _short_repr(obj: Any) -> str:
    r = reprlib.Repr()
    r.maxstring = 200
    r.maxother = 200
    r.maxlist = r.maxtuple = r.maxset = r.maxdict = 12
    r.maxlevel = 3
    try:
        text = r.repr(obj)
    except Exception as exc:  # a broken __repr__ must not break the prompt
        text = f"<unrepresentable: {type(exc).__name__}>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR] + "…"


def _is_dataframe(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("shape", "dtypes", "head", "columns"))


def _is_series(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("shape", "dtype", "head", "index")) and not _is_dataframe(obj)


def _is_array(obj: Any) -> bool:
    return hasattr(obj, "shape") and hasattr(obj, "dtype") and hasattr(obj, "ndim")


def describe(name: str, obj: Any) -> str:
    """A compact, bounded, Markdown description of one kernel variable."""
    kind = _qualname(obj)
    if _is_dataframe(obj):
        dtypes = ", ".join(f"{c}: {t}" for c, t in list(obj.dtypes.items())[:30])
        try:
            head = obj.head(5).to_string(max_cols=12, max_colwidth=40)
        except Exception:
            head = _short_repr(obj)
        return (f"`{name}`: {kind}, shape {tuple(obj.shape)}\n  dtypes: {dtypes}\n"
                f"  head:\n```\n{head}\n```")
    if _is_series(obj):
        head = obj.head(5).to_string()
        return (f"`{name}`: {kind} named {getattr(obj, 'name', None)!r}, shape {tuple(obj.shape)}, "
                f"dtype {obj.dtype}\n  head:\n```\n{head}\n```")
    if _is_array(obj):
        return f"`{name}`: {kind}, shape {tuple(obj.shape)}, dtype {obj.dtype}"
    if inspect.isroutine(obj) or inspect.isclass(obj):
        try:
            sig = str(inspect.signature(obj, eval_str=True))
        except Exception:
            sig = None
        try:
            sig = sig or str(inspect.signature(obj))
        except (TypeError, ValueError):
            sig = "(...)"
        doc = inspect.getdoc(obj) or ""
        doc = doc.split("\n\n", 1)[0].strip()
        what = "class" if inspect.isclass(obj) else "function"
        line = f"`{name}`: {what} `{getattr(obj, '__name__', name)}{sig}`"
        return line + (f"\n  doc: {doc[:MAX_REPR]}" if doc else "")
    if inspect.ismodule(obj):
        return f"`{name}`: module {obj.__name__}"
    size = ""
    if isinstance(obj, (list, tuple, dict, set, frozenset, str, bytes)):
        size = f", length {len(obj)}"
    return f"`{name}`: {kind}{size} = {_short_repr(obj)}"


def build_prompt(prompt: str, namespace: Mapping[str, Any]) -> str:
    """Interpolate ``{name}`` values and append descriptions of the ``@name`` variables.

    Raises:
        UnknownVariableError: A referenced name is not defined in ``namespace``.
    """
    names = attached_names(prompt)
    values = {n: _lookup(namespace, n, "@" + n) for n in names}  # check all before changing anything
    text = interpolate(_ATTACH.sub(lambda m: f"`{m.group(1)}`", prompt), namespace)
    if not names:
        return text
    blocks = "\n".join(f"- {describe(n, v)}" for n, v in values.items())
    return f"{text}\n\nKernel variables (from the user's Python session):\n{blocks}"
