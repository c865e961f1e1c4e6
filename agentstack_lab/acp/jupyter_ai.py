"""Our agent as a jupyter-ai 3.x persona: jupyter-ai's ACP client talking to ``agentstack-lab acp``.

jupyter-ai finds personas through the ``jupyter_ai.personas`` entry point group (as it finds its own Claude
Code, Codex and Goose personas); ours is registered in ``pyproject.toml``, so installing agentstack-lab beside
jupyter-ai (``pip install 'agentstack-lab[jupyter-ai]'``) is all it takes: ``@agentstack-lab`` in a chat.

The agent process is this Python's (``python -m agentstack_lab.cli acp``), so the persona needs no console
script on ``PATH`` and runs the agentstack-lab installed beside the Jupyter server. Each chat is an ACP
session whose ``cwd`` is the chat file's folder, which picks the workspace as ``%agent`` and the CLI do.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

from jupyter_ai_persona_manager import PersonaDefaults, PersonaRequirementsUnmet

try:
    from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
except ImportError:  # jupyter-ai without its ACP client: the persona manager lists why and goes on
    raise PersonaRequirementsUnmet("the agentstack-lab persona needs jupyter-ai's ACP client: "
                                   "pip install 'agentstack-lab[jupyter-ai]'") from None

__all__ = ["AgentstackLabPersona", "EXECUTABLE", "AVATAR"]

EXECUTABLE = [sys.executable, "-m", "agentstack_lab.cli", "acp"]
"""The agent process jupyter-ai starts (one per persona class, shared by its chats)."""
AVATAR = Path(__file__).with_name("static") / "agentstack-lab.svg"


class AgentstackLabPersona(BaseAcpPersona):  # pyright: ignore[reportUntypedBaseClass]
    """agentstack-lab in jupyter-ai's chat: clarifies, splits the work into subagents, asks before running code."""

    # jupyter-ai prepends a note on editing notebooks with its MCP tools to a session's first prompt; this agent
    # uses neither those tools nor file writes, and the note would become part of the run's prompt and titles
    NOTEBOOK_EDITING_GUIDANCE: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=list(EXECUTABLE), **kwargs)

    async def process_message(self, message: Any) -> None:
        """The message without the leading ``@agentstack-lab`` that routed it here: the run's prompt is the question."""
        body = getattr(message, "body", None)
        if isinstance(body, str):
            stripped = re.sub(rf"^\s*@{re.escape(self.defaults.name)}\b[:,]?\s*", "", body)
            if stripped and stripped != body:
                message = copy.copy(message)   # the chat keeps its message as written
                message.body = stripped
        await super().process_message(message)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="agentstack-lab",
            description="Recursive agents: subagents in parallel, Python after your approval, one memory.",
            avatar_path=str(AVATAR),
            system_prompt="unused (the agent's own prompts are in its workspace config)",
        )
