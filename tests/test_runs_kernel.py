"""Background runs in a real kernel (nbclient): ``run = %agent ...`` shows its tree and its approval card, a
bare ``%agent ...`` draws its tree once, and Stop all with an approval pending ends the call cancelled."""

from __future__ import annotations

import pytest

from tests.notebook_helpers import CODE_THEN_ANSWER, by_tag, run_cells

pytestmark = pytest.mark.slow

WIDGET = "application/vnd.jupyter.widget-view+json"
SNAPSHOT = "application/vnd.agentstack.tree+json"

CELLS = {
    "setup": "%load_ext agentstack_lab\nimport asyncio\nfrom agentstack_lab.notebook.magics import agent_tree\n"
             + CODE_THEN_ANSWER + "\nmodel = code_then_answer('x = 41 + 1')\nquick = code_then_answer('y = 1')",
    "assigned": "run = %agent --provider @model --no-subagents Compute x",
    "waiting": "for _ in range(600):\n    if run.pending_queries:\n        break\n    await asyncio.sleep(0.05)\n"
               "tree = agent_tree(run)\nview = tree.node_view(run.root_id)\n"
               "print('card', view.card.query.kind, view.card.query.query_id == run.pending_queries[0].query_id)\n"
               "print('views', tree.handle is not None, tree.shown_in is not None)",
    "bare": "%agent --provider @quick --no-subagents --auto-approve Compute y",
    "bare-done": "last = get_ipython().magics_manager.registry['AgentstackMagics'].last_run\nawait last.wait()\n"
                 "print(last.status, last.prompt)",
    "stop": "qid = run.pending_queries[0].query_id\nview.stop.click()\nview.confirm_yes.click()\n"
            "await run.wait(raise_on_error=False)\nprint('status', run.status)",
    "after": "from agentstack_lab.events import ToolResult\nimport agentstack_lab\n"
             "results = [e for e in run.events if isinstance(e, ToolResult)]\n"
             "print('results', len(results), results[0].output)\n"
             "print('decision', agentstack_lab.workspace().decisions.get(qid).state)\n"
             "body = view.tool_panels()[0].children[0].children[0].value\n"
             "print('running', 'running…' in body, 'title', view.tool_panels()[0].titles[0])\n"
             "print('qa', 'Approval cancelled: stopped by the user' in view.qa.value)\n"
             "print('card-left', view.card is not None)",
}


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    nb = run_cells(CELLS, tmp_path_factory.mktemp("runs"))
    return by_tag(nb)


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")


def _trees(cell) -> list[dict]:
    return [o for o in cell.outputs if o["output_type"] in ("display_data", "execute_result")
            and SNAPSHOT in o.get("data", {})]


def test_an_assigned_background_run_shows_its_tree_and_its_approval_card(cells):
    (shown,) = _trees(cells["assigned"])  # the tree, although the run is assigned and not the cell's value
    # the live widget was displayed (its approval card is what the person answers); no front end drew it here,
    # so once the run ended its output was rewritten with the final snapshot alone
    assert "card approval True" in _text(cells["waiting"]) and "views True True" in _text(cells["waiting"])
    assert shown["data"][SNAPSHOT]["final"] is True and "[stopped]" in shown["data"]["text/plain"]
    assert WIDGET not in shown["data"]


def test_a_bare_background_run_draws_its_tree_once(cells):
    trees = _trees(cells["bare"])
    assert len(trees) == 1, cells["bare"].outputs
    assert "completed Compute y" in _text(cells["bare-done"])
    assert "[completed]" in trees[0]["data"]["text/plain"]


def test_stop_all_with_an_approval_pending_cancels_it_and_ends_the_call(cells):
    out = _text(cells["stop"]) + _text(cells["after"])
    assert "status stopped" in out, out
    assert "results 1 {'cancelled': True, 'reason': 'stopped by the user'}" in out, out
    assert "decision cancelled" in out and "running False" in out and "title python ■ · cancelled" in out, out
    assert "qa True" in out and "card-left False" in out, out
