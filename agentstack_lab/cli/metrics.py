"""``agentstack-lab metrics``: the workspace's Prometheus metrics, in the text exposition format.

Computed from the database when run (``monitoring/metrics.py``), so every process's work counts;
the server extension serves the same text at ``/agentstack/api/metrics``.
"""

from __future__ import annotations

import sys

import typer

from agentstack_lab.cli.common import open_workspace

__all__ = ["metrics"]


def metrics(ctx: typer.Context):
    """Print the workspace's Prometheus metrics (text exposition format)."""
    from agentstack_lab.monitoring.metrics import exposition

    sys.stdout.write(exposition(open_workspace(ctx, announce_new=False).db)[0].decode())
