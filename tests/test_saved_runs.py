"""Saved runs render without a kernel: every ``%agent`` output carries the tree's final snapshot
(custom MIME type + Markdown, and HTML where a front end watched the run), and ``%agent show RUN_ID`` rebuilds a past run from the log.

One real kernel (nbclient); the outputs are read back from the executed notebook, as a reopened
notebook would have them.
"""

from __future__ import annotations

import pytest

from agentstack_lab.notebook.magics import show_ref
from agentstack_lab.notebook.snapshot import SNAPSHOT_MIME, snapshot
from tests.notebook_helpers import ASKING_PROVIDER, by_tag, run_cells

CELLS = {
    "setup": "%load_ext agentstack_lab\n" + ASKING_PROVIDER,
    "wait": "%agent --wait --auto-approve --provider @asking --no-subagents --answer clarification=2023 "
            "What was the best year?",
    "id": "rid = _.id\nprint(rid)",
    "show": "short = rid[:8]\n%agent show {short}",
    "show-missing": "%agent show deadbeef",
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    work = tmp_path_factory.mktemp("saved")
    return {tag: c.outputs for tag, c in by_tag(run_cells(CELLS, work)).items()}


def _bundles(outputs):
    return [o["data"] for o in outputs if o["output_type"] in ("display_data", "execute_result")
            and SNAPSHOT_MIME in o.get("data", {})]


@pytest.mark.slow
def test_wait_output_carries_the_final_tree_in_every_format(executed):
    rid = "".join(o.get("text", "") for o in executed["id"] if o["output_type"] == "stream").strip()
    (data,) = _bundles(executed["wait"])  # the live display was updated at the end: one output, final
    snap = data[SNAPSHOT_MIME]
    assert snap["final"] is True and snap["runId"] == rid
    (root,) = snap["roots"]
    assert root["status"] == "completed" and "2024" in root["result"] and root["usage"]["outputTokens"] > 0
    # no front end watched this run (nbclient): no widget view nor HTML for nbconvert to prefer over the Markdown
    assert "application/vnd.jupyter.widget-view+json" not in data and "text/html" not in data
    markdown = data["text/markdown"]
    assert "**Agent tree**" in markdown and "2024" in markdown
    outside_fences = markdown.split("```")[::2]  # the answer is Markdown whose HTML is text: "<" as "&lt;"
    assert "&lt;script" in markdown and not any("<script" in part or "<img" in part for part in outside_fences)


@pytest.mark.slow
def test_agent_show_rebuilds_a_past_run_from_the_log(executed):
    (data,) = _bundles(executed["show"])
    (root,) = data[SNAPSHOT_MIME]["roots"]
    (waited,) = _bundles(executed["wait"])
    assert root["status"] == "completed" and root["result"] == waited[SNAPSHOT_MIME]["roots"][0]["result"]
    assert "application/vnd.jupyter.widget-view+json" not in data  # no kernel object needed to show it
    (err,) = [o["text"] for o in executed["show-missing"] if o["output_type"] == "stream"]
    assert err.strip() == "UsageError: no run 'deadbeef' in this workspace"  # one line, no traceback


def test_show_is_only_show_followed_by_one_run_id():
    assert show_ref("show 1a2b3c4d", None) == "1a2b3c4d"
    assert show_ref("  show  0f3e9a2c-77aa-4b8e-9c1d-6e5f4a3b2c1d ", None) == "0f3e9a2c-77aa-4b8e-9c1d-6e5f4a3b2c1d"
    assert show_ref("show me the sales", None) is None  # a prompt
    assert show_ref("show abc", None) is None  # too short to be an id
    assert show_ref("show {run_id}", None) == "{run_id}"  # a kernel variable holding the id
    assert show_ref("show 1a2b3c4d", "cell body") is None  # %%agent: always a prompt


def test_snapshot_is_bounded_and_final_only_when_every_root_ended():
    big = {"id": "r", "type": "researcher", "status": "completed", "prompt": "p" * 5000, "result": "x" * 50_000,
           "usage": {"input_tokens": 3, "output_tokens": 4},
           "children": [{"id": "c", "type": "coder", "status": "running", "children": []}]}
    snap = snapshot(big, run_id="r")
    assert snap["final"] is True  # the root decides; a child cut short is shown as it was
    root = snap["roots"][0]
    assert len(root["prompt"]) < 2100 and len(root["result"]) < 20_100 and "more characters" in root["result"]
    assert root["usage"] == {"inputTokens": 3, "outputTokens": 4, "basis": "reported"} and root["children"][0]["status"] == "running"
    assert snapshot({**big, "status": "running"}, run_id="r")["final"] is False
    assert snapshot(None, run_id=None) == {"version": 1, "runId": None, "final": False, "roots": []}
