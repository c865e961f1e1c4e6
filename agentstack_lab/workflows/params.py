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
import warnings
from pathlib import Path
from typing import Any

from agentstack_lab.workflows.translators import LANGUAGES, ParameterError, render_parameters

__all__ = [
    "ParameterError",
    "UndeclaredParameterWarning",
    "check_name",
    "declared_parameters",
    "inject_parameters",
    "load_params_file",
    "parse_value",
    "parse_yaml_text",
    "render_literal",
]


_PATH_PARAMETERS = ("PAPERMILL_INPUT_PATH", "PAPERMILL_OUTPUT_PATH")
"""Added by ``--inject-paths`` (papermill's names); a notebook need not declare them."""


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
    """Type a ``-p NAME VALUE`` string exactly as papermill does.

    ``True``/``False``/``None`` become bool/None; what ``int()`` accepts is an int, what ``float()``
    accepts is a float (``1e3``, ``nan``, ``inf``); everything else stays the string it was:
    ``true``, ``[1, 2]`` and ``{a: 1}`` included. Lists, mappings and YAML's spellings go through
    ``-y``/``-f``/``-b`` (:func:`parse_yaml_text`, :func:`load_params_file`).
    """
    if text == "True":
        return True
    if text == "False":
        return False
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError as exc:
        if "digits" in str(exc):  # over Python's limit for int() (4300 digits)
            raise ParameterError(f"parameter {name!r}: integer with {len(text.strip())} digits is too long") from None
    try:
        return float(text)
    except ValueError:
        return text


def parse_yaml_text(text: str | bytes, what: str) -> dict[str, Any]:
    """A YAML mapping given on the command line (``-y``, or ``-b`` once decoded) as parameters.

    Dates stay the text they were written as (papermill's loader does not make dates either).
    """
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParameterError(f"{what} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ParameterError(f"{what} is nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParameterError(f"{what} must be a mapping of name: value, got {type(data).__name__}")
    return {str(k): _plain(str(k), v) for k, v in data.items()}


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
    """Render a parameter value as Python source that evaluates to it (papermill's Python translator)."""
    return LANGUAGES["python"].render(value)


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
                      output_path: str | None = None, kernel_name: str | None = None,
                      language: str | None = None, report_mode: bool = False) -> Any:
    """Return a copy of ``nb`` with an ``injected-parameters`` cell holding ``parameters``, as papermill does.

    The cell is written in the kernel's language (:mod:`~agentstack_lab.workflows.translators`); it
    replaces an injected cell left by an earlier run, else goes right after the ``parameters`` cell,
    else first. A notebook older than nbformat 4.5 is upgraded to 4.5 (cell ids) before a cell is
    added, so the result validates. Warns (:class:`UndeclaredParameterWarning`) for names the
    ``parameters`` cell does not assign; raises :class:`ParameterError` for a name that is not a
    Python identifier or is a keyword, or a kernel language no translator knows.
    """
    import nbformat

    for name in parameters:
        check_name(name)
    kernelspec = nb.metadata.get("kernelspec", {})
    kernel_name = kernel_name or kernelspec.get("name")
    language = language or kernelspec.get("language") or nb.metadata.get("language_info", {}).get("name")
    out = copy.deepcopy(nb)
    python = language in (None, "python") and kernel_name in (None, "python3", "python", "pysparkkernel")
    if (out.get("nbformat"), out.get("nbformat_minor", 0)) < (4, 5):  # cell ids, as papermill's load does
        out = nbformat.v4.upgrade(out, from_version=out.get("nbformat", 4), from_minor=out.get("nbformat_minor", 0))
    try:
        declared = declared_parameters(out) if python else _tagged_cell_names(out)
    except ParameterError as exc:  # injected all the same, as papermill: the cell fails when it runs
        warnings.warn(f"{exc}; its names are not checked", UndeclaredParameterWarning, stacklevel=2)
        declared, python = {}, False
    if declared is None and parameters:
        warnings.warn("the notebook has no cell tagged 'parameters'; injecting parameters at the top",
                      UndeclaredParameterWarning, stacklevel=2)
    for name in parameters:
        if declared is not None and name not in declared and python and name not in _PATH_PARAMETERS:
            warnings.warn(f"parameter {name!r} is not declared in the notebook's parameters cell "
                          f"(declared: {', '.join(declared) or 'none'})", UndeclaredParameterWarning,
                          stacklevel=2)
    if parameters:
        source = render_parameters(parameters, kernel_name=kernel_name, language=language)
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = ["injected-parameters"]
        if report_mode:
            cell.metadata["jupyter"] = {"source_hidden": True}
        injected = next((i for i, c in enumerate(out.cells) if "injected-parameters" in _tags(c)), None)
        if injected is not None:
            out.cells[injected] = cell
        else:
            index = next((i + 1 for i, c in enumerate(out.cells) if "parameters" in _tags(c)), 0)
            out.cells.insert(index, cell)
    from agentstack_lab._version import __version__

    # papermill's metadata, as papermill writes it: made when the notebook has none, else an earlier
    # run's kept (its parameters too when none are given: they describe the injected cell kept with them)
    meta = out.metadata.setdefault("papermill", {"default_parameters": {}, "parameters": {},
                                                 "environment_variables": {}})
    if parameters or "parameters" not in meta:
        meta["parameters"] = copy.deepcopy(parameters)
    meta["version"] = f"agentstack-lab {__version__}"  # what ran it, whatever ran it before
    for cell in out.cells:  # as papermill's load: every cell has tags and papermill metadata
        cell.metadata.setdefault("tags", [])
        cell.metadata.setdefault("papermill", {})
    if input_path is not None:
        meta["input_path"] = input_path
    if output_path is not None:
        meta["output_path"] = output_path
    return out


def _tagged_cell_names(nb: Any) -> dict[str, str] | None:
    """A non-Python notebook's parameters cell: present or not (its names are not parsed)."""
    return {} if any(c.cell_type == "code" and "parameters" in _tags(c) for c in nb.cells) else None
