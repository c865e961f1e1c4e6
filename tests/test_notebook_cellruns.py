"""A cell's runs under ``notebook.rerun`` (stop | keep), a cleared output, and the controls' kernel side.

Unit tests drive ``cellruns`` and the tree's Presence child with fake runs and a fake clock; one test
runs a real kernel with ``notebook.rerun = keep`` in the workspace config and reads the database.
"""

from __future__ import annotations

import json
import time

import comm
import pytest

from agentstack_lab.config import Config, ConfigError
from agentstack_lab.events import AgentCompleted, AgentState, TextDelta, ToolCall, ToolResult, UserQuery
from agentstack_lab.notebook.cellruns import EarlierRuns, claim_cell, output_gone
from agentstack_lab.notebook.controls import ActionBar, code_blocks
from agentstack_lab.notebook.widget import GONE_GRACE, AgentTree
from tests.test_widget import Clock, CountingComm, state


@pytest.fixture
def sent(monkeypatch):
    CountingComm.sent = []
    monkeypatch.setattr(comm, "create_comm", CountingComm)
    return CountingComm.sent


class Run:
    """What cellruns reads of an AgentRun: id, status, done, stop, subscribe."""

    def __init__(self, name, status="waiting_user"):
        self.id, self.agent_type, self.prompt, self.status, self.done = name, "researcher", f"ask {name}", status, False
        self.stops: list[str] = []
        self.callbacks = []

    def stop(self, agent_id=None, *, reason="stopped by the user"):
        self.stops.append(reason)
        self.status = "stopped"
        for cb in self.callbacks:
            cb(AgentState(agent_id=self.id, state={"status": "stopped"}))

    def subscribe(self, callback, replay=True):
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback)


def test_rerun_stop_mode_stops_the_cells_earlier_run_only():
    runs, said = {}, []
    a, b, other = Run("a"), Run("b"), Run("other")
    assert claim_cell(runs, "cell-1", [], a, say=said.append) == []
    claim_cell(runs, "cell-2", [], other, say=said.append)
    assert claim_cell(runs, "cell-1", [], b, say=said.append) == []
    assert a.stops == ["stopped: its cell was run again"] and not other.stops and not b.stops
    assert runs == {"cell-1": [b], "cell-2": [other]}
    assert said == ["agentstack-lab: stopped the previous run of this cell (its cell was run again)"]


def test_rerun_keep_mode_lists_the_live_earlier_runs_and_deleted_cells_stop():
    runs = {}
    a, b, c = Run("a"), Run("b", status="completed"), Run("c")
    claim_cell(runs, "cell", [], a, mode="keep")
    claim_cell(runs, "cell", [], b, mode="keep")
    assert claim_cell(runs, "cell", [], c, mode="keep") == [a]  # b finished: not listed
    assert not a.stops and runs["cell"] == [a, c]
    d = Run("d")
    claim_cell(runs, "cell-2", ["cell"], d, mode="keep")  # the cell was deleted: nothing can list its runs
    assert a.stops == c.stops == ["stopped: its cell was deleted"] and "cell" not in runs


def test_cleared_output_stops_or_keeps_by_mode():
    a = Run("a")
    assert output_gone(a, "cleared", mode="keep") is False and not a.stops
    assert output_gone(a, "cleared") is True and a.stops == ["stopped: its output was cleared"]
    assert output_gone(a, "cleared") is False  # already stopped: nothing more
    b = Run("b")
    assert output_gone(b, "cell-deleted", mode="keep") is True and b.stops == ["stopped: its cell was deleted"]


def test_notebook_rerun_setting_is_validated():
    assert Config().notebook.rerun == "stop"
    assert Config.from_dict({"notebook": {"rerun": "keep"}}).notebook.rerun == "keep"
    with pytest.raises(ConfigError, match=r"^notebook.rerun: expected 'stop' or 'keep', got 'maybe'$"):
        Config.from_dict({"notebook": {"rerun": "maybe"}})
    with pytest.raises(ConfigError, match=r"^notebook.reruns: unknown key$"):
        Config.from_dict({"notebook": {"reruns": "keep"}})


def test_presence_tells_on_gone_after_the_grace_only_when_no_view_is_left(sent):
    clock, gone = Clock(), []
    tree = AgentTree(clock=clock)
    tree.on_gone = gone.append
    msg = lambda event, how="": tree.presence.comm.handle(  # noqa: E731
        {"method": "custom", "content": {"event": event, "how": how}})
    msg("shown")
    msg("shown")  # the same tree in two outputs
    msg("removed", "cleared")
    tree.check_gone()
    assert tree.views == 1 and gone == []  # one view left
    msg("removed", "cleared")
    tree.check_gone()
    assert gone == []  # within the grace: a cell that re-displays the tree may show it again
    msg("shown")
    clock.t += GONE_GRACE
    tree.check_gone()
    assert gone == []  # it came back
    msg("removed", "closed")  # the notebook was closed: its runs go on
    clock.t += GONE_GRACE
    tree.check_gone()
    assert gone == []
    msg("shown")
    msg("removed", "cell-deleted")
    clock.t += GONE_GRACE
    tree.check_gone()
    assert gone == ["cell-deleted"]


def test_earlier_runs_show_live_status_and_stop(sent):
    a, b = Run("a"), Run("b", status="running")
    tree = AgentTree()
    tree.show_earlier(EarlierRuns([a, b]))
    assert tree.earlier.layout.display is None
    (box,) = tree.earlier.children
    assert "2;" in box.children[0].value and "notebook.rerun = keep" in box.children[0].value
    status, title, stop = box.children[1].children
    assert "waiting for you" in status.value and "ask a" in title.value and 'title="a"' in title.value
    stop.click()
    assert a.stops == ["stopped by the user"] and "stopped" in status.value and stop.layout.display == "none"
    b.status = "completed"
    b.callbacks[0](AgentCompleted(agent_id="b", result="ok"))
    assert "completed" in box.rows["b"][0].value and box.rows["b"][1].layout.display == "none"


def _bars(view):
    return list(view.result_actions.children)


def test_answer_and_its_code_blocks_get_copy_and_insert_bars(sent):
    answer = "Use this:\n\n```python\ntotal = sum(sales.values())\n```\n\nor in SQL:\n\n~~~sql\nselect 1\n~~~\n"
    tree = AgentTree().extend([state("root", "running"), AgentCompleted(agent_id="root", result=answer)])
    view = tree.node_view("root")
    bars = _bars(view)
    assert [(b.cell_type, b.label, b.text) for b in bars] == [
        ("markdown", "answer", answer), ("code", "code block 1 (python)", "total = sum(sales.values())"),
        ("code", "code block 2 (sql)", "select 1")]
    assert all(isinstance(b, ActionBar) and b.anchor == tree.model_id for b in bars)
    assert view.result_actions.layout.display is None
    before = len(sent)
    tree.apply(state("root", "completed"))  # the same answer: the bars are not rebuilt
    assert _bars(view) == bars and not [m for m in sent[before:] if m and m.get("method") == "open"]


def test_partial_answer_has_a_bar_and_an_empty_run_has_none(sent):
    tree = AgentTree().extend([state("root", "running"), TextDelta(agent_id="root", delta="half of it")])
    tree.flush()
    assert _bars(tree.node_view("root")) == [] and tree.node_view("root").result_actions.layout.display == "none"
    tree.apply(state("root", "stopped", error="stopped by the user"))
    (bar,) = _bars(tree.node_view("root"))
    assert (bar.text, bar.cell_type) == ("half of it", "markdown")


def test_tool_panel_bar_copies_the_code_that_ran(sent):
    tree = AgentTree().extend([
        state("root", "running"),
        ToolCall(agent_id="root", tool="python", input={"code": "df['sales']"}),
    ])
    view = tree.node_view("root")
    (panel,) = view.tool_panels()
    bar = panel.children[0].children[1]
    assert bar.text == "df['sales']" and bar.cell_type == "code" and bar.layout.display is None
    tree.apply(ToolResult(agent_id="root", tool="python", output={"code": "df['revenue']", "text": "ok"}))
    assert bar.text == "df['revenue']"  # after Edit: the edited code, the one that ran
    tree.extend([ToolCall(agent_id="root", tool="memory_search", input={"query": "churn"})])
    panel2 = view.tool_panels()[1]
    assert panel2.children[0].children[1].layout.display == "none"  # no code: no bar


def test_answer_box_sends_the_value_carried_by_enter(sent):
    answers = []
    tree = AgentTree(responder=lambda *a: answers.append(a)).extend([
        state("root", "waiting_user"), UserQuery(agent_id="root", query_id="q", kind="clarification", prompt="?")])
    card = tree.node_view("root").card
    assert "Shift+Enter adds a line" in card.answer.placeholder
    card.answer.comm.handle({"method": "custom", "content": {"event": "submit", "value": " \n "}})
    assert answers == [] and "type an answer first" in card.note.value  # blank lines are empty too
    # the value travels with Enter, even before the typed value's own sync arrived
    card.answer.comm.handle({"method": "custom", "content": {"event": "submit", "value": "total\nby region"}})
    assert answers == [("root", "q", "total\nby region")]


def test_code_blocks_reads_fences_and_skips_empty_ones():
    text = "```\n\n```\n````py\na = '```'\n````\n" + "".join(f"```\nx{i}\n```\n" for i in range(6))
    blocks = code_blocks(text)
    assert blocks[0] == ("py", "a = '```'") and len(blocks) == 4 and blocks[-1] == ("", "x2")


@pytest.mark.slow
def test_keep_mode_in_a_kernel_lists_the_earlier_run_and_leaves_it_waiting(workdir):
    from jupyter_client.manager import start_new_kernel

    from agentstack_lab.store.connection import SQLiteDatabase
    from tests.test_decisions_kernel import _execute_as_cell

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "agentstack.config.json").write_text(json.dumps({"notebook": {"rerun": "keep"}}))
    ask = "run = %agent --no-subagents --executor subprocess how are sales trending in df?"
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(workdir))
    try:
        _execute_as_cell(kc, "%load_ext agentstack_lab", "cell-setup")
        _execute_as_cell(kc, ask + "\nfirst = run", "cell-ask")
        _execute_as_cell(kc, ask, "cell-ask")  # the same cell again: the first run goes on, and is listed
        probe = ("from agentstack_lab.notebook.magics import agent_tree\n"
                 "t = agent_tree(run)\n"
                 "print('LISTED', list(t.earlier.children[0].rows) == [first.id], first.status)")
        msg_id = kc.execute(probe)
        out, deadline = "", time.monotonic() + 60
        while time.monotonic() < deadline:  # the trees' elapsed-time ticks keep iopub busy: read until idle
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out += msg["content"]["text"]
            elif msg["msg_type"] == "error":
                out += "\n".join(msg["content"]["traceback"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        assert "LISTED True" in out, out
        db = SQLiteDatabase(workdir / ".agentstack" / "agentstack.db")
        deadline = time.monotonic() + 30
        while True:
            roots = [r[0] for r in db.query("SELECT status FROM agents WHERE parent_id IS NULL")]
            if len(roots) == 2 and "pending" not in roots and "running" not in roots:
                break
            assert time.monotonic() < deadline, roots
            time.sleep(0.1)
        assert roots == ["waiting_user", "waiting_user"]  # both still waiting: nothing was stopped
        db.close()
    finally:
        km.shutdown_kernel(now=True)
        kc.stop_channels()
