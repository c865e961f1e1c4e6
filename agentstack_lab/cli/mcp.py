"""``agentstack-lab mcp``: serve the workspace as MCP tools over stdio (the server itself is :mod:`agentstack_lab.mcp`)."""

from __future__ import annotations

from pathlib import Path

import typer

from agentstack_lab.cli.common import CommandError

__all__ = ["mcp"]


def mcp(ctx: typer.Context,
        workspace: Path = typer.Option(None, "--workspace", "-w",
                                       help="Workspace folder (default: the global --workspace, or found from cwd).")):
    """Serve agents, memory, sessions and identities as MCP tools over stdio (for Claude Code or any MCP host)."""
    from agentstack_lab.mcp import serve  # the MCP surface's public entry point

    root = ctx.find_root().obj or {}
    try:
        serve(workspace or root.get("workspace"))
    except ImportError as exc:  # the `mcp` extra is missing; the message says what to install
        raise CommandError(str(exc)) from None
