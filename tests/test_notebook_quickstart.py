"""The quickstart notebook, executed headless in a real kernel (nbclient, widget state stored)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from agentstack_lab.demo import cell_text, run_quickstart
from agentstack_lab.notebook.snapshot import SNAPSHOT_MIME
from tests.notebook_helpers import node_summary, valid_notebook, widget_models

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _outputs(nb, tag):
    cell = next(c for c in nb.cells if tag in c.get("metadata", {}).get("tags", []))
    return cell.outputs


def test_quickstart_runs_headless_with_final_widget_state(workdir):
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", workdir)
    nb = run_quickstart(workdir / "quickstart.ipynb")  # what `make demo` runs
    saved = valid_notebook(workdir / "quickstart.executed.ipynb")  # what `make demo` writes validates
    assert cell_text(saved, "agent-tree") == cell_text(nb, "agent-tree")
    assert cell_text(nb, "agent-tree", streams=False).startswith("✓ researcher [completed] How are sales trending in @df?")
    # the tree is drawn once in the whole notebook: by the `--wait` cell itself, nothing shows it again
    drawn = [(c.metadata.get("tags"), o) for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if SNAPSHOT_MIME in o.get("data", {})]
    assert [tags for tags, _o in drawn] == [["agent", "agent-tree"]], drawn

    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = widget_models(state)
    nodes = node_summary(models)
    assert len(nodes) == 4  # the root and the demo's three subagents
    assert [n["status"] for n in nodes] == ["completed"] * 4
    root = next(n for n in nodes if n["children"] == 3)
    assert "researcher" in root["title"] and "How are sales trending in" in root["title"]
    assert "Final answer" in root["result"] and "offline scripted demo" in root["result"]
    assert all("offline" in n["content"] for n in nodes)  # streamed text was rendered
    assert "<script" not in str(state)

    (tree_out,) = [o for o in _outputs(nb, "agent-tree") if "data" in o]
    # no front end drew the widget: the saved output is the final snapshot, which nbconvert exports as Markdown
    assert "application/vnd.jupyter.widget-view+json" not in tree_out["data"]
    assert tree_out["data"][SNAPSHOT_MIME]["final"] is True
    text = tree_out["data"]["text/plain"].splitlines()
    assert text[0].startswith("✓ researcher [completed] How are sales trending in @df?")  # as typed
    assert sum(line.lstrip("│├└─ ").startswith("✓ ") for line in text) == 4
    assert "```text" in tree_out["data"]["text/markdown"]

    result = _outputs(nb, "result")[0]["text"]
    assert result.startswith("completed\n[offline scripted demo]")
    assert "mean" in _outputs(nb, "agent-variable")[0]["data"]["text/plain"]  # df_summary made by the agent
    events = _outputs(nb, "events")[0]["data"]["text/plain"]
    assert re.search(r"agent-completed +4\b", events) and re.search(r"tool-call +1\b", events), events
    assert "stored 'q2-sales' in namespace 'default'" in _outputs(nb, "memory-store")[0]["text"]
    search = _outputs(nb, "memory-search")[0]["data"]["text/plain"].splitlines()
    # the cell selects hits[["key", "score", "matched", "content"]]: exactly those columns, in that order
    assert search[0].split()[:4] == ["key", "score", "matched", "content"] and search[1].split()[0] == "q2-sales"
    listing = _outputs(nb, "memory-list")[0]["data"]["text/plain"]
    assert "churn" in listing and "q2-sales" in listing
    assert (workdir / ".agentstack" / "agentstack.db").exists()
