"""Provenance and undo of what agent code does to the live namespace (executor level)."""

from __future__ import annotations

import pandas as pd
import pytest

from agentstack_lab.engine.executors import ExecContext, LiveKernelExecutor
from agentstack_lab.engine.provenance import UndoRefusedError


def _ns():
    return {"__name__": "__main__", "df": pd.DataFrame({"x": [1, 2, 3]}), "b": [1, 2], "keep": 5}


async def _run(ex, code, run_id="r1"):
    res = await ex.run(code, context=ExecContext(run_id=run_id, agent_id="a1", call_id="c1"))
    assert res.ok, res.traceback
    return res


async def test_created_changed_in_place_and_deleted_names_are_recorded_and_undone():
    ns = _ns()
    original_df = ns["df"]
    ex = LiveKernelExecutor(namespace=ns)
    res = await _run(ex, "a = 41 + 1\ndf['y'] = df['x'] * 2\ndel b")
    assert sorted(res.changed_names) == ["a", "df"] and res.deleted_names == ["b"]
    actions = {c["name"]: (c["action"], c["before"], c["after"]) for c in res.changes}
    assert actions == {"a": ("created", "", "int = 42"),
                       "df": ("changed", "DataFrame (3, 1) [x]", "DataFrame (3, 2) [x, y]"),
                       "b": ("deleted", "list[2]", "")}
    assert "names deleted: b" in res.to_text()

    undone = ex.journal.undo(ns, "r1")
    assert {(c.name, c.action) for c in undone} == {("a", "removed"), ("df", "restored"), ("b", "restored")}
    assert "a" not in ns and ns["b"] == [1, 2] and list(ns["df"].columns) == ["x"]
    assert ns["df"].equals(pd.DataFrame({"x": [1, 2, 3]})) and original_df is not None
    with pytest.raises(UndoRefusedError, match="already undone"):
        ex.journal.undo(ns, "r1")
    with pytest.raises(UndoRefusedError, match="changed no kernel variables"):
        ex.journal.undo(ns, "r9")


async def test_a_rebinding_is_undone_to_the_very_same_object():
    ns = _ns()
    old = ns["df"]
    ex = LiveKernelExecutor(namespace=ns)
    await _run(ex, "df = df.assign(z=0)")
    assert ns["df"] is not old
    ex.journal.undo(ns, "r1")
    assert ns["df"] is old


async def test_undo_refuses_when_the_user_changed_a_name_since_and_changes_nothing():
    ns = _ns()
    ex = LiveKernelExecutor(namespace=ns)
    await _run(ex, "a = 1\ndf['y'] = 0")
    ns["df"].loc[0, "x"] = 100          # the user edits df after the run
    with pytest.raises(UndoRefusedError, match=r"cannot undo run r1: df changed since"):
        ex.journal.undo(ns, "r1")
    assert ns["a"] == 1 and "y" in ns["df"].columns   # nothing was restored


async def test_undo_refuses_when_a_later_run_touched_the_same_name():
    ns = _ns()
    ex = LiveKernelExecutor(namespace=ns)
    await _run(ex, "a = 1", run_id="r1")
    await _run(ex, "a = a + 1", run_id="r2")
    with pytest.raises(UndoRefusedError, match="a changed since"):
        ex.journal.undo(ns, "r1")
    ex.journal.undo(ns, "r2")
    assert ns["a"] == 1
    ex.journal.undo(ns, "r1")
    assert "a" not in ns


async def test_values_too_big_to_snapshot_are_named_and_undo_refuses_them():
    ns = _ns()
    ex = LiveKernelExecutor(namespace=ns)
    ex.journal.max_bytes = 10
    assert ex.journal.plan(ns, "df['y'] = 1") == ["df"]
    await _run(ex, "df['y'] = 1")
    with pytest.raises(UndoRefusedError, match="df were too big to snapshot"):
        ex.journal.undo(ns, "r1")
    assert "y" in ns["df"].columns
