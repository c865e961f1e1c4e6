"""What saved trees keep and how they read: tool records, trimmed tracebacks, typed titles, the saved HTML.

The browser half (the lab extension's saved-tree renderer, the panel's run view, the live widget) is
tests/test_render_browser.py; here the pure parts, on real tracebacks and a real engine run.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from pathlib import Path

import pytest

from agentstack_lab.engine.log import rebuild_tree
from agentstack_lab.engine.transcript import code_failed, tool_record, user_frames
from agentstack_lab.events import AgentState, ToolCall, ToolResult
from agentstack_lab.notebook.context import build_prompt
from agentstack_lab.notebook.render import node_title
from agentstack_lab.notebook.snapshot import snapshot, snapshot_bundle, snapshot_html
from agentstack_lab.notebook.tree import TreeState, tree_to_text
from agentstack_lab.validation import excerpt, typed_prompt
from agentstack_lab.workspace import Workspace


def _raised(code: str, filename: str = "<agent-python-1>") -> str:
    try:
        exec(compile(code, filename, "exec"), {})
    except Exception as exc:  # noqa: BLE001 - the traceback is what the test is about
        return "".join(traceback.format_exception(exc))
    raise AssertionError("the code did not raise")


def test_user_frames_leave_library_frames_out_and_mark_the_gap():
    full = _raised("import json\njson.loads('{')")
    assert "decoder.py" in full
    mine = user_frames(full)
    assert mine is not None
    assert '"<agent-python-1>", line 2' in mine  # the agent's own frame stays
    assert "decoder.py" not in mine and "__init__.py" not in mine
    assert "library frames" in mine and mine.rstrip().endswith("(char 1)")  # the gap is marked, the error kept
    assert user_frames(_raised("x = {}\nx['revenue']")) is None  # nothing to leave out: the traceback as it is


def test_tool_record_keeps_the_code_that_ran_the_original_and_the_traceback():
    tb = _raised("import json\njson.loads('{')")
    edited = tool_record("python", {"code": "json.loads('[')"},
                         {"code": "json.loads('{')", "stdout": "hi\n", "traceback": tb, "text": "model text"},
                         "JSONDecodeError: ...", True)
    assert edited["decision"] == "edited" and edited["code"] == "json.loads('{')"
    assert edited["original"] == "json.loads('[')" and edited["traceback"] == tb
    assert edited["output"] == "stdout:\nhi\n" and edited["input"] is None
    rejected = tool_record("python", {"code": "rm()"}, {"text": "The user rejected running this code."},
                           "rejected by the user", True)
    assert rejected["decision"] == "rejected" and rejected["traceback"] is None
    ok = tool_record("python", {"code": "1"}, {"result": "1"}, None, True)
    assert ok["decision"] == "approved" and ok["output"] == "result:\n1"
    search = tool_record("memory_search", {"query": "churn"}, {"results": [], "text": "no hits"}, None, True)
    assert search["output"] == "no hits" and search["code"] is None and '"churn"' in search["input"]
    assert code_failed([edited, rejected, ok, search]) == 1
    huge = tool_record("python", {"code": "x" * 9000}, None, None, False)
    assert len(huge["code"]) < 4100 and huge["code"].endswith("more characters]")


def test_typed_prompt_and_excerpt():
    prompt = build_prompt("How are **sales** doing in @df? Use `x` too", {"df": {"a": 1}})
    assert "Kernel variables" in prompt and "`df`" in prompt
    assert typed_prompt(prompt) == "How are **sales** doing in @df? Use `x` too"
    assert typed_prompt("no variables `here`") == "no variables `here`"
    assert excerpt(typed_prompt(prompt)) == "How are sales doing in @df? Use x too"  # no ** or backticks
    assert excerpt("a" * 100, 20) == "a" * 19 + "…"  # a cut line ends with an ellipsis
    assert excerpt("First part.\n\nSecond part.") == "First part. …"  # so does a first paragraph of several
    assert tree_to_text({"type": "researcher", "status": "completed", "prompt": prompt}).endswith(
        "How are sales doing in @df? Use x too")


def _events(hostile: str) -> list[object]:
    tb = _raised("import json\njson.loads('{')")
    answers = [{"kind": "clarification", "question": "Which **measure**?", "answer": "revenue", "source": "cli"},
               {"kind": "approval", "question": "run it?", "answer": {"approved": True, "code": "json.loads('{')"}}]
    return [
        AgentState(agent_id="r", state={"status": "running", "type": "researcher", "parentId": None,
                                        "prompt": build_prompt("Sales in @df?", {"df": [1]}),
                                        "metadata": {"answers": answers}}),
        ToolCall(agent_id="r", tool="python", input={"code": "json.loads('[')"}),
        ToolResult(agent_id="r", tool="python", output={"code": "json.loads('{')", "traceback": tb, "text": "t"},
                   error="JSONDecodeError: Expecting property name"),
        AgentState(agent_id="c", state={"status": "completed", "type": "analyst", "parentId": "r",
                                        "prompt": "Check gaps", "result": "No gaps: **three** years."}),
        AgentState(agent_id="r", state={"status": "completed", "result": hostile}),
    ]


def test_saved_html_shows_what_the_live_tree_shows():
    hostile = "The best year was **2023**.\n\n<script>window.x=1</script><img src=x onerror=alert(1)>"
    state = TreeState()
    state.extend(_events(hostile))
    snap = snapshot(state.to_tree(), run_id="run-1")
    root = snap["roots"][0]
    assert root["codeFailed"] == 1 and root["tools"][0]["decision"] == "edited"
    assert [a["kind"] for a in root["answers"]] == ["clarification", "approval"]
    json.dumps(snap)  # the MIME data is JSON
    html = snapshot_html(snap)
    assert "✗ code failed" in html  # the header says the code raised, not only "completed"
    assert "Sales in @df?" in html and "Kernel variables" not in html  # the prompt as typed
    assert "<strong>2023</strong>" in html and "**2023**" not in html  # the answer as Markdown
    assert "<script" not in html.split("</style>", 2)[-1] and "onerror" not in html and "<img" not in html
    assert "code that ran (edited)" in html and "the model's original" in html
    assert "Which measure? → revenue (from the terminal)" in html and "Code edited" in html
    assert "library frame" in html and "full traceback</summary>" in html and "decoder.py" in html
    child = html[html.index('<details class="agentstack-saved-node'):]  # the finished subagent, folded
    assert child.startswith('<details class="agentstack-saved-node s-completed"')
    assert "→ No gaps: three years." in child[:child.index("</summary>")]
    assert snapshot_bundle(state.to_tree(), run_id="run-1", html=False).keys() == {
        "application/vnd.agentstack.tree+json", "text/markdown", "text/plain"}


def test_live_title_is_typed_and_flags_failed_code():
    state = TreeState()
    state.extend(_events("done"))
    node = state.nodes["r"]
    title = node_title(node, False)
    assert "✗ code failed" in title and "Sales in @df?" in title and "`" not in title
    assert "code failed in a subagent" in node_title(state.nodes["c"], True, failed_below=2)
    assert "code failed" not in node_title(state.nodes["c"], True)


def test_rebuilt_tree_with_details_has_each_agents_tool_calls(tmp_path):
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.providers.testing import TestModel, has_tool_result

    model = TestModel(code="import json\njson.loads('{')", main=lambda r: "done" if has_tool_result(r) else None)
    with Workspace.open(tmp_path, announce=False) as ws:
        run = AgentRun("q", workspace=ws, provider=model, options={"auto_approve": True, "subagents": False})

        async def go() -> None:
            run.start()
            await run.wait(raise_on_error=False)

        asyncio.run(go())
        plain, detailed = rebuild_tree(ws.db, run.id), rebuild_tree(ws.db, run.id, details=True)
    assert "tools" not in plain  # the engine's own shape (equal to run.tree) is unchanged
    (call,) = detailed["tools"]
    assert call["code"] == "import json\njson.loads('{')" and "JSONDecodeError" in call["traceback"]
    assert snapshot(detailed, run_id=run.id)["roots"][0]["codeFailed"] == 1


@pytest.mark.parametrize(("where", "exists", "said"), [
    ("here", True, False),    # the notebook's own folder, an existing file: nothing to say
    ("here", False, True),    # new: said, with "(new)"
    ("other", True, True),    # another folder's database: said
])
def test_notebook_announces_its_database_only_when_it_is_news(tmp_path, monkeypatch, capsys, where, exists, said):
    from agentstack_lab.store.connection import SQLiteDatabase

    notebook = tmp_path / "nb"
    folder = notebook if where == "here" else tmp_path / "elsewhere"
    notebook.mkdir()
    folder.mkdir(exist_ok=True)
    if exists:
        (folder / ".agentstack").mkdir()
        SQLiteDatabase(folder / ".agentstack" / "agentstack.db").close()
    monkeypatch.chdir(notebook)
    monkeypatch.setattr(Workspace, "_announced", set())
    with Workspace.open(Path(folder), announce="stdout") as ws:
        ws.db  # noqa: B018 - opening it is what announces it
    out = capsys.readouterr().out
    assert ("using database" in out) is said, out
    assert ("(new)" in out) is (not exists)


def test_saved_records_of_cancelled_and_edited_calls_say_what_happened():
    from agentstack_lab.engine.transcript import EDITED_NOTE
    from agentstack_lab.notebook.render import record_html, record_title

    stopped = tool_record("python", {"code": "x = 1"}, {"cancelled": True, "reason": "stopped by the user"},
                          "cancelled: stopped by the user", True)
    assert stopped["decision"] == "cancelled" and stopped["traceback"] is None
    assert code_failed([stopped]) == 0  # a stopped call is not code that failed
    assert record_title(stopped) == "python ■ · cancelled"
    assert "cancelled: stopped by the user" in record_html(stopped) and "running" not in record_html(stopped)

    # an edit is a marker now; a log written before it carried the note in the output text
    for output in ({"edited": True, "code": "y = 2\nprint(y)", "stdout": "2\n"},
                   {"code": "y = 2\nprint(y)", "text": EDITED_NOTE + "\n2"}):
        edited = tool_record("python", {"code": "y = 1\nprint(y)"}, output, None, True)
        assert edited["decision"] == "edited" and edited["original"] == "y = 1\nprint(y)"
        assert EDITED_NOTE not in (edited["output"] or "")
        html = record_html(edited)
        assert "agentstack-edited-badge" in html and "+1 −1 lines" in html
