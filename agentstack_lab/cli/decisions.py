"""``agentstack-lab decisions ...``: list, show and answer the questions runs put to a person, from a terminal.

A run anywhere (a notebook kernel, a CI job's ``agent run --on-query wait``, the MCP server) that
asks a clarification or wants to run code writes a decision to the workspace database; these
commands answer it, and the waiting run continues within a fraction of a second. Exactly one
answer wins: a second answer (from here, the widget or MCP) prints "already answered (by …,
from …)" and exits 2 (see :mod:`agentstack_lab.cli.common`). Before reading, runs whose process died are reaped (their decisions are
cancelled) and overdue decisions are expired, so the list never shows a question nobody waits for.
"""

from __future__ import annotations

import contextlib
import getpass
from pathlib import Path
from typing import Any

import typer

from agentstack_lab.cli.common import (
    JSON_OPTION,
    CommandError,
    open_workspace,
    print_json,
    short,
    table,
    timestamp,
)

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="List, show and answer pending decisions (questions and approvals).")

JSON = JSON_OPTION


def _who() -> str | None:
    with contextlib.suppress(Exception):
        return getpass.getuser()
    return None


def _decisions(ctx: typer.Context) -> Any:
    """The workspace's decisions, after reaping dead runs and expiring overdue decisions."""
    from agentstack_lab.decisions import Decisions
    from agentstack_lab.engine.liveness import reap_orphans

    ws = open_workspace(ctx)
    reap_orphans(ws.db)
    ds = Decisions(ws.db)
    ds.expire_due()
    return ds


def _answer_text(d: Any) -> str:
    if d.state != "answered":
        return d.reason or ""
    if isinstance(d.answer, dict) and "approved" in d.answer:
        if d.answer["approved"] and d.answer.get("always"):
            return f"approved, always ({d.answer['always']})"
        return "approved" if d.answer["approved"] else f"rejected{': ' + d.answer['reason'] if d.answer.get('reason') else ''}"
    return short(d.answer, 60)


@app.command("list")
def list_command(ctx: typer.Context, run: str = typer.Option(None, "--run", "-r", help="Only this run (id)."),
                 state: str = typer.Option(None, "--state", help="pending, answered, expired or cancelled."),
                 all_states: bool = typer.Option(False, "--all", help="Every state (default: pending only)."),
                 limit: int = typer.Option(50, "--limit", min=1), as_json: bool = JSON):
    """Pending decisions (``--all`` for answered, expired and cancelled ones too), newest first."""
    ds = _decisions(ctx)
    items = ds.list(run=run, state=None if all_states else (state or "pending"), limit=limit)
    if as_json:
        print_json([d.to_dict() for d in items])
        return
    if not items:
        typer.echo("no pending decisions" if not all_states and not state else "no decisions")
        return
    from agentstack_lab.decisions import surface_label

    table("decisions", ["id", "kind", "state", "run", "prompt", "answer", "decided by", "from", "created"],
          [[d.id[:8], d.kind, d.state, (d.run_id or "")[:8], short(d.prompt, 60), _answer_text(d),
            d.decided_by or "", surface_label(d.surface) if d.surface else "", timestamp(d.created_at)]
           for d in items])


@app.command("show")
def show_command(ctx: typer.Context, decision_id: str = typer.Argument(..., help="Decision id (or a unique prefix)."),
                 as_json: bool = JSON):
    """One decision in full: the question, the code of an approval, the answer and who gave it."""
    d = _decisions(ctx).get(decision_id)
    if as_json:
        print_json(d.to_dict())
        return
    from agentstack_lab.decisions import surface_label

    typer.echo(f"decision {d.id}\n  kind:    {d.kind}\n  state:   {d.state}\n  run:     {d.run_id or ''}\n"
               f"  agent:   {d.agent_id or ''}\n  created: {timestamp(d.created_at)}"
               + (f"\n  expires: {timestamp(d.expires_at)}" if d.expires_at else "")
               + f"\n  prompt:  {d.prompt}")
    if d.code:
        typer.echo("  code:\n" + "\n".join(f"    {line}" for line in d.code.splitlines()))
    if d.kind == "approval" and d.pending:
        preview = _always_preview(d)
        typer.echo(f"  always:  {preview.description} (decisions approve {d.id[:8]} --always)" if not preview.refused
                   else f"  always:  not offered: {preview.refused}")
    saved = d.metadata.get("savedRule")
    if isinstance(saved, dict):
        typer.echo(f"  saved:   rule {saved.get('id')} ({saved.get('scope')}): {saved.get('description')}"
                   if saved.get("id") else f"  saved:   no rule: {saved.get('refused')}")
    if d.state == "answered":
        typer.echo(f"  answer:  {_answer_text(d)} (by {d.answered_by or 'unknown'}, from {surface_label(d.surface)})")
        typer.echo(f"  decided: by {d.decided_by}")
        verdict = d.metadata.get("verdict")
        if isinstance(verdict, dict) and verdict.get("reason"):
            typer.echo(f"  why:     {verdict['reason']}")
    elif d.reason:
        typer.echo(f"  reason:  {d.reason}")


def _done(d: Any, as_json: bool) -> None:
    if as_json:
        print_json(d.to_dict())
    else:
        typer.echo(f"decision {d.id[:8]} {_answer_text(d)}" if d.kind in ("approval", "consensus")
                   else f"decision {d.id[:8]} answered")


@app.command("answer")
def answer_command(ctx: typer.Context, decision_id: str = typer.Argument(..., help="Decision id (or prefix)."),
                   text: str = typer.Argument(..., help="The answer (approve/reject for an approval)."),
                   as_json: bool = JSON):
    """Answer a question (clarification, blocking, final) with TEXT."""
    if not text.strip():
        raise CommandError("the answer is empty; say what the agent should know (or approve/reject an approval)")
    ds = _decisions(ctx)
    _done(ds.answer(ds.get(decision_id).id, text, by=_who(), surface="cli"), as_json)


def _always_preview(d: Any) -> Any:
    """What "Always allow code like this" would save for approval ``d`` (its card's classes and code)."""
    from agentstack_lab.approval import always_rule

    classes: Any = d.options.get("classes")
    return always_rule(classes if isinstance(classes, list) else [], d.code or "")


@app.command("approve")
def approve_command(ctx: typer.Context, decision_id: str = typer.Argument(..., help="Decision id (or prefix)."),
                    edit: Path = typer.Option(None, "--edit", help="Run this file's code instead (an edited version)."),
                    always: bool = typer.Option(False, "--always",
                                                help="Also save \"Always allow code like this\" as a rule "
                                                     "(`decisions show ID` says what it matches)."),
                    scope: str = typer.Option(None, "--scope", help="Where --always saves the rule: session "
                                                                    "(default) or workspace."),
                    as_json: bool = JSON):
    """Approve a code approval (optionally with edited code from a file) or a consensus checkpoint."""
    from agentstack_lab.decisions import ALWAYS_SCOPES

    if scope is not None and not always:
        raise CommandError("--scope goes with --always (it says where the saved rule applies)")
    if scope is not None and scope not in ALWAYS_SCOPES:
        raise CommandError(f"--scope must be session or workspace, got {scope!r}")
    if always and edit is not None:
        raise CommandError("--always saves a rule for the code as asked; it cannot go with --edit")
    code = None
    if edit is not None:
        try:
            code = edit.read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--edit: cannot read {edit}: {exc.strerror or exc}") from None
    ds = _decisions(ctx)
    d = ds.get(decision_id)
    preview = None
    if always:
        if d.kind != "approval":
            raise CommandError(f"--always saves a rule for code approvals; decision {d.id[:8]} is a {d.kind}")
        preview = _always_preview(d)
        if preview.refused:
            raise CommandError(f"--always: no rule can be saved for decision {d.id[:8]}: {preview.refused}")
    done = ds.approve(d.id, code=code, by=_who(), surface="cli", always=(scope or "session") if always else None)
    _done(done, as_json)
    if preview is not None and not as_json:
        typer.echo(f"the run saves an approval rule ({scope or 'session'}): {preview.description}")


@app.command("reject")
def reject_command(ctx: typer.Context, decision_id: str = typer.Argument(..., help="Decision id (or prefix)."),
                   reason: str = typer.Option(None, "--reason", help="Why (the agent sees it)."),
                   as_json: bool = JSON):
    """Reject a code approval or a consensus checkpoint."""
    ds = _decisions(ctx)
    _done(ds.reject(ds.get(decision_id).id, reason=reason, by=_who(), surface="cli"), as_json)
