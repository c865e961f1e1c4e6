"""Kernel variables as prompt context: ``{expr}`` interpolation and ``@name`` descriptions.

``{expr}`` is replaced by the value of a Python expression evaluated in the kernel, as IPython does
for ``!echo {expr}``: names, attributes, indexing and calls (``{df.shape}``, ``{df.x.max()}``,
``{In[3]}``, ``{Out[4]}``, ``{Err[5]}`` the traceback cell 5 raised, ``{Err[-1]}`` the latest), with
``!r``/``!s``/``!a`` and a ``:format`` spec as in ``str.format``. ``{{`` and ``}}`` are literal braces.
Every ``{...}`` is an expression: one that is not, or whose name is undefined or whose evaluation
fails, is one line naming it and nothing runs (never a literal left in the prompt unnoticed).

``@name`` attaches a compact description of the variable (a DataFrame's shape, dtypes and head; an
array's shape and dtype; a function's signature and docstring; otherwise a bounded repr). Nothing
heavy is imported: DataFrames and arrays are recognised by duck typing.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import reprlib
from collections.abc import Mapping
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["PromptError", "UnknownVariableError", "Traceback", "build_prompt", "describe", "interpolate",
           "attached_names"]

MAX_REPR = 600
MAX_STR = 2000

_ATTACH = re.compile(r"(?<![\w@.`])@([A-Za-z_]\w*)")
_CONVERSIONS = {"r": repr, "s": str, "a": ascii}


class PromptError(AgentstackError, ValueError):
    """A ``{...}`` field of a prompt cannot be filled in (not an expression, or its evaluation failed)."""


class UnknownVariableError(PromptError, NameError):
    """A ``{name}`` or ``@name`` in a prompt is not defined in the kernel."""


class Traceback(str):
    """A cell's traceback as text (``Err[n]``): cut from the front when too long, as its end says most."""


def _lookup(namespace: Mapping[str, Any], name: str, syntax: str) -> Any:
    if name not in namespace:
        raise UnknownVariableError(f"unknown variable {syntax}: {name!r} is not defined in the kernel")
    return namespace[name]


def _field_end(text: str, start: int) -> int:
    """The index of the ``}`` closing the field opened at ``start`` (nested braces, quoted strings), or -1."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _parses(expr: str) -> bool:
    try:
        ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return False
    return True


def _split(field: str) -> tuple[str, str, str | None]:
    """``expr!conv:spec`` into its parts; the whole field is the expression whenever it parses as one."""
    if _parses(field):
        return field, "", None
    depth, quote = 0, ""
    for i, ch in enumerate(field):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch == "!" and field[i + 1:i + 2] in _CONVERSIONS and field[i + 2:i + 3] in ("", ":"):
            return field[:i], field[i + 1], field[i + 3:] if field[i + 2:i + 3] == ":" else None
        elif depth == 0 and ch == ":":
            return field[:i], "", field[i + 1:]
    return field, "", None


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str) and " " in exc.args[0]:
        text = exc.args[0]   # a sentence (Err's "cell 5 raised no error ..."), not a missing key's repr
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"


def _bounded(value: Any) -> str:
    text = str(value)
    if len(text) <= MAX_STR:
        return text
    if isinstance(value, Traceback):
        return f"[{len(text) - MAX_STR} characters before] …" + text[-MAX_STR:]
    return text[:MAX_STR] + f"… [{len(text) - MAX_STR} more characters]"


def _evaluate(field: str, namespace: Mapping[str, Any]) -> str:
    syntax = "{" + field + "}"
    if not field.strip():
        raise PromptError(f"empty {syntax} in the prompt: write {{{{}}}} for literal braces")
    expr, conversion, spec = _split(field)
    try:
        code = compile(expr.strip(), "<prompt>", "eval")
    except SyntaxError:
        raise PromptError(f"{syntax} in the prompt is not a Python expression: write {{{{ and }}}} for literal "
                          "braces") from None
    scope = namespace if isinstance(namespace, dict) and "__builtins__" in namespace else \
        {**namespace, "__builtins__": builtins}
    try:
        value = eval(code, scope)  # noqa: S307 - the user's own expression, in the user's kernel, as IPython's {expr}
    except NameError as exc:
        name = getattr(exc, "name", None) or str(exc)
        raise UnknownVariableError(f"unknown variable {syntax}: {name!r} is not defined in the kernel") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the user's expression is one line
        raise PromptError(f"{syntax} in the prompt failed: {_one_line(exc)}") from None
    try:
        if conversion:
            value = _CONVERSIONS[conversion](value)
        if spec is not None:
            return _bounded(format(value, spec))
    except Exception as exc:  # noqa: BLE001 - a bad format spec, a broken __repr__
        hint = " (write {{ and }} for literal braces)" if spec is not None else ""
        raise PromptError(f"{syntax} in the prompt failed: {_one_line(exc)}{hint}") from None
    return _bounded(value)


def interpolate(prompt: str, namespace: Mapping[str, Any]) -> str:
    """Replace each ``{expr}`` with its value's ``str()`` (bounded); ``{{``/``}}`` are literal braces.

    Raises:
        PromptError: A field is not an expression, or failed (``UnknownVariableError``: an undefined name).
    """
    out: list[str] = []
    i = 0
    while i < len(prompt):
        ch = prompt[i]
        if prompt.startswith("{{", i) or prompt.startswith("}}", i):
            out.append(ch)
            i += 2
        elif ch == "{":
            end = _field_end(prompt, i)
            if end < 0:
                raise PromptError(f"unmatched '{{' at character {i + 1} of the prompt: write {{{{ for a literal "
                                  "brace")
            out.append(_evaluate(prompt[i + 1:end], namespace))
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


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


def build_prompt(prompt: str, namespace: Mapping[str, Any], *, isolated: bool = False) -> str:
    """Interpolate ``{expr}`` values and append descriptions of the ``@name`` variables.

    ``isolated``: the run's code executes outside this kernel, which the descriptions' header tells
    the model (the names are not defined where its code runs).

    Raises:
        PromptError: A ``{expr}`` is not an expression or fails; ``UnknownVariableError``: an undefined name.
    """
    names = attached_names(prompt)
    values = {n: _lookup(namespace, n, "@" + n) for n in names}  # check all before changing anything
    text = interpolate(_ATTACH.sub(lambda m: f"`{m.group(1)}`", prompt), namespace)
    if not names:
        return text
    blocks = "\n".join(f"- {describe(n, v)}" for n, v in values.items())
    where = ("descriptions only: your python tool runs in a separate process where these names are not defined"
             if isolated else "from the user's Python session")
    return f"{text}\n\nKernel variables ({where}):\n{blocks}"
