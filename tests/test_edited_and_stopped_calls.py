"""A real run (real engine, real SQLite workspace) read back through the live tree.

Edited code is a marker on its tool call (``output.edited``), not a line of its output: the model is
told in words, the tree shows an "edited" badge, the diff against the model's original, and the code
highlighted. Stop all while an approval waits: the approval is a cancelled decision listed in the
node's questions, and its tool call ends cancelled with a ``tool-result`` (never "running…" forever).
"""

from __future__ import annotations

import asyncio
import html
import re

import pytest

from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import ToolResult, UserQuery
from agentstack_lab.notebook.widget import AgentTree
from agentstack_lab.providers.testing import TestModel, has_tool_result

EDITED_NOTE = "(The user edited the code before it ran.)"  # what the model is told


def _shown(value: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", value))


def _model(code: str) -> TestModel:
    return TestModel(code=code, main=lambda r: "done" if has_tool_result(r) else None, summary="summary")


def _tool_result_texts(model: TestModel) -> list[str]:
    from agentstack_lab.providers.base import ToolResultBlock

    return [b.content for r in model.requests for m in r.messages if not isinstance(m.content, str)
            for b in m.content if isinstance(b, ToolResultBlock)]


async def test_an_edit_is_a_marker_with_a_diff_not_a_line_of_output(ws):
    ran: list[str] = []
    model = _model("ran.append('original')\nprint('model')")
    run = AgentRun("go", workspace=ws, provider=model, options={"subagents": False},
                   executor=LiveKernelExecutor(namespace={"ran": ran}))

    def on_event(ev):
        if isinstance(ev, UserQuery) and ev.kind == "approval":
            run.respond(ev.query_id, {"approved": True, "code": "ran.append('edited')\nprint('mine')"})

    run.subscribe(on_event)
    await run
    assert ran == ["edited"]
    (result,) = [e for e in run.events if isinstance(e, ToolResult)]
    assert result.output["edited"] is True and result.output["code"] == "ran.append('edited')\nprint('mine')"
    assert EDITED_NOTE not in result.output["text"] and "mine" in result.output["text"]
    told = _tool_result_texts(model)
    assert told and told[0].startswith(EDITED_NOTE + "\n")  # the model still hears it, in words

    tree = AgentTree(run)
    (panel,) = tree.node_view(run.root_id).tool_panels()
    body = panel.children[0].children[0].value
    assert panel.titles == ("python ✓ · edited by you · changed ran",)
    assert 'class="agentstack-edited-badge">edited<' in body
    diff = re.search(r'<pre class="agentstack-code-box agentstack-diff">(.*?)</pre>', body, re.S)
    assert diff is not None
    lines = [_shown(s) for s in re.findall(r"<span class=\"agentstack-diff-[a-z]+\">.*?</span>", diff.group(1))]
    assert "-ran.append('original')" in lines and "+ran.append('edited')" in lines
    assert "-print('model')" in lines and "+print('mine')" in lines
    assert "+2 −2 lines against the model's original" in _shown(body)
    assert 'class="agentstack-hl-nb">print<' in body  # the code that ran is highlighted
    output = re.findall(r"<b>output</b><pre[^>]*>(.*?)</pre>", body, re.S)
    assert output and "mine" in output[0] and "edited the code" not in output[0]
    tree.detach()


@pytest.mark.parametrize("when", ["clicked", "in-subscriber"])
async def test_stop_with_an_approval_pending_cancels_it_and_ends_the_call(ws, when):
    model = _model("x = 1")
    run = AgentRun("go", workspace=ws, provider=model, options={"subagents": False},
                   executor=LiveKernelExecutor(namespace={}))
    asked: list[UserQuery] = []

    def on_event(ev):
        if isinstance(ev, UserQuery) and ev.kind == "approval":
            asked.append(ev)
            if when == "clicked":  # "Stop all" (confirmed), clicked while the card waits
                asyncio.get_running_loop().call_soon(run.stop)
            else:  # from inside the agent's own task, while it announces the approval: it must not hang
                run.stop()

    run.subscribe(on_event)
    tree = AgentTree(run)
    await asyncio.wait_for(run.wait(raise_on_error=False), 60)  # a failure, not a hang
    assert run.status == "stopped" and len(asked) == 1
    results = [e for e in run.events if isinstance(e, ToolResult)]
    assert len(results) == 1 and results[0].output == {"cancelled": True, "reason": "stopped by the user"}
    assert results[0].error == "cancelled: stopped by the user"
    decision = ws.decisions.get(asked[0].query_id)
    assert decision.state == "cancelled" and decision.reason == "stopped by the user"
    answers = run.tree["metadata"]["answers"]
    assert answers[-1]["kind"] == "approval" and answers[-1]["state"] == "cancelled"
    assert answers[-1]["queryId"] == asked[0].query_id

    view = tree.node_view(run.root_id)
    (panel,) = view.tool_panels()
    body = panel.children[0].children[0].value
    assert "running…" not in body and "cancelled: stopped by the user" in _shown(body)
    assert panel.titles == ("python ■ · cancelled",)
    assert "Approval cancelled: stopped by the user" in _shown(view.qa.value)
    assert view.card is None and view.query.layout.display == "none"  # no card left to answer
    tree.detach()


def test_highlighted_code_and_diffs_escape_hostile_code():
    from agentstack_lab.notebook.codeview import diff_html, diff_stats, highlighted_box

    hostile = "s = '</pre><script>alert(1)</script>'\n# <img src=x onerror=alert(2)>"
    box = highlighted_box(hostile, clamped=True)
    assert box.startswith('<pre class="agentstack-code-box clamped agentstack-hl">') and box.count("<pre") == 1
    assert "<script" not in box and "<img" not in box and _shown(box) == hostile  # colour added, never text
    diff = diff_html("x = 1", hostile)
    assert "<script" not in diff and "<img" not in diff and diff.count("<pre") == 1
    assert diff_html(hostile, hostile) == "" and diff_stats("a\nb", "a\nc\nd") == (2, 1)
