""""Always allow code like this": the saved rules' table, their order in the policy, their scopes, the CLI,
and a real run where a person's "always" answer decides the next similar call with no card."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentstack_lab.approval import ApprovalPolicy, SavedRules, always_rule
from agentstack_lab.approval.saved import SavedRuleError, SavedRuleNotFoundError
from agentstack_lab.cli import app
from agentstack_lab.config import Config
from agentstack_lab.decisions import DecisionError, Decisions
from agentstack_lab.engine import AgentRun, HeadlessQueryError
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import UserQuery
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.store.migrations import MIGRATIONS, applied
from tests.test_engine import brain, last_tool_result


def calls(*codes: str):
    """A model that runs each of ``codes`` in turn, then answers with what the last tool said."""
    def main(req):
        done = sum(1 for m in req.messages if m.role == "user" and not isinstance(m.content, str))
        return [tool_call("python", {"code": codes[done]})] if done < len(codes) else \
            "saw: " + last_tool_result(req).content

    return ScriptedProvider(brain(main=main))


def test_the_table_comes_from_a_named_migration_at_the_end(ws):
    assert MIGRATIONS[-1][0] == "approval_saved_rules" and applied(ws.db)[-1] == "approval_saved_rules"
    cols = [r[1] for r in ws.db.query("PRAGMA table_info(approval_rules)")]
    assert cols[:6] == ["id", "action", "any_of", "only", "code", "scope"] and "created_by" in cols
    with pytest.raises(Exception, match="CHECK"):   # a session rule without its session is refused by the table
        with ws.db.transaction() as conn:
            conn.execute("INSERT INTO approval_rules (id, action, only, scope, created_at) "
                         "VALUES ('x', 'allow', '[\"rebinds\"]', 'session', 0)")


def test_always_rule_matches_the_classes_and_never_lifts_a_builtin_deny():
    rule = always_rule(["rebinds", "read_only"], "x = df.head()")
    assert rule.description == "allow cells that only do: read_only, rebinds" and rule.code is None
    exact = always_rule(["unknown"], "model.fit(X)")
    assert exact.code is not None and "exactly this code" in exact.description
    assert always_rule(["network", "read_only"], "requests.get(u)").refused.startswith(
        "a built-in deny covers this code (deny-network)")
    assert always_rule([], "x").refused and always_rule(["flying"], "x").refused == "unknown code classes flying"


def test_saved_rules_come_after_the_config_rules_and_the_last_match_wins(ws):
    config = Config.from_dict({"approval": {"rules": [{"id": "ask-rebinds", "action": "ask", "any_of": ["rebinds"]}]}})
    rules = SavedRules(ws.db)
    policy = ApprovalPolicy.from_config(config.approval, session_id="s1", saved=rules.rules("s1"))
    assert policy.decide("y = 2").rule == "ask-rebinds"
    mine = rules.add(always_rule(["rebinds"], "y = 2"), scope="session", session_id="s1", created_by="alice")
    theirs = rules.add(always_rule(["mutates"], "a.append(1)"), scope="session", session_id="s2")
    everyone = rules.add(always_rule(["read_only", "rebinds"], "y = len(a)"), scope="workspace")
    assert [r.id for r in rules.list()] == [mine.id, theirs.id, everyone.id]

    def decide(code: str, session: str):
        return ApprovalPolicy.from_config(config.approval, session_id=session, saved=rules.rules(session)).decide(code)

    assert (decide("y = 2", "s1").action, decide("y = 2", "s1").rule) == ("allow", everyone.id)   # the last match
    assert decide("a.append(1)", "s1").action == "ask" and decide("a.append(1)", "s2").rule == theirs.id
    rules.remove(everyone.id)
    assert decide("y = 2", "s1").rule == mine.id and decide("y = 2", "s3").rule == "ask-rebinds"
    # a saved allow never lifts a built-in deny, and bad input changes nothing
    rules.add(always_rule(["rebinds"], "x = 1"), scope="workspace")
    assert decide("import os; os.system('ls')", "s1").rule == "deny-subprocess"
    n = len(rules.list())
    with pytest.raises(SavedRuleError, match="scope must be session or workspace"):
        rules.add(always_rule(["rebinds"], "x"), scope="team")
    with pytest.raises(SavedRuleError, match="no rule saved: a built-in deny"):
        rules.add(always_rule(["file_delete"], "os.remove(p)"), scope="workspace")
    with pytest.raises(SavedRuleNotFoundError):
        rules.remove("saved-nothere")
    assert len(rules.list()) == n


def test_an_always_answer_is_checked(ws):
    ds = Decisions(ws.db)
    d = ds.create(kind="approval", prompt="Run?", code="x = 1", options={"code": "x = 1", "classes": ["rebinds"]})
    for bad, why in (({"approved": True, "always": "forever"}, "'always' must be one of session, workspace"),
                     ({"approved": False, "always": "session"}, "needs approved: true"),
                     ({"approved": True, "always": "session", "code": "x = 2"}, "not to edited code")):
        with pytest.raises(DecisionError, match=why):
            ds.answer(d.id, bad)
    assert ds.get(d.id).pending
    assert ds.approve(d.id, always="workspace", by="alice").answer == {"approved": True, "always": "workspace"}


async def test_a_person_answers_always_and_the_next_similar_call_has_no_card(ws):
    ns = {"data": [1, 2, 3]}
    run = AgentRun("q", workspace=ws, provider=calls("data.append(4)", "data.append(5)"),
                   options={"subagents": False}, executor=LiveKernelExecutor(namespace=ns))
    cards: list[UserQuery] = []

    def answer(ev):
        if isinstance(ev, UserQuery):
            cards.append(ev)
            run.respond(ev.query_id, {"approved": True, "always": "session"})

    run.subscribe(answer)
    await run
    assert ns["data"] == [1, 2, 3, 4, 5] and len(cards) == 1   # the second call was decided by the saved rule
    (saved,) = SavedRules(ws.db).list()
    assert (saved.only, saved.scope, saved.session_id, saved.decision_id) == (("mutates",), "session", run.session_id,
                                                                             cards[0].query_id)
    first, second = sorted(Decisions(ws.db).list(run=run.id), key=lambda d: d.created_at)
    assert first.answer == {"approved": True, "always": "session"} and first.decided_by.startswith("person")
    assert first.metadata["savedRule"] == {"id": saved.id, "scope": "session",
                                           "description": "allow cells that only do: mutates"}
    assert second.decided_by == f"rule {saved.id}" and second.code == "data.append(5)"
    assert f"saved approval rule {saved.id}" in run.tree["metadata"]["notes"][0]
    # the same session's next run is decided by it too; another session's is asked (headless: fails closed)
    again = AgentRun("q", workspace=ws, provider=calls("data.append(6)"), session_id=run.session_id,
                     options={"subagents": False, "interactive": False}, executor=LiveKernelExecutor(namespace=ns))
    await again
    assert ns["data"][-1] == 6
    other = AgentRun("q", workspace=ws, provider=calls("data.append(7)"),
                     options={"subagents": False, "interactive": False}, executor=LiveKernelExecutor(namespace=ns))
    with pytest.raises(HeadlessQueryError):
        await other
    assert ns["data"][-1] == 6


async def test_always_on_code_a_builtin_deny_covers_runs_it_once_and_saves_nothing(tmp_path):
    from agentstack_lab.workspace import Workspace

    cfg = Config.from_dict({"approval": {"rules": [
        {"id": "ask-local-net", "action": "ask", "any_of": ["network"], "code": "localhost",
         "lifts": ["deny-network"]}]}})
    with Workspace.open(tmp_path / "ws", config=cfg, announce=False) as ws:
        run = AgentRun("q", workspace=ws, provider=calls("x = 'http://localhost'; urllib.request.urlopen"),
                       options={"subagents": False}, executor=LiveKernelExecutor(namespace={"urllib": None}))
        run.subscribe(lambda ev: isinstance(ev, UserQuery) and run.respond(ev.query_id, {"approved": True,
                                                                                          "always": "workspace"}))
        await run
        assert SavedRules(ws.db).list() == []
        (d,) = Decisions(ws.db).list(run=run.id)
        assert d.metadata["savedRule"]["refused"].startswith("no rule saved: a built-in deny covers this code")


def test_cli_saves_from_the_terminal_lists_and_removes(ws):
    runner = CliRunner()

    def cli(*args: str):
        return runner.invoke(app, ["--workspace", str(ws.root), *args], env={"COLUMNS": "200"})

    ds = Decisions(ws.db)
    d = ds.create(kind="approval", prompt="Run?", code="df2 = df.head()",
                  options={"code": "df2 = df.head()", "classes": ["read_only", "rebinds"]})
    shown = cli("decisions", "show", d.id[:8]).output
    assert "always:  allow cells that only do: read_only, rebinds" in shown
    for args, why in ((["--scope", "session"], "--scope goes with --always"),
                      (["--always", "--scope", "team"], "--scope must be session or workspace, got 'team'"),
                      (["--always", "--edit", "x.py"], "cannot go with --edit")):
        out = cli("decisions", "approve", d.id, *args)
        assert out.exit_code == 2 and out.output.strip().splitlines() == [f"error: {out.output.split('error: ')[1].strip()}"]
        assert why in out.output
    assert ds.get(d.id).pending   # nothing changed
    net = ds.create(kind="approval", prompt="Run?", code="requests.get(u)", options={"classes": ["network"]})
    out = cli("decisions", "approve", net.id, "--always")
    assert out.exit_code == 2 and "no rule can be saved" in out.output and ds.get(net.id).pending
    out = cli("decisions", "approve", d.id, "--always", "--scope", "workspace")
    assert out.exit_code == 0, out.output
    assert "approved, always (workspace)" in out.output and "the run saves an approval rule (workspace)" in out.output
    assert ds.get(d.id).answer == {"approved": True, "always": "workspace"}
    assert "no saved approval rules" in cli("approval", "rules").output
    rule = SavedRules(ws.db).add(always_rule(["rebinds"], "x = 1"), scope="workspace", created_by="alice")
    listed = cli("approval", "rules").output
    assert rule.id in listed and "allow cells that only do: rebinds" in listed and "workspace" in listed
    assert json.loads(cli("approval", "rules", "--json").output)[0]["id"] == rule.id
    out = cli("approval", "rules", "--remove", "saved-nothere")
    assert out.exit_code != 0 and "no saved approval rule 'saved-nothere'" in out.output
    assert f"removed approval rule {rule.id}" in cli("approval", "rules", "--remove", rule.id).output
    assert SavedRules(ws.db).list() == []
