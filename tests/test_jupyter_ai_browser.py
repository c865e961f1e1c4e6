"""Our persona in jupyter-ai 3.2's chat, in a real browser: the answer streams, the approval is in the chat,
approving it runs the code, and the same run is in our Agents panel with its tree.

jupyter-ai 3.2 pins ``mcp < 2`` while our MCP server needs ``mcp >= 2.3``, so JupyterLab + jupyter-ai from PyPI
run from a venv of their own, ``.venv-jupyter-ai`` (``make jupyter-ai``, part of ``make test``), with
agentstack-lab installed in it from this checkout. Debian's ``/usr/bin/chromium`` driven by Playwright.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from tests.browser_helpers import REPO, browser_page, jupyter_server, needs_chromium

JAI = REPO / ".venv-jupyter-ai" / "bin" / "python"
PROMPT = "How are sales trending in df?"   # the offline demo: three subagents, and it asks to run Python

pytestmark = [
    pytest.mark.slow,
    needs_chromium,
    pytest.mark.skipif(not JAI.exists(), reason="no .venv-jupyter-ai with jupyter-ai 3.2 (make jupyter-ai)"),
]


def _get(base: str, token: str, path: str):
    with urllib.request.urlopen(f"{base}{path}?token={token}", timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture
def lab(tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    with jupyter_server(tmp_path, root, python=str(JAI), extra_args=["--AgentstackExtension.poll_interval=0.05"],
                        ready_path="/agentstack/api/health/live", timeout=120,
                        env={"PATH": f"{JAI.parent}:{os.environ['PATH']}"},
                        env_drop=["AGENTSTACK_CONFIG", "PYTHONPATH", "VIRTUAL_ENV"],
                        stop_timeout=20) as (base, token, _log):
        yield base, token, root, tmp_path


def test_a_chat_message_to_our_persona_streams_asks_in_the_chat_and_shows_in_our_panel(lab):
    from playwright.sync_api import expect

    base, token, root, tmp_path = lab
    with browser_page(tmp_path / "chromium-profile", f"{base}/lab?token={token}",
                      viewport={"width": 1400, "height": 1000}, default_timeout=60_000,
                      expect_timeout=120_000,   # the persona starts its agent process on first use
                      ready_js="window.jupyterapp?.commands.hasCommand('jupyterlab-chat:create')"
                               " && window.agentstackPanel", check_errors=False) as page:
        page.evaluate("window.jupyterapp.commands.execute('jupyterlab-chat:create', {name: 'sales.chat'})")
        page.evaluate("window.jupyterapp.commands.execute('jupyterlab-chat:open', {filepath: 'sales.chat'})")
        box = page.locator(".jp-chat-input-container textarea").first
        box.click()
        box.fill(f"@agentstack-lab {PROMPT}")
        box.press("Enter")

        chat = page.locator(".jp-chat-messages-container, .jp-chat-messages").first
        # the subagents stream in as tool calls, then the approval is asked in the chat
        # titled by the prompt as typed (jupyter-ai's note on notebook tools is not prepended to it)
        expect(chat.get_by_text("Subagent analyst: Which analyses of `df` would answer: How are sales",  # no @mention
                                exact=False)).to_be_visible()
        run_it = chat.get_by_role("button", name="Run it", exact=True)
        expect(run_it).to_be_visible()
        for who in ("researcher", "reviewer"):
            expect(chat.get_by_text(f"Subagent {who}", exact=False)).to_be_visible()
        # the same run, in our workspace, waiting on the decision the chat shows
        runs = _get(base, token, "/agentstack/api/runs")["runs"]
        (run,) = [r for r in runs if str(r.get("origin", "")).startswith("acp:")]
        assert run["origin"] == "acp:Jupyter AI ACP Client"
        run_it.click()
        # approving in the chat ran the code (in the agent's subprocess: no `df` there), and the answer came
        expect(chat.get_by_text("NameError", exact=False).first).to_be_attached()
        expect(chat.get_by_text("offline scripted demo", exact=False).last).to_be_visible()
        deadline = time.monotonic() + 120
        while (tree := _get(base, token, f"/agentstack/api/runs/{run['id']}")["tree"])["status"] != "completed":
            assert time.monotonic() < deadline, tree["status"]
            time.sleep(0.5)
        assert len(tree["children"]) == 3
        decisions = _get(base, token, "/agentstack/api/decisions")["decisions"]
        # our Agents panel lists the run with the host's name, and shows its tree
        page.evaluate("window.jupyterapp.shell.activateById('agentstack-agents')")
        panel = page.locator("#agentstack-agents")
        row = panel.locator(".agentstack-run").filter(has_text="ACP · Jupyter AI ACP Client").first
        expect(row).to_be_visible()
        row.click()
        view = panel.locator(".agentstack-tree-view")
        for who in ("analyst", "researcher", "reviewer"):
            expect(view).to_contain_text(who)
        page.screenshot(path=str(tmp_path / "jupyter-ai.png"))
    assert not [d for d in decisions if d.get("state") == "pending"]
    log = (tmp_path / "lab.log").read_text()
    assert "Loaded AI persona class 'AgentstackLabPersona'" in log
