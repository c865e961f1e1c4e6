"""Notebook 7 in a real browser: the quickstart runs there; the cost in USD shows in the cell and the Agents panel.

Issue 27 items 19 and 16. One ``jupyter notebook`` server (Notebook 7: a loopback port, a token, a
temporary root folder holding a copy of ``notebooks/quickstart.ipynb``) serves the lab extension
exactly as committed in ``labextension/dist`` (first on ``JUPYTER_PATH``); Debian's
``/usr/bin/chromium``, driven by Playwright (never a downloaded browser), opens the notebook in
Notebook 7's own UI and runs every cell from its Run menu. The quickstart is offline (the
``scripted`` demo model), so no model server is needed. The root's ``agentstack.config.json``
prices the scripted model (``prices.scripted."*"``): the trees must render as live widgets with every
agent completed, the answer must appear in the result cell, and the tree's header must show the run's
cost ("cost ~$…": the scripted model's tokens are estimates) worked out from that price. The same
server serves JupyterLab at ``/lab``, where the Agents panel must list the run with the same cost and
show it on the run's tree.

``make test`` installs chromium (``make browser``) and Notebook 7 (the ``test`` extra); elsewhere this skips.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_notebook_browser import CHROMIUM, CHROMIUM_ARGS, _free_port

REPO = Path(__file__).resolve().parent.parent
BUILT = REPO / "labextension" / "dist"
PRICE = {"input": 3, "output": 15}   # USD per million tokens for the scripted model, set by the root's config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium "
                       "(`make browser` installs it as root with apt-get)"),
    pytest.mark.skipif(shutil.which("jupyter-notebook", path=str(Path(sys.executable).parent)) is None,
                       reason="Notebook 7 is not installed (the test extra installs it: pip install -e '.[test]')"),
    pytest.mark.skipif(not (BUILT / "package.json").exists(), reason="labextension/dist is not built (make labext)"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jupyter notebook`` on loopback serving a copy of the quickstart, with a config that prices its model."""
    tmp_path = tmp_path_factory.mktemp("notebook7")
    root = tmp_path / "nb"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", root)
    (root / "agentstack.config.json").write_text(json.dumps({"prices": {"scripted": {"*": PRICE}}}))
    data = tmp_path / "jupyter-data" / "labextensions"
    data.mkdir(parents=True)
    (data / "agentstack-lab").symlink_to(BUILT)  # the committed build, ahead of any installed copy
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, HOME=str(tmp_path / "home"), JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"), JUPYTER_PLATFORM_DIRS="1",
               JUPYTER_PATH=str(tmp_path / "jupyter-data"), TMPDIR=str(tmp_path))  # what it and its kernels leave goes
    env.pop("AGENTSTACK_CONFIG", None)
    log = (tmp_path / "notebook.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--JupyterNotebookApp.expose_app_in_browser=True", "--LabApp.expose_app_in_browser=True",
         f"--LabApp.user_settings_dir={tmp_path / 'settings'}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--AgentstackExtension.poll_interval=0.05"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90  # a loaded 2-core machine starts the server slowly
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/agentstack/api/health/live?token={token}",
                                       timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("Notebook 7 did not start:\n" + (tmp_path / "notebook.log").read_text()[-3000:])
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", token, root, tmp_path
    finally:
        proc.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import expect, sync_playwright

    _base, _token, _root, tmp_path = server
    with pytest.MonkeyPatch.context() as mp, sync_playwright() as pw:
        mp.setenv("TMPDIR", str(tmp_path))  # Playwright's and chromium's scratch folders, removed with tmp_path
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 900})
        context.set_default_timeout(30_000)
        expect.set_options(timeout=90_000)  # a kernel start and a whole quickstart on a loaded machine
        try:
            yield context
        finally:
            context.close()


# Notebook 7.6's own bundle and the ipywidgets manager, as this machine serves them: each may throw at page
# load, with every third-party extension disabled too ("reading 'schema'" from Notebook's shortcuts
# settings handler; "reading 'widgets'" when the widget manager asks for the shell's current widget early)
THEIRS = ("/static/notebook/", "/lab/extensions/@jupyter-widgets/jupyterlab-manager/")


def _notebook_core_only(error: str) -> bool:
    """A page error raised wholly inside Notebook 7's or the ipywidgets manager's code, none of ours."""
    frames = [line for line in error.splitlines()[1:] if line.strip().startswith("at ") and "http" in line]
    return bool(frames) and all(any(t in f for t in THEIRS) for f in frames)


def _run_cost(root: Path) -> str:
    """The quickstart run's cost as the package prices it from the workspace database and the root's config."""
    from agentstack_lab.engine.activity import run_costs
    from agentstack_lab.providers.prices import PriceTable
    from agentstack_lab.store.connection import SQLiteDatabase

    db = SQLiteDatabase(root / ".agentstack" / "agentstack.db")
    try:
        run_ids = [r[0] for r in db.query("SELECT id FROM agents WHERE parent_id IS NULL")]
        assert len(run_ids) == 1, run_ids
        return run_costs(db, run_ids, PriceTable({"scripted": {"*": PRICE}}))[run_ids[0]].text
    finally:
        db.close()


def test_quickstart_runs_in_notebook7_with_trees_answers_and_cost(server, browser):
    from playwright.sync_api import expect

    base, token, root, _tmp = server
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc) + "\n" + str(exc.stack)))
    page.goto(f"{base}/notebooks/quickstart.ipynb?token={token}")
    # Notebook 7's own shell (not JupyterLab's), with its kernel up
    page.wait_for_function("window.jupyterapp?.shell?.currentWidget?.sessionContext")
    assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready; }")
    # Run ▸ Run All Cells, from the menu bar
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

    # the trees render as live widgets: the root and the demo's three subagents, all completed
    tree = page.locator(".agentstack-tree").first
    expect(tree).to_be_visible()
    expect(tree.locator(".agentstack-node")).to_have_count(4)
    expect(tree.locator(".agentstack-badge", has_text="completed")).to_have_count(4)
    # the answers appear: the result cell prints the run's answer, and the widget shows it too
    outputs = page.locator(".jp-OutputArea-output")
    expect(outputs.filter(has_text="[offline scripted demo]").first).to_be_visible()
    expect(tree).to_contain_text("Final answer")
    expect(outputs.filter(has_text="q2-sales").first).to_be_visible()  # the memory cells ran after it
    # the cell shows the run's cost beside its tokens, priced by the config (estimated tokens: "~$")
    cost = _run_cost(root)
    assert cost.startswith("~$"), cost
    expect(tree.locator(".agentstack-meta").first).to_contain_text(f"tokens (estimated, subtree) · cost {cost} · ")
    assert not [e for e in errors if not _notebook_core_only(e)], errors
    page.close()


def test_agents_panel_shows_the_run_cost(server, browser):
    """JupyterLab on the same server: the run list and the run's tree say what the quickstart run cost."""
    from playwright.sync_api import expect

    base, token, root, _tmp = server
    cost = _run_cost(root)   # the quickstart of the test above ran in this workspace
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base}/lab?token={token}")
    page.wait_for_function("window.jupyterapp?.shell && window.agentstackPanel")
    # once the layout is restored (it would reopen the file browser over the panel)
    page.evaluate("async () => { await window.jupyterapp.restored;"
                  " window.jupyterapp.shell.activateById('agentstack-agents'); }")
    panel = page.locator("#agentstack-agents")
    row = panel.locator(".agentstack-run").filter(has_text="How are sales trending")
    expect(row).to_have_count(1)
    expect(row.locator(".agentstack-run-meta")).to_contain_text(f"tokens · cost {cost} · 4 agents")
    row.locator(".agentstack-run-prompt").click()  # not the row's centre: its notebook link opens the notebook
    root_node = panel.locator(".agentstack-tree-view > .agentstack-snapshot-node")  # the run view (runview.ts)
    expect(root_node).to_have_count(1)
    expect(root_node.locator(".agentstack-cost").first).to_have_text(f" · cost {cost}")
    # and each subagent's own figure
    expect(root_node.locator(".agentstack-snapshot-node .agentstack-cost")).to_have_count(3)
    assert not errors, errors
    page.close()
