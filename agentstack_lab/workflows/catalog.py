"""The built-in workflow notebooks, addressable by name (``agentstack-lab workflow run doc_sync``).

The notebooks live in the repository's ``notebooks/workflows/``; the wheel carries them as package data
under ``agentstack_lab/workflows/builtin/`` (hatch ``force-include``, see pyproject.toml). They are found
in the installed location first, then in the source checkout (editable installs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from agentstack_lab.errors import AgentstackError

__all__ = ["BuiltinWorkflow", "UnknownWorkflowError", "builtin_dirs", "builtin_workflows", "resolve_notebook"]


class UnknownWorkflowError(AgentstackError, LookupError):
    """A name that is neither a file nor a built-in workflow."""


@dataclass(frozen=True)
class BuiltinWorkflow:
    """One shipped workflow notebook."""

    name: str
    path: Path
    description: str


def builtin_dirs() -> list[Path]:
    """Folders searched for built-in notebooks, in order: installed package data, then the source checkout."""
    here = Path(__file__).resolve().parent
    return [here / "builtin", here.parents[1] / "notebooks" / "workflows"]


def _description(path: Path) -> str:
    """One line: ``metadata.agentstack.description`` / ``metadata.description``, else the first Markdown line."""
    try:
        nb = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return "(unreadable notebook)"
    meta = nb.get("metadata") or {}
    text = (meta.get("agentstack") or {}).get("description") or meta.get("description")
    if not text:
        cell = next((c for c in nb.get("cells") or [] if c.get("cell_type") == "markdown"), None)
        source = cell.get("source", "") if cell else ""
        text = "".join(source) if isinstance(source, list) else str(source)
    line = next((ln.strip().lstrip("#").strip() for ln in str(text).splitlines() if ln.strip()), "")
    for sep in (" — ", " - ", ": "):  # "# doc_sync — are the docs still true?" -> "are the docs still true?"
        if line.startswith(path.stem + sep):
            line = line[len(path.stem) + len(sep):]
            break
    return line


def builtin_workflows() -> dict[str, BuiltinWorkflow]:
    """Built-in workflows by name (the notebook's stem); the first folder holding a name wins."""
    found: dict[str, BuiltinWorkflow] = {}
    for folder in builtin_dirs():
        if folder.is_dir():
            for path in sorted(folder.glob("*.ipynb")):
                if path.stem not in found and not path.name.endswith(".executed.ipynb"):
                    found[path.stem] = BuiltinWorkflow(path.stem, path, _description(path))
    return found


def _looks_like_name(text: str) -> bool:
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return bool(text) and not any(s in text for s in seps) and not text.endswith(".ipynb")


def resolve_notebook(spec: str) -> Path:
    """The notebook ``spec`` names: an existing file as given, else a built-in workflow by name.

    Anything with a path separator or an ``.ipynb`` suffix is returned as a path even when missing (the
    runner reports "notebook not found").

    Raises:
        UnknownWorkflowError: ``spec`` is a bare name that is neither a file nor a built-in.
    """
    path = Path(spec)
    if path.is_file() or not _looks_like_name(spec):
        return path
    builtins = builtin_workflows()
    if spec in builtins:
        return builtins[spec].path
    names = ", ".join(sorted(builtins)) or "none found"
    raise UnknownWorkflowError(f"unknown workflow {spec!r}: not a file and not a built-in (built-ins: {names})")
