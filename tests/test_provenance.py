"""Provenance and undo of what agent code does to the live namespace (executor level)."""

from __future__ import annotations

import pandas as pd
import pytest

from agentstack_lab.engine.executors import ExecContext, LiveKernelExecutor
from agentstack_lab.engine.provenance import UndoRefusedError
from tests.notebook_helpers import code_then_answer


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


# --- through the engine and the workspace database ----------------------------------------------------
EDIT = "a = 41 + 1\ndf['y'] = df['x'] * 2\ndel b"


def _editor(code):
    return code_then_answer(code)


def _workspace(tmp_path, engine=None):
    from agentstack_lab.config import Config
    from agentstack_lab.workspace import Workspace

    cfg = Config.from_dict({"engine": engine}) if engine is not None else None
    return Workspace.open(tmp_path / "ws", config=cfg, announce=False)


async def _agent(ws, ns, code=EDIT, *, approve=False, executor=None):
    """Run the editor agent; ``approve``: a person approves the code (a real ``user-query``), else auto-approve."""
    import asyncio

    from agentstack_lab.engine import AgentRun, RunOptions

    executor = executor or LiveKernelExecutor(namespace=ns)
    opts = RunOptions(subagents=False, interactive=approve, auto_approve=not approve, final_question=False)
    run = AgentRun("tidy up", workspace=ws, provider=_editor(code), options=opts, executor=executor)
    loop = asyncio.get_running_loop()

    def answer(ev):
        if getattr(ev, "kind", None) == "approval":
            loop.call_soon(run.respond, ev.query_id, True)

    run.subscribe(answer)
    await asyncio.wait_for(run.wait(), 60)
    return run


async def test_rows_are_persisted_per_call_and_read_back_as_a_dataframe(tmp_path):
    ns = _ns()
    with _workspace(tmp_path) as ws:
        run = await _agent(ws, ns)
        frame = run.provenance()
        assert list(frame.columns) == ["time", "run_id", "agent", "call_id", "name", "action", "before", "after"]
        assert sorted(zip(frame.name, frame.action, strict=True)) == [("a", "created"), ("b", "deleted"),
                                                                       ("df", "changed")]
        assert set(frame.run_id) == {run.id} and frame.call_id.str.startswith("toolu_").all()
        assert frame.agent.iloc[0] == run.agents[run.root_id].name
        assert ws.provenance("df").after.tolist() == ["DataFrame (3, 2) [x, y]"]

        undone = run.undo()
        assert {(c.name, c.action) for c in undone} == {("a", "removed"), ("df", "restored"), ("b", "restored")}
        assert "a" not in ns and ns["b"] == [1, 2] and list(ns["df"].columns) == ["x"]
        df_rows = ws.provenance("df")
        assert df_rows.action.tolist() == ["changed", "restored"]
        assert df_rows.before.iloc[1] == "DataFrame (3, 2) [x, y]" and df_rows.after.iloc[1] == "DataFrame (3, 1) [x]"
        assert len(ws.provenance(run_id=run.id, limit=2)) == 2
        with pytest.raises(UndoRefusedError, match="already undone"):
            run.undo()
        assert len(ws.provenance()) == 6


async def test_the_configured_snapshot_bound_has_an_effect_and_too_big_names_are_on_the_card(tmp_path):
    """``engine.undo.max_snapshot_bytes``: below df's size the approval lists df and undo refuses; default undoes."""
    ns = _ns()
    ns["df"] = pd.DataFrame({"x": range(1000)})      # 8 KB of data; b (a list of 2) is ~130 bytes
    with _workspace(tmp_path, {"undo": {"max_snapshot_bytes": 1024}}) as ws:
        run = await _agent(ws, ns, approve=True)
        (query,) = [e for e in run.events if getattr(e, "kind", None) == "approval"]
        assert query.options["notSnapshotted"] == ["df"]          # b (list of 2) is small enough
        (result,) = [e for e in run.events if getattr(e, "type", "") == "tool-result"]
        assert result.output["notSnapshotted"] == ["df"]
        with pytest.raises(UndoRefusedError, match=r"df were too big to snapshot"):
            run.undo()
        assert "y" in ns["df"].columns and "a" in ns and "b" not in ns    # refused: nothing restored

    ns = _ns()
    ns["df"] = pd.DataFrame({"x": range(1000)})
    with _workspace(tmp_path / "default") as ws:
        run = await _agent(ws, ns, approve=True)
        (query,) = [e for e in run.events if getattr(e, "kind", None) == "approval"]
        assert "notSnapshotted" not in query.options
        run.undo()
        assert list(ns["df"].columns) == ["x"]


def test_the_card_says_which_names_undo_cannot_restore():
    from agentstack_lab.events import UserQuery
    from agentstack_lab.notebook.cards import QueryCard

    query = UserQuery(agent_id="a1", query_id="q1", kind="approval", prompt="Run this Python code?",
                      options={"code": "df['y'] = 1", "notSnapshotted": ["df", "<big>"]})
    card = QueryCard(query, lambda _r: None, executor="live")
    assert "too big to snapshot: <code>df</code>, <code>&lt;big&gt;</code>; undo cannot restore them" in card.heading.value
    plain = QueryCard(UserQuery(agent_id="a1", query_id="q2", kind="approval", prompt="Run this Python code?",
                                options={"code": "x = 1"}), lambda _r: None)
    assert "too big" not in plain.heading.value


def test_a_bad_snapshot_bound_is_one_clear_error():
    from agentstack_lab.config import Config, ConfigError

    with pytest.raises(ConfigError, match=r"engine\.undo\.max_snapshot_bytes"):
        Config.from_dict({"engine": {"undo": {"max_snapshot_bytes": -1}}})
    with pytest.raises(ConfigError, match=r"engine\.undo\.max_snapshot_bytes"):
        Config.from_dict({"engine": {"undo": {"max_snapshot_bytes": True}}})


SECRET = "sk-ant-api03-" + "Zq7" * 12


async def test_secrets_never_reach_the_stored_summaries(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    ns = {"__name__": "__main__", "os": __import__("os")}
    code = ("leaked = os.environ['ANTHROPIC_API_KEY']\nnote = 'the key is ' + leaked\n"
            "api_key = 'short-but-secret-named'\nimport pandas as pd\nframe = pd.DataFrame({leaked: [1]})\n"
            "raw = leaked.encode()")
    with _workspace(tmp_path) as ws:
        await _agent(ws, ns, code)
        rows = ws.db.query("SELECT name, before, after FROM provenance")
        stored = {r[0]: r[2] for r in rows}
        assert not [r for r in rows if any(SECRET[:12] in (v or "") for v in tuple(r))], rows
        assert stored["leaked"] == "str[49] = '***'" and stored["note"] == "str[60] = 'the key is ***'"
        assert stored["api_key"] == "str[22]"                  # a secret-looking name gets no repr at all
        assert stored["frame"] == "DataFrame (1, 1) [***]"      # column names are redacted too
        assert stored["raw"] == "bytes[49]"                     # bytes get no repr (a cut key would survive)


@pytest.mark.slow
async def test_unknown_run_and_executors_without_a_kernel_are_one_clear_line(tmp_path):
    from agentstack_lab.engine.executors import SubprocessExecutor
    from agentstack_lab.engine.history import resolve_run

    ns = _ns()
    with _workspace(tmp_path) as ws:
        run = await _agent(ws, ns)
        with pytest.raises(UndoRefusedError, match=r"^unknown run '0000dead': no run with that id changed kernel "
                                                   r"variables \(see %agent_history\)$"):
            resolve_run("0000dead", ws.db)
        with pytest.raises(UndoRefusedError, match="too short"):
            resolve_run("ab", ws.db)
        assert resolve_run(run.id[:6], ws.db) == run.id
        # the rows exist but this executor's journal never saw the run: another kernel, or a restart
        from agentstack_lab.engine.history import undo_run

        with pytest.raises(UndoRefusedError, match="in another kernel"):
            undo_run(LiveKernelExecutor(namespace=ns), ws.db, run.id)
        assert "a" in ns
        sub = await _agent(ws, {}, "x = 1", executor=SubprocessExecutor())
        with pytest.raises(UndoRefusedError, match="subprocess executor: nothing in this kernel to undo"):
            sub.undo()


def test_tool_titles_list_the_names_a_call_touched():
    from agentstack_lab.notebook.render import tool_title
    from agentstack_lab.notebook.tree import ToolCallState

    changes = [{"name": "a", "action": "created"}, {"name": "df", "action": "changed"},
               {"name": "b", "action": "deleted"}] + [{"name": f"v{i}", "action": "created"} for i in range(7)]
    call = ToolCallState(tool="python", input={"code": "..."}, output={"changes": changes}, done=True)
    assert tool_title(call) == ("python ✓ · created a, v0, v1, v2, v3, v4 +2 · changed df · deleted b")
    assert tool_title(ToolCallState(tool="python", input={}, output={"changes": []}, done=True)) == "python ✓"


def test_magic_lines_parse_into_frozen_arguments_and_bad_input_is_one_line():
    import dataclasses

    from agentstack_lab.notebook.args import MagicUsageError
    from agentstack_lab.notebook.provenance_magic import (
        HistoryArgs,
        UndoArgs,
        parse_history_line,
        parse_undo_line,
    )

    assert parse_history_line("df --limit 5  # latest") == HistoryArgs(name="df", limit=5)
    assert parse_history_line("--run abcd1234") == HistoryArgs(run="abcd1234")
    assert parse_undo_line(" 0a1b2c3d ") == UndoArgs(run="0a1b2c3d")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parse_undo_line("abcd").run = "x"  # type: ignore[misc]
    for bad, reason in [("df x", "unrecognized arguments: x"), ("--limit 0", "--limit"),
                        ("'a b'", "NAME must be a variable name, got 'a b'")]:
        with pytest.raises(MagicUsageError, match=reason) as info:
            parse_history_line(bad)
        assert str(info.value).splitlines()[-1].startswith("%agent_history: error: ")
    with pytest.raises(MagicUsageError, match="the following arguments are required: run"):
        parse_undo_line("")
