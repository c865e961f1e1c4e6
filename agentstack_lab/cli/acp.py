"""``agentstack-lab acp``: serve the recursive agent over the Agent Client Protocol on stdio (:mod:`agentstack_lab.acp`)."""

from __future__ import annotations

from pathlib import Path

import typer

from agentstack_lab.cli.common import CommandError

__all__ = ["acp"]


def acp(ctx: typer.Context,
        workspace: Path = typer.Option(None, "--workspace", "-w",
                                       help="Workspace folder for every session (default: the global --workspace, "
                                            "else each session's cwd picks it, as the CLI finds it from a folder).")):
    """Serve the agent to ACP hosts (jupyter-ai, Zed, marimo, ...) over stdio: sessions, streamed runs, approvals."""
    from agentstack_lab.acp import serve  # the ACP surface's public entry point

    root = ctx.find_root().obj or {}
    try:
        serve(workspace or root.get("workspace"))
    except ImportError as exc:  # the `acp` extra is missing; the message says what to install
        raise CommandError(str(exc)) from None
