"""The ``agentstack_lab`` Jupyter server extension application.

Settings are traitlets (``c.AgentstackExtension.workspace = "/path"`` in ``jupyter_server_config.py``
or ``--AgentstackExtension.workspace=...``). The workspace defaults to the server's root directory's
workspace (``.agentstack/agentstack.db`` there, or where its ``agentstack.config.json`` says).
Background work (the event-log tail that feeds the WebSocket) starts once the server's loop runs,
is confirmed in the log, and is stopped — with the runs this server started — on shutdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Float, Unicode

from agentstack_lab.server.base import ServerState
from agentstack_lab.server.handlers import routes
from agentstack_lab.server.hub import EventHub

__all__ = ["AgentstackExtension"]


class AgentstackExtension(ExtensionApp):
    """Serves the workspace's runs, decisions, tasks, memory, health and metrics."""

    name = "agentstack_lab"

    workspace = Unicode("", config=True,
                        help="Workspace folder (or .db file). Default: the one a kernel started in the server's"
                             " root directory finds (agentstack.config.json walking up, else the nearest"
                             " .agentstack/ above, else the root directory).")
    poll_interval = Float(0.05, config=True,
                          help="Seconds between reads of the event log for WebSocket clients (coalescing window).")
    provider = Unicode("", config=True, help="Provider for runs started from JupyterLab (default: the config's).")

    def initialize_settings(self) -> None:
        from agentstack_lab.workspace import Workspace, root_for

        assert self.serverapp is not None   # the server links its extensions before their settings
        root = Path(self.workspace).expanduser() if self.workspace else \
            root_for(Path(self.serverapp.root_dir).expanduser())
        ws = Workspace.open(root, announce=False)
        ws.db  # noqa: B018 - open and migrate now: a broken database is a start-up error, not a 500 later
        hub = EventHub(ws.db, poll_interval=self.poll_interval)
        self.state = ServerState(workspace=ws, hub=hub, provider=self.provider or None,
                                 root_dir=str(self.serverapp.root_dir))
        self.settings["agentstack"] = self.state
        self.log.info("agentstack-lab: serving workspace %s", ws.db_path)

    def initialize_handlers(self) -> None:
        self.handlers.extend(routes())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        self.state.hub.start()
        await self.state.hub.poll_once()   # confirm the log is readable before saying so
        self.log.info("agentstack-lab: following the event log from seq %d", self.state.hub.seq)

    async def stop_extension(self) -> None:
        state: ServerState | None = getattr(self, "state", None)
        if state is None:
            return
        await state.close()
        self.log.info("agentstack-lab: stopped")
