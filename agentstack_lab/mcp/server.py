"""The MCP server: the :class:`~agentstack_lab.mcp.tools.Toolbox` methods served over stdio.

Expected failures (:class:`~agentstack_lab.errors.AgentstackError`: bad input, unknown ids, access
denied, a missing provider key, an invalid transition) come back as tool errors with one line of
text; argument validation failures are reduced to ``field: problem`` pairs. Anything else is a bug:
it is logged with its traceback (stderr, the MCP host's server log) and the client reads only
``internal error (see server log)``, so neither a stack nor an exception's text (which may quote
arguments, such as a session token) reaches the model. Runs still going when the client
disconnects are stopped (and their event logs flushed) before the process exits.

Protocol errors follow the MCP 2025-11-25 spec: an unknown tool or prompt, a prompt's missing argument, and
any pagination cursor (every list is one page, so no cursor is ever valid) are JSON-RPC ``-32602`` errors
with one line; a bug in any handler is ``-32603`` with the same ``internal error (see server log)``. The
capabilities ``initialize`` advertises are the methods served: tools and prompts, no resources, and
``listChanged: false`` (the lists never change while the server runs).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import camel_keys
from agentstack_lab.mcp.prompts import PROMPTS
from agentstack_lab.mcp.tools import TOOL_NAMES, Toolbox
from agentstack_lab.mcp.tools_review import REVIEW_TOOL_NAMES, ReviewTools
from agentstack_lab.mcp.tools_tasks import TASK_TOOL_NAMES, TaskTools
from agentstack_lab.redaction import public_message

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = ["build_server", "serve", "INTERNAL_ERROR"]

log = logging.getLogger(__name__)

INTERNAL_ERROR = "internal error (see server log)"

INSTRUCTIONS = (
    "agentstack-lab: recursive LLM agents over one SQLite workspace. agent_run starts a headless run "
    "(auto_approve must be set for agents to run Python; questions need `answers`, or start it with "
    "on_query='wait' and answer with decision_list/decision_answer); agent_status, "
    "agent_tree and agent_list read the workspace database, so they also show runs of other processes "
    "(notebooks, the CLI). memory_* honour sessions: pass session_id and the session_token that "
    "session_start returned (once, as sessionToken) to use a session's private namespace; keep the token to "
    "yourself. "
    "Results have camelCase keys (runId, createdAt); metadata, inputs, options and results keep the keys they were "
    "written with. "
    "task_* create, assign, complete and relate tasks (every agent of a run is one); task_check_drift and "
    "task_drift_metrics report drift detection; consensus_* list and decide the checkpoints risky subtasks "
    "wait on (approve, reject, or reject some subtasks by id). review_loop_* run an adversarial review loop: a "
    "reviewer agent's PASS/FAIL verdict decides and a coder agent revises, up to max_iterations; status, issues "
    "and the current code are read from the database.")


def _guard(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a tool on the server's loop: camelCase result keys, one-line tool errors, bugs logged.

    The tool methods return their services' dicts (snake_case, as in Python); :func:`camel_keys`, the converter
    the CLI's ``--json`` and the lab server use, turns them into the wire form here, leaving the user's and the
    model's data (metadata, inputs, answers) as written. Argument names (the input schema) stay snake_case.
    """
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    async def tool(**kwargs: Any) -> Any:
        try:
            result = fn(**kwargs)
            return camel_keys(await result if inspect.isawaitable(result) else result)
        except AgentstackError as exc:
            raise ToolError(public_message(exc)) from None
        except Exception:
            log.exception("MCP tool %s failed with an unexpected error (a bug)", name)
            raise ToolError(INTERNAL_ERROR) from None

    return tool


def _validation_text(exc: Any) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__") or "arguments"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(dict.fromkeys(parts))


# The list methods the spec paginates. The server returns each list whole and never issues a nextCursor.
PAGINATED = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
# What MCPServer serves though this server has none: dropped, so `initialize` does not advertise resources
# and a client asking gets JSON-RPC's "Method not found".
UNSERVED = ("resources/list", "resources/templates/list", "resources/read")


@functools.cache
def _server_class() -> type:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INTERNAL_ERROR as INTERNAL_CODE
    from mcp.types import INVALID_PARAMS
    from pydantic import ValidationError

    class AgentstackServer(MCPServer):
        """``MCPServer`` with the spec's protocol errors and capabilities that name only what it serves.

        Argument errors of a known tool stay tool results (the spec's tool execution errors, which the model
        can correct) and read ``invalid arguments for X: field: problem``.
        """

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(subscriptions=False, **kwargs)  # no subscriptions/listen: nothing ever changes
            handlers = self._lowlevel_server._request_handlers  # no public way to unregister; capabilities
            for method in UNSERVED:  # are derived from this table, so they follow
                handlers.pop(method, None)
            self.middleware.append(self._protocol_errors)

        async def _protocol_errors(self, ctx: Any, call_next: Any) -> Any:
            """Refuse cursors; turn a handler's unexpected exception into -32603 with its traceback logged."""
            if ctx.request_id is None:  # a notification: nothing to answer
                return await call_next(ctx)
            params = ctx.params or {}
            if ctx.method in PAGINATED and params.get("cursor") is not None \
                    and self._lowlevel_server.get_request_handler(ctx.method) is not None:
                raise MCPError(INVALID_PARAMS, f"invalid cursor for {ctx.method}: this server returns the whole "
                                               "list in one page and issues no cursors")
            try:
                return await call_next(ctx)
            except (MCPError, ValidationError):
                raise
            except Exception:
                log.exception("MCP request %s failed with an unexpected error (a bug)", ctx.method)
                raise MCPError(INTERNAL_CODE, INTERNAL_ERROR) from None

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            if self._tool_manager.get_tool(name) is None:
                raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}")
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError:
                raise
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    raise ToolError(f"invalid arguments for {name}: {_validation_text(exc.__cause__)}") from None
                raise

        async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
            prompt = self._prompt_manager.get_prompt(name)
            if prompt is None:
                raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}")
            arguments = arguments or {}
            declared = [arg.name for arg in prompt.arguments or ()]
            problems = [f"{arg.name}: required" for arg in prompt.arguments or ()
                        if arg.required and not str(arguments.get(arg.name) or "").strip()]
            problems += [f"{extra}: not an argument of this prompt" for extra in arguments if extra not in declared]
            if problems:
                raise MCPError(INVALID_PARAMS, f"invalid arguments for prompt {name}: {'; '.join(problems)}")
            return await super().get_prompt(name, arguments, context)

    return AgentstackServer


def build_server(workspace: Workspace) -> Any:
    """An MCP server exposing the workspace's agents, memory, sessions, identities and status."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        raise ImportError("the MCP server needs the `mcp` package: pip install 'agentstack-lab[mcp]'") from exc
    from agentstack_lab._version import __version__

    toolbox = Toolbox(workspace)
    review_tools = ReviewTools(workspace)

    @contextlib.asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {"toolbox": toolbox}
        finally:
            await review_tools.shutdown()
            await _stop_runs(toolbox)

    server = _server_class()(name="agentstack-lab", version=__version__, instructions=INSTRUCTIONS,
                             lifespan=lifespan, log_level="WARNING")
    for name in TOOL_NAMES:
        server.add_tool(_guard(name, getattr(toolbox, name)), name=name)
    task_tools = TaskTools(workspace)
    for name in TASK_TOOL_NAMES:
        server.add_tool(_guard(name, getattr(task_tools, name)), name=name)
    for name in REVIEW_TOOL_NAMES:
        server.add_tool(_guard(name, getattr(review_tools, name)), name=name)
    for prompt in PROMPTS:
        server.prompt()(prompt)
    server.toolbox = toolbox
    return server


async def _stop_runs(toolbox: Toolbox) -> None:
    import asyncio

    live = [run for run in toolbox.runs.values() if not run.done]
    for run in live:
        run.stop(reason="the MCP server shut down")
    if live:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*(r.wait(raise_on_error=False) for r in live)), 10)


def serve(path: str | Path | None = None) -> None:
    """Open the workspace (``path`` or the one found from the working directory) and serve over stdio."""
    import sys

    from agentstack_lab.workspace import Workspace

    # Plain lines on stderr (the MCP host's server log): set before the SDK's own basicConfig, which would
    # otherwise install a Rich handler that wraps tracebacks into 80-column boxes.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ws = Workspace.open(path)
    try:
        _ = ws.memory  # open and migrate now: a broken database or embedder fails before the protocol starts
        build_server(ws).run("stdio")
    finally:
        ws.close()
