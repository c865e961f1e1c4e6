"""HTML pieces of the agent tree, coloured only by the front end's theme variables.

Every colour is a JupyterLab CSS variable (``--jp-ui-font-color0``, ``--jp-layout-color1``,
``--jp-brand-color1``, ``--jp-warn-color0`` ...), which JupyterLab, Notebook 7 and VS Code's
Jupyter all define, so light and dark themes both read. Text is always a theme *font* colour on a
theme *layout* colour (≥ 4.5:1 in both built-in themes, measured in the browser test); status
colour only tints a badge (18 % over the layout colour) and draws borders, never carries text.
Model output only ever arrives here through :func:`~agentstack_lab.notebook.sanitize.markdown_to_html`
or :func:`~agentstack_lab.notebook.sanitize.escape`.
"""

from __future__ import annotations

from typing import Any

from agentstack_lab.engine.transcript import MAX_TEXT, as_text, user_frames
from agentstack_lab.events import STATUS_LABELS
from agentstack_lab.notebook.codeview import diff_html, diff_stats, highlighted_box
from agentstack_lab.notebook.sanitize import escape, markdown_to_html
from agentstack_lab.notebook.tree import NodeState, ToolCallState, excerpt, typed_prompt

__all__ = ["THEME_CSS", "BASE_CSS", "status_css", "STATUS_VARS", "STATUS_LABELS", "CODE_PREVIEW_LINES", "pill", "markdown", "code_box",
           "tool_title", "record_title", "tool_body", "record_html", "traceback_html", "failed_flag", "where_code_runs", "qa_html", "answers_html", "source_label", "MAX_TOOL_TEXT", "node_title"]

MAX_TOOL_TEXT = MAX_TEXT
CODE_PREVIEW_LINES = 12  # longer code shows this many lines and a "Show all N lines" control
STATUS_VARS = {
    "pending": "--jp-border-color1", "running": "--jp-brand-color1", "waiting_user": "--jp-warn-color0",
    "paused": "--jp-warn-color0", "completed": "--jp-success-color1", "failed": "--jp-error-color1", "stopped": "--jp-border-color1",
}
SOURCE_LABELS = {"user": "by you", "answers": "from the answers given up front", "cli": "from the terminal",
                 "mcp": "from an MCP client", "lab": "from the Agents panel",
                 # the decision surfaces the engine records (agentstack_lab.decisions.SURFACES)
                 "widget": "by you", "options": "from the answers given up front", "python": "from Python",
                 "policy": "by the run's on_query policy"}



def status_css(statuses: Any = None) -> str:
    """The rules that give each status (all, or only ``statuses``) its colour variable."""
    return "".join(f".agentstack-tree .s-{s}{{--agentstack-c:var({v})}}" for s, v in STATUS_VARS.items()
                   if statuses is None or s in statuses)


_STATUS_CSS = status_css()
BASE_CSS = """
.agentstack-tree{color:var(--jp-ui-font-color0);font-size:var(--jp-ui-font-size1)}
.agentstack-tree .agentstack-node{border-left:3px solid var(--agentstack-c,var(--jp-border-color1));
 padding-left:6px;margin:2px 0}
.agentstack-tree .agentstack-pill{color:var(--jp-ui-font-color0);border:1px solid var(--agentstack-c);
 background:color-mix(in srgb,var(--agentstack-c) 18%,var(--jp-layout-color1));border-radius:8px;
 padding:0 7px;font-size:85%;white-space:nowrap}
.agentstack-tree .agentstack-quiet{color:var(--jp-ui-font-color1);font-size:85%;white-space:nowrap}
.agentstack-tree .agentstack-spinner{display:inline-block;width:.75em;height:.75em;margin-right:4px;
 border:2px solid var(--jp-border-color2);border-top-color:var(--jp-brand-color1);border-radius:50%;
 animation:agentstack-spin 1s linear infinite;vertical-align:-1px;box-sizing:border-box}
@keyframes agentstack-spin{to{transform:rotate(360deg)}}
@media (prefers-reduced-motion:reduce){.agentstack-tree .agentstack-spinner{animation:none}}
.agentstack-tree .agentstack-prose{line-height:1.45;color:var(--jp-content-font-color1);white-space:normal}
.agentstack-tree .agentstack-prose>:first-child{margin-top:.3em}.agentstack-tree .agentstack-prose>:last-child{margin-bottom:.3em}
.agentstack-tree .jupyter-widget-Collapse-header,.agentstack-tree .lm-AccordionPanel-title,
.agentstack-tree .p-Collapse-header{color:var(--jp-ui-font-color1)}
.agentstack-tree .agentstack-failed-flag{color:var(--jp-ui-font-color0);border:1px solid var(--jp-error-color1);
 background:color-mix(in srgb,var(--jp-error-color1) 14%,var(--jp-layout-color1));border-radius:8px;padding:0 6px;
 margin-right:4px;font-size:85%;white-space:nowrap}
.agentstack-tree .agentstack-node.agentstack-code-failed{border-left-color:var(--jp-error-color1)}
.agentstack-tree .agentstack-prose pre{white-space:pre;overflow-x:auto}
.agentstack-tree .agentstack-answer-box{border-left:4px solid var(--jp-success-color1);padding:4px 8px;
 color:var(--jp-content-font-color1);
 background:color-mix(in srgb,var(--jp-success-color1) 8%,var(--jp-layout-color1))}
.agentstack-tree .agentstack-answer-box.partial{border-left-color:var(--jp-warn-color1);
 background:color-mix(in srgb,var(--jp-warn-color1) 8%,var(--jp-layout-color1))}
.agentstack-tree .agentstack-problem{color:var(--jp-content-font-color1);padding-left:6px;white-space:pre-wrap;
 border-left:3px solid var(--jp-error-color1)}
.agentstack-tree .agentstack-problem.stopped{border-left-color:var(--jp-border-color1)}
.agentstack-tree .agentstack-code-box{font-family:var(--jp-code-font-family),monospace;
 font-size:var(--jp-code-font-size);line-height:1.4;white-space:pre;overflow:auto;margin:2px 0;padding:6px 8px;
 color:var(--jp-content-font-color1);background:var(--jp-cell-editor-background);
 border:1px solid var(--jp-border-color2);border-radius:2px;box-sizing:border-box;max-width:100%;max-height:32em}
.agentstack-tree .agentstack-code-box.clamped{max-height:calc(""" + str(CODE_PREVIEW_LINES) + """ * 1.4em + 12px);
 overflow-y:hidden}
.agentstack-tree .agentstack-qa-item summary{cursor:pointer;color:var(--jp-ui-font-color1)}
.agentstack-tree .agentstack-qa-item div{margin-left:1.2em;color:var(--jp-content-font-color1)}
.agentstack-tree .agentstack-qa .widget-html-content,.agentstack-tree .agentstack-card .widget-html-content{
 line-height:1.4}
.agentstack-tree .agentstack-hint{color:var(--jp-ui-font-color1);font-size:85%}
"""
THEME_CSS = "<style>" + _STATUS_CSS + BASE_CSS + "</style>"


def pill(status: str) -> str:
    """The status badge: theme text on a status-tinted theme background."""
    label = STATUS_LABELS.get(status, status)
    return f'<span class="agentstack-pill s-{escape(status)}">{escape(label)}</span>'


def markdown(text: str) -> str:
    """Untrusted Markdown as sanitised HTML at prose line height."""
    return f'<div class="agentstack-prose">{markdown_to_html(text)}</div>'


def code_box(code: str, *, clamped: bool = False) -> str:
    """Code, read-only: monospace, long lines scroll (never break mid-word), theme code colours."""
    cls = "agentstack-code-box clamped" if clamped else "agentstack-code-box"
    return f'<pre class="{cls}">{escape(code)}</pre>'


def source_label(source: Any) -> str:
    """Who answered: ``by you``, ``from the terminal`` ... (unknown surfaces by name)."""
    return SOURCE_LABELS.get(str(source), f"from {source}") if source else "by you"


def tool_title(call: ToolCallState, by: str | None = None) -> str:
    """``python ✓ · edited by you · created a · changed df``: the tool, its outcome, the decision, the names touched."""
    mark = "…" if not call.done else ("✗" if call.error else "✓")
    decision = call.decision
    if decision == "rejected":
        return f"{call.tool} · rejected {by or 'by you'}"
    if call.cancelled:
        return f"{call.tool} ■ · cancelled"
    touched = touched_names(call.output)
    if decision == "edited":
        return f"{call.tool} {mark} · edited {by or 'by you'}" + touched
    return f"{call.tool} {mark}" + touched


def record_title(rec: dict[str, Any]) -> str:
    """A saved tool call's one line: ``python ✗ · edited · created a`` (what :func:`tool_title` says live)."""
    mark = "…" if not rec.get("done") else ("✗" if rec.get("traceback") else "✓")
    decision = rec.get("decision")
    if decision == "rejected":
        return f"{rec.get('tool')} · rejected"
    if decision == "cancelled":
        return f"{rec.get('tool')} ■ · cancelled"
    return f"{rec.get('tool')} {mark}" + (" · edited" if decision == "edited" else "")


def touched_names(output: Any, limit: int = 6) -> str:
    """`` · created a · changed df · deleted b`` from a python result's ``changes`` (at most ``limit`` names each)."""
    changes = output.get("changes") if isinstance(output, dict) else None
    if not isinstance(changes, list):
        return ""
    parts = []
    for action in ("created", "changed", "deleted"):
        names = [str(c.get("name")) for c in changes if isinstance(c, dict) and c.get("action") == action]
        if names:
            more = f" +{len(names) - limit}" if len(names) > limit else ""
            parts.append(f" · {action} {', '.join(names[:limit])}{more}")
    return "".join(parts)


def tool_body(call: ToolCallState) -> str:
    """The code that actually ran (the edited version after Edit), then its output and traceback."""
    return record_html(call.record())


def traceback_html(traceback: str) -> str:
    """A traceback trimmed to the agent's own frames, the whole one a click away (when anything was left out)."""
    mine = user_frames(traceback)
    if mine is None:
        return f"<b>traceback</b>{code_box(traceback)}"
    return (f'<b>traceback</b> <span class="agentstack-quiet">(your code\'s frames)</span>{code_box(mine)}'
            f'<details class="agentstack-full-traceback"><summary>full traceback</summary>{code_box(traceback)}'
            "</details>")


def record_html(rec: dict[str, Any]) -> str:
    """One tool call's record (:func:`~agentstack_lab.engine.transcript.tool_record`) as HTML, model text escaped."""
    code, decision = rec.get("code"), rec.get("decision")
    parts = []
    edited = decision == "edited"
    if isinstance(code, str):
        # -- the code (highlighted), and an edit's badge and diff against the model's original (notebook/codeview.py)
        label = "code that ran (edited)" if edited else "code"
        badge = '<span class="agentstack-edited-badge">edited</span>' if edited else ""
        shown = highlighted_box(code) if rec.get("tool") == "python" else code_box(code)
        parts.append(f"<b>{label}</b>{badge}{shown}")
        original = rec.get("original")
        if edited and isinstance(original, str) and original != code:
            added, removed = diff_stats(original, code)
            parts.append(f"<b>your edit</b> <span class=\"agentstack-diff-stat\">+{added} −{removed} lines against the "
                         f"model's original</span>{diff_html(original, code)}")
            parts.append(f"<details><summary>the model's original</summary>{highlighted_box(original)}</details>")
    elif rec.get("input") is not None:
        parts.append(f"<b>input</b>{code_box(str(rec['input']))}")
    output, traceback = rec.get("output"), rec.get("traceback")
    if not rec.get("done"):
        parts.append("<i>running…</i>")
    elif decision == "rejected":
        parts.append("<i>not run: rejected</i>")
    elif decision == "cancelled":
        parts.append(f"<i>{escape(str(output or 'cancelled'))}</i>")
    else:
        if output or not traceback:
            parts.append(f"<b>output</b>{code_box(str(output or '(no output)'))}")
        if traceback:
            parts.append(traceback_html(str(traceback)))
    return "".join(parts)


def failed_flag(own: int, below: int = 0) -> str:
    """The header's mark for code that raised: in this agent, or in its subagents (empty when none did)."""
    if not own and not below:
        return ""
    text = ("code failed" + (f" ×{own}" if own > 1 else "")) if own else "code failed in a subagent"
    return f'<span class="agentstack-failed-flag" title="{text}: open the transcript for the traceback">✗ {text}</span> '


def where_code_runs(executor: str | None) -> str:
    """Where approved code runs, and what that means for the person's variables."""
    if executor == "live":
        return "in <b>your live kernel</b>: it can read and change your variables"
    if executor == "subprocess":
        return "in <b>an isolated subprocess</b>: your variables are not touched"
    return f"with the {escape(executor)} executor" if executor else ""


def qa_html(node: NodeState) -> str:
    """The questions this agent asked and how they were answered, each folded to one line."""
    return answers_html(node.answers, [t.decision for t in node.tools if t.tool == "python"])


def answers_html(answers: list[dict[str, Any]], decisions: list[str | None]) -> str:
    """Questions and their answers (``metadata.answers``), each folded to one line; ``decisions`` of the python calls, in order."""
    items = []
    approvals = 0
    for a in answers:
        kind, question, answer = a.get("kind"), str(a.get("question") or ""), a.get("answer")
        by = source_label(a.get("source"))
        if a.get("state") == "cancelled":  # the agent stopped while it waited: nobody answered
            if kind == "approval":
                approvals += 1
            why = str(a.get("reason") or "the agent stopped")
            items.append(f'<details class="agentstack-qa-item agentstack-qa-cancelled"><summary>'
                         f"{escape(str(kind).capitalize())} cancelled: {escape(excerpt(why, 80))}</summary>"
                         f"<div><b>Q:</b> {escape(question)}</div><div><b>A:</b> none, cancelled ({escape(why)})</div>"
                         "</details>")
            continue
        if kind == "approval":
            decided = decisions[approvals] if approvals < len(decisions) else None
            approvals += 1
            ok = answer.get("approved") if isinstance(answer, dict) else answer
            word = decided or ("approved" if ok is True or str(ok).lower() in ("approve", "approved", "yes", "y", "ok", "run")
                               else "rejected")
            summary = escape(f"Code {word} {by}")
            shown = word
        else:
            if answer in (None, ""):
                continue
            shown = as_text(answer)
            summary = f"{escape(excerpt(question, 60))} → {escape(excerpt(shown, 40))} ({escape(by)})"
        items.append(f'<details class="agentstack-qa-item"><summary>{summary}</summary>'
                     f"<div><b>Q:</b> {escape(question)}</div><div><b>A:</b> {escape(shown)}</div></details>")
    return "".join(items)


def node_title(node: NodeState, collapsed_result: bool, failed_below: int = 0) -> str:
    """Agent type and the prompt as typed (never an internal id, nor the kernel-variable descriptions), two lines at most.

    A folded finished subagent adds an excerpt of its result; the whole prompt excerpt is the tooltip.
    Code that raised, in this agent or (``failed_below``) its subagents, is flagged first.
    """
    prompt = escape(excerpt(typed_prompt(node.prompt), 200))
    marks = "".join(f'<span class="agentstack-flag" style="border:1px solid var(--jp-warn-color1);'
                    f'color:var(--jp-ui-font-color0);border-radius:8px;padding:0 6px;margin-right:4px;'
                    f'font-size:85%;white-space:nowrap">{escape(b)}</span>' for b in node.badges)
    text = failed_flag(node.code_failed, failed_below) + marks + f"<b>{escape(node.type)}</b>" + (
        f" · {prompt}" if prompt else "")
    if node.follows is not None:  # a follow-up (``run.ask`` / ``%agent --continue``): the question it continues
        text = (f'<span class="agentstack-quiet">↪ follow-up to “{escape(excerpt(node.follows, 80))}”</span><br>'
                + text)
    if collapsed_result:
        done = node.result if node.result is not None else (node.error or "")
        text += f' <span class="agentstack-quiet">→ {escape(excerpt(done, 90))}</span>'
    return (f'<div title="{prompt}" style="line-height:1.35;overflow-wrap:anywhere;overflow:hidden;'
            f'display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:2">{text}</div>')
