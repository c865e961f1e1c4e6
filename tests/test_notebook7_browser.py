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
import shutil
import sys
from pathlib import Path

import pytest

from tests.browser_helpers import (
    REPO,
    assert_no_errors,
    browser_context,
    collect_errors,
    jupyter_server,
    needs_built,
    needs_chromium,
)

PRICE = {"input": 3, "output": 15}   # USD per million tokens for the scripted model, set by the root's config

pytestmark = [
    pytest.mark.slow,
    needs_chromium,
    pytest.mark.skipif(shutil.which("jupyter-notebook", path=str(Path(sys.executable).parent)) is None,
                       reason="Notebook 7 is not installed (the test extra installs it: pip install -e '.[test]')"),
    needs_built,
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jupyter notebook`` on loopback serving a copy of the quickstart, with a config that prices its model."""
    tmp_path = tmp_path_factory.mktemp("notebook7")
    root = tmp_path / "nb"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", root)
    (root / "agentstack.config.json").write_text(json.dumps({"prices": {"scripted": {"*": PRICE}}}))
    # a loaded 2-core machine starts the server slowly; what it and its kernels leave goes to tmp_path
    with jupyter_server(tmp_path, root, app="notebook", extra_args=["--AgentstackExtension.poll_interval=0.05"],
                        ready_path="/agentstack/api/health/live", timeout=90, env={"TMPDIR": str(tmp_path)},
                        env_drop=["AGENTSTACK_CONFIG"]) as (base, token, _log):
        yield base, token, root, tmp_path


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import expect

    _base, _token, _root, tmp_path = server
    with browser_context(tmp_path / "chromium-profile", viewport={"width": 1200, "height": 900},
                         tmpdir=tmp_path) as context:  # scratch folders removed with tmp_path
        context.set_default_timeout(30_000)
        expect.set_options(timeout=90_000)  # a kernel start and a whole quickstart on a loaded machine
        yield context


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
    errors = collect_errors(page, stack=True)
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
    assert_no_errors(errors, [_notebook_core_only])
    page.close()


def test_agents_panel_shows_the_run_cost(server, browser):
    """JupyterLab on the same server: the run list and the run's tree say what the quickstart run cost."""
    from playwright.sync_api import expect

    base, token, root, _tmp = server
    cost = _run_cost(root)   # the quickstart of the test above ran in this workspace
    page = browser.new_page()
    errors = collect_errors(page)
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
    assert_no_errors(errors)
    page.close()
