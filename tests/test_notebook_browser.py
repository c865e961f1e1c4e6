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

``make test`` installs chromium (``make browser``, as root with apt-get); elsewhere this test skips.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
SCREENSHOT = Path(tempfile.gettempdir()) / "agentstack-browser-tree.png"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium "
                       "(`make browser` installs it as root with apt-get)"),
]

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
            return [tool_call("python", {"code": "best_year = max(sales, key=sales.get)\\nprint('best', best_year)"})]
        year = re.search(r"best (\\d{4})", out).group(1)
        said = re.search(r"User's answer: (.*)", _user_text(req)).group(1)
        answers.append(f"The best year was **{year}** (measure: {said}). "
                       '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
                       '<style>body { display: none }</style> [details](javascript:window.__pwned=3)')
        return answers[-1]
    return answers[-1] + " The analyst found no gaps."  # the summary merges the main answer and the child's

asking = ScriptedProvider(_script)
'''
AGENT = "run = %agent --provider @asking --max-depth 1 What was our best year for sales?\nrun"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on loopback serving ``tree.ipynb`` from a temporary root folder."""
    root = tmp_path / "lab"
    root.mkdir()
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(AGENT)],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, root / "tree.ipynb")
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, HOME=str(tmp_path / "home"), JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"), JUPYTER_PLATFORM_DIRS="1")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--LabApp.expose_app_in_browser=True",
         f"--LabApp.user_settings_dir={tmp_path / 'lab-settings'}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/lab/tree/tree.ipynb?token={token}", root
    finally:
        server.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
        log.close()


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
    assert meta["rects"] == 1 and meta["h"] < 1.8 * meta["size"], m  # "in … tok · 552 ms" on one line
    assert title["h"] <= 2 * title["lh"] + 2, m  # the title wraps to two lines at most


def test_jupyterlab_tree_is_answered_approved_and_safe(lab, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, root = lab
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 700, "height": 1000})  # narrow: the header must still read on one row
        page = browser.pages[0] if browser.pages else browser.new_page()
        try:
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            page.wait_for_function("window.jupyterapp?.shell?.currentWidget?.sessionContext")
            page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready;"
                          " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

            tree = page.locator(".agentstack-tree")
            answer = tree.locator(".agentstack-answer textarea")
            expect(answer).to_be_visible()
            expect(tree.locator(".agentstack-query")).to_contain_text("Which measure of sales do you mean?")
            expect(tree.locator(".agentstack-status-waiting_user")).to_have_count(1)
            expect(tree.locator(".agentstack-stop")).to_be_visible()  # a working agent can be stopped
            answer.fill("total revenue")
            tree.screenshot(path=str(SCREENSHOT.with_name("agentstack-browser-question.png")))
            tree.locator("button.agentstack-send").click()

            approve = tree.locator("button.agentstack-approve")
            expect(approve).to_be_visible()
            code = "best_year = max(sales, key=sales.get)\nprint('best', best_year)"
            query = tree.locator(".agentstack-query").first
            expect(query).to_contain_text("researcher wants to run this Python code:")
            viewer = query.locator(".agentstack-code-view pre")
            expect(viewer).to_have_text(code)  # read-only, in full contrast, before Edit
            assert viewer.evaluate("e => getComputedStyle(e).fontFamily").lower().find("mono") >= 0
            assert viewer.evaluate("e => parseFloat(getComputedStyle(e.closest('.agentstack-code-view')).opacity)") == 1
            expect(tree.locator(".agentstack-code textarea")).to_be_hidden()
            expect(tree.locator("button.agentstack-reject")).to_be_visible()
            expect(tree.locator("button.agentstack-edit")).to_be_visible()
            _assert_header_fits(tree.locator(".agentstack-node").first)
            tree.screenshot(path=str(SCREENSHOT.with_name("agentstack-browser-approval.png")))
            tree.locator("button.agentstack-edit").click()
            expect(tree.locator(".agentstack-code textarea")).to_have_value(code)  # now editable, unchanged
            expect(viewer).to_be_hidden()
            approve.click()

            nodes = tree.locator(".agentstack-node")
            expect(nodes).to_have_count(2)
            expect(tree.locator(".agentstack-node.agentstack-status-completed")).to_have_count(2)
            final = tree.locator(".agentstack-result").filter(has_text="Final answer")
            expect(final).to_have_count(1)
            expect(final).to_contain_text("The best year was 2023 (measure: total revenue).")
            expect(final.locator("strong")).to_have_text("2023")

            # Nothing from the model acted: no handler ran, no element or link survived, the page is visible.
            assert page.evaluate("() => window.__pwned") is None
            assert tree.locator("img, script, style, iframe").count() == 0
            assert tree.locator("[onerror], [onclick], a[href^='javascript']").count() == 0
            assert page.evaluate("() => getComputedStyle(document.body).display") != "none"
            expect(final.locator("a", has_text="details")).to_have_count(0)  # the javascript: link is plain text

            expect(tree.locator(".agentstack-node .agentstack-node")).to_contain_text("No gaps: three years")
            expect(tree.locator(".agentstack-stop")).to_have_count(2)
            expect(tree.locator(".agentstack-stop").first).to_be_hidden()  # a finished agent has nothing to stop
            header = nodes.first.locator(".agentstack-meta").first
            expect(header).to_have_text(re.compile(r"^in \d+ · out \d+ tok · \d+(\.\d)? m?s$"))  # usage, elapsed

            # The tool call is folded: its title says what ran; its body opens on click.
            tools = nodes.first.locator(".agentstack-tools").first
            expect(tools).to_contain_text("python ✓")
            tools.get_by_text("python ✓").click()
            expect(tools).to_contain_text("best 2023")

            _assert_header_fits(nodes.nth(1))  # a finished node: badge and usage on one line
            page.set_viewport_size({"width": 1300, "height": 1000})
            _assert_header_fits(nodes.first)
            tree.screenshot(path=str(SCREENSHOT.with_name("agentstack-browser-tree-wide.png")))
            page.set_viewport_size({"width": 700, "height": 1000})

            # Collapsing the root hides its subtree.
            child = nodes.nth(1)
            nodes.first.locator(".agentstack-toggle").first.click()
            expect(child).to_be_hidden()
            nodes.first.locator(".agentstack-toggle").first.click()
            expect(child).to_be_visible()
            assert not errors, errors
        finally:
            try:  # for a person to look at (also when the test failed)
                shown = page.locator(".agentstack-tree")
                (shown if shown.count() == 1 else page).screenshot(path=str(SCREENSHOT), timeout=5_000)
            except Exception as exc:  # a failed screenshot must not hide the test's own failure
                print(f"no screenshot: {exc}")
            browser.close()
