"""The Agents panel in a real browser (issue 27, items 12-15): toasts, the decision card, run controls, workspace.

The harness of ``tests/test_lab_panel_browser.py`` (its ``lab`` and ``page`` fixtures: a JupyterLab serving the
worktree's ``labextension/dist``, Debian's ``/usr/bin/chromium`` driven by Playwright), with runs of other OS
processes (``agentstack-lab agent run --on-query wait`` from a terminal) and of a notebook kernel:

- a decision's toast closes when it is answered from another surface (the CLI) and when its run ends, and
  its "Show" closes it (no stack of stale toasts over the card);
- the decision card names the agent, the run's prompt, how many lines run where, shows the code highlighted
  by JupyterLab's CodeMirror without sideways scrolling at the default sidebar width, and Edit is a real
  code editor whose text is what runs (light and dark, 700 and 1400 px wide);
- Stop, Pause / Resume and Comment act on a run of another process; the runs list shows when each started,
  filters by status and searches; a run of a notebook names it relative to the root and opens it at the cell;
- the panel names the workspace it serves.
"""

from __future__ import annotations

import json
import subprocess

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests import test_lab_panel_browser as harness
from tests.notebook_helpers import ASKING_PROVIDER
from tests.test_lab_panel_browser import ASKS_FOR_CODE, CLI
from tests.test_notebook_browser import CONTRAST_JS, _set_theme

lab, page = harness.lab, harness.page   # its fixtures: one JupyterLab and one browser page for this module
pytestmark = harness.pytestmark   # slow; skipped without Debian's chromium or a built labextension/dist

CARD_TEXT = [".agentstack-decision-what", ".agentstack-decision-run", ".agentstack-workspace", ".agentstack-started",
             "a.agentstack-open-cell", ".agentstack-run-controls button", ".agentstack-code-view .cm-line",
             ".agentstack-badge", ".agentstack-muted"]


def _waiting_run(root, prompt: str = ASKS_FOR_CODE) -> subprocess.Popen:
    """A headless run of another process that waits for any surface to approve its code."""
    return subprocess.Popen([*CLI, "-w", str(root), "agent", "run", prompt, "--no-subagents", "--on-query", "wait",
                             "--decision-timeout", "3m"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=root)


def _cli(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-w", str(root), *args], capture_output=True, text=True, timeout=120, check=True)


def _pending(root) -> list[dict]:
    return json.loads(_cli(root, "decisions", "list", "--json").stdout)


def _open_panel(page):
    """Show the panel once JupyterLab has restored its layout (which may show another sidebar)."""
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.wait_for_function("() => { window.jupyterapp.shell.activateById('agentstack-agents');"
                           " const p = document.querySelector('#agentstack-agents');"
                           " return p !== null && p.offsetParent !== null && p.getBoundingClientRect().width > 0; }",
                           polling=200)
    return page.locator("#agentstack-agents")


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=120)
    finally:
        proc.kill()


def test_toasts_close_when_answered_elsewhere_when_the_run_ends_and_on_show(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    page.wait_for_function("document.querySelector('#agentstack-agents') !== null")
    toasts = page.locator(".Toastify__toast").filter(has_text="An agent needs you")
    first = _waiting_run(root)
    try:
        expect(toasts).to_have_count(1)
        (d,) = _pending(root)
        _cli(root, "decisions", "approve", d["id"])   # answered in the terminal, not in the lab
        expect(toasts).to_have_count(0)
    finally:
        out, err = _finish(first)
    assert first.returncode == 0, err
    second = _waiting_run(root, "how are sales trending in df? (to stop)")
    try:
        expect(toasts).to_have_count(1)
        (d,) = _pending(root)
        _cli(root, "agent", "stop", d["runId"] if "runId" in d else d["run_id"])   # its run ends
        expect(toasts).to_have_count(0)
    finally:
        _finish(second)
    third = _waiting_run(root, "how are sales trending in df? (to show)")
    try:
        expect(toasts).to_have_count(1)
        toasts.get_by_role("button", name="Show").click()
        expect(toasts).to_have_count(0)   # the card is in view; the toast does not stay over it
        card = page.locator("#agentstack-agents .agentstack-decision")
        expect(card).to_have_count(1)
        card.locator("button.agentstack-reject").click()
    finally:
        _finish(third)
    expect(page.locator("#agentstack-agents .agentstack-decision")).to_have_count(0)


def _card_checks(page, card, where: str) -> None:
    """Readable at this width: no sideways scrolling of the code or the panel, and every text ≥ 4.5:1."""
    sizes = card.locator(".agentstack-code-view .cm-scroller").evaluate(
        "e => [e.scrollWidth, e.clientWidth, e.getBoundingClientRect().width]")
    assert sizes[0] <= sizes[1] + 1 and sizes[2] >= 150, (where, sizes)
    panel = page.locator("#agentstack-agents")
    assert panel.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), where
    found = page.evaluate(CONTRAST_JS, [f".agentstack-panel {s}" for s in CARD_TEXT])
    low = [f for f in found if f["ratio"] < 4.5]
    assert not low, (where, low)
    assert any(".agentstack-decision-what" in f["sel"] for f in found), (where, found)


def test_the_decision_card_says_what_the_cell_card_says_and_edits_in_codemirror(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    proc = _waiting_run(root)
    try:
        panel = _open_panel(page)
        card = panel.locator(".agentstack-decision")
        expect(card).to_have_count(1)
        (d,) = _pending(root)
        lines = len(d["code"].splitlines())
        what = card.locator(".agentstack-decision-what")
        expect(what).to_contain_text(f"wants to run {lines} line{'s' if lines != 1 else ''} of Python")
        expect(what).to_contain_text("researcher")
        expect(what).to_contain_text(" in ")   # where the code runs: the kernel or an isolated subprocess
        expect(card.locator(".agentstack-decision-run")).to_have_text(f"Run: “{ASKS_FOR_CODE}”")
        view = card.locator(".agentstack-code-view .cm-editor")
        expect(view).to_have_count(1)
        expect(view).to_contain_text("_first_look")
        colours = view.evaluate("e => new Set([...e.querySelectorAll('.cm-line span')]"
                                ".map(s => getComputedStyle(s).color)).size")
        assert colours >= 2, "the code is not highlighted"
        for width in (1400, 700):
            page.set_viewport_size({"width": width, "height": 900})
            _open_panel(page)
            for theme in ("JupyterLab Light", "JupyterLab Dark"):
                _set_theme(page, theme)
                _card_checks(page, card, f"{theme}, {width} px")
        _set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1200, "height": 900})
        card.locator("button.agentstack-edit").click()
        editor = card.locator(".agentstack-code-edit .cm-content[contenteditable='true']")
        expect(editor).to_have_count(1)
        editor.click()
        page.keyboard.press("Control+a")
        page.keyboard.type("print('edited in the panel', 6 * 7)\n")
        page.wait_for_timeout(500)   # the 5 s refresh and the event socket must not wipe the editor
        expect(editor).to_contain_text("edited in the panel")
        card.locator("button.agentstack-approve").click()
        out, err = _finish(proc)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "edited in the panel 42" in out   # the code typed in the panel's editor is what ran over there


def _status(root, run_id: str) -> str:
    runs = json.loads(_cli(root, "agent", "list", "--json").stdout)
    return next(r["status"] for r in runs if r["id"] == run_id)


def test_the_panel_comments_pauses_resumes_and_stops_a_run_of_another_process(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    proc = _waiting_run(root, "how are sales trending in df? (controls)")
    try:
        panel = _open_panel(page)
        expect(panel.locator(".agentstack-decision")).to_have_count(1)
        (d,) = _pending(root)
        run_id = d.get("runId") or d["run_id"]
        row = panel.locator(f".agentstack-run[data-run='{run_id}']")
        expect(row.locator(".agentstack-started")).to_contain_text("started ")
        row.locator("button.agentstack-run-comment").click()
        row.locator("textarea.agentstack-comment").fill("look at the 2023 rows first")
        row.locator("button.agentstack-run-comment-send").click()
        expect(row.locator("textarea.agentstack-comment")).to_have_count(0)
        row.locator("button.agentstack-run-pause").click()
        expect(row.locator("button.agentstack-run-resume")).to_be_visible()   # the run applied it: paused
        row.locator("button.agentstack-run-resume").click()
        expect(row.locator("button.agentstack-run-pause")).to_be_visible()
        row.locator("button.agentstack-run-stop").click()
        expect(row.locator(".agentstack-badge").first).to_have_text("stopped")
        expect(row.locator(".agentstack-run-controls")).to_have_count(0)
        _finish(proc)
    finally:
        proc.kill()
    assert _status(root, run_id) == "stopped"
    from agentstack_lab.workspace import Workspace

    with Workspace.open(root, announce=False) as ws:
        rows = [tuple(r) for r in ws.db.query(
            "SELECT action, text, surface, applied_at IS NOT NULL FROM interventions WHERE run_id = ? ORDER BY id",
            (run_id,))]
    assert rows == [("comment", "look at the 2023 rows first", "lab", 1), ("pause", None, "lab", 1),
                    ("resume", None, "lab", 1), ("stop", None, "lab", 1)]


def test_a_notebook_run_links_to_its_cell_and_the_list_filters_and_searches(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    cells = [new_code_cell("%load_ext agentstack_lab\n" + ASKING_PROVIDER)]
    cells += [new_markdown_cell(f"## filler {i}\n\n" + "text " * 40) for i in range(40)]
    cells.append(new_code_cell("%agent --wait --auto-approve --provider @asking --no-subagents "
                               "--answer clarification=2021 Which year from the long notebook?"))
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    nbformat.write(nb, root / "long.ipynb")
    target = nb.cells[-1].id
    page.evaluate("async () => { window.__long = await window.jupyterapp.commands.execute('docmanager:open',"
                  " {path: 'long.ipynb'}); await window.__long.sessionContext.ready; }")
    page.wait_for_function("window.__long.sessionContext.session?.kernel", timeout=90_000)
    page.evaluate("async () => { window.jupyterapp.shell.activateById(window.__long.id);"
                  " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    panel = _open_panel(page)
    row = panel.locator(".agentstack-run").filter(has_text="Which year from the long notebook?")
    expect(row.locator(".agentstack-badge").first).to_have_text("completed", timeout=120_000)
    link = row.locator("a.agentstack-open-cell")
    # relative to the root, not the kernel's absolute path (a kernel in a subfolder opens a workspace there)
    expect(link).to_have_text("long.ipynb ↗ cell")
    page.evaluate("async () => { const w = window.__long; await w.context.save();"
                  " await w.sessionContext.shutdown(); w.dispose(); }")
    link.click()
    page.wait_for_function("""id => { const w = window.jupyterapp.shell.currentWidget;
        const nb = w && w.content; if (!nb || !nb.activeCell) return false;
        if (nb.activeCell.model.id !== id) return false;
        const r = nb.activeCell.node.getBoundingClientRect(), v = nb.node.getBoundingClientRect();
        return r.bottom > v.top && r.top < v.bottom; }""", arg=target, timeout=60_000)
    page.evaluate("async () => { const w = window.jupyterapp.shell.currentWidget;"
                  " await w.sessionContext.shutdown(); w.dispose(); }")
    panel = _open_panel(page)
    # the filter and the search, over this run and one of a terminal
    _cli(root, "agent", "run", "what is 6 * 7?", "--no-subagents")
    runs = panel.locator(".agentstack-runs .agentstack-run")
    expect(runs.filter(has_text="what is 6 * 7?")).to_have_count(1)
    total = runs.count()
    filter_ = panel.locator("select.agentstack-filter")
    filter_.select_option("going")
    expect(runs.filter(has_text="Which year from the long notebook?")).to_have_count(0)
    assert all(b.inner_text() not in ("completed", "failed", "stopped")
               for b in runs.locator(".agentstack-badge:first-child").all())
    filter_.select_option("ended")
    expect(runs.filter(has_text="Which year from the long notebook?")).to_have_count(1)
    expect(runs.filter(has_text="what is 6 * 7?")).to_have_count(1)
    filter_.select_option("all")
    expect(runs).to_have_count(total)
    search = panel.locator("input.agentstack-search")
    search.click()
    page.keyboard.type("long notebook")
    expect(runs).to_have_count(1)
    expect(runs.first).to_contain_text("Which year from the long notebook?")
    assert page.evaluate("document.activeElement.classList.contains('agentstack-search')")  # typing kept its focus
    search.fill("no run says this")
    expect(panel.locator(".agentstack-none-shown")).to_contain_text(f"None of the {total} runs match.")
    search.fill("")
    expect(runs).to_have_count(total)


def test_the_panel_names_its_workspace(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp = lab
    panel = _open_panel(page)
    expect(panel.locator(".agentstack-workspace")).to_have_text(f"Workspace: {root.name} (the server's root folder)")
    assert panel.locator(".agentstack-workspace").get_attribute("title").startswith("database: .agentstack/")
