"""A run's tree as a static snapshot that a saved notebook renders without a kernel.

Every ``%agent`` output carries, next to the live widget, the MIME type
``application/vnd.agentstack.tree+json`` (rendered by the lab extension, ranked before the widget so
a reopened notebook shows the tree instead of "model not found"; while the widget's model is live
the extension shows the widget), plus ``text/html`` and ``text/markdown`` for Notebook 7 without
the extension, VS Code, GitHub and nbviewer. A run that ends with no front end showing its tree
(nbclient, papermill, ``agentstack-lab workflow run``) leaves only the snapshot, Markdown and text in
its output, so ``jupyter nbconvert --to html`` and ``--to markdown`` both show the final tree. The
snapshot is bounded: prompts are cut at 2,000 characters, results at 20,000 and streamed text at
4,000 per agent, so a 10,000-delta run adds a few KB, not the whole transcript, to the notebook file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.engine.state import token_text, tree_scope
from agentstack_lab.engine.transcript import code_failed
from agentstack_lab.events import TERMINAL
from agentstack_lab.notebook.render import (
    BASE_CSS,
    STATUS_VARS,
    answers_html,
    failed_flag,
    markdown,
    pill,
    record_html,
    record_title,
    status_css,
)
from agentstack_lab.notebook.sanitize import escape
from agentstack_lab.notebook.tree import excerpt, tree_to_markdown, tree_to_text, typed_prompt
from agentstack_lab.providers.prices import PriceTable, price_tree

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["SNAPSHOT_MIME", "snapshot", "snapshot_bundle", "snapshot_html", "SavedRun"]

SNAPSHOT_MIME = "application/vnd.agentstack.tree+json"
_LIMITS = {"prompt": 2000, "result": 20_000, "error": 4000, "content": 4000}
_MAX_TOOLS = 40  # tool calls kept per agent (the last ones; a note says how many were left out)
_MAX_ANSWERS = 20


def _cut(text: Any, limit: int) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def _tool(t: Any) -> dict[str, Any]:
    if not isinstance(t, dict):
        return {"tool": str(t), "done": True}
    rec = cast("dict[str, Any]", t)
    if "traceback" not in rec and "code" not in rec:  # an engine tree's short form: the outcome only
        return {"tool": rec.get("tool"), "traceback": _cut(rec.get("error"), 4000), "done": bool(rec.get("done", True))}
    return {k: (_cut(rec.get(k), 4000) if k in ("code", "original", "output", "traceback", "input") else rec.get(k))
            for k in ("tool", "code", "original", "decision", "input", "output", "traceback", "done")}


def _answer(a: dict[str, Any]) -> dict[str, Any]:
    answer = a.get("answer")
    if not isinstance(answer, str | bool | int | float | type(None)):
        answer = {"approved": answer.get("approved")} if isinstance(answer, dict) else str(answer)
    return {"kind": a.get("kind"), "question": _cut(a.get("question"), 1000), "source": a.get("source"),
            "answer": _cut(answer, 1000) if isinstance(answer, str) else answer}


def _node(node: dict[str, Any]) -> dict[str, Any]:
    usage = node.get("usage") or {}
    tools = [_tool(t) for t in node.get("tools") or []]
    meta: dict[str, Any] = node["metadata"] if isinstance(node.get("metadata"), dict) else {}
    answers = node.get("answers") if isinstance(node.get("answers"), list) else meta.get("answers")
    out = {"id": node.get("id"), "type": node.get("type"), "status": node.get("status"),
           "usage": {"inputTokens": int(usage.get("input_tokens") or usage.get("inputTokens") or 0),
                     "outputTokens": int(usage.get("output_tokens") or usage.get("outputTokens") or 0),
                     "basis": str(usage.get("basis") or "reported")},
           "elapsed": node.get("elapsed"),
           **({"cost": dict(node["cost"])} if isinstance(node.get("cost"), dict) else {}),
           "tools": tools[-_MAX_TOOLS:], "toolsLeftOut": max(0, len(tools) - _MAX_TOOLS),
           "answers": [_answer(a) for a in (answers or []) if isinstance(a, dict)][:_MAX_ANSWERS],
           "codeFailed": code_failed(tools),
           "children": [_node(c) for c in node.get("children") or []]}
    for key, limit in _LIMITS.items():
        out[key] = _cut(node.get(key) or None, limit)
    return out


def snapshot(tree: dict[str, Any] | list[dict[str, Any]] | None, *, run_id: str | None) -> dict[str, Any]:
    """The JSON of the custom MIME type: ``{version, runId, final, roots}`` (``final`` once every root ended)."""
    roots = [r for r in (tree if isinstance(tree, list) else [tree] if tree else []) if r]
    return {"version": 1, "runId": run_id, "final": bool(roots) and all(r.get("status") in TERMINAL for r in roots),
            "roots": [_node(r) for r in roots]}


def _failed_below(n: dict[str, Any]) -> int:
    return sum(int(c.get("codeFailed") or 0) + _failed_below(c) for c in n.get("children") or [])


def snapshot_html(snap: dict[str, Any]) -> str:
    """Static HTML of a snapshot as the live tree draws it: theme variables only, model text sanitised or escaped.

    Each agent: its header (code that raised flagged, status, type, the prompt as typed), the questions
    with their answers, each tool call folded (the code that ran, edited marked, its output and
    traceback), its result as Markdown; a finished subagent folds to its header and a result excerpt.
    """

    def node_html(n: dict[str, Any], root: bool) -> str:
        status = n.get("status") or "?"
        var = STATUS_VARS.get(status, "--jp-border-color1")
        meta = token_text(n.get("usage"), tree_scope(n))
        if (n.get("cost") or {}).get("text"):
            meta += f" · cost {n['cost']['text']}"
        title = excerpt(typed_prompt(n.get("prompt")), 200)
        folded = not root and status in TERMINAL
        done = excerpt(n.get("result") or n.get("error") or "", 90) if folded else ""
        head = (f'{failed_flag(int(n.get("codeFailed") or 0), _failed_below(n))}{pill(status)} '
                f'<b>{escape(n.get("type") or "")}</b>' + (f" · {escape(title)}" if title else "")
                + (f' <span class="agentstack-quiet">→ {escape(done)}</span>' if done else "")
                + f' <span class="agentstack-quiet">{escape(meta)}</span>')
        body = []
        prompt = typed_prompt(n.get("prompt"))
        if prompt and excerpt(prompt, 200) != prompt.strip():
            body.append(f'<div class="agentstack-saved-prompt">{escape(prompt)}</div>')
        qa = answers_html(n.get("answers") or [], [t.get("decision") for t in n.get("tools") or []
                                                   if t.get("tool") == "python"])
        if qa:
            body.append(f'<div class="agentstack-qa">{qa}</div>')
        if n.get("toolsLeftOut"):
            body.append(f'<div class="agentstack-quiet">{n["toolsLeftOut"]} earlier tool calls left out</div>')
        for t in n.get("tools") or []:
            body.append(f'<details class="agentstack-saved-tool"><summary>{escape(record_title(t))}</summary>'
                        f"{record_html(t)}</details>")
        if n.get("result"):
            label = ("Final answer" if root else "Result")
            body.append(f'<div class="agentstack-answer-box agentstack-saved-result"><b>{label}</b>'
                        f"{markdown(n['result'])}</div>")
        if n.get("error"):
            cls = "agentstack-problem" + (" stopped" if status == "stopped" else "")
            body.append(f'<div class="{cls} agentstack-saved-error"><b>{escape(status)}:</b> {escape(n["error"])}</div>')
        kids = "".join(node_html(c, False) for c in n.get("children") or [])
        cls = f"agentstack-saved-node s-{escape(status)}" + (" agentstack-code-failed" if int(
            n.get("codeFailed") or 0) or _failed_below(n) else "")
        style = f'border-left:3px solid var({var});padding-left:6px;margin:2px 0'
        inner = f'{"".join(body)}<div style="margin-left:1.2em">{kids}</div>' if kids else "".join(body)
        if folded:
            return (f'<details class="{cls}" style="{style}"><summary class="agentstack-saved-head">{head}</summary>'
                    f"{inner}</details>")
        return f'<div class="{cls}" style="{style}"><div class="agentstack-saved-head">{head}</div>{inner}</div>'

    def statuses(n: dict[str, Any]) -> set[str]:
        return {str(n.get("status"))}.union(*(statuses(c) for c in n.get("children") or []))

    used = set[str]().union(*(statuses(r) for r in snap["roots"]))
    # the colours of the statuses shown only: a saved final tree mentions no "pending" anywhere
    style = (f"<style>{status_css(used)}{BASE_CSS}.agentstack-saved .agentstack-saved-head{{line-height:1.5}}"
             ".agentstack-saved .agentstack-saved-tool summary,.agentstack-saved summary{cursor:pointer}"
             ".agentstack-saved .agentstack-saved-prompt{color:var(--jp-ui-font-color1);white-space:pre-wrap}</style>")
    roots = "".join(node_html(r, True) for r in snap["roots"])
    return f'{style}<div class="agentstack-tree agentstack-saved">{roots}</div>'


def snapshot_bundle(tree: Any, *, run_id: str | None, html: bool = True) -> dict[str, Any]:
    """The static representations of a tree: the custom MIME type, HTML, Markdown and plain text.

    ``html=False`` leaves the HTML out, for outputs no front end is watching (a headless run):
    ``jupyter nbconvert --to markdown`` takes ``text/html`` before ``text/markdown``, so only without
    it does the Markdown export read as Markdown; ``--to html`` then renders the Markdown.
    """
    snap = snapshot(tree, run_id=run_id)
    bundle = {SNAPSHOT_MIME: snap, "text/markdown": tree_to_markdown(tree), "text/plain": tree_to_text(tree)}
    if html:
        bundle["text/html"] = snapshot_html(snap)
    return bundle


class SavedRun:
    """A past run rebuilt from the workspace's event log, displayed as its snapshot (``%agent show ID``)."""

    def __init__(self, db: Database, run_ref: str, prices: PriceTable | None = None):
        from agentstack_lab.engine.activity import resolve_run
        from agentstack_lab.engine.log import rebuild_tree

        self.run_id = resolve_run(db, run_ref)
        self.tree = price_tree(rebuild_tree(db, self.run_id, details=True), prices or PriceTable())

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict[str, Any]:
        return snapshot_bundle(self.tree, run_id=self.run_id)

    def __repr__(self) -> str:
        return tree_to_text(self.tree)
