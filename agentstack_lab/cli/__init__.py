"""The ``agentstack-lab`` command line: one root app, one module per command group.

Groups: ``memory``, ``session``, ``config``, ``agent``, ``decisions``, ``approval``, ``review``, ``workflow``, plus the ``mcp`` and ``acp`` commands.
Shared behaviour (opening the workspace, the exit-code policy, one-line errors, JSON and tables)
lives in the public :mod:`agentstack_lab.cli.common`; a group module imports only from there and
from the layers below, never from another group. Exit codes: 0 success, 1 a check failed, 2 the
command could not run (see :mod:`agentstack_lab.cli.common`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from agentstack_lab.cli import (
    agent,
    approval,
    config,
    decisions,
    memory,
    review,
    session,
    system,
    tasks,
    worker,
    workflow,
)
from agentstack_lab.cli.acp import acp
from agentstack_lab.cli.common import HandledGroup, configure_logging
from agentstack_lab.cli.mcp import mcp
from agentstack_lab.cli.metrics import metrics

__all__ = ["app", "main"]

app = typer.Typer(name="agentstack-lab", cls=HandledGroup, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, help="Recursive LLM agents at home in Jupyter.")
app.add_typer(memory.app, name="memory")
app.add_typer(session.app, name="session")
app.add_typer(config.app, name="config")
app.add_typer(workflow.app, name="workflow")
app.add_typer(agent.app, name="agent")
app.add_typer(decisions.app, name="decisions")
app.add_typer(approval.app, name="approval")
app.add_typer(review.app, name="review")
app.add_typer(tasks.app, name="task")
app.add_typer(worker.queue_app, name="queue")
app.command("worker")(worker.worker)
app.add_typer(system.app, name="system")
app.command("mcp")(mcp)
app.command("acp")(acp)
app.command("metrics")(metrics)


@app.callback()
def _root(ctx: typer.Context,
          workspace: Path = typer.Option(None, "--workspace", "-w", help="Workspace folder (default: found from cwd)."),
          verbose: bool = typer.Option(False, "--verbose", "-v",
                                       help="Show log messages (warnings and up) and the traceback of a bug."),
          debug: bool = typer.Option(False, "--debug", help="Show all log messages and the traceback of a bug.")):
    configure_logging(verbose=verbose, debug=debug)
    ctx.obj = {"workspace": workspace, "verbose": verbose or debug}


def main() -> None:
    """Console entry point (``agentstack-lab``); exit codes 0 success, 1 a check failed, 2 could not run."""
    _check_argv(sys.argv[1:])
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


def _check_argv(args: list[str]) -> None:
    """Arguments that were not UTF-8 bytes (Python keeps them as lone surrogates) end here, in one line."""
    from agentstack_lab.errors import UsageError
    from agentstack_lab.validation import check_text

    for i, arg in enumerate(args, 1):
        try:
            check_text(f"argument {i} ({arg.encode('utf-8', 'replace').decode()!r})", arg)
        except UsageError as exc:
            typer.echo(f"error: {exc}", err=True)
            sys.exit(2)
