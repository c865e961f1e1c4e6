"""Write the configuration reference (docs/reference/configuration.md) from the pydantic config models.

Every key of ``agentstack.config.json`` comes from ``agentstack_lab/config.py``: its type, default and
bounds are read from the models, its explanation from the comment on the field's line (or the
docstring below it) and each section's class docstring. ``make docs`` runs this before building;
``tests/test_docs.py`` fails when the committed page differs from what this prints, so the page
cannot drift from the code.

Usage: ``python docs/gen_config.py [OUT]`` (no ``OUT``: print to stdout).
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from agentstack_lab import config as config_module


def _comments() -> dict[tuple[str, str], str]:
    """``(class, field)`` → the explanation written beside or below the field in config.py."""
    source = inspect.getsource(config_module)
    lines = source.splitlines()
    out: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        body = node.body
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            text = ""
            nxt = body[i + 1] if i + 1 < len(body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                text = " ".join(nxt.value.value.split())
            else:
                last = lines[(stmt.end_lineno or stmt.lineno) - 1]
                if "#" in last:
                    text = last.split("#", 1)[1].strip()
                above, j = [], stmt.lineno - 2   # a comment block directly above the field
                while j >= 0 and lines[j].strip().startswith("#"):
                    above.insert(0, lines[j].strip().lstrip("#").strip())
                    j -= 1
                text = " ".join([*above, text]).strip()
            out[(node.name, stmt.target.id)] = text
    return out


def _type_text(annotation: Any) -> str:
    text = str(annotation) if typing.get_origin(annotation) else getattr(annotation, "__name__", str(annotation))
    return text.replace("typing.", "").replace("pydantic.types.", "").replace("NoneType", "None")


def _default_text(field: Any) -> str:
    """The default as it is written in the JSON file."""
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return "required"
    try:
        return f"`{json.dumps(value)}`"
    except TypeError:
        return f"`{value!r}`"


def _bounds(field: Any) -> str:
    names = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "min length", "max_length": "max length"}
    parts = []
    for meta in field.metadata:
        for attr, sign in names.items():
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return ", ".join(parts)


def _section(model: type[BaseModel], path: str, comments: dict[tuple[str, str], str], out: list[str]) -> None:
    rows: list[str] = []
    nested: list[tuple[type[BaseModel], str]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((annotation, f"{path}.{name}" if path else name))
            continue
        inner, keys = annotation, []
        while typing.get_origin(inner) is dict:   # a mapping of sections, e.g. prices.<provider>.<model>
            inner = typing.get_args(inner)[1]
            keys.append("<provider>" if not keys else "<model>")
        if keys and isinstance(inner, type) and issubclass(inner, BaseModel):
            nested.append((inner, ".".join([f"{path}.{name}" if path else name, *keys])))
            continue
        note = comments.get((model.__name__, name), "")
        bounds = _bounds(field)
        notes = "; ".join(p for p in (bounds, note) if p).replace("|", "\\|")
        kind = _type_text(annotation).replace("|", "\\|")
        rows.append(f"| `{name}` | `{kind}` | {_default_text(field)} | {notes} |")
    if path:
        out.append(f"## `{path}`\n")
        doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")   # its own, not BaseModel's
        if doc:
            out.append(doc + "\n")
        if rows:
            out.extend(["| key | type | default | notes |", "|---|---|---|---|", *rows, ""])
    for sub, sub_path in nested:
        _section(sub, sub_path, comments, out)


def render() -> str:
    out = ["# Configuration reference", "",
           "Every key of `agentstack.config.json`, generated from the pydantic models in "
           "`agentstack_lab/config.py` by `docs/gen_config.py` (`make docs`; `tests/test_docs.py` checks "
           "this page is current). Every value has a default; an unknown key is an error naming it. "
           "`${VAR}` reads the environment (an error naming the field when unset), `${VAR:-}` allows it "
           "to be unset. `agentstack-lab config validate` checks a file, `agentstack-lab config show` "
           "prints the effective configuration.", ""]
    _section(config_module.Config, "", _comments(), out)
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    text = render()
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
