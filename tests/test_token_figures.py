"""Token figures: labelled by their basis (estimated / unknown) and named by scope, the same on every view."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.engine.state import token_text
from agentstack_lab.notebook.snapshot import snapshot, snapshot_html
from agentstack_lab.notebook.tree import tree_to_text
from agentstack_lab.notebook.widget import AgentTree

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    return result


def test_token_text_names_the_scope_and_the_basis():
    assert token_text({"inputTokens": 1200, "outputTokens": 9, "basis": "reported"}, "subtree") == \
        "1,209 tokens (subtree)"
    assert token_text({"inputTokens": 3, "outputTokens": 4, "basis": "estimated"}, "this agent") == \
        "~7 tokens (estimated, this agent)"
    assert token_text({"inputTokens": 0, "outputTokens": 0, "basis": "unknown"}, "this agent") == \
        "tokens unknown (this agent)"
    assert token_text({"inputTokens": 5, "outputTokens": 0, "basis": "partial"}, "subtree") == \
        "≥5 tokens (some unknown, subtree)"


def test_scripted_run_is_estimated_and_every_view_shows_the_same_figure(workdir):
    data = json.loads(invoke("agent", "run", "what is a monad?", "--json").stdout)
    run_id = data["runId"]
    tree = json.loads(invoke("agent", "tree", run_id, "--json").stdout)
    usage = tree["usage"]
    assert usage["basis"] == "estimated" and usage["inputTokens"] > 0 and tree["ownUsage"]["basis"] == "estimated"
    scope = "subtree" if tree["children"] else "this agent"
    figure = token_text(usage, scope)
    assert figure.startswith("~") and f"(estimated, {scope})" in figure

    # the CLI tree, the saved tree (text and HTML) and the cell widget: the root shows the same figure
    assert figure in invoke("agent", "tree", run_id).stdout.replace("\n", " ")
    assert figure in tree_to_text(tree)
    assert figure in snapshot_html(snapshot(tree, run_id=run_id))
    widget = AgentTree()
    for node in _flat(tree):
        widget.apply(_state(node))
    assert figure in widget.node_view(tree["id"]).meta.value

    # agent list: one row per agent, its own figure, in a column that says so
    listed = invoke("agent", "list", "--run", run_id).stdout
    assert "tokens (this agent)" in listed
    own = tree["ownUsage"]["inputTokens"] + tree["ownUsage"]["outputTokens"]
    root_row = next(line for line in listed.splitlines() if line.startswith(f"│ {tree['id'][:8]}"))
    assert re.search(rf"~{own:,} tokens \(estimated\)", root_row), listed
    rows = json.loads(invoke("agent", "list", "--run", run_id, "--json").stdout)
    assert {r["tokenBasis"] for r in rows} == {"estimated"}


def _flat(node):
    yield node
    for child in node.get("children", []):
        yield from _flat(child)


def _state(node):
    from agentstack_lab.events import AgentState

    state = {k: v for k, v in node.items() if k not in ("children", "usage")}
    return AgentState(agent_id=node["id"], state=state)
