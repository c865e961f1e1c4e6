"""The dry-run report on an approval card: what the code would do, from a sandboxed fork of the kernel.

Names created / changed / deleted with their value-free summaries (``DataFrame (3, 1) → (3, 2)``), its
output and error, the files it opened and the calls the sandbox refused, then every protection, each one
unavailable said so. The report is model-influenced text: everything is escaped.
"""

from __future__ import annotations

from typing import Any, cast

from agentstack_lab.notebook.sanitize import escape

__all__ = ["dry_run_html"]

_CUT = 2000


def _items(value: Any) -> list[dict[str, Any]]:
    return [cast("dict[str, Any]", v) for v in (value if isinstance(value, list) else []) if isinstance(v, dict)]


def _pre(label: str, text: Any) -> str:
    if not isinstance(text, str) or not text:
        return ""
    cut = text if len(text) <= _CUT else text[:_CUT] + f"\n… ({len(text) - _CUT} more characters)"
    return f"<div><b>{label}</b><pre class=\"agentstack-dry-{label}\">{escape(cut)}</pre></div>"


def dry_run_html(report: dict[str, Any]) -> str:
    """The card's view of one dry-run report (``DryRunResult.to_dict()``)."""
    clean = bool(report.get("clean"))
    ended = str(report.get("ended") or "no report")
    verdict = "clean: it finished without an error and nothing was refused" if clean else \
        "not clean" + (f": it ended {escape(ended)}" if ended != "finished" else "")
    parts = [f"<div class=\"agentstack-dry-run\"><b>Dry run in a sandboxed copy of the kernel</b> ({verdict}). "
             "Nothing has changed in your kernel yet."]
    changes = _items(report.get("changes"))
    if changes:
        rows = []
        for c in changes:
            action, before, after = str(c.get("action")), c.get("before"), c.get("after")
            what = (escape(str(after)) if action == "created" else escape(str(before)) if action == "deleted"
                    else f"{escape(str(before))} → {escape(str(after))}")
            rows.append(f"<li>{escape(action)} <code>{escape(str(c.get('name')))}</code>: {what}</li>")
        parts.append("<div><b>names</b><ul class=\"agentstack-dry-changes\">" + "".join(rows) + "</ul></div>")
    else:
        parts.append("<div><b>names</b>: none created, changed or deleted</div>")
    parts.append(_pre("stdout", report.get("stdout")))
    parts.append(_pre("stderr", report.get("stderr")))
    if report.get("error"):
        parts.append(_pre("error", report.get("traceback") or report.get("error")))
    refused = _items(report.get("refused"))
    if refused:
        parts.append("<div><b>refused by the sandbox</b><ul class=\"agentstack-dry-refused\">" + "".join(
            f"<li><code>{escape(str(r.get('call')))}</code> {escape(str(r.get('target') or ''))}"
            f"{(': ' + escape(str(r['error']))) if r.get('error') else ''}</li>" for r in refused) + "</ul></div>")
    opened = _items(report.get("opened"))
    if opened:
        parts.append("<div><b>files opened</b>: " + ", ".join(
            f"<code>{escape(str(o.get('path')))}</code> ({escape(str(o.get('access')))})" for o in opened) + "</div>")
    prot = report.get("protections")
    if isinstance(prot, dict) and prot:
        rows = []
        for name, state in cast("dict[str, Any]", prot).items():
            text = str(state)
            mark = "✓" if text.startswith("active") else "⚠"
            rows.append(f"<li>{mark} {escape(str(name))}: {escape(text)}</li>")
        parts.append("<div><b>protections</b><ul class=\"agentstack-dry-protections\">" + "".join(rows) + "</ul></div>")
    return "".join(parts) + "</div>"
