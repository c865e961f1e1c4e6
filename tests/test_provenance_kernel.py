"""Must-show (issue 14): provenance and undo in a real kernel through nbclient.

An agent (scripted provider, auto-approved, live executor) creates ``a``, changes ``df`` in place
and deletes ``b``; ``%agent_history`` lists all three; ``%agent_undo RUN_ID`` restores all three
(values checked in the kernel) and the history shows the undo. A second run's undo, after the
user changed ``df``, refuses with one line naming ``df`` and changes nothing. The tree's tool call
lists the names it touched.
"""

from __future__ import annotations

import pytest

from tests.notebook_helpers import CODE_THEN_ANSWER, by_tag, run_cells, widget_models, with_class

pytestmark = pytest.mark.slow

EDITOR = CODE_THEN_ANSWER + (
    "editor = code_then_answer(\"a = 41 + 1\\ndf['y'] = df['x'] * 2\\ndel b\", \"Done: created a, added df.y, deleted b.\")\n")

CELLS = {
    "setup": "%load_ext agentstack_lab\nimport pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\nb = [1, 2]\n"
             + EDITOR,
    "run": "r = %agent --wait --auto-approve --provider @editor --no-subagents tidy up my variables",
    "after-run": "print('a' in globals(), a, list(df.columns), 'b' in globals())",
    "history": "h = %agent_history\nprint(h[['name', 'action', 'before', 'after']].to_string(index=False))\n"
               "print(set(h.run_id) == {r.id}, h.agent.iloc[0], h.call_id.notna().all())",
    "undo": "%agent_undo {r.id}",
    "after-undo": "print('a' in globals(), list(df.columns), b, df.equals(pd.DataFrame({'x': [1, 2, 3]})))",
    "history-df": "hd = %agent_history df\nprint(hd[['action', 'before', 'after']].to_string(index=False))",
    "undo-again": "%agent_undo {r.id}",
    # second scenario: the user changes df after the run, so undo must refuse and change nothing
    "run2": "r2 = %agent --wait --auto-approve --provider @editor --no-subagents tidy up again",
    "user-edit": "df.loc[0, 'x'] = 100",
    "undo-refused": "%agent_undo {r2.id[:8]}",
    "after-refusal": "print('a' in globals(), list(df.columns), df.x.tolist(), 'b' in globals())",
    "history-run2": "h2 = %agent_history --run {r2.id}\nprint(len(h2), sorted(h2.action))",
    "unknown": "%agent_undo 0000dead",
    "bad-name": "%agent_history 'not a name'",
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    work = tmp_path_factory.mktemp("provenance")
    nb = run_cells(CELLS, work, store_widget_state=True)
    return {tag: c.outputs for tag, c in by_tag(nb).items()}, nb.metadata.get("widgets", {})


def _out(outputs):
    """The cell's printed lines; consecutive stream messages are joined first (the kernel may flush one
    ``print`` in two messages: "3" and " ['changed', …]" arrived apart once under load)."""
    text = ""
    for o in outputs:
        if o["output_type"] == "stream":
            text += o["text"]
        elif o["output_type"] == "error":
            text += "\n" + "\n".join(o["traceback"]) + "\n"
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("agentstack-lab: using database")]


def test_setup_and_runs_ran(executed):
    cells, _ = executed
    for tag in ("setup", "run", "after-run", "history", "undo", "after-undo", "run2", "user-edit"):
        assert not [o for o in cells[tag] if o["output_type"] == "error"], (tag, _out(cells[tag]))


def test_the_agent_created_changed_and_deleted(executed):
    cells, _ = executed
    assert _out(cells["after-run"]) == ["True 42 ['x', 'y'] False"]


def test_history_lists_all_three(executed):
    cells, _ = executed
    lines = [ln.split() for ln in _out(cells["history"])]
    assert lines[0] == ["name", "action", "before", "after"]
    rows = {ln[0]: " ".join(ln[1:]) for ln in lines[1:4]}
    assert rows == {"a": "created int = 42", "df": "changed DataFrame (3, 1) [x] DataFrame (3, 2) [x, y]",
                    "b": "deleted list[2]"}
    assert lines[4][0] == "True" and lines[4][1].startswith("researcher") and lines[4][2] == "True"


def test_undo_restores_all_three_and_is_recorded(executed):
    cells, _ = executed
    (line,) = _out(cells["undo"])
    assert line.startswith("undid run ") and line.endswith(": removed a; restored b, df")
    assert _out(cells["after-undo"]) == ["False ['x'] [1, 2] True"]
    lines = [ln.split(None, 1) for ln in _out(cells["history-df"])]
    assert [ln[0] for ln in lines[1:]] == ["changed", "restored"]
    assert lines[2][1].split() == ["DataFrame", "(3,", "2)", "[x,", "y]", "DataFrame", "(3,", "1)", "[x]"]
    (line,) = _out(cells["undo-again"])
    assert line == f"UsageError: %agent_undo: run {line.split('run ')[1].split()[0]} was already undone"


def test_undo_after_the_user_changed_df_refuses_with_one_line_and_changes_nothing(executed):
    cells, _ = executed
    (line,) = _out(cells["undo-refused"])
    assert line.startswith("UsageError: %agent_undo: cannot undo run ") and line.endswith(
        ": df changed since the run (undo would lose that change); nothing was restored")   # only df is named
    assert _out(cells["after-refusal"]) == ["True ['x', 'y'] [100, 2, 3] False"]
    assert _out(cells["history-run2"]) == ["3 ['changed', 'created', 'deleted']"]   # the refusal recorded nothing


def test_unknown_run_and_bad_name_are_one_line(executed):
    cells, _ = executed
    assert _out(cells["unknown"]) == ["UsageError: %agent_undo: unknown run '0000dead': no run with that id "
                                      "changed kernel variables (see %agent_history)"]
    (line,) = [ln for ln in _out(cells["bad-name"]) if "error" in ln.lower()][-1:]
    assert line == ("UsageError: %agent_history: error: NAME must be a variable name, got 'not a name' "
                    "(%agent_history -h for help)")  # the whole error: one line, no usage block above it


def test_the_tree_lists_the_names_each_python_call_touched(executed):
    _, widgets = executed
    models = widget_models(widgets["application/vnd.jupyter.widget-state+json"]["state"])
    titles = [t for _mid, s in with_class(models, "agentstack-tool") for t in s.get("titles") or []]
    assert "python ✓ · created a · changed df · deleted b" in titles, titles
