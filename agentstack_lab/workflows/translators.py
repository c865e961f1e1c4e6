"""Parameters rendered as source in the kernel's language, as papermill's translators render them.

The injected cell of a notebook run on an R, Julia, Scala or bash kernel must assign the parameters
in that language (``TRUE``/``NULL`` for R, ``nothing`` for Julia, ``val`` for Scala). The kernel's
name is looked up first, then its language, as papermill does (``pysparkkernel`` is Python,
``sparkkernel`` Scala, ``sparkrkernel`` R). Python's output is papermill's, character for
character, so a notebook's injected cell is the same whichever tool ran it; the other languages
follow papermill and fix where its output does not parse or changes the value: non-finite floats
(``NaN``/``Inf`` in R and Julia, ``Double.NaN`` in Scala), ``$`` in Julia strings (interpolation),
and non-ASCII text in R, Julia and Scala strings (kept as UTF-8, not turned into Python's backslash escapes).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["LANGUAGES", "ParameterError", "language_of", "render_parameters"]


class ParameterError(AgentstackError, ValueError):
    """A parameter is malformed (the message names it).

    Defined here, the leaf of the workflows layer, and re-exported by
    :mod:`~agentstack_lab.workflows.params`, which is where users import it from.
    """


def _python_str(text: str) -> str:
    return '"' + text.encode("unicode_escape").decode("utf-8").replace('"', r"\"") + '"'


def _c_like_str(text: str, *, dollar: bool = False) -> str:
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "$" and dollar:
            out.append("\\$")
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class _Language:
    name: str
    comment: str
    none: str
    true: str
    false: str
    nan: str
    inf: str
    ninf: str
    string: Callable[[str], str]
    list_: Callable[[list[str]], str]
    dict_: Callable[[list[tuple[str, str]]], str] | None
    assign: Callable[[str, str], str]

    def render(self, value: Any) -> str:
        if value is None:
            return self.none
        if isinstance(value, bool):
            return self.true if value else self.false
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if math.isnan(value):
                return self.nan
            if math.isinf(value):
                return self.inf if value > 0 else self.ninf
            return repr(value)
        if isinstance(value, list | tuple):
            return self.list_([self.render(v) for v in value])
        if isinstance(value, dict):
            if self.dict_ is None:
                raise ParameterError(f"a {self.name} kernel cannot take a mapping as a parameter")
            return self.dict_([(self.string(str(k)), self.render(v)) for k, v in value.items()])
        raise ParameterError(f"cannot render {type(value).__name__} as a {self.name} parameter")


def _r_assign(name: str, value: str) -> str:
    return f"{name.lstrip('_')} = {value}"  # a leading "_" is not a legal R name: dropped, as papermill


_PYTHON = _Language(
    "Python", "# Parameters", "None", "True", "False", "float('nan')", "float('inf')", "float('-inf')",
    _python_str,
    lambda items: "[" + ", ".join(items) + "]",
    lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}",
    lambda name, value: f"{name} = {value}")
_R = _Language(
    "R", "# Parameters", "NULL", "TRUE", "FALSE", "NaN", "Inf", "-Inf", _c_like_str,
    lambda items: "list(" + ", ".join(items) + ")",
    lambda pairs: "list(" + ", ".join(f"{k} = {v}" for k, v in pairs) + ")", _r_assign)
_JULIA = _Language(
    "Julia", "# Parameters", "nothing", "true", "false", "NaN", "Inf", "-Inf",
    lambda s: _c_like_str(s, dollar=True),
    lambda items: "[" + ", ".join(items) + "]",
    lambda pairs: "Dict(" + ", ".join(f"{k} => {v}" for k, v in pairs) + ")",
    lambda name, value: f"{name} = {value}")
_SCALA = _Language(
    "Scala", "// Parameters", "None", "true", "false", "Double.NaN", "Double.PositiveInfinity",
    "Double.NegativeInfinity", _c_like_str,
    lambda items: "Seq(" + ", ".join(items) + ")",
    lambda pairs: "Map(" + ", ".join(f"{k} -> {v}" for k, v in pairs) + ")",
    lambda name, value: f"val {name} = {value}")
_BASH = _Language(
    "bash", "# Parameters", "''", "true", "false", "nan", "inf", "-inf", shlex.quote,
    lambda items: "(" + " ".join(items) + ")", None, lambda name, value: f"{name}={value}")

LANGUAGES: dict[str, _Language] = {
    "python": _PYTHON, "pysparkkernel": _PYTHON, "R": _R, "r": _R, "ir": _R, "sparkrkernel": _R,
    "julia": _JULIA, "scala": _SCALA, "sparkkernel": _SCALA, "bash": _BASH,
}


def language_of(kernel_name: str | None, language: str | None) -> _Language:
    """The translator for ``kernel_name`` (looked up first) or ``language``; one line naming both if none.

    A notebook that names neither (no kernelspec, no language_info) runs on the default ``python3`` kernel,
    so it gets Python.
    """
    if not kernel_name and not language:
        return _PYTHON
    for key in (kernel_name, language):
        if key and key in LANGUAGES:
            return LANGUAGES[key]
    for key in (kernel_name, language):  # "julia-1.10", "Python 3": a versioned name of a known language
        base = (key or "").lower().split("-")[0].split(" ")[0].rstrip("0123456789.")
        if base in LANGUAGES:
            return LANGUAGES[base]
    known = ", ".join(sorted({lang.name for lang in LANGUAGES.values()}))
    raise ParameterError(f"no parameter translator for kernel {kernel_name!r} (language {language!r}); "
                         f"parameters can be injected for {known} kernels")


def render_parameters(parameters: dict[str, Any], *, kernel_name: str | None = None,
                      language: str | None = "python") -> str:
    """The injected cell's source: a comment line, then one assignment per parameter, in the kernel's language."""
    lang = language_of(kernel_name, language)
    lines = [lang.comment]
    for name, value in parameters.items():
        rendered = lang.render(value)
        if lang is _SCALA and isinstance(value, int) and not isinstance(value, bool) \
                and not -2**31 <= value < 2**31:
            rendered += "L"  # a Long literal: an Int one would not compile
        lines.append(lang.assign(name, rendered))
    return "\n".join(lines) + "\n"
