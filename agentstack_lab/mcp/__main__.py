"""``python -m agentstack_lab.mcp [--workspace DIR]``: the MCP server over stdio."""

import argparse

from agentstack_lab.mcp.server import serve

parser = argparse.ArgumentParser(prog="python -m agentstack_lab.mcp", description=__doc__)
parser.add_argument("--workspace", "-w", help="Workspace folder (default: found from the working directory).")
serve(parser.parse_args().workspace)
