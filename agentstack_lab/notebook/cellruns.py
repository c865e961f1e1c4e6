"""A cell's runs: what re-running an ``%agent`` cell, clearing its output or deleting it does to them.

Without this, the old run would wait for an answer nobody can give any more (its widget is gone) and
stay ``waiting_user`` in the workspace for ever. ``notebook.rerun`` chooses:

- ``stop`` (default): re-running the cell, clearing its output or deleting it stops the run.
- ``keep``: the run goes on; the cell's next output lists its earlier runs still going, each with
  its status (kept live) and a Stop control. A deleted cell has no next output to list them in, so
  its runs stop in both modes.

The cell is known from the execute request (JupyterLab and Notebook 7 put ``cellId`` and
``deletedCells`` in its metadata); a cleared output is reported by the tree's Presence child
(``AgentTree.on_gone``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as W

from agentstack_lab.events import TERMINAL
from agentstack_lab.notebook.render import pill
from agentstack_lab.notebook.sanitize import escape
from agentstack_lab.notebook.tree import excerpt, typed_prompt

__all__ = ["TERMINAL_STATUSES", "EarlierRuns", "alive", "cell_request", "claim_cell", "output_gone"]

TERMINAL_STATUSES = tuple(sorted(TERMINAL))


def alive(run: Any) -> bool:
    """The run is still going (not finished, not stopped)."""
    return not run.done and run.status not in TERMINAL_STATUSES


def cell_request(shell: Any) -> tuple[str | None, list[str], str | None]:
    """The executing cell's id, the cells the front end reports deleted, and the request's msg id."""
    parent = getattr(shell, "parent_header", None) or {}
    meta = parent.get("metadata") or {}
    deleted = meta.get("deletedCells") or []
    return meta.get("cellId"), [c for c in deleted if isinstance(c, str)], (parent.get("header") or {}).get("msg_id")


def claim_cell(cell_runs: dict[str, list[Any]], cell: str | None, deleted: list[str], run: Any, *,
               mode: str = "stop", say: Callable[[str], None] = print) -> list[Any]:
    """Record ``run`` as its cell's newest run; returns the cell's earlier runs still going (``keep``).

    ``stop``: the cell's earlier runs still going are stopped (one line says so). Runs of deleted
    cells stop in both modes.
    """
    for key in deleted:
        for old in cell_runs.pop(key, []):
            if old is not run and alive(old):
                old.stop(reason="stopped: its cell was deleted")
                say("agentstack-lab: stopped a run because its cell was deleted")
    if not cell:
        return []
    earlier = [r for r in cell_runs.pop(cell, []) if r is not run and alive(r)]
    if mode != "keep":
        for old in earlier:
            old.stop(reason="stopped: its cell was run again")
            say("agentstack-lab: stopped the previous run of this cell (its cell was run again)")
        earlier = []
    cell_runs[cell] = [*earlier, run]
    return earlier


def output_gone(run: Any, how: str, *, mode: str = "stop") -> bool:
    """The run's last view was cleared (``how="cleared"``) or its cell deleted; True when it was stopped."""
    if not alive(run) or (mode == "keep" and how != "cell-deleted"):
        return False
    run.stop(reason="stopped: " + ("its cell was deleted" if how == "cell-deleted" else "its output was cleared"))
    return True


class EarlierRuns(W.VBox):
    """The cell's earlier runs still going: status (live), title and a Stop control each."""

    def __init__(self, runs: list[Any]):
        super().__init__()
        self.add_class("agentstack-earlier-runs")
        heading = W.HTML(f'<span class="agentstack-hint">Earlier runs of this cell still going '
                         f"({len(runs)}; <code>notebook.rerun = keep</code>):</span>")
        self.rows: dict[str, tuple[W.HTML, W.Button]] = {}
        self._unsubscribe: list[Callable[[], None]] = []
        rows = []
        for run in runs:
            status = W.HTML(pill(run.status))
            status.add_class("agentstack-badge")
            title = W.HTML(f'<div title="{escape(run.id)}" style="overflow-wrap:anywhere"><b>{escape(run.agent_type)}'
                           f"</b> · {escape(excerpt(typed_prompt(run.prompt), 120))}</div>",
                           layout=W.Layout(flex="1 1 9em", min_width="0", margin="2px 6px"))
            title.add_class("agentstack-title")
            stop = W.Button(description="Stop", tooltip="stop this earlier run", layout=W.Layout(width="auto"))
            stop.add_class("agentstack-earlier-stop")
            stop.on_click(lambda _b, r=run: r.stop())
            self.rows[run.id] = (status, stop)
            row = W.HBox([status, title, stop], layout=W.Layout(align_items="center", flex_flow="row wrap"))
            row.add_class("agentstack-earlier-run")
            rows.append(row)
            self._unsubscribe.append(run.subscribe(lambda _e, r=run: self.refresh(r), replay=False))
        self.children = (heading, *rows)

    def refresh(self, run: Any) -> None:
        """Redraw one run's status (called on each of its events)."""
        status, stop = self.rows[run.id]
        value = pill(run.status)
        if status.value != value:
            status.value = value
        if not alive(run) and stop.layout.display != "none":
            stop.layout.display = "none"
