"""Headless notebooks export readably: ``jupyter nbconvert --to html`` and ``--to markdown`` show the final tree.

A real kernel runs a background ``%agent`` (the default) and ``--wait`` ones on the offline scripted
provider, executed by nbclient (widget state stored, as papermill and ``nbconvert --execute`` store it)
or by ``agentstack-lab workflow run``; the real ``jupyter nbconvert`` of the venv then exports it.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from agentstack_lab.notebook.snapshot import SNAPSHOT_MIME
from agentstack_lab.notebook.tree import inert_markdown
from tests.notebook_helpers import ASKING_PROVIDER, notebook, run_cells

JUPYTER = Path(sys.executable).with_name("jupyter")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CELLS = {
    "setup": "%load_ext agentstack_lab\n" + ASKING_PROVIDER,
    "background": "bg = %agent --auto-approve --provider scripted Which month had the most sales?\nbg",
    "await": "_ = await bg.wait()",
    "waited": "waited = %agent --wait --auto-approve --provider scripted How are sales trending?",
    # an answer carrying HTML: the exports must keep it inert
    "asked": "asked = %agent --wait --auto-approve --provider @asking --no-subagents --answer clarification=2023 "
             "What was the best year?",
    "record": ("import json, pathlib\n"
               "_ = pathlib.Path('runs.json').write_text(json.dumps({r: {'status': v.status, 'result': v.result, "
               "'tree': v.tree} for r, v in (('bg', bg), ('waited', waited), ('asked', asked))}))"),
}


@pytest.fixture(scope="module", params=["nbclient", "workflow run"])
def executed(request, tmp_path_factory):
    """The notebook executed by nbclient (as papermill and ``nbconvert --execute``) or ``agentstack-lab workflow run``."""
    work = tmp_path_factory.mktemp("export")
    nb = notebook(CELLS)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = work / "executed.ipynb"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("JPY_SESSION_NAME", raising=False)  # a kernel no Jupyter Server session started
        if request.param == "nbclient":
            nbformat.write(run_cells(nb, work, timeout=180, allow_errors=False, store_widget_state=True), path)
        else:
            nbformat.write(nb, work / "in.ipynb")
            done = subprocess.run([str(Path(sys.executable).with_name("agentstack-lab")), "workflow", "run",
                                   "in.ipynb", path.name], capture_output=True, text=True, timeout=240, cwd=work)
            assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads((work / "runs.json").read_text("utf-8"))
    return work, path, runs


def _outputs(nb, tag):
    return next(c for c in nb.cells if tag in c.metadata.get("tags", [])).outputs


def _export(path: Path, to: str) -> str:
    done = subprocess.run([str(JUPYTER), "nbconvert", "--to", to, "--output", f"exported-{to}", str(path)],
                          capture_output=True, text=True, timeout=240, cwd=path.parent)
    assert done.returncode == 0, done.stderr
    (out,) = path.parent.glob(f"exported-{to}.*")
    return out.read_text("utf-8")


@pytest.mark.slow
def test_the_runs_completed_and_the_notebook_is_valid(executed):
    _work, path, runs = executed
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert not any(WIDGET_VIEW in out.get("data", {}) for cell in nb.cells for out in cell.outputs)
    # nbclient stores every widget's state; workflow run only the state of widgets an output shows: none here
    assert ("widgets" in nb.metadata) is (not (path.parent / "in.ipynb").exists())
    assert {name: run["status"] for name, run in runs.items()} == dict.fromkeys(("bg", "waited", "asked"), "completed")
    assert all(run["result"] for run in runs.values())


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["background", "waited", "asked"])
def test_each_run_output_holds_its_final_tree_and_no_widget(executed, tag):
    _work, path, runs = executed
    (out,) = [o for o in _outputs(nbformat.read(path, as_version=4), tag) if "data" in o]
    data = out["data"]
    assert WIDGET_VIEW not in data and "text/html" not in data  # nbconvert would take either over the Markdown
    snap = data[SNAPSHOT_MIME]
    run = runs[{"background": "bg"}.get(tag, tag)]
    assert snap["final"] is True and snap["roots"][0]["status"] == "completed"
    assert snap["roots"][0]["result"] == run["result"]
    usage = run["tree"]["usage"]
    assert snap["roots"][0]["usage"]["outputTokens"] == int(usage.get("output_tokens") or usage["outputTokens"])
    assert data["text/plain"].startswith("✓ ") and "[completed]" in data["text/plain"].splitlines()[0]
    assert inert_markdown(run["result"]).splitlines()[0] in data["text/markdown"]  # as Markdown, its HTML as text


def _answer_lines(runs):
    return [run["result"].strip().splitlines()[0] for run in runs.values()]


@pytest.mark.slow
def test_markdown_export_shows_the_final_trees_as_markdown(executed):
    _work, path, runs = executed
    md = _export(path, "markdown")
    assert "<div" not in md.lower() and "<style" not in md.lower()
    assert md.count("[completed]") >= 3 and "pending" not in md and "0 in / 0 out" not in md
    for line in _answer_lines(runs):
        assert inert_markdown(line) in md
    # the answer is Markdown (not a fenced block of raw ** and fences); its HTML is text
    assert "The year is **2024**. &lt;script>" in md and "```text\nThe year is" not in md
    assert md.count("**Agent tree**") == 3


@pytest.mark.slow
def test_html_export_shows_the_final_trees(executed):
    _work, path, runs = executed
    page = _export(path, "html")
    body = page[page.index("<body"):]
    # the model's HTML is text on the page, never markup (a stored widget state holds it as JSON data)
    state = f'<script type="{WIDGET_STATE}">'
    outside_state = (body[:body.index(state)] + body[body.index("</script>", body.index(state)):]
                     if state in body else body)
    assert "<script>alert" not in outside_state and "<img src=x" not in outside_state
    assert "&lt;script&gt;alert(" in outside_state
    # what a reader sees: the body without scripts and styles
    visible = re.sub(r"<(script|style)\b.*?</\1>", "", body, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", "", visible))
    assert text.count("[completed]") >= 3 and "pending" not in text and "0 in / 0 out" not in text
    for line in _answer_lines(runs):
        assert line.replace("**", "") in text
    assert "The year is <strong>2024</strong>." in body  # the answer's Markdown is rendered
    assert text.count("Agent tree") == 3
    assert f'<script type="{WIDGET_VIEW}">' not in page  # no widget view to draw as an empty area


def test_workflow_run_keeps_the_state_of_shown_widgets_and_what_they_use():
    from agentstack_lab.workflows.execute import keep_shown_widgets

    slider, layout, tree, style = "a" * 32, "b" * 32, "c" * 32, "d" * 32
    state = {slider: {"state": {"layout": f"IPY_MODEL_{layout}"}}, layout: {"state": {}},
             tree: {"state": {"children": [f"IPY_MODEL_{style}"]}}, style: {"state": {}}}
    nb = new_notebook(cells=[new_code_cell("slider", outputs=[nbformat.v4.new_output(
        "display_data", data={WIDGET_VIEW: {"model_id": slider}, "text/plain": "IntSlider()"})])])
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": dict(state), "version_major": 2, "version_minor": 0}}
    keep_shown_widgets(nb)
    assert set(nb.metadata.widgets[WIDGET_STATE]["state"]) == {slider, layout}  # the tree no output shows went
    nb.cells[0].outputs = []
    keep_shown_widgets(nb)
    assert "widgets" not in nb.metadata
    nbformat.validate(nb)
