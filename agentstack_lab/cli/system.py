"""``agentstack-lab system ...``: the workspace's health (docs/tasks.md) and its configuration (secrets masked).

``system health`` exits 0 healthy, 1 degraded, 2 unhealthy, so a probe or CI step can gate on it; a
folder with no workspace database is an error (exit 2) and the check creates nothing on disk.
"""

from __future__ import annotations

import typer

from agentstack_lab.cli.common import JSON_OPTION, CommandError, open_workspace, print_json, table

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Workspace health and configuration.")


@app.command("health")
def health_command(ctx: typer.Context,
                   kind: str = typer.Option("detailed", "--kind", help="live, ready or detailed."),
                   as_json: bool = JSON_OPTION):
    """Check the workspace: exit 0 healthy, 1 degraded, 2 unhealthy."""
    from agentstack_lab.monitoring.health import EXIT_CODES, KINDS, check

    if kind not in KINDS:
        from agentstack_lab.errors import UsageError

        raise UsageError(f"--kind must be one of {', '.join(KINDS)}; got {kind!r}")
    ws = open_workspace(ctx, announce_new=False)
    if not ws.db_path.is_file():  # checking must not create the workspace it checks
        raise CommandError(f"no workspace at {ws.root}: {ws.db_path} does not exist")
    report = check(ws, kind)
    if as_json:
        print_json(report)
    else:
        table(f"health ({kind}): {report['status']}", ["check", "status", "detail"],
              [[c["name"], c["status"], c["detail"]] for c in report["checks"]])
    raise typer.Exit(EXIT_CODES[report["status"]])


@app.command("config")
def config_command(ctx: typer.Context, as_json: bool = JSON_OPTION):
    """The configuration in effect, secrets masked (JSON)."""
    ws = open_workspace(ctx, announce_new=False)
    data = ws.config.to_public_dict()
    data["source"] = str(ws.config.source) if ws.config.source else None
    # the config file's own keys; nested sections read best as JSON; --json is accepted for symmetry with other reads
    print_json(data, as_written=True)
