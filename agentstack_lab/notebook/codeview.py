"""Code as the tree shows it: Python highlighted by Pygments, and an edit's diff against the model's original.

Both are built on the kernel side as HTML whose every piece of code text went through Pygments' or
:func:`~agentstack_lab.notebook.sanitize.escape`'s escaping; Pygments only adds ``<span class="...">``
around tokens. Token colours are JupyterLab's own editor colours (``--jp-mirror-editor-*``) mixed a
quarter of the way towards the content font colour, so light and dark themes both read at ≥ 4.5:1 on
the code box's editor background. A diff line carries its ``+`` / ``-`` sign as well as its tint.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Any

from agentstack_lab.notebook.sanitize import escape

__all__ = ["CODEVIEW_CSS", "highlight", "highlighted_box", "diff_html", "diff_stats"]

_PREFIX = "agentstack-hl-"
# Pygments' short token classes -> the JupyterLab editor colour they take
_TOKEN_VARS = {
    "k": "keyword", "kc": "keyword", "kd": "keyword", "kn": "keyword", "kp": "keyword", "kr": "keyword",
    "kt": "keyword", "ow": "keyword", "o": "operator", "s": "string", "s1": "string", "s2": "string",
    "sa": "string", "sb": "string", "sc": "string", "sd": "string", "se": "string-2", "sh": "string",
    "si": "string-2", "sr": "string-2", "ss": "string", "dl": "string", "m": "number", "mi": "number",
    "mf": "number", "mh": "number", "mo": "number", "mb": "number", "il": "number", "nf": "def", "fm": "def",
    "nc": "def", "nb": "builtin", "bp": "builtin", "nd": "meta", "ne": "builtin", "nn": "variable-2",
    "c": "comment", "c1": "comment", "ch": "comment", "cm": "comment", "cs": "comment", "cp": "comment",
}
_TOKEN_CSS = "".join(
    f".agentstack-tree .{_PREFIX}{cls}{{color:color-mix(in srgb,var(--jp-mirror-editor-{var}-color) 75%,"
    f"var(--jp-content-font-color1))" + (";font-style:italic" if var == "comment" else "") + "}"
    for cls, var in _TOKEN_VARS.items())
CODEVIEW_CSS = _TOKEN_CSS + """
/* a tool panel's HTML may shrink below its longest code line: its code boxes scroll sideways instead */
.agentstack-tree .agentstack-tool .widget-html-content{min-width:0}
.agentstack-tree .agentstack-diff{padding:4px 0}
.agentstack-tree .agentstack-diff span{display:block;padding:0 8px}
.agentstack-tree .agentstack-diff .agentstack-diff-add{
 background:color-mix(in srgb,var(--jp-success-color1) 16%,var(--jp-cell-editor-background))}
.agentstack-tree .agentstack-diff .agentstack-diff-del{
 background:color-mix(in srgb,var(--jp-error-color1) 16%,var(--jp-cell-editor-background))}
.agentstack-tree .agentstack-diff .agentstack-diff-hunk{color:var(--jp-ui-font-color1)}
.agentstack-tree .agentstack-diff-stat{color:var(--jp-ui-font-color1);font-size:85%}
.agentstack-tree .agentstack-edited-badge{color:var(--jp-ui-font-color0);border:1px solid var(--jp-warn-color1);
 border-radius:8px;padding:0 6px;margin-left:6px;font-size:85%;font-weight:normal;white-space:nowrap}
"""


@lru_cache(maxsize=1)
def _pygments() -> Any:
    try:
        from pygments import highlight as run
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:  # IPython depends on Pygments; without it the code is shown plain
        return None
    return run, PythonLexer(stripnl=False, ensurenl=False), HtmlFormatter(nowrap=True, classprefix=_PREFIX)


def highlight(code: str) -> str:
    """``code`` as escaped HTML with Python tokens in ``<span class="agentstack-hl-...">`` (plain if no Pygments)."""
    tools = _pygments()
    if tools is None:
        return escape(code)
    run, lexer, formatter = tools
    html = run(code, lexer, formatter)
    return html[:-1] if html.endswith("\n") and not code.endswith("\n") else html


def highlighted_box(code: str, *, clamped: bool = False) -> str:
    """Python code, read-only and highlighted, in the tree's code box (long lines scroll, never break)."""
    cls = "agentstack-code-box clamped agentstack-hl" if clamped else "agentstack-code-box agentstack-hl"
    return f'<pre class="{cls}">{highlight(code)}</pre>'


def diff_stats(original: str, edited: str) -> tuple[int, int]:
    """(lines added, lines removed) from ``original`` to ``edited``."""
    added = removed = 0
    for line in difflib.unified_diff(original.splitlines(), edited.splitlines(), lineterm="", n=0):
        if line.startswith(("+++", "---")):
            continue
        added += line.startswith("+")
        removed += line.startswith("-")
    return added, removed


def diff_html(original: str, edited: str, *, context: int = 3) -> str:
    """A unified diff from the model's ``original`` to the ``edited`` code, one tinted line each ("" if equal)."""
    lines = list(difflib.unified_diff(original.splitlines(), edited.splitlines(), "the model's code", "the code that ran",
                                      lineterm="", n=context))
    if not lines:
        return ""
    out = []
    for line in lines[2:]:  # the two file headers say nothing the label does not
        cls = ("agentstack-diff-hunk" if line.startswith("@@") else "agentstack-diff-add" if line.startswith("+")
               else "agentstack-diff-del" if line.startswith("-") else "agentstack-diff-same")
        out.append(f'<span class="{cls}">{escape(line) or " "}</span>')
    return f'<pre class="agentstack-code-box agentstack-diff">{"".join(out)}</pre>'
