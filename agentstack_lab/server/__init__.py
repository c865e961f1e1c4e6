"""The Jupyter server extension: REST and a WebSocket over the workspace, behind Jupyter's auth.

Enabled on install (``labextension/jupyter-config/``, installed under ``etc/jupyter``, puts ``agentstack_lab.server`` into
``jpserver_extensions``); ``jupyter server extension list`` shows it. Nothing is imported from
Jupyter until the server asks for the extension point.
"""

from __future__ import annotations

from typing import Any

__all__ = ["_jupyter_server_extension_points"]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from agentstack_lab.server.app import AgentstackExtension

    return [{"module": "agentstack_lab.server", "app": AgentstackExtension}]
