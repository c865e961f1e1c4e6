"""How ``%memory`` results look: a pandas DataFrame that displays as a table a person reads.

The frame keeps every field for code (``df.content``, ``df.snippet``, ``df.agent_id``, ``df.attrs``);
only its display is curated: key, content beside it (an excerpt of 160 characters; for a search the
match snippet, matched words highlighted), tags, the score of a search, and the namespace only when
some row is not in ``default`` (nine rows in ten live there, so the column was noise). ``%memory get``
shows the whole entry. A frame whose columns were chosen in code (``hits[["key", "score", "matched"]]``,
``hits.assign(...)``) displays exactly its own columns, in their order, with the same readable cells.

HTML: the table's markup is ours; every cell is escaped, and the search snippet (HTML from
:mod:`agentstack_lab.memory.search`: escaped text with ``<mark>`` around matches) goes through the
project's sanitiser (:func:`agentstack_lab.notebook.sanitize.sanitize_html`), so the only markup from
memory that survives is ``<mark>``. text/plain (nbclient runs, terminals, saved notebooks without
HTML) is an aligned text table with matches in «guillemets»: readable, and never raw ``**`` Markdown.

This module imports pandas at the top: :mod:`.memory_magic` imports it on the first ``%memory``.
"""

from __future__ import annotations

import html
import math
from typing import Any, cast

import pandas as pd

from agentstack_lab.notebook.sanitize import escape, sanitize_html

__all__ = ["MemoryFrame", "memory_frame", "plain_snippet", "DEFAULT_NAMESPACE", "EXCERPT", "TEXT_EXCERPT"]

DEFAULT_NAMESPACE = "default"
EXCERPT = 160  # characters of content beside the key in HTML (about two lines of a 700 px output)
TEXT_EXCERPT = 60  # in text/plain, so a row of key, content, tags and score stays under ~110 columns
_LEFT = ' style="text-align: left; vertical-align: top"'  # front ends right-align table cells by default


def plain_snippet(snippet: str) -> str:
    """A search snippet (escaped HTML, matches in ``<mark>``) as text with the matches in «guillemets»."""
    return html.unescape(snippet.replace("<mark>", "«").replace("</mark>", "»"))


def _excerpt(text: Any, size: int) -> str:
    text = " ".join(str(text).split()) if _present(text) else ""
    return text if len(text) <= size else text[: size - 1].rstrip() + "…"


def _present(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _tags(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(sorted(map(str, value)))
    return ", ".join(t.strip() for t in str(value).split(",") if t.strip()) if _present(value) else ""


class MemoryFrame(pd.DataFrame):
    """A DataFrame of memory entries or search hits whose display is the readable table above.

    ``memory_kind`` is ``"search"``, ``"list"`` or ``"get"``; ``memory_columns`` the columns the
    magic made. A frame whose columns differ from those displays exactly its own columns; one with no
    ``key`` or ``content`` column displays as any DataFrame.
    """

    _metadata = ["memory_kind", "memory_columns"]

    @property
    def _constructor(self) -> type[MemoryFrame]:
        return MemoryFrame

    def _chosen(self) -> bool:
        """Whether code chose the columns (a selection, a reordering, an added column)."""
        made = getattr(self, "memory_columns", None)
        return made is not None and tuple(self.columns) != tuple(made)

    def _columns(self) -> list[str] | None:
        if "key" not in self.columns or "content" not in self.columns:
            return None
        if self._chosen():
            return [str(c) for c in self.columns]
        cols = ["key", "content", "tags"]
        if getattr(self, "memory_kind", None) == "search" and "score" in self.columns:
            cols.append("score")
        if "namespace" in self.columns and any(_present(n) and n != DEFAULT_NAMESPACE for n in self["namespace"]):
            cols.append("namespace")
        return cols

    def _whole(self) -> bool:
        return getattr(self, "memory_kind", None) == "get" and len(self) == 1

    def _cell(self, row: Any, col: str, *, as_html: bool) -> str:
        value = row.get(col)
        if col == "content":
            curated_search = getattr(self, "memory_kind", None) == "search" and not self._chosen()
            snippet = row.get("snippet") if curated_search else None
            if isinstance(snippet, str) and snippet:
                return sanitize_html(snippet) if as_html else _excerpt(plain_snippet(snippet), TEXT_EXCERPT)
            if self._whole():
                return escape(str(value)) if as_html else str(value)
            return escape(_excerpt(value, EXCERPT)) if as_html else _excerpt(value, TEXT_EXCERPT)
        if col == "snippet" and isinstance(value, str):
            return sanitize_html(value) if as_html else _excerpt(plain_snippet(value), TEXT_EXCERPT)
        if col in ("tags", "matched"):  # comma-joined in the frame: read as words
            text = _tags(value)
        elif col == "score":
            text = f"{value:.3f}" if isinstance(value, (int, float)) and _present(value) else ""
        elif isinstance(value, (list, tuple, set, frozenset)):
            text = ", ".join(map(str, value))
        else:
            text = str(value) if _present(value) else ""
        return escape(text) if as_html else text

    def _repr_html_(self) -> str | None:  # type: ignore[override]
        cols = self._columns()
        if cols is None:
            return super()._repr_html_()
        wrap = "; white-space: pre-wrap" if self._whole() else ""
        head = "".join(f"<th{_LEFT}>{escape(c)}</th>" for c in cols)
        body = "".join(
            "<tr>" + "".join(f'<td style="text-align: left; vertical-align: top{wrap if c == "content" else ""}">'
                             f"{self._cell(row, c, as_html=True)}</td>" for c in cols) + "</tr>"
            for row in self._records())
        if not body:
            body = f'<tr><td colspan="{len(cols)}"{_LEFT}>{escape(self._empty())}</td></tr>'
        return f'<table class="dataframe"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        cols = self._columns()
        if cols is None:
            return super().__repr__()
        records = self._records()
        if not records:
            return self._empty()
        if self._whole():  # one entry: its fields, then the whole content
            row = records[0]
            fields = [c for c in cols if c != "content"] + [c for c in ("version", "updated_at")
                                                            if c in self.columns and c not in cols]
            width = max(len(c) for c in fields)
            lines = [f"{c.ljust(width)}  {self._cell(row, c, as_html=False)}" for c in fields]
            return "\n".join([*lines, "", self._cell(row, "content", as_html=False)])
        cells = [[self._cell(r, c, as_html=False) for c in cols] for r in records]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        return "\n".join(lines)

    def _records(self) -> list[dict[str, Any]]:
        return pd.DataFrame(self).to_dict("records")

    def _empty(self) -> str:
        return "(no matches)" if getattr(self, "memory_kind", None) == "search" else "(no entries)"


def memory_frame(records: list[dict[str, Any]], columns: list[str], kind: str) -> MemoryFrame:
    """A :class:`MemoryFrame` of ``records`` with ``columns`` (those present), times as datetimes."""
    frame = pd.DataFrame.from_records(records)
    frame = pd.DataFrame(columns=columns) if frame.empty else frame[[c for c in columns if c in frame.columns]]
    for col in ("created_at", "updated_at"):
        if col in frame.columns and pd.api.types.is_numeric_dtype(frame[col]) and not frame.empty:
            seconds = cast(pd.Series, frame[col])   # one column (pandas' stubs widen it to any indexing result)
            frame[col] = pd.to_datetime(seconds, unit="s", utc=True).dt.tz_convert(None).dt.floor("s")
    out = MemoryFrame(frame)
    out.memory_kind = kind
    out.memory_columns = tuple(out.columns)
    return out
