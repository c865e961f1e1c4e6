"""`make lab` in a real browser (issue 27, item 15): JupyterLab's own Terminal reaches the Agents panel.

Its own module: the module-scoped page of ``tests/test_lab_panel_browser.py``'s harness keeps a sync Playwright
open for its module, and a second one cannot start beside it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests import test_lab_panel_browser as harness
from tests.test_lab_panel_controls_browser import _open_panel
from tests.test_notebook_browser import CHROMIUM, CHROMIUM_ARGS, _free_port

pytestmark = [*harness.pytestmark,
              pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")]


def test_make_lab_terminal_runs_reach_the_panel(tmp_path):
    """`make lab` (its recipe, with this venv as BIN): JupyterLab's own Terminal starts in notebooks/ with the
    venv's ``agentstack-lab`` on PATH, and a run typed there is listed in the panel, which names that workspace."""
    from playwright.sync_api import expect, sync_playwright

    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(harness.REPO / name, checkout / name)
    data = tmp_path / "jupyter-data" / "labextensions"
    data.mkdir(parents=True)
    (data / "agentstack-lab").symlink_to(harness.BUILT)
    bin_dir = Path(sys.executable).parent
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, HOME=str(tmp_path / "home"), JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"), JUPYTER_PLATFORM_DIRS="1",
               JUPYTER_PATH=str(tmp_path / "jupyter-data"), SHELL="/bin/bash",
               PATH=os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                    if p and Path(p).resolve() != bin_dir.resolve()))  # only make lab puts it there
    env.pop("AGENTSTACK_CONFIG", None)
    args = (f"--no-browser --ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={token}"
            " --LabApp.expose_app_in_browser=True --LabApp.news_url=None"
            " --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(["make", "lab", f"BIN={bin_dir}", "STAMP=", f"LAB_ARGS={args}"], cwd=checkout, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/agentstack/api/health/live?token={token}",
                                       timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("make lab did not start JupyterLab:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.1)
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1200, "height": 900})
            try:
                page = browser.pages[0] if browser.pages else browser.new_page()
                page.goto(f"http://127.0.0.1:{port}/lab?token={token}")
                page.wait_for_function("window.jupyterapp?.shell && window.agentstackPanel", timeout=60_000)
                page.evaluate("async () => { await window.jupyterapp.restored;"
                              " window.__term = await window.jupyterapp.commands.execute('terminal:create-new');"
                              " await window.__term.content.session.connectionStatus; }")
                page.wait_for_function("window.__term.content.session.connectionStatus === 'connected'",
                                       timeout=60_000)
                page.evaluate("""() => window.__term.content.session.send({type: 'stdin', content: [
                    'pwd > where.txt; command -v agentstack-lab > which.txt; '
                    + 'agentstack-lab agent run "typed in the lab terminal" --no-subagents\\r']})""")
                panel = _open_panel(page)
                row = panel.locator(".agentstack-run").filter(has_text="typed in the lab terminal")
                expect(row.locator(".agentstack-badge").first).to_have_text("completed", timeout=120_000)
                expect(row.locator(".agentstack-run-meta")).to_contain_text("terminal")
                expect(panel.locator(".agentstack-workspace")).to_have_text(
                    "Workspace: notebooks (the server's root folder)")
            finally:
                browser.close()
        notebooks = checkout / "notebooks"
        assert (notebooks / "where.txt").read_text().strip() == str(notebooks.resolve())
        assert (notebooks / "which.txt").read_text().strip() == str(bin_dir / "agentstack-lab")
    finally:
        os.killpg(server.pid, signal.SIGTERM)   # make and the JupyterLab it started (their own process group)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(5)
        log.close()
