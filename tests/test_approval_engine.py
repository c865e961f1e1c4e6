"""The approval rules in a real run: a read-only call runs without asking anyone and its decision names the
rule, a denied call is refused naming the rule, anything else is asked of a person; ``decisions list`` shows
who decided."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.config import Config
from agentstack_lab.decisions import Decisions
from agentstack_lab.engine import AgentRun, HeadlessQueryError
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import ToolResult, UserQuery
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.workspace import Workspace
from tests.test_engine import brain, last_tool_result


def one_call(code: str):
    """A model that runs ``code`` once, then answers with what the tool said."""
    def main(req):
        result = last_tool_result(req)
        return [tool_call("python", {"code": code})] if result is None else "saw: " + result.content

    return ScriptedProvider(brain(main=main))


def results(run) -> list[ToolResult]:
    return [e for e in run.events if isinstance(e, ToolResult)]


async def test_read_only_code_runs_without_asking_and_the_decision_names_the_rule(ws):
    ns = {"df": [3, 1, 2]}
    run = AgentRun("q", workspace=ws, provider=one_call("print(sorted(df), len(df))"),
                   options={"subagents": False, "interactive": False},   # headless: an ask would fail the run
                   executor=LiveKernelExecutor(namespace=ns))
    asked: list[UserQuery] = []
    run.subscribe(lambda ev: asked.append(ev) if isinstance(ev, UserQuery) else None)
    assert "[1, 2, 3] 3" in await run
    assert asked == []
    (d,) = Decisions(ws.db).list(run=run.id)
    assert (d.kind, d.state, d.answer, d.surface) == ("approval", "answered", {"approved": True}, "rule")
    assert d.decided_by == "rule allow-read-only" and d.answered_by == "rule:allow-read-only"
    assert d.metadata["verdict"]["classes"] == ["read_only"] and d.code == "print(sorted(df), len(df))"
    (answer,) = run.tree["metadata"]["answers"]
    assert (answer["source"], answer["by"]) == ("rule", "rule:allow-read-only")


@pytest.mark.parametrize("auto_approve", [False, True])
async def test_a_denied_call_is_refused_naming_the_rule_even_with_auto_approve(ws, tmp_path, auto_approve):
    target = tmp_path / "outside" / "x.txt"   # the working folder is the test's own work folder, not tmp_path
    run = AgentRun("q", workspace=ws, provider=one_call(f"open({str(target)!r}, 'w').write('x')"),
                   options={"subagents": False, "auto_approve": auto_approve, "interactive": False},
                   executor=LiveKernelExecutor(namespace={}))
    answer = await run
    (result,) = results(run)
    assert result.error == "denied by approval rule deny-write-outside"
    assert "Refused by approval rule deny-write-outside" in result.output["text"] and str(target) in answer
    assert not target.parent.exists()   # nothing ran
    (d,) = Decisions(ws.db).list(run=run.id)
    assert d.answer == {"approved": False, "reason": "denied by approval rule deny-write-outside"}
    assert d.decided_by == "rule deny-write-outside"


async def test_other_code_is_asked_of_a_person_and_the_card_says_why(ws):
    ran: list[str] = []
    run = AgentRun("q", workspace=ws, provider=one_call("ran.append('yes')"), options={"subagents": False},
                   executor=LiveKernelExecutor(namespace={"ran": ran}))
    queries: list[UserQuery] = []

    def answer(ev):
        if isinstance(ev, UserQuery):
            queries.append(ev)
            run.respond(ev.query_id, True)

    run.subscribe(answer)
    await run
    (q,) = queries
    assert q.kind == "approval" and q.options["classes"] == ["mutates"] and "append" in q.options["why"]
    assert ran == ["yes"]
    (d,) = Decisions(ws.db).list(run=run.id)
    assert d.surface == "widget" and d.decided_by.startswith("person") and "rule" not in d.metadata


async def test_configured_rules_decide_in_a_run(tmp_path):
    cfg = Config.from_dict({"approval": {"rules": [
        {"id": "allow-appends", "action": "allow", "only": ["mutates"], "code": r"^ran\.append\("},
        {"id": "no-fits", "action": "deny", "any_of": ["mutates"], "code": r"\.fit\("}]}})
    with Workspace.open(tmp_path / "ws", config=cfg, announce=False) as ws:
        ran: list[str] = []
        run = AgentRun("q", workspace=ws, provider=one_call("ran.append('by rule')"),
                       options={"subagents": False, "interactive": False},
                       executor=LiveKernelExecutor(namespace={"ran": ran}))
        await run
        assert ran == ["by rule"] and Decisions(ws.db).list(run=run.id)[0].decided_by == "rule allow-appends"
        run = AgentRun("q", workspace=ws, provider=one_call("model.fit(X)"),
                       options={"subagents": False, "auto_approve": True},
                       executor=LiveKernelExecutor(namespace={}))
        await run
        assert results(run)[0].error == "denied by approval rule no-fits"
        # an asked call in a headless run still fails closed
        run = AgentRun("q", workspace=ws, provider=one_call("x = 1"), options={"subagents": False,
                                                                              "interactive": False},
                       executor=LiveKernelExecutor(namespace={}))
        with pytest.raises(HeadlessQueryError):
            await run


async def test_decisions_list_shows_who_decided(ws):
    run = AgentRun("q", workspace=ws, provider=one_call("len([1, 2])"), options={"subagents": False,
                                                                               "interactive": False},
                   executor=LiveKernelExecutor(namespace={}))
    await run
    runner = CliRunner()
    out = runner.invoke(app, ["--workspace", str(ws.root), "decisions", "list", "--all"], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    assert "decided by" in out.output and "rule allow-read-only" in out.output
    listed = json.loads(runner.invoke(app, ["--workspace", str(ws.root), "decisions", "list", "--all",
                                            "--json"]).output)
    assert listed[0]["decidedBy"] == "rule allow-read-only"
    shown = runner.invoke(app, ["--workspace", str(ws.root), "decisions", "show", listed[0]["id"]]).output
    assert "decided: by rule allow-read-only" in shown and "why:" in shown


