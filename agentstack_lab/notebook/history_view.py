"""How ``%agent_history`` looks: a DataFrame that reads in a 680 px notebook.

The frame keeps every field for code (full ``run_id``, ``call_id``, ``before``, ``after``) plus
``undoable``: whether ``%agent_undo`` can take the row's run back in this kernel. Only its display is
curated: the time of day, the run's first 8 characters (the whole id in a tooltip; undo takes the
prefix), agent, name, the change in one wrapped cell (``changed DataFrame (3, 1) → DataFrame (3, 2)``)
and an ``undo`` column: ``yes``, ``undone``, or ``no: other kernel`` for a run whose code ran in another
kernel (or before this one restarted), whose snapshots are gone. A frame whose columns code chose
(``h[["name", "before"]]``) displays as any DataFrame.

This module imports pandas at the top: :mod:`.provenance_magic` imports it on the first ``%agent_history``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import pandas as pd

from agentstack_lab.notebook.sanitize import escape

__all__ = ["HistoryFrame", "history_frame", "SHORT_ID", "change_text"]

SHORT_ID = 8
_TEXT_WIDTHS = {"agent": 14, "name": 16, "change": 44}  # text/plain: a row stays under ~120 columns
_UNDO_ACTIONS = ("restored", "removed")
_CELL = "text-align: left; vertical-align: top"
_WRAP = _CELL + "; white-space: pre-wrap; overflow-wrap: anywhere"


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return " ".join(str(value).split())


def change_text(action: str, before: Any, after: Any) -> str:
    """One line saying what happened to a name: ``created int = 42``, ``changed a → b``, ``deleted (was a)``."""
    old, new = _text(before), _text(after)
    if action == "created":
        return f"created {new}"
    if action == "changed":
        return f"changed {old} → {new}"
    if action == "restored":
        return f"restored {new} (was {old})"
    return f"{action} (was {old})" if old else action  # deleted, removed


def _clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1].rstrip() + "…"


class HistoryFrame(pd.DataFrame):
    """The provenance rows, displayed as the compact table above."""

    _metadata = ["history_columns"]

    @property
    def _constructor(self) -> type[HistoryFrame]:
        return HistoryFrame

    def _curated(self) -> bool:
        made = getattr(self, "history_columns", None)
        return made is not None and tuple(self.columns) == tuple(made)

    def _rows(self) -> list[dict[str, str]]:
        rows = []
        for r in pd.DataFrame(self).to_dict("records"):
            time: Any = r.get("time")
            run_id = _text(r.get("run_id"))
            if r.get("action") in _UNDO_ACTIONS:
                undo = "(the undo)"
            elif r.get("undoable"):
                undo = "yes"
            elif r.get("undone"):
                undo = "undone"
            else:
                undo = "no: other kernel"
            rows.append({"time": time.strftime("%H:%M:%S") if hasattr(time, "strftime") else _text(time),
                         "when": str(time), "run": run_id[:SHORT_ID], "run_id": run_id,
                         "agent": _text(r.get("agent")), "name": _text(r.get("name")),
                         "change": change_text(str(r.get("action")), r.get("before"), r.get("after")), "undo": undo})
        return rows

    def _repr_html_(self) -> str | None:  # type: ignore[override]
        if not self._curated():
            return super()._repr_html_()
        cols = ["time", "run", "agent", "name", "change", "undo"]
        head = "".join(f'<th style="{_CELL}">{c}</th>' for c in cols)
        body = ""
        for r in self._rows():
            body += (f'<tr><td style="{_CELL}" title="{escape(r["when"])}">{escape(r["time"])}</td>'
                     f'<td style="{_CELL}; font-family: var(--jp-code-font-family, monospace)" '
                     f'title="{escape(r["run_id"])}">{escape(r["run"])}</td>'
                     f'<td style="{_WRAP}; max-width: 9em">{escape(r["agent"])}</td>'
                     f'<td style="{_WRAP}; max-width: 9em">{escape(r["name"])}</td>'
                     f'<td style="{_WRAP}; min-width: 12em; max-width: 24em">{escape(r["change"])}</td>'
                     f'<td style="{_WRAP}; max-width: 7em">{escape(r["undo"])}</td></tr>')
        if not body:
            body = f'<tr><td colspan="{len(cols)}" style="{_CELL}">(no changes recorded)</td></tr>'
        return f'<table class="dataframe" style="max-width: 100%"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        if not self._curated():
            return super().__repr__()
        rows = self._rows()
        if not rows:
            return "(no changes recorded)"
        cols = ["time", "run", "agent", "name", "change", "undo"]
        cells = [[_clip(r[c], _TEXT_WIDTHS.get(c, 20)) for c in cols] for r in rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        return "\n".join(lines)


def history_frame(frame: Any, *, undoable: Collection[str], undone: Collection[str]) -> HistoryFrame:
    """``frame`` (from ``Workspace.provenance``) with ``undoable``: the run can be undone in this kernel.

    ``undoable`` are this kernel's runs with changes not yet undone; ``undone`` the runs undone (here
    or, judging by their ``restored``/``removed`` rows, in another kernel).
    """
    out = HistoryFrame(frame.copy())
    undone_ids = set(undone) | set(out.loc[out["action"].isin(_UNDO_ACTIONS), "run_id"])
    out["undoable"] = out["run_id"].isin(sorted(set(undoable) - undone_ids)) & ~out["action"].isin(_UNDO_ACTIONS)
    out["undone"] = out["run_id"].isin(sorted(undone_ids))
    out.history_columns = tuple(out.columns)
    return out
