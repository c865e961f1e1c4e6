"""Our agent as a jupyter-ai 3.x persona: the entry point jupyter-ai's persona manager reads, and jupyter-ai's
own ACP client (``jupyter_ai_acp_client.default_acp_client.JaiAcpClient``) opening a session with it."""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest

pytest.importorskip("jupyter_ai_acp_client")

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona  # noqa: E402
from jupyter_ai_acp_client.default_acp_client import JaiAcpClient  # noqa: E402
from jupyter_ai_persona_manager import PersonaDefaults  # noqa: E402

from agentstack_lab.acp.jupyter_ai import AVATAR, EXECUTABLE, AgentstackLabPersona  # noqa: E402


def test_the_persona_is_registered_where_jupyter_ai_looks():
    (ours,) = [e for e in entry_points(group="jupyter_ai.personas") if e.value.startswith("agentstack_lab")]
    persona = ours.load()
    assert persona is AgentstackLabPersona and issubclass(persona, BaseAcpPersona)
    defaults = AgentstackLabPersona.defaults.fget(None)  # pyright: ignore[reportOptionalMemberAccess]
    assert isinstance(defaults, PersonaDefaults) and defaults.name == "agentstack-lab"
    assert AVATAR.is_file() and AVATAR.read_text().startswith("<svg")
    assert EXECUTABLE[-1] == "acp"


@pytest.mark.slow
async def test_jupyter_ais_own_acp_client_opens_a_session_in_the_chats_folder(workdir):
    with open(workdir.parent / "agent.stderr", "w") as err:
        proc = await asyncio.create_subprocess_exec(*EXECUTABLE, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=err,
                                                    limit=50 * 1024 * 1024)
        try:
            client = JaiAcpClient(agent_subprocess=proc, event_loop=asyncio.get_running_loop())
            caps = await asyncio.wait_for(client.get_agent_capabilities(), 60)
            assert caps.load_session is True
            chat = SimpleNamespace(get_chat_dir=lambda: str(workdir), get_mcp_settings=lambda: None,
                                   log=logging.getLogger("persona"))
            session = await asyncio.wait_for(client.create_session(chat), 60)   # pyright: ignore[reportArgumentType]
            assert session.session_id
            listed = await (await client.get_connection()).list_sessions(cwd=str(workdir))
            assert [x.session_id for x in listed.sessions] == [session.session_id]
            assert listed.sessions[0].title == "ACP · Jupyter AI ACP Client"   # jupyter-ai's client names itself
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), 30)
    assert (workdir / ".agentstack" / "agentstack.db").is_file()   # the chat's folder is the workspace
