"""The lab extension in a real browser: the Agents panel, its toasts and decisions, saved trees without a kernel.

One JupyterLab server for the module (loopback port, token, temporary root whose ``.agentstack`` is the
workspace), serving the lab extension exactly as committed in ``labextension/dist`` (put first on
``JUPYTER_PATH``); Debian's ``/usr/bin/chromium`` driven by Playwright (never a downloaded browser).

- A headless ``agentstack-lab agent run … --on-query wait`` started from a terminal (another OS
  process) after the page loaded: a toast says an agent needs you; its "Show" opens the panel on
  the run, which lists it with origin ``terminal`` and "1 waiting for you"; Approve in the panel lets
  that process finish (its approved code ran), and a toast says the run completed.
- Light and dark theme: every badge and text of the panel is ≥ 4.5:1 against what is behind it,
  computed in the browser from the rendered styles; screenshots go to ``docs/images/``
  with ``UPDATE_SCREENSHOTS=1``.
- A notebook whose ``%agent`` ran in the background and with ``--wait`` is saved, closed, its kernel
  shut down, and reopened: each output shows its final tree, and no "model not found".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.browser_helpers import CANCELED_FUTURE, browser_page, jupyter_server, needs_built, needs_chromium
from tests.notebook_helpers import ASKING_PROVIDER
from tests.test_notebook_browser import CONTRAST_JS, _set_theme, docs_dir

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]
ASKS_FOR_CODE = "how are sales trending in df?"   # the scripted provider wants to run Python for this one
PANEL_TEXT = [".agentstack-badge", ".agentstack-muted", ".agentstack-run-prompt", ".agentstack-decision-prompt",
              "h2", "h3", ".agentstack-code-view .cm-line"]

pytestmark = [pytest.mark.slow, needs_chromium, needs_built]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("labpanel")
    root = tmp_path / "lab"
    root.mkdir()
    nb = new_notebook(cells=[
        new_code_cell("%load_ext agentstack_lab\n" + ASKING_PROVIDER),
        new_code_cell("%agent --auto-approve --provider @asking --no-subagents --answer clarification=2023 "
                      "Which year in the background?"),
        new_code_cell("%agent --wait --auto-approve --provider @asking --no-subagents --answer clarification=2022 "
                      "Which year with wait?")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, root / "saved.ipynb")
    # a loaded 2-core machine starts JupyterLab slowly
    with jupyter_server(tmp_path, root, extra_args=["--AgentstackExtension.poll_interval=0.05"],
                        ready_path="/agentstack/api/health/live", timeout=90,
                        env_drop=["AGENTSTACK_CONFIG"]) as (base, token, _log):
        yield base, token, root, tmp_path


@pytest.fixture(scope="module")
def page(lab):
    base, token, _root, tmp_path = lab
    with browser_page(tmp_path / "chromium-profile", f"{base}/lab?token={token}",
                      viewport={"width": 1200, "height": 900}, default_timeout=30_000,
                      expect_timeout=60_000,  # the terminal run starts a Python process (a few seconds under load)
                      ready_js="window.jupyterapp?.shell && window.agentstackPanel",
                      allowed_errors=[CANCELED_FUTURE]) as page:  # notebooks a test opened close with the browser
        yield page


def _panel_contrast(page, where: str) -> list[dict]:
    found = page.evaluate(CONTRAST_JS, [f".agentstack-panel {s}" for s in PANEL_TEXT])
    low = [f for f in found if f["ratio"] < 4.5]
    assert not low, (where, low)
    assert any(".agentstack-badge" in f["sel"] for f in found) and any(".agentstack-muted" in f["sel"]
                                                                       for f in found), (where, found)
    return found


def test_panel_approves_a_terminal_run_and_toasts(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    page.wait_for_function("document.querySelector('#agentstack-agents') !== null")
    # a headless run of another process, started after the page loaded: it waits for any surface
    proc = subprocess.Popen([*CLI, "-w", str(root), "agent", "run", ASKS_FOR_CODE, "--no-subagents",
                             "--on-query", "wait", "--decision-timeout", "3m"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root)
    try:
        toast = page.locator(".Toastify__toast").filter(has_text="An agent needs you (approval)")
        expect(toast).to_be_visible()
        toast.get_by_role("button", name="Show").click()
        panel = page.locator("#agentstack-agents")
        expect(panel).to_be_visible()
        run = panel.locator(".agentstack-run.selected")
        expect(run).to_contain_text(ASKS_FOR_CODE)
        expect(run).to_contain_text("terminal")
        expect(run.locator(".agentstack-waiting")).to_contain_text("1 waiting for you")
        card = panel.locator(".agentstack-decision")
        expect(card).to_have_count(1)
        expect(card.locator(".agentstack-code-view .cm-editor")).to_contain_text("df")
        expect(panel.locator(".agentstack-tree-view")).to_contain_text("waiting for you")  # the run's tree

        _set_theme(page, "JupyterLab Light")
        _panel_contrast(page, "light, decision pending")
        docs_dir().mkdir(parents=True, exist_ok=True)
        panel.screenshot(path=str(docs_dir() / "lab-panel-light.png"), animations="disabled")
        _set_theme(page, "JupyterLab Dark")
        _panel_contrast(page, "dark, decision pending")
        panel.screenshot(path=str(docs_dir() / "lab-panel-dark.png"), animations="disabled")
        _set_theme(page, "JupyterLab Light")

        card.locator("button.agentstack-approve").click()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "NameError: name 'df' is not defined" in out  # the code approved in the panel ran over there
    expect(page.locator(".Toastify__toast").filter(has_text="Agent run completed")).to_be_visible()
    expect(panel.locator(".agentstack-decision")).to_have_count(0)
    expect(panel.locator(".agentstack-run.selected .agentstack-badge").first).to_have_text("completed")
    for shot in ("lab-panel-light.png", "lab-panel-dark.png"):
        assert (docs_dir() / shot).stat().st_size < 200_000


DRY_RUN = """
import asyncio, sys
from agentstack_lab.config import Config
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.workspace import Workspace

async def main():
    config = Config.from_dict({"approval": {"dry_run": True}})
    with Workspace.open(sys.argv[1], config=config, announce=False) as ws:
        ns = {}
        run = AgentRun(sys.argv[2], workspace=ws, executor=LiveKernelExecutor(namespace=ns),
                       options={"subagents": False, "on_query": "wait",
                                                            "answers": {"clarification": "2024"}})
        await run
        print("status", run.status)

asyncio.run(main())
"""


def test_panel_shows_the_dry_run_and_always_allows_for_the_session(lab, page):
    """A live-executor run with approval.dry_run: the panel's card shows the sandboxed dry run's report, and
    "Always allow code like this" approves the call and saves a session rule the person saw first."""
    import json

    from playwright.sync_api import expect

    _base, _token, root, tmp = lab
    script = tmp / "dry_run.py"
    script.write_text(DRY_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(root), ASKS_FOR_CODE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root)
    try:
        panel = page.locator("#agentstack-agents")
        page.evaluate("window.jupyterapp.shell.activateById('agentstack-agents')")
        card = panel.locator(".agentstack-decision").filter(has=page.locator(".agentstack-dry-run"))
        expect(card).to_have_count(1)
        dry = card.locator(".agentstack-dry-run")
        expect(dry).to_contain_text("Dry run in a sandboxed fork of the kernel")
        expect(dry).to_contain_text("Protections")
        expect(card.locator("button.agentstack-always-session")).to_have_count(0)   # not before the preview
        card.locator("button.agentstack-always-open").click()
        preview = card.locator(".agentstack-always")
        expect(preview).to_contain_text("never lifts a built-in deny")
        shown = preview.locator("b").inner_text()   # what the rule will match, before the person confirms
        card.locator("button.agentstack-always-session").click()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "status completed" in out, err
    listed = subprocess.run([*CLI, "-w", str(root), "approval", "rules", "--json"], capture_output=True, text=True,
                            timeout=60)
    rules = json.loads(listed.stdout)
    assert [r["scope"] for r in rules] == ["session"] and (rules[0].get("session_id") or rules[0].get("sessionId")), \
        listed.stdout
    assert rules[0]["description"] == shown


FOLLOW_UP = """
import asyncio, sys
from agentstack_lab.engine import AgentRun
from agentstack_lab.workspace import Workspace

async def main():
    with Workspace.open(sys.argv[1], announce=False) as ws:
        first = AgentRun("how many rows has the <sales> table?", workspace=ws, options={"subagents": False})
        await first
        await first.ask("and how many columns?")

asyncio.run(main())
"""


def test_panel_links_a_follow_up_to_the_question_it_continues(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    subprocess.run([sys.executable, "-c", FOLLOW_UP, str(root)], check=True, timeout=120, cwd=root)
    page.evaluate("() => window.jupyterapp.shell.activateById('agentstack-agents')")
    panel = page.locator("#agentstack-agents")
    row = panel.locator(".agentstack-run").filter(has_text="and how many columns?")
    expect(row).to_have_count(1)
    expect(row.locator(".agentstack-follow-up")).to_have_text("↪ follow-up to “how many rows has the <sales> table?”")
    first = panel.locator(".agentstack-run", has=page.locator(".agentstack-run-prompt", has_text="how many rows"))
    expect(first).to_have_count(1)
    expect(first.locator(".agentstack-follow-up")).to_have_count(0)


def test_saved_notebook_reopened_without_its_kernel_shows_final_trees(lab, page):
    from playwright.sync_api import expect

    page.evaluate("async () => { window.__nb = await window.jupyterapp.commands.execute('docmanager:open',"
                  " {path: 'saved.ipynb'}); await window.__nb.sessionContext.ready; }")
    page.wait_for_function("window.__nb.sessionContext.session?.kernel", timeout=90_000)
    page.evaluate("async () => { window.jupyterapp.shell.activateById(window.__nb.id);"
                  " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    # both runs end; the extension finalises the snapshot of the background one's output from the server
    page.wait_for_function("""() => {
        const nb = window.__nb.content.model;
        let final = 0;
        for (let i = 0; i < nb.cells.length; i++) { const c = nb.cells.get(i);
          if (c.type !== 'code') continue;
          for (let j = 0; j < c.outputs.length; j++) {
            const s = c.outputs.get(j).data['application/vnd.agentstack.tree+json'];
            if (s && s.final && s.roots[0].status === 'completed') final++; } }
        return final === 2; }""", timeout=90_000)
    # and the kernel rewrote every representation of both outputs with the final tree (display id update)
    page.wait_for_function("""() => {
        const nb = window.__nb.content.model;
        let final = 0;
        for (let i = 0; i < nb.cells.length; i++) { const c = nb.cells.get(i);
          if (c.type !== 'code') continue;
          for (let j = 0; j < c.outputs.length; j++) { const d = c.outputs.get(j).data;
            if (!d['application/vnd.agentstack.tree+json']) continue;
            const md = d['text/markdown'] || '', html = d['text/html'] || '';
            if (md.includes('[completed]') && !md.includes('[pending]') && html.includes('s-completed')
                && !html.includes('s-pending') && d['application/vnd.jupyter.widget-view+json']) final++; } }
        return final === 2; }""", timeout=90_000)
    live = page.locator(".agentstack-tree")
    expect(live).to_have_count(2)  # with the kernel, the live widgets are the view
    page.evaluate("async () => { const w = window.__nb;"
                  " await w.context.save(); await w.sessionContext.shutdown(); w.dispose(); }")
    page.evaluate("async () => { await window.jupyterapp.serviceManager.sessions.refreshRunning(); }")
    page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:open', {path: 'saved.ipynb'}); }")
    saved = page.locator(".agentstack-snapshot .agentstack-snapshot-node:visible")
    expect(saved).to_have_count(2)
    expect(saved.nth(0)).to_contain_text("completed")
    expect(saved.nth(0)).to_contain_text("2024")
    expect(saved.nth(0)).not_to_contain_text(" 0 tokens")  # usage came along with the final tree
    expect(page.locator(".agentstack-snapshot-head:visible").first).to_have_text("Agent run (saved tree)")
    page.wait_for_timeout(3500)  # past the renderer's wait for a widget manager
    expect(page.get_by_text("model not found")).to_have_count(0)
    expect(saved).to_have_count(2)
