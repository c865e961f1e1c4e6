"""Helpers for the notebook-surface kernel tests: building and executing a notebook of cells in a real
kernel, scripted providers (and their source, to define them in a kernel), widget-state readers, and the
strict check of a notebook file we wrote."""

from __future__ import annotations

import copy
import inspect
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Cells = Sequence[str] | Mapping[str, str]


def notebook(cells: Cells) -> Any:
    """A new notebook of code cells: a list of sources, or ``{tag: source}`` (each cell tagged with its key)."""
    from nbformat.v4 import new_code_cell, new_notebook

    if isinstance(cells, Mapping):
        return new_notebook(cells=[new_code_cell(src, metadata={"tags": [tag]}) for tag, src in cells.items()])
    return new_notebook(cells=[new_code_cell(src) for src in cells])


def _client(cells: Cells | Any, workdir: Path | str, timeout: int, allow_errors: bool,
            store_widget_state: bool) -> tuple[Any, Any]:
    from nbclient import NotebookClient
    from nbformat import NotebookNode

    nb = cells if isinstance(cells, NotebookNode) else notebook(cells)
    return nb, NotebookClient(nb, kernel_name="python3", timeout=timeout, allow_errors=allow_errors,
                              store_widget_state=store_widget_state,
                              resources={"metadata": {"path": str(workdir)}})


def run_cells(cells: Cells | Any, workdir: Path | str, *, timeout: int = 120, allow_errors: bool = True,
              store_widget_state: bool = False) -> Any:
    """Execute ``cells`` (sources, ``{tag: source}``, or a notebook) in a fresh python3 kernel started in
    ``workdir``; returns the executed notebook (``nb.metadata.widgets`` holds the widget state if asked).

    ``allow_errors=False`` makes the first failing cell raise ``CellExecutionError`` (nbclient's default);
    with ``True`` an error is an output of its cell and the cells after it still run.
    """
    nb, client = _client(cells, workdir, timeout, allow_errors, store_widget_state)
    client.execute()
    return nb


async def async_run_cells(cells: Cells | Any, workdir: Path | str, *, timeout: int = 120,
                          allow_errors: bool = True, store_widget_state: bool = False) -> Any:
    """:func:`run_cells` for an async test (whose event loop may serve a fake the kernel talks to)."""
    nb, client = _client(cells, workdir, timeout, allow_errors, store_widget_state)
    await client.async_execute()
    return nb


def by_tag(nb: Any) -> dict[str, Any]:
    """``{tag: cell}`` for a notebook built from ``{tag: source}``."""
    return {c.metadata["tags"][0]: c for c in nb.cells}


def valid_notebook(written: Path | str) -> Any:
    """The notebook in ``written`` (a path, or the text itself), after checking it exactly as written.

    ``nbformat.validate`` against the schema of the file's own version (``nbformat``/``nbformat_minor``),
    on the JSON as written, not on what ``nbformat.read`` makes of it (reading drops transient keys);
    nbformat's silent repair of a missing or duplicate cell id is an error here, and from 4.5 on every
    cell has an id of its own. Returns the notebook as ``nbformat.reads(..., 4)`` gives it.
    """
    import nbformat
    from nbformat.warnings import DuplicateCellId, MissingIDFieldWarning

    text = written.read_text(encoding="utf-8") if isinstance(written, Path) else written
    raw = json.loads(text)
    version = (raw["nbformat"], raw["nbformat_minor"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingIDFieldWarning)
        warnings.simplefilter("error", DuplicateCellId)
        nbformat.validate(copy.deepcopy(raw), version=version[0], version_minor=version[1])
    if version >= (4, 5):
        ids = [c.get("id") for c in raw["cells"]]
        assert all(ids) and len(set(ids)) == len(ids), f"cell ids missing or repeated: {ids}"
    else:
        assert all("id" not in c for c in raw["cells"]), f"cell ids in an nbformat {version} notebook"
    return nbformat.reads(text, 4)


def code_then_answer(code: str, answer: str = "done") -> Any:
    """A test model whose main step runs ``code`` with the python tool, then answers ``answer``."""
    from agentstack_lab.providers.testing import TestModel, has_tool_result

    return TestModel(code=code, main=lambda r: answer if has_tool_result(r) else None, summary="summary")


# the same function as source text, for a kernel cell to define it (``from typing import Any`` first)
CODE_THEN_ANSWER = "from typing import Any\n\n" + inspect.getsource(code_then_answer)

# Defined inside the kernel: a provider that asks a clarification (once), then wants to run code.
ASKING_PROVIDER = '''
from agentstack_lab.providers.testing import TestModel, has_tool_result

def _clarify(req):
    return "Which **year** do you mean?" if len(asking.steps("clarify")) == 1 else None

asking = TestModel(
    clarify=_clarify, code="answer_year = 2024\\nprint('computed', answer_year)", summary="summary",
    main=lambda r: "The year is **2024**. <script>alert('x')</script><img src=x onerror=alert(1)>"
    if has_tool_result(r) else None)
'''


def widget_models(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{model_id: state}`` from a notebook's saved widget state."""
    return {mid: m["state"] for mid, m in state.items()}


def with_class(models: dict[str, dict[str, Any]], cls: str) -> list[tuple[str, dict[str, Any]]]:
    return [(mid, s) for mid, s in models.items() if cls in (s.get("_dom_classes") or [])]


def node_summary(models: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per agent node box: status class, title, content, result (HTML values), children count."""

    def kids(state: dict[str, Any]) -> list[dict[str, Any]]:
        return [models[c.removeprefix("IPY_MODEL_")] for c in state.get("children") or []]

    def find(state: dict[str, Any], cls: str) -> dict[str, Any] | None:
        """The first descendant with ``cls``, not looking inside nested agent nodes."""
        for kid in kids(state):
            classes = kid.get("_dom_classes") or []
            if cls in classes:
                return kid
            if "agentstack-node" not in classes and (hit := find(kid, cls)) is not None:
                return hit
        return None

    out = []
    for _mid, box in with_class(models, "agentstack-node"):
        status = next(c.removeprefix("agentstack-status-") for c in box["_dom_classes"]
                      if c.startswith("agentstack-status-"))
        header, body = kids(box)
        out.append({"status": status, "title": kids(header)[2]["value"],
                    "content": "".join(kid["value"] for kid in kids(find(box, "agentstack-transcript"))
                                       if "agentstack-text" in (kid.get("_dom_classes") or [])),
                    "result": find(box, "agentstack-result")["value"],
                    "children": len(kids(kids(body)[-1]))})
    return out
