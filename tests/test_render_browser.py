"""Issue 27 in a real browser: saved trees, the panel's run view and the live tree render what matters.

One JupyterLab server for the module (loopback port, token, temporary root whose ``.agentstack`` is the
workspace), serving the lab extension as committed in ``labextension/dist``; Debian's ``/usr/bin/chromium``
driven by Playwright (never a downloaded browser). One run's notebook is executed headless first (nbclient,
as ``workflow run`` does): its saved output is the snapshot only. The run asks a question answered up front,
runs code that raises inside the standard library, starts a subagent, and answers in Markdown.

- Saved tree and the panel's run view: the answer is rendered Markdown (no ``**``, fenced code is a code
  block), the question shows with its answer, the code that ran with its traceback trimmed to the agent's
  frames (the whole one a click away), the finished subagent folded to a line; the header says the code
  failed; the title is the prompt as typed (``@df``, no backticks or ``**``, no kernel-variable block).
- Live tree: the final answer box is as tall as its Markdown (no doubled blank lines), the collapsed root
  header says its code failed, tracebacks are trimmed, titles are as typed; the panel's run list cuts a
  long title with an ellipsis; a workspace that already exists in the notebook's folder is not announced.
- Every text in all three views is >= 4.5:1 against what is behind it, light and dark, 700 and 1400 px.
"""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.browser_helpers import browser_page, jupyter_server, needs_built, needs_chromium
from tests.test_notebook_browser import _set_theme

SNAPSHOT = "application/vnd.agentstack.tree+json"

pytestmark = [pytest.mark.slow, needs_chromium, needs_built]

SETUP = '''%load_ext agentstack_lab
from agentstack_lab.providers.testing import TestModel, has_tool_result

df = {"north": [1, 2, 3], "south": [4, 5, 6]}
ANSWER = ("Sales are **up 12%** in the north.\\n\\nThe south is flat.\\n\\n- north: 6\\n- south: 15\\n\\n"
          "```python\\ntotal = 21\\n```\\n\\nThat is all.")

def _clarify(req):
    return "Which **measure** of `sales` do you mean?" if len(model.steps("clarify")) == 1 else None

def _main(req):
    if not has_tool_result(req):
        return None
    return ANSWER if req.metadata.get("depth") == 0 else "No gaps: **three** years of figures."

model = TestModel(clarify=_clarify, subquestions=["Check the figures for gaps"], main=_main, summary=ANSWER,
                  code="import json\\nfigures = json.loads('{')")
'''
PROMPT = ("How are **sales** doing in @df? Compare every region and every quarter of the last three years, "
          "in detail.")
TYPED = "How are sales doing in @df? Compare every region and every quarter of the last three years, in detail."
AGENT = f"%agent --wait --auto-approve --provider @model --answer clarification=revenue {PROMPT}"


# A run of another process into the same workspace whose approval edits the code (given up front).
EDITED = """
import asyncio, sys
from agentstack_lab.engine import AgentRun
from agentstack_lab.providers.testing import TestModel, has_tool_result
from agentstack_lab.workspace import Workspace

async def main():
    model = TestModel(code="total = 1 + 1", main=lambda r: "**Done.**" if has_tool_result(r) else None)
    with Workspace.open(sys.argv[1], announce=False) as ws:
        run = AgentRun("Add the `figures` up", workspace=ws, provider=model, options={
            "subagents": False, "answers": {"approval": {"approved": True, "code": "total = 2 + 2"}}})
        await run
        print(run.id)

asyncio.run(main())
"""


# A terminal-like run of another process that waits for any surface to answer its question.
WAITING = """
import asyncio, sys
from agentstack_lab.engine import AgentRun
from agentstack_lab.notebook.context import build_prompt
from agentstack_lab.providers.testing import TestModel
from agentstack_lab.workspace import Workspace

async def main():
    model = TestModel(clarify=lambda r: "Which **measure** of `sales` do you mean?" if len(model.steps("clarify")) == 1
                      else None)
    prompt = build_prompt(sys.argv[2], {"df": {"north": [1, 2]}})
    with Workspace.open(sys.argv[1], announce=False) as ws:
        run = AgentRun(prompt, workspace=ws, provider=model, options={"subagents": False, "on_query": "wait"})
        await run
        print(run.status)

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("render")
    root = tmp_path / "lab"
    root.mkdir()
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(AGENT)], metadata=meta)
    nbformat.write(nb, root / "live.ipynb")
    # the saved one runs headless first (as `workflow run` does): its output is the snapshot, no widget
    from nbclient import NotebookClient

    saved = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(AGENT)], metadata=meta)
    NotebookClient(saved, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
    nbformat.write(saved, root / "saved.ipynb")
    edited = subprocess.run([sys.executable, "-c", EDITED, str(root)], capture_output=True, text=True, timeout=120,
                            cwd=root, check=True).stdout.split()[-1]
    with jupyter_server(tmp_path, root, extra_args=["--AgentstackExtension.poll_interval=0.05"],
                        ready_path="/agentstack/api/health/live", timeout=90,
                        env_drop=["AGENTSTACK_CONFIG"]) as (base, token, _log):
        yield base, token, root, tmp_path, saved, edited


@pytest.fixture(scope="module")
def page(lab):
    base, token, _root, tmp_path, _saved, _edited = lab
    with browser_page(tmp_path / "chromium-profile", f"{base}/lab?token={token}",
                      viewport={"width": 1400, "height": 1000}, default_timeout=30_000, expect_timeout=60_000,
                      ready_js="window.jupyterapp?.shell && window.agentstackPanel") as page:
        page.evaluate("async () => { await window.jupyterapp.restored; }")  # the layout restored: panels stay put
        yield page


# Contrast of every element that holds text of its own (a text node child), against what is really behind
# it: its colour composited over the nearest backgrounds, by the WCAG formula.
OWN_TEXT_CONTRAST = """(root) => {
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
  for (const top of document.querySelectorAll(root)) for (const el of [top, ...top.querySelectorAll('*')]) {
    const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
    if (!own || !el.getClientRects().length || getComputedStyle(el).visibility === 'hidden') continue;
    if (el.closest('button, textarea, input, .jp-Toolbar')) continue;  // JupyterLab's own controls
    const bg = background(el), fg = over(parse(getComputedStyle(el).color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    out.push({cls: el.className, text: own.slice(0, 40), ratio: (a + 0.05) / (b + 0.05),
              fg: getComputedStyle(el).color, bg: bg.map(Math.round).join(',')}); }
  return out; }"""


def _contrast(page, root: str, where: str, must: tuple[str, ...] = ()) -> None:
    """Every text of ``root`` reads at >= 4.5:1, in both themes at 700 and 1400 px; ``must`` texts were measured."""
    size = page.viewport_size
    try:
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            _set_theme(page, theme)
            for width in (700, 1400):
                page.set_viewport_size({"width": width, "height": 1000})
                page.wait_for_timeout(200)
                found = page.evaluate(OWN_TEXT_CONTRAST, root)
                low = [f for f in found if f["ratio"] < 4.5]
                assert not low, (where, theme, width, low)
                for text in must:
                    assert any(text in f["text"] for f in found), (where, theme, width, text, found)
    finally:
        _set_theme(page, "JupyterLab Light")
        page.set_viewport_size(size)


def _check_run_view(view, page, where: str) -> None:
    """What a saved tree and the panel's run view must show of the run (items 2, 4 and 8)."""
    from playwright.sync_api import expect

    root = view.locator(".agentstack-snapshot-node").first
    head = root.locator(".agentstack-run-head").first
    expect(head).to_contain_text(TYPED[:60])  # the prompt as typed, as plain text
    head_text = head.inner_text()
    assert "`" not in head_text and "**" not in head_text and "Kernel variables" not in head_text, (where, head_text)
    expect(head.locator(".agentstack-failed-flag")).to_have_text("✗ code failed")  # not just a green "completed"
    result = root.locator(":scope > .agentstack-result")
    expect(result.locator("strong").first).to_have_text("up 12%")  # Markdown rendered...
    expect(result.locator("li")).to_have_count(2)
    expect(result.locator("pre code").first).to_contain_text("total = 21")
    assert "**" not in result.inner_text() and "```" not in result.inner_text(), (where, result.inner_text())
    qa = root.locator(":scope > .agentstack-qa .agentstack-qa-item summary").first
    expect(qa).to_contain_text("Which measure of sales do you mean? → revenue")  # the question and its answer
    tool = root.locator(":scope > .agentstack-run-tool").first
    tool.locator("summary").first.click()
    expect(tool).to_contain_text("figures = json.loads('{')")  # the code that ran
    boxes = tool.locator(":scope > pre")
    trimmed = boxes.last.inner_text()
    assert "<agent-python" in trimmed and "JSONDecodeError" in trimmed and "library frame" in trimmed, trimmed
    assert "decoder.py" not in trimmed, trimmed  # the library's frames are left out...
    full = tool.locator("details.agentstack-full-traceback")
    full.locator("summary").click()
    expect(full.locator("pre")).to_contain_text("decoder.py")  # ...and one click away
    child = root.locator(".agentstack-snapshot-node").first
    expect(child).to_have_js_property("open", False)  # the finished subagent is folded to its line
    expect(child.locator("summary").first).to_contain_text("→ No gaps: three years of figures.")


def test_saved_tree_renders_what_matters(lab, page):
    from playwright.sync_api import expect

    _base, _token, _root, _tmp, saved, _edited = lab
    outputs = [o for c in saved.cells for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "using database" in text and "(new)" in text  # a new workspace is announced
    page.evaluate("async () => { window.__saved = await window.jupyterapp.commands.execute('docmanager:open',"
                  " {path: 'saved.ipynb'}); }")
    view = page.locator(".agentstack-snapshot:visible")
    expect(view.locator(".agentstack-snapshot-node").first).to_be_visible()
    _check_run_view(view, page, "saved tree")
    _contrast(page, ".agentstack-snapshot", "saved tree", must=("code failed", "Which measure", "traceback"))
    page.evaluate("async () => { const w = window.__saved; await w.sessionContext.ready;"
                  " await w.sessionContext.shutdown(); w.dispose(); }")


def test_panel_run_view_renders_what_matters(lab, page):
    from playwright.sync_api import expect

    _base, _token, _root, _tmp, saved, edited = lab
    run_id = next(o["data"][SNAPSHOT]["runId"] for c in saved.cells for o in c.get("outputs", [])
                  if SNAPSHOT in o.get("data", {}))
    page.evaluate(f"() => {{ window.agentstackPanel.showRun({json.dumps(run_id)});"
                  " window.jupyterapp.shell.activateById('agentstack-agents'); }")
    panel = page.locator("#agentstack-agents")
    row = panel.locator(f".agentstack-run[data-run='{run_id}'] .agentstack-run-prompt")
    expect(row).to_have_text(TYPED[:79].rstrip() + "…")  # cut titles end with an ellipsis
    view = panel.locator(".agentstack-tree-view")
    expect(view.locator(".agentstack-snapshot-node").first).to_be_visible()
    # the panel redraws on a timer: hold its redraws while the test opens folds and reads
    page.evaluate("() => { const p = window.agentstackPanel; p.__render = p.render; p.render = () => {}; }")
    try:
        _check_run_view(view, page, "panel run view")
        _contrast(page, "#agentstack-agents", "panel", must=("code failed", "Which measure"))
    finally:
        page.evaluate("() => { const p = window.agentstackPanel; p.render = p.__render; }")
    # a run whose code the person edited: the run view says which code ran, and keeps the model's
    page.evaluate(f"() => window.agentstackPanel.showRun({json.dumps(edited)})")
    expect(panel.locator(f".agentstack-run[data-run='{edited}'] .agentstack-run-prompt")).to_have_text(
        "Add the figures up")
    tool = view.locator(".agentstack-run-tool").first
    expect(tool.locator("summary").first).to_have_text("python ✓ · edited")
    page.evaluate("() => { const p = window.agentstackPanel; p.__render = p.render; p.render = () => {}; }")
    try:
        tool.locator("summary").first.click()
        expect(tool).to_contain_text("code that ran (edited)")
        expect(tool.locator(":scope > pre").first).to_have_text("total = 2 + 2")
        tool.locator("details summary").click()
        expect(tool.locator("details pre")).to_have_text("total = 1 + 1")  # the model's original
        expect(view.locator(".agentstack-qa-item summary").first).to_contain_text("Code edited")
        expect(view.locator(".agentstack-result strong")).to_have_text("Done.")
    finally:
        page.evaluate("() => { const p = window.agentstackPanel; p.render = p.__render; }")


def test_live_tree_answer_headers_and_titles(lab, page):
    from playwright.sync_api import expect

    page.evaluate("async () => { window.__nb = await window.jupyterapp.commands.execute('docmanager:open',"
                  " {path: 'live.ipynb'}); await window.__nb.sessionContext.ready; }")
    page.wait_for_function("window.__nb.sessionContext.session?.kernel", timeout=90_000)
    page.evaluate("async () => { window.jupyterapp.shell.activateById(window.__nb.id);"
                  " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    tree = page.locator(".agentstack-tree")
    final = tree.locator(".agentstack-result").filter(has_text="Final answer")
    expect(final).to_have_count(1)
    expect(final.locator("strong").first).to_have_text("up 12%")
    # The answer box is as tall as its Markdown: the same HTML with normal white space is no shorter.
    heights = final.locator(".agentstack-prose").first.evaluate("""p => {
        const twin = p.cloneNode(true); twin.style.whiteSpace = 'normal';
        const holder = document.createElement('div'); holder.style.whiteSpace = 'normal';
        holder.append(twin); p.parentElement.append(holder);
        const out = [p.getBoundingClientRect().height, twin.getBoundingClientRect().height];
        holder.remove(); return out; }""")
    assert heights[0] <= heights[1] + 2, heights
    # No "using database" line: the workspace exists, in the notebook's own folder.
    expect(page.locator(".jp-OutputArea-output").filter(has_text="using database")).to_have_count(0)
    root = tree.locator(".agentstack-node").first
    title = root.locator(".agentstack-title").first
    expect(title).to_contain_text(TYPED[:60])
    assert "`" not in title.inner_text() and "**" not in title.inner_text(), title.inner_text()
    root.locator(".agentstack-toggle").first.click()  # collapsed: the header alone says the code failed
    expect(root.locator(".agentstack-transcript").first).to_be_hidden()
    expect(root.locator(".agentstack-header").first.locator(".agentstack-failed-flag")).to_have_text("✗ code failed")
    root.locator(".agentstack-toggle").first.click()
    # folded accordion titles ("transcript", each tool call) too: JupyterLab draws them in its dimmest text
    _contrast(page, ".agentstack-tree", "live tree, transcript folded", must=("transcript",))
    root.locator(".agentstack-work").first.locator(
        ".lm-AccordionPanel-title, .jupyter-widget-Collapse-header, .p-Collapse-header").first.click()
    tool = root.locator(".agentstack-transcript").first.locator(":scope > .agentstack-tool").first
    tool.get_by_text("python ✗").click()
    expect(tool).to_contain_text("figures = json.loads('{')")
    trimmed = tool.locator("pre.agentstack-code-box").nth(1).inner_text()
    assert "library frame" in trimmed and "JSONDecodeError" in trimmed and "decoder.py" not in trimmed, trimmed
    full = tool.locator("details.agentstack-full-traceback")
    full.locator("summary").click()
    expect(full.locator("pre")).to_contain_text("decoder.py")
    _contrast(page, ".agentstack-tree", "live tree", must=("transcript", "code failed", "traceback"))
    page.evaluate("async () => { const w = window.__nb; await w.sessionContext.shutdown(); w.dispose(); }")


def test_toasts_read_as_plain_typed_text(lab, page):
    from playwright.sync_api import expect

    _base, _token, root, _tmp, _saved, _edited = lab
    page.evaluate("() => window.jupyterapp.shell.activateById('agentstack-agents')")
    proc = subprocess.Popen([sys.executable, "-c", WAITING, str(root), PROMPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=root)
    try:
        toast = page.locator(".Toastify__toast").filter(has_text="An agent needs you (clarification)")
        expect(toast).to_be_visible()
        expect(toast).to_contain_text("An agent needs you (clarification): Which measure of sales do you mean?")
        card = page.locator("#agentstack-agents .agentstack-decision")
        card.locator("textarea.agentstack-answer").fill("revenue")
        card.locator("button.agentstack-send").click()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert out.strip() == "completed", err
    done = page.locator(".Toastify__toast").filter(has_text="Agent run completed")
    expect(done).to_be_visible()
    shown = done.inner_text()
    assert f"Agent run completed: {TYPED[:99].rstrip()}…" in shown, shown  # as typed, cut with an ellipsis
    assert "`" not in shown and "**" not in shown, shown
