"""``agentstack-lab review ...``: run an adversarial review loop from a terminal, and inspect any loop.

``review run FILE`` runs the loop in this process until the reviewer passes the code or
``--max-iterations`` reviews have failed; the exit code is the verdict (0 passed, 1 failed, 2 error
or aborted), so CI can gate on it. ``list``, ``status``, ``issues``, ``code`` and ``abort`` read the
workspace database, so they see loops run by a notebook, an MCP client or another terminal, and
``abort`` stops one within a fraction of a second.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer

from agentstack_lab.cli.common import (
    EXIT_ERROR,
    EXIT_FAIL,
    JSON_OPTION,
    CommandError,
    open_workspace,
    print_json,
    require_writable,
    short,
    table,
    timestamp,
)

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Adversarial review loops: a reviewer agent's verdict decides, "
                                              "a coder agent revises.")

_EXIT = {"passed": 0, "failed": EXIT_FAIL, "error": EXIT_ERROR, "aborted": EXIT_ERROR}


def _loops(ctx: typer.Context) -> Any:
    from agentstack_lab.workflows.review_loop import ReviewLoops

    return ReviewLoops(open_workspace(ctx))


def _findings_rows(issues: list[Any]) -> list[list[Any]]:
    return [[i.iteration, i.severity, f"{i.file or ''}:{i.line if i.line is not None else ''}".strip(":"),
             short(i.claim, 70), short(i.evidence, 50)] for i in issues]


@app.command("run")
def run_command(ctx: typer.Context, file: Path = typer.Argument(..., help="The code (or unified diff) to review."),
                max_iterations: int = typer.Option(3, "--max-iterations", "-n", min=1, max=50,
                                                   help="Reviews at most."),
                provider: str = typer.Option(None, "--provider", "-p", help="Provider for both agents (default: "
                                                                            "offline scripted; with no --script it "
                                                                            "reviews nothing: exit 2)."),
                script: Path = typer.Option(None, "--script", help="JSON file of scripted verdicts and revisions "
                                                                   "(provider scripted)."),
                context: str = typer.Option("", "--context", help="Extra text for the reviewer."),
                output: Path = typer.Option(None, "--output", "-o", help="Write the final code here."),
                as_json: bool = JSON_OPTION):
    """Review FILE until the reviewer passes it or the iterations run out; exit 0 passed, 1 failed, 2 error."""
    if not file.is_file():
        raise CommandError(f"no such file: {file}")
    if output is not None:
        output = require_writable(output, "--output")   # before the review runs, not after
    code = file.read_text("utf-8", errors="replace")
    loops = _loops(ctx)
    from agentstack_lab.workflows.review_loop import SKIP_REASON, reviews_nothing

    if reviews_nothing(provider, script):
        typer.echo(f"warning: the review will be skipped, {SKIP_REASON}", err=True)

    async def go() -> Any:
        loop = loops.start(code, path=file.name, max_iterations=max_iterations, provider=provider,
                           script=str(script) if script else None, context=context)
        typer.echo(f"review loop {loop.id} started on {file}", err=True)
        return await loop

    state = asyncio.run(go())
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(state.code, "utf-8")
    issues = loops.issues(state.id)
    if as_json:
        print_json({**state.to_dict(), "issues": [i.to_dict() for i in issues]})
    else:
        if issues:
            table(f"review loop {state.id[:8]}: findings", ["it", "severity", "where", "claim", "evidence"],
                  _findings_rows(issues))
        typer.echo(f"{state.status.upper()} after {state.iteration} of {state.max_iterations} review(s)"
                   + (f": {state.error}" if state.error else ""))
    raise typer.Exit(_EXIT[state.status])


@app.command("list")
def list_command(ctx: typer.Context, status: str = typer.Option(None, "--status", help="running, passed, failed, "
                                                                                   "aborted or error."),
                 limit: int = typer.Option(50, "--limit", min=1), as_json: bool = JSON_OPTION):
    """Review loops, newest first."""
    states = _loops(ctx).list(status=status, limit=limit)
    if as_json:
        print_json([s.to_dict() for s in states])
        return
    if not states:
        typer.echo("no review loops")
        return
    table("review loops", ["id", "status", "verdict", "iteration", "path", "provider", "started"],
          [[s.id[:8], s.status, s.verdict, f"{s.iteration}/{s.max_iterations}", s.path, s.provider,
            timestamp(s.created_at)] for s in states])


@app.command("status")
def status_command(ctx: typer.Context, loop_id: str = typer.Argument(..., help="Loop id or unique prefix."),
                   as_json: bool = JSON_OPTION):
    """One loop's status, last verdict and each review's summary."""
    loops = _loops(ctx)
    state = loops.status(loop_id)
    reviews = loops.reviews(state.id)
    if as_json:
        print_json({**state.to_dict(), "reviews": [{k: v for k, v in r.items() if k != "code"} for r in reviews]})
        return
    typer.echo(f"{state.id}  {state.status}  verdict {state.verdict or '-'}  review {state.iteration}/"
               f"{state.max_iterations}" + (f"  ({state.error})" if state.error else ""))
    for r in reviews:
        typer.echo(f"  {r['iteration']}. {r['verdict']}: {len(r['findings'])} finding(s) {short(r['summary'], 80)}")


@app.command("issues")
def issues_command(ctx: typer.Context, loop_id: str = typer.Argument(..., help="Loop id or unique prefix."),
                   iteration: int = typer.Option(None, "--iteration", min=1, help="Only this iteration."),
                   as_json: bool = JSON_OPTION):
    """The reviewer's findings (severity, file, line, claim, evidence)."""
    issues = _loops(ctx).issues(loop_id, iteration=iteration)
    if as_json:
        print_json([i.to_dict() for i in issues])
    elif not issues:
        typer.echo("no findings")
    else:
        table("findings", ["it", "severity", "where", "claim", "evidence"], _findings_rows(issues))


@app.command("code")
def code_command(ctx: typer.Context, loop_id: str = typer.Argument(..., help="Loop id or unique prefix.")):
    """Print the loop's current code (the coder's latest revision, or the original)."""
    typer.echo(_loops(ctx).get_code(loop_id), nl=False)


@app.command("abort")
def abort_command(ctx: typer.Context, loop_id: str = typer.Argument(..., help="Loop id or unique prefix.")):
    """Stop a running loop (of any process)."""
    state = _loops(ctx).abort(loop_id)
    typer.echo(f"abort requested for review loop {state.id}")
