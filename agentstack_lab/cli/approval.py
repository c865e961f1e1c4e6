"""``agentstack-lab approval rules``: the approval rules people saved with "Always allow code like this".

A saved rule applies after the config's ``approval.rules`` (the last match wins), to runs of its session
or to the whole workspace; ``--remove ID`` deletes one, and runs decide by the rest from their next call on.
Saving one from the terminal: ``agentstack-lab decisions approve ID --always [--scope session|workspace]``.
"""

from __future__ import annotations

import typer

from agentstack_lab.cli.common import JSON_OPTION, open_workspace, print_json, table, timestamp

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="The approval rules saved with \"Always allow code like this\".")


@app.command("rules")
def rules_command(ctx: typer.Context,
                  remove: str = typer.Option(None, "--remove", help="Delete the saved rule with this id."),
                  as_json: bool = JSON_OPTION):
    """List the saved approval rules, oldest first (the order they apply in), or ``--remove ID`` one."""
    from agentstack_lab.approval import SavedRules

    rules = SavedRules(open_workspace(ctx).db)
    if remove is not None:
        gone = rules.remove(remove)
        if as_json:
            print_json(gone.to_dict())
        else:
            typer.echo(f"removed approval rule {gone.id}: {gone.description}")
        return
    items = rules.list()
    if as_json:
        print_json([r.to_dict() for r in items])
        return
    if not items:
        typer.echo("no saved approval rules")
        return
    table("saved approval rules", ["id", "action", "matches", "scope", "by", "created"],
          [[r.id, r.action, r.description, "workspace" if r.scope == "workspace" else f"session {r.session_id}",
            r.created_by or "", timestamp(r.created_at)] for r in items])
