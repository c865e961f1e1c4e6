"""``agentstack-lab mcp``: the workspace's agents, memory, sessions and identities as MCP tools over stdio.

Importing this package is light; the ``mcp`` SDK (extra ``agentstack-lab[mcp]``) is imported
when a server is built. See :mod:`agentstack_lab.mcp.tools` for the tools.
"""

__all__ = ["build_server", "serve"]


def build_server(workspace):
    """An ``MCPServer`` over ``workspace`` (see :func:`agentstack_lab.mcp.server.build_server`)."""
    from agentstack_lab.mcp.server import build_server as build

    return build(workspace)


def serve(path=None):
    """Serve the workspace at ``path`` (or found from the working directory) over stdio."""
    from agentstack_lab.mcp.server import serve as run

    run(path)
