"""``agentstack-lab session ...``: start, end and inspect sessions (a session owns a private memory namespace).

``status`` and ``active`` are reads and take ``--json``; ``start`` prints the new id (or JSON).
"""

from __future__ import annotations

from typing import Any

import typer

from agentstack_lab.cli.common import JSON_OPTION, open_workspace, print_json, table, timestamp

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Start, end and inspect sessions.")


def _show(sessions: list[Any], as_json: bool, title: str) -> None:
    if as_json:
        print_json([s.to_dict() for s in sessions])
        return
    table(title, ["id", "name", "status", "started", "ended", "entries"],
          [[s.id, s.name, s.status, timestamp(s.started_at), timestamp(s.ended_at), s.entries] for s in sessions])


@app.command("start")
def session_start(ctx: typer.Context, name: str = typer.Option(None, "--name"), as_json: bool = JSON_OPTION):
    """Start a session; prints its id."""
    s = open_workspace(ctx).sessions.start(name)
    if as_json:
        print_json(s.to_dict())
    else:
        typer.echo(s.id)


@app.command("end")
def session_end(ctx: typer.Context, session_id: str, as_json: bool = JSON_OPTION):
    """End a session and delete its private memory."""
    s = open_workspace(ctx).sessions.end(session_id)
    if as_json:
        print_json(s.to_dict())
    else:
        typer.echo(f"ended {s.id}; removed {s.entries} memory entr{'y' if s.entries == 1 else 'ies'}")


@app.command("status")
def session_status(ctx: typer.Context, session_id: str, as_json: bool = JSON_OPTION):
    """Show one session."""
    _show([open_workspace(ctx).sessions.status(session_id)], as_json, "session")


@app.command("active")
def session_active(ctx: typer.Context, as_json: bool = JSON_OPTION):
    """List active sessions."""
    _show(open_workspace(ctx).sessions.active(), as_json, "active sessions")
