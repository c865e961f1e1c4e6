"""Notebook parameters with papermill's conventions.

A cell tagged ``parameters`` holds the defaults; the values given for a run go into a new cell
tagged ``injected-parameters`` placed right after it (or first, when there is no such cell), and
into ``notebook.metadata.papermill.parameters``. Values are rendered as Python literals.
"""

from __future__ import annotations

import ast
import copy
import datetime as _dt
import keyword
import math
import re
import warnings
from pathlib import Path
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = [
    "ParameterError",
    "UndeclaredParameterWarning",
    "check_name",
    "declared_parameters",
    "inject_parameters",
    "load_params_file",
    "parse_value",
    "render_literal",
]

_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?\Z")


class ParameterError(AgentstackError, ValueError):
    """A parameter is malformed (the message names it)."""


class UndeclaredParameterWarning(UserWarning):
    """A parameter was given that the notebook's ``parameters`` cell does not declare."""


def check_name(name: str) -> str:
    """``name`` if it can be assigned in the injected cell, else :class:`ParameterError`.

    A keyword (``import``, ``class``, ``True``) passes an identifier check but makes the injected
    cell a SyntaxError, so it is refused here, before a kernel starts. Soft keywords (``match``,
    ``case``, ``type``) are ordinary names when assigned and stay allowed.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ParameterError(f"parameter name {name!r} is not a valid Python identifier")
    if keyword.iskeyword(name):
        raise ParameterError(f"parameter name {name!r} is a Python keyword; it cannot be assigned")
    return name


def parse_value(name: str, text: str) -> Any:
    """Type a ``-p NAME VALUE`` string like papermill, plus YAML for lists and dicts.

    ``True``/``False``/``None`` (and YAML's ``true``/``false``/``null``) become bool/None, integers
    and floats become numbers, ``[...]`` and ``{...}`` are parsed as YAML flow collections,
    anything else stays a string.
    """
    stripped = text.strip()
    if stripped in ("True", "true"):
        return True
    if stripped in ("False", "false"):
        return False
    if stripped in ("None", "null", "~"):
        return None
    if _INT.match(stripped):
        try:
            return int(stripped)
        except ValueError:  # over Python's 4300-digit limit for int()
            raise ParameterError(f"parameter {name!r}: integer with {len(stripped)} digits is too long") from None
    if _FLOAT.match(stripped):
        return float(stripped)
    if stripped[:1] in ("[", "{"):
        import yaml

        try:
            value = yaml.safe_load(stripped)
        except yaml.YAMLError as exc:
            problem = str(exc).splitlines()[0]
            raise ParameterError(f"parameter {name!r}: value {text[:80]!r} looks like a list/dict but is not "
                                 f"valid YAML ({problem})") from None
        except RecursionError:
            raise ParameterError(f"parameter {name!r}: value is nested too deeply") from None
        return _plain(name, value)
    return text


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (or JSON) mapping of parameter name → value."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"parameters file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except yaml.YAMLError as exc:
        raise ParameterError(f"parameters file {p} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ParameterError(f"parameters file {p} is nested too deeply") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"parameters file {p} cannot be read: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParameterError(f"parameters file {p} must hold a mapping of name: value, "
                             f"got {type(data).__name__}")
    return {str(k): _plain(str(k), v) for k, v in data.items()}


def _plain(name: str, value: Any, depth: int = 0) -> Any:
    if depth > 100:  # also ends YAML's self-referencing anchors ([&a [*a]])
        raise ParameterError(f"parameter {name!r}: value is nested too deeply (or refers to itself)")
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(name, v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(name, v, depth + 1) for k, v in value.items()}
    raise ParameterError(f"parameter {name!r}: unsupported value type {type(value).__name__}")


def render_literal(value: Any) -> str:
    """Render a parameter value as Python source that evaluates to it."""
    if value is None or isinstance(value, bool | int | str):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(render_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{render_literal(str(k))}: {render_literal(v)}" for k, v in value.items()) + "}"
    raise ParameterError(f"cannot render {type(value).__name__} as a parameter literal")


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def declared_parameters(nb: Any) -> dict[str, str] | None:
    """Names assigned in the ``parameters`` cell → their default source, or None if no such cell."""
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in _tags(cell):
            try:
                tree = ast.parse(cell.source)
            except SyntaxError as exc:
                raise ParameterError(f"the notebook's parameters cell does not parse: {exc}") from None
            names: dict[str, str] = {}
            for node in tree.body:
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AnnAssign) else [])
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            value = getattr(node, "value", None)
                            names[sub.id] = (ast.get_source_segment(cell.source, value) or "") if value else ""
            return names
    return None


def inject_parameters(nb: Any, parameters: dict[str, Any], *, input_path: str | None = None,
                      output_path: str | None = None) -> Any:
    """Return a copy of ``nb`` with an ``injected-parameters`` cell holding ``parameters``.

    Warns (:class:`UndeclaredParameterWarning`) for names the ``parameters`` cell does not assign,
    as papermill does; raises :class:`ParameterError` for a name that is not a Python identifier
    or is a keyword.
    """
    import nbformat

    for name in parameters:
        check_name(name)
    lines = ["# Parameters"] + [f"{k} = {render_literal(v)}" for k, v in parameters.items()]
    out = copy.deepcopy(nb)
    declared = declared_parameters(out)
    if declared is None and parameters:
        warnings.warn("the notebook has no cell tagged 'parameters'; injecting parameters at the top",
                      UndeclaredParameterWarning, stacklevel=2)
    for name in parameters:
        if declared is not None and name not in declared:
            warnings.warn(f"parameter {name!r} is not declared in the notebook's parameters cell "
                          f"(declared: {', '.join(declared) or 'none'})", UndeclaredParameterWarning,
                          stacklevel=2)
    out.cells = [c for c in out.cells if "injected-parameters" not in _tags(c)]
    index = next((i + 1 for i, c in enumerate(out.cells) if "parameters" in _tags(c)), 0)
    if parameters:
        cell = nbformat.v4.new_code_cell("\n".join(lines) + "\n")
        cell.metadata["tags"] = ["injected-parameters"]
        out.cells.insert(index, cell)
    meta = out.metadata.setdefault("papermill", {})
    meta["parameters"] = copy.deepcopy(parameters)
    meta["default_parameters"] = declared or {}
    if input_path is not None:
        meta["input_path"] = input_path
    if output_path is not None:
        meta["output_path"] = output_path
    return out
