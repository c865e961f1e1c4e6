"""Issue 27 item 10: ``%agent_history`` / ``%agent_undo`` read well in a 680 px notebook.

Runs of this kernel (an in-process shell, scripted providers, the live executor) and a row another
kernel wrote to the same SQLite file: short run ids with the whole id in a tooltip, the change in one
wrapped cell, other kernels' rows marked not undoable, and an undo of a run that changed nothing says
so. The layout is measured in Debian chromium at 680 px when it is installed.
"""

from __future__ import annotations

import re

import pytest

from agentstack_lab.store import provenance
from tests.browser_helpers import CHROMIUM, browser_context
from tests.notebook_helpers import code_then_answer

LINE = "--wait --auto-approve --no-subagents --max-depth 0 --provider @editor "


def _agent(sh, code, prompt="tidy up"):
    sh.user_ns["editor"] = code_then_answer(code)
    return sh.run_line_magic("agent", LINE + prompt)


def _cells(html):
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", html)[1:]]


@pytest.fixture
def history(shell):
    """Two runs here (one undone), one quiet run, and a row written by another kernel's run."""
    shell.user_ns.update(b=[1, 2], notes="x" * 50)
    first = _agent(shell, "a = 41 + 1\nb.append(3)\nlong_name_for_a_value = 'word ' * 60")
    second = _agent(shell, "c = {'k': list(range(40))}\ndel notes")
    quiet = _agent(shell, "print('nothing changes')")
    assert {first.status, second.status, quiet.status} == {"completed"}
    shell.run_line_magic("agent_undo", first.id[:8])
    ws = shell.magics_manager.registry["AgentstackMagics"].workspace
    other = "f00dcafe-0000-4000-8000-000000000001"
    provenance.write(ws.db, [{"run_id": other, "agent_id": None, "call_id": "c9", "name": "remote",
                              "action": "created", "before": "", "after": "int = 7"}])
    return shell, first, second, quiet, other


def test_history_is_compact_wrapped_and_marks_what_can_be_undone(history):
    shell, first, second, _quiet, other = history
    h = shell.run_line_magic("agent_history", "")
    assert list(h.columns[:8]) == ["time", "run_id", "agent", "call_id", "name", "action", "before", "after"]
    assert set(h.run_id) == {first.id, second.id, other}  # the data keeps the whole ids
    by_run = h.groupby("run_id")
    assert by_run.undoable.any().to_dict() == {first.id: False, second.id: True, other: False}
    assert h[h.run_id == first.id].undone.all() and not h[h.run_id == other].undone.any()

    html = h._repr_html_()
    assert re.findall(r"<th\b[^>]*>(.*?)</th>", html) == ["time", "run", "agent", "name", "change", "undo"]
    rows = _cells(html)
    assert len(rows) == len(h) and all(re.fullmatch(r"\d\d:\d\d:\d\d", r[0]) for r in rows)
    assert {r[1] for r in rows} == {first.id[:8], second.id[:8], other[:8]}
    assert f'title="{second.id}"' in html and first.id not in re.sub(r'title="[^"]*"', "", html)
    undo = {(r[1], r[3], r[4].split()[0]): r[5] for r in rows}  # (run, name, action) -> the undo column
    assert undo[(other[:8], "remote", "created")] == "no: other kernel"
    assert undo[(second.id[:8], "c", "created")] == "yes" and undo[(first.id[:8], "a", "created")] == "undone"
    assert undo[(first.id[:8], "a", "removed")] == undo[(first.id[:8], "b", "restored")] == "(the undo)"
    change = {r[3]: r[4] for r in rows if r[1] == second.id[:8]}
    assert change["c"].startswith("created dict") and change["notes"].startswith("deleted (was str")
    assert "overflow-wrap: anywhere" in html and "max-width: 24em" in html

    text = repr(h).splitlines()
    assert text[0].split() == ["time", "run", "agent", "name", "change", "undo"]
    assert all(len(line) <= 120 for line in text) and not any(first.id in line for line in text)
    assert any(line.rstrip().endswith("no: other kernel") for line in text)

    picked = h[["name", "action"]]  # columns chosen in code: shown as they are
    assert "<th>name</th>" in picked._repr_html_().replace(' style="text-align: right;"', "")


def test_undo_says_what_it_did_or_that_there_was_nothing(history, capsys):
    shell, _first, second, quiet, other = history
    capsys.readouterr()
    shell.run_line_magic("agent_undo", quiet.id[:8])
    assert capsys.readouterr().out == f"run {quiet.id[:8]} changed no kernel variables: nothing to undo\n"
    shell.run_line_magic("agent_undo", second.id)
    assert capsys.readouterr().out == f"undid run {second.id[:8]}: removed c; restored notes\n"
    assert "c" not in shell.user_ns and shell.user_ns["notes"] == "x" * 50
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="changed kernel variables in another kernel"):
        shell.run_line_magic("agent_undo", other[:8])


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium")
def test_the_history_table_fits_680_px(history, tmp_path):
    shell = history[0]
    html = shell.run_line_magic("agent_history", "")._repr_html_()
    # JupyterLab at 680 px: the output area is the window less the prompt column and margins (~110 px)
    page_html = ('<html><body style="margin: 0; font: 13px sans-serif"><div id="out" style="width: 570px; '
                 f'overflow-x: auto">{html.replace("<td ", "<td style-pad ")}</div></body></html>'
                 ).replace("style-pad ", "")
    with browser_context(tmp_path / "profile", viewport={"width": 680, "height": 900}) as browser:
        page = browser.new_page()
        page.set_content(page_html.replace("<table ", "<style>td, th { padding: 4px 8px }</style><table ", 1))
        widths = page.evaluate("() => { const o = document.getElementById('out');"
                               " return [o.scrollWidth, o.clientWidth,"
                               " Math.max(...[...document.querySelectorAll('td')].map(td => td.scrollWidth"
                               " - td.clientWidth))]; }")
    scroll, client, overflow = widths
    assert scroll <= client, f"the table is {scroll} px wide in a {client} px output"
    assert overflow <= 0  # no cell's text runs past its cell: long values wrap
