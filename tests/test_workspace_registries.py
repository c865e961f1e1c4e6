"""One Workspace owns the registries: a custom agent type registered once is visible to every surface.

Registered on the workspace object (``ws.agent_types.register``), it is usable by the engine, listed
by the MCP ``agent_types`` tool and accepted by ``%agent``. Shipped as a real entry-point plugin (a
``.dist-info`` on ``sys.path``), it also reaches the CLI and an ``agentstack-lab mcp`` subprocess.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.embeddings.hashing import HashEmbedder
from agentstack_lab.engine import AgentRun, RunOptions
from agentstack_lab.plugins import hookimpl, load_plugins, new_manager
from agentstack_lab.providers.registry import ProviderRegistry
from agentstack_lab.workspace import Workspace

POET = {"type": "poet", "name": "Poet", "description": "Writes verse.", "system_prompt": "You answer in verse."}
HEADLESS = RunOptions(interactive=False, subagents=False, auto_approve=True, executor="subprocess")
PACKAGE = Path(__file__).resolve().parents[1] / "agentstack_lab"


def _plugin_dir(tmp_path: Path) -> Path:
    """A real installed plugin: a module plus a ``.dist-info`` with an ``agentstack_lab`` entry point."""
    root = tmp_path / "site"
    (root / "poet_plugin-0.1.dist-info").mkdir(parents=True)
    (root / "poet_plugin.py").write_text(textwrap.dedent(f"""
        from agentstack_lab.plugins import hookimpl

        @hookimpl
        def register_agent_types(register):
            register({POET!r})
            register({{"type": "coder", "system_prompt": "hijack the core type"}})  # refused, with a warning
        """))
    (root / "poet_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: poet-plugin\n"
                                                                  "Version: 0.1\n")
    (root / "poet_plugin-0.1.dist-info" / "entry_points.txt").write_text("[agentstack_lab]\npoet = poet_plugin\n")
    return root


async def test_a_type_registered_on_the_workspace_is_used_by_the_engine_and_mcp(ws):
    from agentstack_lab.mcp.tools import Toolbox

    with pytest.raises(KeyError, match="unknown agent type 'poet'"):
        AgentRun("a poem?", workspace=ws, provider="scripted", agent_type="poet", options=HEADLESS)
    assert ws.agent_types.register(POET).name == "Poet"
    assert ws.agent_types is ws.agent_types  # built once per workspace

    run = AgentRun("a poem about tides?", workspace=ws, provider="scripted", agent_type="poet", options=HEADLESS)
    await run
    assert run.status == "completed" and run.tree["type"] == "poet"
    assert ws.db.query("SELECT type FROM agents WHERE id = ?", (run.id,))[0][0] == "poet"

    listed = {t["type"]: t for t in Toolbox(ws).agent_types()["types"]}
    assert listed["poet"] == {"type": "poet", "name": "Poet", "description": "Writes verse.", "capabilities": [],
                              "core": False}
    out = await Toolbox(ws).agent_run(prompt="another poem?", agent_type="poet", provider="scripted", wait=True)
    assert out["status"] == "completed" and out["tree"]["type"] == "poet"

    other = Workspace.open(ws.root, announce=False)  # another workspace object: its own registries
    try:
        assert not other.agent_types.has("poet")
    finally:
        other.close()


def test_a_type_registered_on_the_kernels_workspace_is_accepted_by_the_agent_magic():
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "agentstack_lab")
    try:
        with pytest.raises(UsageError, match="unknown agent type 'poet'"):
            shell.run_line_magic("agent", "--type poet hi")
        ws = shell.magics_manager.registry["AgentstackMagics"].workspace
        ws.agent_types.register(POET)
        run = shell.run_line_magic("agent", "--type poet --no-subagents --auto-approve a haiku about tides?")
        assert run.status == "completed" and run.tree["type"] == "poet" and run.workspace is ws
    finally:
        shell.run_line_magic("unload_ext", "agentstack_lab")
        InteractiveShell.clear_instance()


def test_an_injected_plugin_manager_feeds_all_three_registries_and_bad_registrations_are_named(tmp_path, caplog):
    class Echo:
        name = "echo"

        def __init__(self, config=None, **settings):
            self.settings = settings

        async def stream(self, request):  # pragma: no cover - never called
            yield

    class Plugin:
        @hookimpl
        def register_providers(self, register):
            register("echo", Echo)
            register("anthropic", Echo)  # a built-in name: refused, the built-in stays

        @hookimpl
        def register_embedders(self, register):
            register("tiny", lambda *, dimensions, config=None, **kw: HashEmbedder(dimensions=dimensions))

        @hookimpl
        def register_agent_types(self, register):
            register({"type": "translator", "system_prompt": "You translate."})
            register({"type": "coder", "system_prompt": "hijack"})

    pm = load_plugins(new_manager())
    pm.register(Plugin(), name="echo-plugin")
    with caplog.at_level(logging.WARNING):
        ws = Workspace.open(tmp_path, announce=False, plugins=pm)
        assert "echo" in ws.providers and ws.get_provider("echo", flavour="x").settings == {"flavour": "x"}
    try:
        assert type(ws.get_provider("anthropic", api_key="sk-test-0123456789")).__name__ == "AnthropicProvider"
        assert "tiny" in ws.embedders.names() and ws.embedders.build("tiny", dimensions=8).dimensions == 8
        assert ws.agent_types.has("translator") and "hijack" not in ws.agent_types.get("coder").system_prompt
        assert "'echo-plugin': skipped a provider: provider 'anthropic' is already registered" in caplog.text
        assert "'echo-plugin': skipped an agent type: agent type 'coder' is a core type" in caplog.text
        # the plugin's provider is the workspace's, not the process's
        assert "echo" not in ProviderRegistry.builtin()
        with Workspace.open(tmp_path / "b", announce=False) as other:
            assert "echo" not in other.providers
    finally:
        ws.close()


def test_an_installed_entry_point_plugin_reaches_the_cli(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_plugin_dir(tmp_path)))
    proj = tmp_path / "proj"
    proj.mkdir()
    result = CliRunner().invoke(app, ["-w", str(proj), "agent", "run", "--type", "poet", "--provider", "scripted",
                                      "--no-subagents", "--json", "a poem about tides?"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "completed" and out["tree"]["type"] == "poet"
    bad = CliRunner().invoke(app, ["-w", str(proj), "agent", "run", "--type", "sonneteer", "hi"])
    assert bad.exit_code != 0 and "unknown agent type 'sonneteer'" in bad.output and "poet" in bad.output


@pytest.mark.slow
async def test_an_installed_entry_point_plugin_reaches_the_mcp_server_process(tmp_path):
    pytest.importorskip("mcp")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    site = _plugin_dir(tmp_path)
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentstack_lab.cli", "mcp", "--workspace",
                                                                 str(proj)], cwd=str(proj), env=env)
    with open(proj / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            types = (await s.call_tool("agent_types", {})).structured_content["types"]
            assert "poet" in {t["type"] for t in types}
            res = await s.call_tool("agent_run", {"prompt": "a poem?", "agent_type": "poet", "provider": "scripted",
                                                  "subagents": False, "wait": True})
            assert not res.is_error and res.structured_content["tree"]["type"] == "poet"


@pytest.mark.slow
def test_registries_and_plugins_form_no_import_cycle_and_keep_no_process_state():
    """The registries never import the plugin machinery; plugins.py holds no module-level manager."""
    def imports(rel: str) -> set[str]:
        tree = ast.parse((PACKAGE / rel).read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        return found

    for rel in ("agents/registry.py", "providers/registry.py", "embeddings/registry.py", "hookspecs.py"):
        assert not {m for m in imports(rel) if m in ("agentstack_lab.plugins", "agentstack_lab.default_plugins",
                                                     "agentstack_lab.workspace")}, rel
    assert "agentstack_lab.plugins" not in imports("default_plugins.py")
    bound = {t.id for n in ast.parse((PACKAGE / "plugins.py").read_text()).body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    assert bound == {"__all__", "log", "ENTRY_POINT_GROUP"}  # no manager or cache kept by the module
    probes = subprocess.run(["grep", "-rnE", r"getattr\((self\.)?(ws|workspace|run\.workspace|self\.workspace)\b",
                             str(PACKAGE)], capture_output=True, text=True).stdout
    assert probes == ""
