"""The ``agentstack-lab mcp`` command (registered in :mod:`agentstack_lab.cli`)."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["mcp"]


def mcp(ctx: typer.Context,
        workspace: Path = typer.Option(None, "--workspace", "-w",
                                       help="Workspace folder (default: the global --workspace, or found from cwd).")):
    """Serve agents, memory, sessions and identities as MCP tools over stdio (for Claude Code or any MCP host)."""
    from agentstack_lab.cli import CliError, _handled

    root = ctx.find_root().obj or {}
    with _handled():
        from agentstack_lab.mcp.server import serve

        try:
            serve(workspace or root.get("workspace"))
        except ImportError as exc:  # the `mcp` extra is missing
            raise CliError(str(exc)) from None
