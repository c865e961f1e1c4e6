"""The three small front-end controls the standard ipywidgets cannot be (anywidget, ES modules in ``static/``).

- :class:`AnswerBox`: the question card's answer box, a textarea where Enter sends and Shift+Enter
  adds a line (``ipywidgets.Text`` has no newlines; ``Textarea`` has no Enter). The typed value
  travels with the submit message, so a fast Enter never sends a stale value.
- :class:`ActionBar`: "Copy" and "Insert as a new cell" under an answer or a code block. Copying is
  the browser's clipboard (a kernel cannot reach it); inserting adds a cell below the tree's cell
  through the notebook model of the front end's widget manager (JupyterLab 4, Notebook 7; a kernel
  payload such as ``set_next_input`` only works in an execute reply, never from a button's comm
  message). Elsewhere Insert copies instead and says so.
- :class:`Presence`: an invisible child of the tree that reports when its output is shown and when it
  leaves the page, and why (cleared, cell deleted, notebook closed), so a run whose output was
  cleared does not wait forever for an answer nobody can give.

Each module is a few dozen lines of plain JavaScript with no build step; the Python side is what the
tests drive (messages in, traits out). Colours are JupyterLab's theme variables (``CSS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets as T

__all__ = ["AnswerBox", "ActionBar", "Presence", "CSS", "answer_bars", "code_blocks", "MAX_CODE_BLOCKS"]

_STATIC = Path(__file__).with_name("static")
MAX_CODE_BLOCKS = 4  # an answer's fenced code blocks that get their own Copy / Insert bar

CSS = """
.agentstack-tree .agentstack-answer-input{width:100%;box-sizing:border-box;resize:vertical;min-height:2.6em;
 font-family:var(--jp-ui-font-family);font-size:var(--jp-widgets-font-size,var(--jp-ui-font-size1));
 line-height:1.4;padding:4px 6px;color:var(--jp-widgets-input-color,var(--jp-ui-font-color0));
 background:var(--jp-widgets-input-background-color,var(--jp-layout-color1));
 border:1px solid var(--jp-widgets-input-border-color,var(--jp-border-color1));border-radius:2px}
.agentstack-tree .agentstack-answer-input:focus{outline:none;
 border-color:var(--jp-widgets-input-focus-border-color,var(--jp-brand-color1))}
.agentstack-tree .agentstack-actions{display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin:2px 0}
.agentstack-tree .agentstack-actions button{width:auto;height:auto;min-height:var(--jp-widgets-inline-height,28px);
 padding:0 10px}
.agentstack-tree .agentstack-actions-label,.agentstack-tree .agentstack-actions-status{
 color:var(--jp-ui-font-color1);font-size:85%}
"""


class AnswerBox(anywidget.AnyWidget):
    """A textarea: Enter sends (``{"event": "submit", "value": ...}``), Shift+Enter adds a line."""

    _esm = _STATIC / "answer.js"
    value = T.Unicode("").tag(sync=True)
    placeholder = T.Unicode("your answer (Enter sends, Shift+Enter adds a line)").tag(sync=True)

    def __init__(self, on_submit: Callable[[str], None] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._on_submit = on_submit
        self.on_msg(self._on_msg)

    def _on_msg(self, _w: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "submit":
            value = content.get("value")
            if isinstance(value, str):
                self.value = value
            if self._on_submit is not None:
                self._on_submit(self.value)


class ActionBar(anywidget.AnyWidget):
    """Copy and "Insert as a new cell" for ``text``; ``cell_type`` is ``code`` or ``markdown``.

    ``anchor`` is the model id of the tree whose cell the new cell goes below.
    """

    _esm = _STATIC / "actions.js"
    text = T.Unicode("").tag(sync=True)
    cell_type = T.Enum(("code", "markdown"), default_value="code").tag(sync=True)
    label = T.Unicode("").tag(sync=True)
    anchor = T.Unicode("").tag(sync=True)


class Presence(anywidget.AnyWidget):
    """Reports ``shown`` and ``removed`` (with ``how``) of the tree's views to ``on_event(event, how)``."""

    _esm = _STATIC / "presence.js"

    def __init__(self, on_event: Callable[[str, str], None] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.layout.display = "none"
        self._on_event = on_event
        self.on_msg(self._on_msg)

    def _on_msg(self, _w: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") in ("shown", "removed") and self._on_event:
            self._on_event(str(content["event"]), str(content.get("how") or ""))


_FENCED = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
                     re.M | re.S)


def code_blocks(markdown_text: str, limit: int = MAX_CODE_BLOCKS) -> list[tuple[str, str]]:
    """``(language, code)`` of the fenced code blocks of a Markdown text, at most ``limit``, empty ones left out."""
    out = []
    for m in _FENCED.finditer(markdown_text or ""):
        body = m["body"].rstrip("\n")
        if body.strip():
            out.append((m["lang"].lower(), body))
        if len(out) >= limit:
            break
    return out


def answer_bars(text: str | None, anchor: str) -> list[ActionBar]:
    """One bar for an answer (a Markdown cell) and one per fenced code block in it (code cells)."""
    if text is None or not text.strip():
        return []
    bars = [ActionBar(text=text, cell_type="markdown", label="answer", anchor=anchor)]
    for i, (lang, code) in enumerate(code_blocks(text), 1):
        bars.append(ActionBar(text=code, cell_type="code", anchor=anchor,
                              label=f"code block {i}" + (f" ({lang})" if lang else "")))
    return bars
