"""End to end in a real browser: JupyterLab draws the AgentTree, a person answers, approves and reads.

JupyterLab (a free loopback port, a token, a temporary root folder) serves a notebook; Debian's
``/usr/bin/chromium``, driven by Playwright (never a downloaded browser), opens it and runs the
cells. The ``%agent`` cell starts WITHOUT ``--wait``, so the widget must stay live: the test types
the answer to the clarification into the answer box, clicks Send, checks the code it is asked to
approve (read-only, monospace, until Edit), clicks Approve, and reads the completed tree and the
final answer from the page. The page is 700 px wide (the output area about 330 px): every node header
must keep Stop's whole label, the status badge and the usage line on one line each. The
model's final answer carries ``<img onerror>``, ``<script>``, ``<style>`` and a ``javascript:`` link;
none of them may act in the page.

Issue 13, judged in the same page (one JupyterLab server for the module): at 700 and 1400 px, in
the light and the dark theme (switched with JupyterLab's ``apputils:change-theme``), every badge and
text is ≥ 4.5:1 against what is really behind it (computed in the browser from the rendered
styles); the approval card says how many lines run and where, and offers the rest of long code;
Enter sends the answer; after Edit the tool panel shows the edited code and its traceback; text
and tool calls read in the order they happened; re-running the cell leaves no run pending in the
workspace database. Screenshots go to ``docs/images/`` (light and dark) for the README with
``UPDATE_SCREENSHOTS=1``, else to a temporary folder.

``make test`` installs chromium (``make browser``, as root with apt-get); elsewhere this test skips.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.browser_helpers import browser_page, jupyter_server, needs_chromium

# README pictures are rewritten only on request (UPDATE_SCREENSHOTS=1): a PNG differs at every run, so
# writing them always left every checkout dirty after `make test` and crept into commits.
# Both are looked up when a test runs: the temporary folder is then the test's own (tests/conftest.py).


def docs_dir() -> Path:
    return (Path(__file__).resolve().parent.parent / "docs" / "images" if os.environ.get("UPDATE_SCREENSHOTS")
            else Path(tempfile.gettempdir()) / "agentstack-screenshots")


def shot(name: str = "agentstack-browser-tree.png") -> Path:
    return Path(tempfile.gettempdir()) / name

pytestmark = [pytest.mark.slow, needs_chromium]

# The provider the notebook defines: it asks which year, then wants to run code, then answers from
# what the code printed and what the person typed. Its answer is hostile HTML on purpose.
SETUP = '''%load_ext agentstack_lab
import re
from agentstack_lab.providers.base import ToolResultBlock
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call

sales = {2022: 310, 2023: 475, 2024: 402}
answers = []

def _user_text(req):
    return "\\n".join(m.text() for m in req.messages if m.role == "user")

def _tool_output(req):
    return next((b.content for m in req.messages if not isinstance(m.content, str)
                 for b in m.content if isinstance(b, ToolResultBlock)), None)

def _script(req):
    step, depth = req.metadata.get("step"), req.metadata.get("depth")
    if step == "clarify":
        return {"needs_clarification": depth == 0 and "User's answer:" not in _user_text(req),
                "question": "Which **measure** of sales do you mean?"}
    if step in ("blocking", "final"):
        return {"has_question": False}
    if step == "subquestions":
        return {"subquestions": [{"question": "Check the sales figures for gaps", "agent_type": "analyst"}]
                if depth == 0 else []}
    if step == "main" and depth > 0:
        return "No gaps: **three** years of figures."
    if step == "main":
        out = _tool_output(req)
        if out is None:
            return ["Let me check the figures first.", tool_call("python", {"code": CODE})]
        year = re.search(r"best (\\d{4})", out).group(1)
        said = re.search(r"User's answer: (.*)", _user_text(req)).group(1)
        answers.append(f"The best year was **{year}** (measure: {said}). "
                       '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
                       '<style>body { display: none }</style> [details](javascript:window.__pwned=3)')
        answers[-1] = "The code ran.\\n\\n" + answers[-1]
        return answers[-1]
    return answers[-1] + " The analyst found no gaps."  # the summary merges the main answer and the child's

asking = ScriptedProvider(_script)
CODE = "\\n".join(["best_year = max(sales, key=sales.get)"] + [f"check_{i} = sales[{2022 + i % 3}]" for i in range(12)]
                   + ["print('best', best_year)"])
'''
AGENT = "run = %agent --provider @asking --max-depth 1 What was our best year for sales?\nrun"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback serving ``tree.ipynb`` from a temporary root folder (one per module)."""
    tmp_path = tmp_path_factory.mktemp("browser")
    root = tmp_path / "lab"
    root.mkdir()
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(AGENT)],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, root / "tree.ipynb")
    with jupyter_server(tmp_path, root, timeout=30) as (base, token, _log):
        yield f"{base}/lab/tree/tree.ipynb?token={token}", root, tmp_path


def _assert_header_fits(node) -> None:
    """One node's header: Stop shows its whole label, badge and usage are one line, the title two at most."""
    m = node.locator(".agentstack-header").first.evaluate("""h => {
        const one = sel => { const e = h.querySelector(sel); if (!e || !e.offsetParent) return null;
            const r = e.getBoundingClientRect(), cs = getComputedStyle(e);
            return {rects: e.getClientRects().length, h: r.height, size: parseFloat(cs.fontSize),
                    lh: parseFloat(cs.lineHeight) || 1.2 * parseFloat(cs.fontSize),
                    sw: e.scrollWidth, cw: e.clientWidth, right: r.right}; };
        return {width: h.clientWidth, sw: h.scrollWidth, right: h.getBoundingClientRect().right,
                stop: one('.agentstack-stop'), badge: one('.agentstack-badge span'),
                meta: one('.agentstack-meta span'), title: one('.agentstack-title div')};
    }""")
    stop, badge, meta, title = m["stop"], m["badge"], m["meta"], m["title"]
    assert m["sw"] <= m["width"], m  # nothing sticks out of the row
    if stop is not None:  # a working agent: its Stop label is not clipped ("St…") and stays inside the row
        assert stop["sw"] <= stop["cw"] and stop["cw"] > 0 and stop["right"] <= m["right"] + 1, m
    assert badge["rects"] == 1 and badge["h"] < 1.8 * badge["size"], m  # "waiting for you" on one line
    assert meta["rects"] == 1 and meta["h"] < 1.8 * meta["size"], m  # "~1,309 tokens (estimated, …) · 552 ms" on one line
    assert title["h"] <= 2 * title["lh"] + 2, m  # the title wraps to two lines at most


# Contrast of every badge and text against what is really behind it: the element's colour composited
# over the nearest backgrounds (alpha included), by the WCAG formula; computed styles may be rgb(),
# rgba() or color(srgb ...) (what color-mix() computes to).
CONTRAST_JS = """(sels) => {
  const parse = s => { let m = s.match(/color\\(srgb ([\\d.e-]+) ([\\d.e-]+) ([\\d.e-]+)(?: \\/ ([\\d.]+))?\\)/);
    if (m) return [m[1] * 255, m[2] * 255, m[3] * 255, m[4] === undefined ? 1 : +m[4]];
    m = s.match(/rgba?\\(([\\d.]+),? ([\\d.]+),? ([\\d.]+)(?:[,/] ?([\\d.]+))?\\)/);
    return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : [0, 0, 0, 0]; };
  const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const background = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    return layers.reverse().reduce((acc, c) => over(c, acc), [255, 255, 255, 1]); };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const out = [];
  for (const sel of sels) for (const el of document.querySelectorAll(sel)) {
    if (!el.offsetParent || !el.textContent.trim()) continue;
    const bg = background(el), fg = over(parse(getComputedStyle(el).color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    out.push({sel, text: el.textContent.trim().slice(0, 40), ratio: (a + 0.05) / (b + 0.05),
              fg: getComputedStyle(el).color, bg: bg.map(Math.round).join(',')}); }
  return out; }"""
TEXT_SELECTORS = [".agentstack-pill", ".agentstack-prose p", ".agentstack-quiet", ".agentstack-title div",
                  ".agentstack-card b", ".agentstack-answer-box b", ".agentstack-problem", ".agentstack-hint",
                  ".agentstack-qa-item summary", ".agentstack-code-box"]


def _assert_contrast(page, where: str) -> int:
    """Every visible badge and text of the tree reads at ≥ 4.5:1; returns how many were measured."""
    found = page.evaluate(CONTRAST_JS, [f".agentstack-tree {s}" for s in TEXT_SELECTORS])
    low = [f for f in found if f["ratio"] < 4.5]
    assert not low, (where, low)
    assert any(".agentstack-pill" in f["sel"] for f in found), (where, found)
    return len(found)


def _set_theme(page, name: str) -> None:
    page.evaluate("n => window.jupyterapp.commands.execute('apputils:change-theme', {theme: n})", name)
    light = "true" if name == "JupyterLab Light" else "false"
    page.wait_for_function(f"document.body.dataset.jpThemeLight === '{light}'")
    page.wait_for_timeout(300)  # the theme's stylesheet applies


def _screenshot(locator, name: str) -> None:
    """A README screenshot under docs/images/ (PNG, kept small: the tree only, no device scaling).

    The page is made tall enough to hold the whole tree (a taller element in the notebook's scrolling
    panel comes out clipped), and notification toasts are left out of the picture.
    """
    docs_dir().mkdir(parents=True, exist_ok=True)
    page = locator.page
    size = page.viewport_size
    height = locator.evaluate("e => e.getBoundingClientRect().height")
    page.set_viewport_size({"width": size["width"], "height": min(4000, int(height) + 400)})
    try:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(docs_dir() / name), animations="disabled",
                           style=".Toastify, .Toastify__toast-container { display: none !important; }")
    finally:
        page.set_viewport_size(size)


def _agent_rows(root: Path) -> list[tuple[str, str, str | None]]:
    """(run id, status, parent) of every agent in the workspace database, via the package's own driver."""
    from agentstack_lab.store.connection import SQLiteDatabase

    db = SQLiteDatabase(root / ".agentstack" / "agentstack.db")
    try:
        return [(r[0], r[1], r[2]) for r in db.query("SELECT run_id, status, parent_id FROM agents")]
    finally:
        db.close()


def test_jupyterlab_tree_is_answered_approved_and_safe(lab):
    from playwright.sync_api import expect

    url, root, tmp_path = lab
    with browser_page(tmp_path / "chromium-profile", url,
                      viewport={"width": 700, "height": 1000},  # narrow: the header must still read on one row
                      permissions=["clipboard-read", "clipboard-write"],  # Copy is read back from the clipboard
                      default_timeout=20_000, ready_js="window.jupyterapp?.shell?.currentWidget?.sessionContext"
                      ) as page:
        try:
            page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready;"
                          " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

            tree = page.locator(".agentstack-tree")
            answer = tree.locator(".agentstack-answer textarea")
            expect(answer).to_be_visible()
            expect(tree.locator(".agentstack-query")).to_contain_text("Which measure of sales do you mean?")
            expect(tree.locator(".agentstack-status-waiting_user")).to_have_count(1)
            expect(tree.locator(".agentstack-stop:visible")).to_have_count(1)  # one Stop all, in the root header
            expect(tree.locator(".agentstack-background")).to_contain_text("kernel as Idle")
            expect(tree.locator(".agentstack-activity").first).to_contain_text("waiting for your answer")
            _assert_contrast(page, "light 700 px, question")  # the amber "waiting for you" badge too
            # The database notice is information: stdout, not a pink stderr box.
            expect(page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                   ).to_have_count(0)
            answer.press("Enter")  # an empty answer is refused in the card
            expect(tree.locator(".agentstack-card-note")).to_contain_text("type an answer first")
            answer.fill("total revenue")
            answer.press("Shift+Enter")  # a new line, not sent (and not JupyterLab's "run cell")
            answer.press_sequentially("(all regions)")
            assert answer.input_value() == "total revenue\n(all regions)"
            page.wait_for_timeout(300)
            expect(tree.locator(".agentstack-status-waiting_user")).to_have_count(1)
            expect(answer).to_be_visible()
            answer.press("Enter")  # Enter sends (the value travels with it)

            approve = tree.locator("button.agentstack-approve")
            expect(approve).to_be_visible()
            query = tree.locator(".agentstack-query").first
            expect(query).to_contain_text("researcher wants to run 14 lines of Python in your live kernel: "
                                          "it can read and change your variables")
            viewer = query.locator(".agentstack-code-view pre")
            expect(viewer).to_contain_text("best_year = max(sales, key=sales.get)")  # read-only, before Edit
            assert "mono" in viewer.evaluate("e => getComputedStyle(e).fontFamily").lower()
            assert viewer.evaluate("e => getComputedStyle(e).whiteSpace") == "pre"  # long lines scroll, never break
            box = viewer.evaluate("e => [e.getBoundingClientRect().right, e.scrollHeight > e.clientHeight,"
                                  " e.closest('.agentstack-node').getBoundingClientRect().right]")
            assert box[0] <= box[2] + 1 and box[1], box  # fits its node; more lines than shown...
            expand = query.locator("button.agentstack-expand")
            expect(expand).to_have_text("Show all 14 lines")  # ...and the card says so
            expand.click()
            expect(expand).to_have_text("Show less")
            page.wait_for_function("() => { const e = document.querySelector('.agentstack-code-view pre');"
                                   " return e && e.scrollHeight <= e.clientHeight + 1; }")
            expect(tree.locator(".agentstack-qa").first).to_contain_text(
                "total revenue (all regions) (by you)")  # the answer stays
            _assert_contrast(page, "light 700 px, approval")
            _assert_header_fits(tree.locator(".agentstack-node").first)
            tree.screenshot(path=str(shot("agentstack-browser-approval.png")))
            _screenshot(tree, "agent-tree-approval-light.png")
            tree.locator("button.agentstack-edit").click()
            editor = tree.locator(".agentstack-code textarea")
            expect(editor).to_be_visible()
            expect(viewer).to_be_hidden()
            edited = editor.input_value() + "\nsales['revenue']"
            editor.fill(edited)
            page.wait_for_timeout(200)
            approve.click()

            nodes = tree.locator(".agentstack-node")
            expect(nodes).to_have_count(2)
            expect(tree.locator(".agentstack-node.agentstack-status-completed")).to_have_count(2)
            final = tree.locator(".agentstack-result").filter(has_text="Final answer")
            expect(final).to_have_count(1)
            expect(final).to_contain_text("The best year was 2023 (measure: total revenue).")
            expect(final.locator("strong")).to_have_text("2023")
            expect(tree.locator(".agentstack-background")).to_be_hidden()

            # Nothing from the model acted: no handler ran, no element or link survived, the page is visible.
            assert page.evaluate("() => window.__pwned") is None
            assert tree.locator("img, script, iframe").count() == 0
            assert tree.locator("style").count() == 1  # only the tree's own theme stylesheet
            assert tree.locator("[onerror], [onclick], a[href^='javascript']").count() == 0
            assert page.evaluate("() => getComputedStyle(document.body).display") != "none"
            expect(final.locator("a", has_text="details")).to_have_count(0)  # the javascript: link is plain text

            # The finished subagent is one line with an excerpt of its result; only the root has Stop all.
            child = nodes.nth(1)
            expect(child.locator(".agentstack-title")).to_contain_text("→ No gaps: three years")
            expect(child.locator(".agentstack-transcript")).to_be_hidden()
            expect(tree.locator(".agentstack-stop:visible")).to_have_count(0)  # a finished run has nothing to stop
            header = nodes.first.locator(".agentstack-meta").first
            expect(header).to_have_text(re.compile(  # one token figure, named, its cost (no price: unknown), the time
                r"^~[\d,]+ tokens \(estimated, (this agent|subtree)\) · cost unknown · \d+(\.\d)? m?s$"))

            # The transcript reads in order: text, the tool call, text. Open it: the code that ran is the
            # edited one, with what it printed and its traceback.
            root_work = nodes.first.locator(".agentstack-work").first
            root_work.locator(".lm-AccordionPanel-title, .jupyter-widget-Collapse-header, .p-Collapse-header"
                              ).first.click()
            items = nodes.first.locator(".agentstack-transcript").first.locator(
                ":scope > .agentstack-text, :scope > .agentstack-tool")
            kinds = items.evaluate_all("els => els.map(e => e.classList.contains('agentstack-tool') ? 'tool' : 'text')")
            assert kinds[:3] == ["text", "tool", "text"], kinds
            expect(items.nth(0)).to_contain_text("Let me check the figures first.")
            expect(items.nth(2)).to_contain_text("The code ran.")
            tool = items.nth(1)
            expect(tool).to_contain_text("python ✗ · edited by you")
            tool.get_by_text("python ✗ · edited by you").click()
            expect(tool).to_contain_text("code that ran (edited)")
            expect(tool).to_contain_text("sales['revenue']")
            expect(tool).to_contain_text("best 2023")  # its stdout
            expect(tool).to_contain_text("Traceback")  # and the whole traceback, not only the last line
            expect(tool).to_contain_text("KeyError: 'revenue'")
            expect(nodes.first.locator(".agentstack-qa").first).to_contain_text("Code edited by you")

            # Copy puts the code that ran on the clipboard; Insert adds it as a new cell below the tree's cell.
            tool.locator("button.agentstack-copy").click()
            expect(tool.locator(".agentstack-actions-status")).to_have_text("copied")
            assert page.evaluate("navigator.clipboard.readText()") == edited
            cells = page.locator(".jp-Notebook .jp-Cell")
            count = cells.count()
            tool.locator("button.agentstack-insert").click()
            expect(cells).to_have_count(count + 1)
            expect(tool.locator(".agentstack-actions-status")).to_have_text("inserted as cell 3")
            assert page.evaluate("() => { const c = window.jupyterapp.shell.currentWidget.content.model.sharedModel"
                                 ".cells[2]; return [c.cell_type, c.getSource()]; }") == ["code", edited]
            answer_bar = nodes.first.locator(".agentstack-result-actions .agentstack-actions").first
            answer_bar.locator("button.agentstack-copy").click()  # the answer, as Markdown
            expect(answer_bar.locator(".agentstack-actions-status")).to_have_text("copied")
            assert page.evaluate("navigator.clipboard.readText()").startswith(
                "The code ran.\n\nThe best year was **2023** (measure: total revenue).")
            _assert_contrast(page, "light 700 px, finished")
            _assert_header_fits(nodes.nth(1))
            page.set_viewport_size({"width": 1400, "height": 1000})
            _assert_header_fits(nodes.first)
            _assert_contrast(page, "light 1400 px")
            tree.screenshot(path=str(shot("agentstack-browser-tree-wide.png")))
            _screenshot(tree, "agent-tree-light.png")

            _set_theme(page, "JupyterLab Dark")
            _assert_contrast(page, "dark 1400 px")
            _screenshot(tree, "agent-tree-dark.png")
            page.set_viewport_size({"width": 700, "height": 1000})
            _assert_contrast(page, "dark 700 px")

            # Collapsing the root hides its subtree.
            nodes.first.locator(".agentstack-toggle").first.click()
            expect(child).to_be_hidden()
            nodes.first.locator(".agentstack-toggle").first.click()
            expect(child).to_be_visible()

            # Re-running the cell stops its waiting run; Stop all (confirmed) stops the last one: nothing pending.
            for _ in range(2):
                page.evaluate("async () => { const nb = window.jupyterapp.shell.currentWidget.content;"
                              " nb.activeCellIndex = 1; await window.jupyterapp.commands.execute('notebook:run-cell'); }")
                expect(page.locator(".agentstack-tree .agentstack-status-waiting_user")).to_have_count(1)
            expect(page.locator(".jp-OutputArea-output")).to_contain_text(
                ["stopped the previous run of this cell"], timeout=20_000)
            _assert_contrast(page, "dark 700 px, question")
            page.locator(".agentstack-tree .agentstack-stop:visible").click()
            page.locator(".agentstack-tree .agentstack-stop-confirm").click()
            expect(page.locator(".agentstack-tree .agentstack-status-stopped")).to_have_count(1)
            expect(page.locator(".agentstack-tree .agentstack-error")).to_contain_text("stopped by the user")
            _assert_contrast(page, "dark 700 px, stopped")
            # Clearing the cell's output stops its run too (notebook.rerun = stop): nothing is left waiting.
            page.evaluate("async () => { const nb = window.jupyterapp.shell.currentWidget.content;"
                          " nb.activeCellIndex = 1; await window.jupyterapp.commands.execute('notebook:run-cell'); }")
            expect(page.locator(".agentstack-tree .agentstack-status-waiting_user")).to_have_count(1)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-cell-output')")
            expect(page.locator(".agentstack-tree")).to_have_count(0)
            deadline = time.monotonic() + 10
            while True:  # the event log writes agent rows in batches
                rows = _agent_rows(root)
                if all(status in ("completed", "failed", "stopped") for _r, status, _p in rows):
                    break
                assert time.monotonic() < deadline, rows
                time.sleep(0.2)
            runs = {r for r, _s, parent in rows if parent is None}
            # the first run, the re-run that was stopped, the one stopped by hand, the one whose output was cleared
            assert len(runs) == 4, rows
            assert sorted(s for _r, s, parent in rows if parent is None) == ["completed"] + ["stopped"] * 3, rows
            _set_theme(page, "JupyterLab Light")
        finally:
            try:  # for a person to look at (also when the test failed)
                shown = page.locator(".agentstack-tree")
                (shown.first if shown.count() else page).screenshot(path=str(shot()), timeout=5_000)
            except Exception as exc:  # a failed screenshot must not hide the test's own failure
                print(f"no screenshot: {exc}")
