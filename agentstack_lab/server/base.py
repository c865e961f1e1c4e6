"""What every agentstack handler shares: the server state, JSON replies, one-line user errors.

Its own module so ``handlers`` (the run/memory/health routes) and ``control`` (decisions, tasks,
agents) both build on it without importing each other: before, ``control`` imported ``_Base`` from
``handlers`` while ``handlers`` imported ``control`` for the runs' extras, a runtime import cycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_server.base.handlers import APIHandler

from agentstack_lab.errors import AgentstackError, NotFoundError, UsageError
from agentstack_lab.events import camel_keys
from agentstack_lab.redaction import public_message
from agentstack_lab.server.hub import EventHub

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = ["PREFIX", "BaseHandler", "ServerState", "loads_json"]

PREFIX = "agentstack/api"


@dataclass(kw_only=True)
class ServerState:
    """What the handlers share: the workspace, the event hub and the runs this server started."""

    workspace: Workspace
    hub: EventHub
    provider: str | None = None
    root_dir: str | None = None   # the Jupyter server's root folder: paths the panel opens are relative to it
    runs: dict[str, Any] = field(default_factory=dict)
    # database reads and writes of handlers run here, never on the server's event loop
    pool: concurrent.futures.ThreadPoolExecutor = field(default_factory=lambda: concurrent.futures.ThreadPoolExecutor(
        max_workers=4, thread_name_prefix="agentstack-db"))

    async def off_loop(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in :attr:`pool`: a slow query never blocks other requests (``health/live``)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def start_run(self, prompt: str, agent_type: str | None = None, options: dict[str, Any] | None = None) -> Any:
        from agentstack_lab.engine import AgentRun
        from agentstack_lab.engine.options import network_options, run_options

        if not isinstance(prompt, str) or not prompt.strip():
            raise UsageError("start-agent needs a non-empty prompt")
        if agent_type is not None and not isinstance(agent_type, str):
            raise UsageError(f"the agent type must be a string, got {type(agent_type).__name__}")
        if options is not None and not isinstance(options, dict):
            raise UsageError(f"options must be an object, got {type(options).__name__}")
        # a network client sets only the documented subset; the rest is the workspace config's
        opts = run_options(self.workspace.config, surface="lab",
                           given=network_options(options, self.workspace.root))
        run = AgentRun(prompt, workspace=self.workspace, provider=self.provider, agent_type=agent_type,
                       options=opts, origin="lab")
        self.runs[run.id] = run.start()
        return run

    def local_run_of(self, agent_id: str) -> Any | None:
        for run in self.runs.values():
            if agent_id in run.agents:
                return run
        return None

    async def close(self) -> None:
        await self.hub.stop()
        for run in list(self.runs.values()):
            if not run.done:
                run.stop(reason="the Jupyter server stopped")
        for run in list(self.runs.values()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(run.wait(raise_on_error=False), 5)
        self.pool.shutdown(wait=True)
        self.workspace.close()


def person_name(handler: Any) -> str:
    """Who answers through ``handler``: the Jupyter user's name, stable across requests.

    Jupyter's default identity provider makes up a new "Anonymous <moon>" user for every request that
    carries the server's token without a cookie; that token identifies one person, the one who started
    the server, so their login name is used. Any other provider's user (JupyterHub, a custom one) is
    named by its ``display_name``, ``name`` or ``username``.
    """
    user = handler.current_user
    if user is None:
        return "lab"
    provider = getattr(handler, "identity_provider", None)
    from jupyter_server.auth.identity import IdentityProvider

    made_up = str(getattr(user, "name", "") or "").startswith("Anonymous ")
    invented = getattr(type(provider), "generate_anonymous_user", None) is IdentityProvider.generate_anonymous_user
    if made_up and invented:  # the name came from Jupyter's own generator, not from a real login
        import getpass

        with contextlib.suppress(Exception):
            return getpass.getuser()
    for attr in ("display_name", "name", "username"):
        value = getattr(user, attr, None)
        if isinstance(value, str) and value.strip():
            return value
    return "lab"


MAX_JSON_DEPTH = 64


def loads_json(raw: str | bytes, *, what: str) -> Any:
    """``raw`` parsed, or one line saying why not: not JSON, or nested deeper than :data:`MAX_JSON_DEPTH`.

    A value deeper than that is refused here, so nothing that walks it afterwards (option checks,
    ``camel_keys``, the event log's ``json.dumps``) can hit Python's recursion limit.
    """
    try:
        data = json.loads(raw)
    except RecursionError:
        raise UsageError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise UsageError(f"{what} is not JSON ({str(exc).splitlines()[0][:120]})") from None
    if _too_deep(data):
        raise UsageError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists/objects deeper than :data:`MAX_JSON_DEPTH` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_JSON_DEPTH:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


class BaseHandler(APIHandler):
    """JSON in and out; a user error is one line with 400/404, anything else keeps Jupyter's handling."""

    @property
    def state(self) -> ServerState:
        return self.settings["agentstack"]

    @property
    def db(self) -> Any:
        return self.state.workspace.db

    def reply(self, value: Any, status: int = 200) -> None:
        """Send ``value`` as JSON, keys camel-cased by :func:`agentstack_lab.events.camel_keys` (data passes as is)."""
        self.set_status(status)
        self.finish(json.dumps(camel_keys(value), default=str))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, AgentstackError):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": public_message(exc)}))
            return
        super().write_error(status_code, **kwargs)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, AgentstackError):  # a user error: one line, no traceback in the log
            self.send_error(404 if isinstance(e, NotFoundError | KeyError) else 400, exc_info=(type(e), e, None))
            return
        super()._handle_request_exception(e)

    def body(self) -> dict[str, Any]:
        data = loads_json(self.request.body or b"{}", what="the request body")
        if not isinstance(data, dict):
            raise UsageError("the request body must be a JSON object")
        return data

    def int_arg(self, name: str, default: int, *, lo: int = 0, hi: int = 10**9) -> int:
        raw = self.get_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise UsageError(f"{name} must be an integer, got {raw!r}") from None
        if not lo <= value <= hi:
            raise UsageError(f"{name} must be between {lo} and {hi}, got {value}")
        return value
