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

from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.state import token_text, tree_scope
from agentstack_lab.events import TERMINAL
from agentstack_lab.notebook.render import STATUS_VARS, pill
from agentstack_lab.notebook.sanitize import escape, markdown_to_html
from agentstack_lab.notebook.tree import tree_to_markdown, tree_to_text
from agentstack_lab.providers.prices import PriceTable, price_tree

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["SNAPSHOT_MIME", "snapshot", "snapshot_bundle", "snapshot_html", "SavedRun"]

SNAPSHOT_MIME = "application/vnd.agentstack.tree+json"
_LIMITS = {"prompt": 2000, "result": 20_000, "error": 4000, "content": 4000}


def _cut(text: Any, limit: int) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def _node(node: dict[str, Any]) -> dict[str, Any]:
    usage = node.get("usage") or {}
    out = {"id": node.get("id"), "type": node.get("type"), "status": node.get("status"),
           "usage": {"inputTokens": int(usage.get("input_tokens") or usage.get("inputTokens") or 0),
                     "outputTokens": int(usage.get("output_tokens") or usage.get("outputTokens") or 0),
                     "basis": str(usage.get("basis") or "reported")},
           "elapsed": node.get("elapsed"),
           **({"cost": dict(node["cost"])} if isinstance(node.get("cost"), dict) else {}),
           "tools": [t.get("tool") if isinstance(t, dict) else str(t) for t in node.get("tools") or []],
           "children": [_node(c) for c in node.get("children") or []]}
    for key, limit in _LIMITS.items():
        out[key] = _cut(node.get(key) or None, limit)
    return out


def snapshot(tree: dict[str, Any] | list[dict[str, Any]] | None, *, run_id: str | None) -> dict[str, Any]:
    """The JSON of the custom MIME type: ``{version, runId, final, roots}`` (``final`` once every root ended)."""
    roots = [r for r in (tree if isinstance(tree, list) else [tree] if tree else []) if r]
    return {"version": 1, "runId": run_id, "final": bool(roots) and all(r.get("status") in TERMINAL for r in roots),
            "roots": [_node(r) for r in roots]}


def snapshot_html(snap: dict[str, Any]) -> str:
    """Static HTML of a snapshot, theme variables only, model text sanitised."""

    def node_html(n: dict[str, Any]) -> str:
        var = STATUS_VARS.get(n.get("status") or "", "--jp-border-color1")
        meta = token_text(n.get("usage"), tree_scope(n))
        if (n.get("cost") or {}).get("text"):
            meta += f" · cost {n['cost']['text']}"
        head = (f'<div class="agentstack-saved-head">{pill(n.get("status") or "?")} <b>{escape(n.get("type") or "")}'
                f'</b> <span class="agentstack-saved-meta">{escape(meta)}</span></div>')
        body = [f'<div class="agentstack-saved-prompt">{escape(n.get("prompt") or "")}</div>']
        if n.get("result"):
            body.append(f'<div class="agentstack-saved-result">{markdown_to_html(n["result"])}</div>')
        if n.get("error"):
            body.append(f'<div class="agentstack-saved-error">{escape(n["error"])}</div>')
        kids = "".join(node_html(c) for c in n.get("children") or [])
        return (f'<div class="agentstack-saved-node" style="border-left:3px solid var({var});padding-left:6px;'
                f'margin:2px 0">{head}{"".join(body)}{kids}</div>')

    style = ("<style>.agentstack-saved{color:var(--jp-ui-font-color0)}.agentstack-saved .agentstack-pill{"
             "color:var(--jp-ui-font-color0);border:1px solid var(--jp-border-color1);border-radius:8px;"
             "padding:0 6px}.agentstack-saved-meta,.agentstack-saved-prompt{color:var(--jp-ui-font-color1)}</style>")
    return f'{style}<div class="agentstack-saved">{"".join(node_html(r) for r in snap["roots"])}</div>'


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
        self.tree = price_tree(rebuild_tree(db, self.run_id), prices or PriceTable())

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict[str, Any]:
        return snapshot_bundle(self.tree, run_id=self.run_id)

    def __repr__(self) -> str:
        return tree_to_text(self.tree)
