"""Background runs, edited code and Stop all, judged in a real browser (JupyterLab + Debian chromium).

Two cells start runs in the background, each assigned (``run = %agent ...``, no second line showing
it): both trees and their approval cards must be on the page. The approval code is highlighted with
the theme's editor colours; Edit offers Reset (the model's code back) and Cancel (edits discarded)
and shows the edit's diff while editing. After the edited code ran, its tool call has an "edited"
badge and a diff against the model's original, and its output box holds only what the code printed.
Stop all on the other run, whose approval is pending: its tool call ends cancelled (never
"running…") and the cancelled approval is listed. Contrast (≥ 4.5:1) of the highlighted tokens and
the diff lines is measured in the light and the dark theme at 700 and 1400 px, and the diff stays
inside its node.

Uses Playwright with ``/usr/bin/chromium`` (never a downloaded browser); skips where it is missing.
"""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.browser_helpers import browser_page, jupyter_server, needs_chromium
from tests.notebook_helpers import CODE_THEN_ANSWER
from tests.test_notebook_browser import CONTRAST_JS, _set_theme

pytestmark = [pytest.mark.slow, needs_chromium]

CODE = ("import math\n# the radius, in metres\nradius = 2.5\narea = math.pi * radius ** 2\n"
        "label = 'area'\nprint(f'{label} {area:.2f}')")
SETUP = ("%load_ext agentstack_lab\n" + CODE_THEN_ANSWER + f"\nCODE = {CODE!r}\n"
         "model = code_then_answer(CODE)\nother = code_then_answer('waiting = True')\n")
FIRST = "run = %agent --provider @model --no-subagents Compute the area of the circle"
SECOND = "run2 = %agent --provider @other --no-subagents Wait for me"
HL_TOKENS = [".agentstack-hl-kn", ".agentstack-hl-c1", ".agentstack-hl-mf", ".agentstack-hl-s1", ".agentstack-hl-o"]
DIFF_LINES = [".agentstack-diff-add", ".agentstack-diff-del", ".agentstack-diff-hunk", ".agentstack-diff-same", ".agentstack-diff-stat",
              ".agentstack-edited-badge"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on loopback serving ``runs.ipynb`` from a temporary root folder."""
    tmp_path = tmp_path_factory.mktemp("runs-browser")
    root = tmp_path / "lab"
    root.mkdir()
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(FIRST), new_code_cell(SECOND)],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, root / "runs.ipynb")
    with jupyter_server(tmp_path, root, timeout=30) as (base, token, _log):
        yield f"{base}/lab/tree/runs.ipynb?token={token}", tmp_path


def _contrast(page, scope: str, selectors: list[str], where: str) -> list[dict]:
    """Every visible piece of text matched reads at ≥ 4.5:1 against what is really behind it."""
    found = page.evaluate(CONTRAST_JS, [f"{scope} {s}" for s in selectors])
    low = [f for f in found if f["ratio"] < 4.5]
    assert not low, (where, low)
    return found


def _fits(locator) -> None:
    """The box stays inside its agent node (long lines scroll inside it)."""
    box = locator.evaluate("e => [e.getBoundingClientRect().right, e.closest('.agentstack-node')"
                           ".getBoundingClientRect().right]")
    kids = locator.evaluate("e => Array.from(e.parentElement.children).map(k => [k.tagName, k.className.slice(0, 30),"
                            " Math.round(k.getBoundingClientRect().left), Math.round(k.getBoundingClientRect().right),"
                            " k.scrollWidth])")
    chain = locator.evaluate("e => { const out = []; for (let x = e; x && !x.classList.contains('agentstack-node');"
                             " x = x.parentElement) out.push([x.className.slice(0, 40), Math.round(x.getBoundingClientRect().right),"
                             " getComputedStyle(x).display, x.scrollWidth]); return out; }")
    assert box[0] <= box[1] + 1, (box, kids, chain)


def test_assigned_runs_edits_with_a_diff_and_stop_all_with_an_approval_pending(lab):
    from playwright.sync_api import expect

    url, tmp_path = lab
    with browser_page(tmp_path / "chromium-profile", url, viewport={"width": 700, "height": 1000},
                      default_timeout=20_000, ready_js="window.jupyterapp?.shell?.currentWidget?.sessionContext"
                      ) as page:
        page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready;"
                      " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        # Both assigned runs show their tree, each waiting on its approval card.
        trees = page.locator(".agentstack-tree")
        expect(trees).to_have_count(2)
        first, second = trees.nth(0), trees.nth(1)
        for tree in (first, second):
            expect(tree.locator("button.agentstack-approve")).to_be_visible()
        expect(first).to_contain_text("Compute the area of the circle")
        expect(second).to_contain_text("Wait for me")

        # The approval code is highlighted, in the theme's editor colours, and reads in both themes.
        viewer = first.locator(".agentstack-code-view pre")
        expect(viewer.locator(".agentstack-hl-kn").first).to_have_text("import")
        expect(viewer.locator(".agentstack-hl-c1")).to_have_text("# the radius, in metres")
        colours = viewer.evaluate("e => [getComputedStyle(e).color,"
                                  " getComputedStyle(e.querySelector('.agentstack-hl-kn')).color,"
                                  " getComputedStyle(e.querySelector('.agentstack-hl-s1')).color]")
        assert len(set(colours)) == 3, colours  # keyword and string each have a colour of their own
        assert viewer.inner_text() == CODE  # highlighting adds colour, never text
        _contrast(page, ".agentstack-code-view", HL_TOKENS, "light 700 px, approval code")

        # Edit: Reset and Cancel, and the diff of the edit while editing.
        first.locator("button.agentstack-edit").click()
        editor = first.locator(".agentstack-code textarea")
        expect(editor).to_be_visible()
        reset, cancel = first.locator("button.agentstack-edit-reset"), first.locator("button.agentstack-edit-cancel")
        expect(reset).to_be_visible()
        expect(cancel).to_be_visible()
        diff = first.locator(".agentstack-edit-diff")
        expect(diff).to_be_hidden()
        editor.fill(CODE.replace("radius = 2.5", "radius = 4.0"))
        expect(diff.locator(".agentstack-diff-add")).to_have_text("+radius = 4.0")
        expect(diff.locator(".agentstack-diff-del")).to_have_text("-radius = 2.5")
        reset.click()  # the model's code back, still editing
        expect(editor).to_have_value(CODE)
        expect(diff).to_be_hidden()
        editor.fill(CODE + "\nprint('discarded')")
        cancel.click()  # the edits are gone, the code is read-only again
        expect(editor).to_be_hidden()
        expect(viewer).to_be_visible()
        expect(first.locator("button.agentstack-edit")).to_be_enabled()
        first.locator("button.agentstack-edit").click()
        expect(editor).to_have_value(CODE)
        edited = CODE.replace("radius = 2.5", "radius = 3.0")
        editor.fill(edited)
        expect(diff.locator(".agentstack-diff-add")).to_have_text("+radius = 3.0")
        page.wait_for_timeout(200)  # the typed value reaches the kernel before the click
        first.locator("button.agentstack-approve").click()

        # The edited call: an "edited" badge, the diff against the model's original, only stdout as output.
        expect(first.locator(".agentstack-node.agentstack-status-completed")).to_have_count(1)
        first.locator(".agentstack-work .lm-AccordionPanel-title, .agentstack-work .jupyter-widget-Collapse-header,"
                      " .agentstack-work .p-Collapse-header").first.click()
        tool = first.locator(".agentstack-tool").first
        tool.get_by_text("edited by you").click()
        expect(tool.locator(".agentstack-edited-badge")).to_have_text("edited")
        expect(tool.locator(".agentstack-diff .agentstack-diff-del")).to_have_text("-radius = 2.5")
        expect(tool.locator(".agentstack-diff .agentstack-diff-add")).to_have_text("+radius = 3.0")
        expect(tool).to_contain_text("+1 −1 lines against the model's original")
        output = tool.locator("b", has_text="output").locator("xpath=following-sibling::pre[1]")
        expect(output).to_contain_text("area 28.27")
        expect(output).not_to_contain_text("edited the code")
        expect(tool.locator(".agentstack-hl-kn").first).to_have_text("import")  # the code that ran, highlighted

        # Stop all on the run whose approval is pending: its call ends cancelled, the approval is listed.
        second.locator(".agentstack-stop:visible").click()
        second.locator(".agentstack-stop-confirm").click()
        expect(second.locator(".agentstack-status-stopped")).to_have_count(1)
        expect(second.locator(".agentstack-card")).to_have_count(0)
        expect(second.locator(".agentstack-qa")).to_contain_text("Approval cancelled: stopped by the user")
        stopped_tool = second.locator(".agentstack-tool").first
        expect(stopped_tool).to_contain_text("python ■ · cancelled")  # its transcript stays open: no result
        stopped_tool.get_by_text("python ■ · cancelled").click()
        expect(stopped_tool).to_contain_text("cancelled: stopped by the user")
        expect(second).not_to_contain_text("running…")
        expect(second.locator(".agentstack-activity:visible")).to_have_count(0)  # nothing says it still works

        # Contrast and fit of the diff, the badge and the highlighted code: both themes, both widths.
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            if theme != "JupyterLab Light":
                _set_theme(page, theme)
            for width in (700, 1400):
                page.set_viewport_size({"width": width, "height": 1000})
                where = f"{theme} {width} px"
                measured = _contrast(page, ".agentstack-tool", DIFF_LINES + HL_TOKENS, where)
                kinds = {m["sel"].split()[-1] for m in measured}
                assert {".agentstack-diff-add", ".agentstack-diff-del", ".agentstack-edited-badge",
                        ".agentstack-hl-kn", ".agentstack-hl-c1"} <= kinds, (where, kinds)
                _fits(tool.locator(".agentstack-diff"))
                _fits(tool.locator(".agentstack-hl").first)
        _set_theme(page, "JupyterLab Light")
