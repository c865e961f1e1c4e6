"""`make lab` in a real browser (issue 27, item 15): JupyterLab's own Terminal reaches the Agents panel.

Its own module: the module-scoped page of ``tests/test_lab_panel_browser.py``'s harness keeps a sync Playwright
open for its module, and a second one cannot start beside it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from pathlib import Path

import pytest

from tests.browser_helpers import (
    REPO,
    browser_page,
    free_port,
    isolated_env,
    needs_built,
    needs_chromium,
    serving,
)
from tests.test_lab_panel_controls_browser import _open_panel

pytestmark = [pytest.mark.slow, needs_chromium, needs_built,
              pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")]


def test_make_lab_terminal_runs_reach_the_panel(tmp_path):
    """`make lab` (its recipe, with this venv as BIN): JupyterLab's own Terminal starts in notebooks/ with the
    venv's ``agentstack-lab`` on PATH, and a run typed there is listed in the panel, which names that workspace."""
    from playwright.sync_api import expect

    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, checkout / name)
    bin_dir = Path(sys.executable).parent
    port, token = free_port(), secrets.token_hex(16)
    env = isolated_env(tmp_path, {"SHELL": "/bin/bash", "PATH": os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and Path(p).resolve() != bin_dir.resolve())},  # only make lab puts it there
        drop=["AGENTSTACK_CONFIG"])
    args = (f"--no-browser --ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={token}"
            " --LabApp.expose_app_in_browser=True --LabApp.news_url=None"
            " --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
    base = f"http://127.0.0.1:{port}"
    with serving(["make", "lab", f"BIN={bin_dir}", "STAMP=", f"LAB_ARGS={args}"], cwd=checkout, env=env,
                 log_path=tmp_path / "lab.log", ready_url=f"{base}/agentstack/api/health/live?token={token}",
                 timeout=90, failure="make lab did not start JupyterLab", stop_timeout=20,
                 group=True):  # make and the JupyterLab it started: their own process group
        with browser_page(tmp_path / "chromium-profile", f"{base}/lab?token={token}",
                          viewport={"width": 1200, "height": 900}, check_errors=False) as page:
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
        notebooks = checkout / "notebooks"
        assert (notebooks / "where.txt").read_text().strip() == str(notebooks.resolve())
        assert (notebooks / "which.txt").read_text().strip() == str(bin_dir / "agentstack-lab")
