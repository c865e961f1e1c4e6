"""The dry run behind the approval card (issue 30, item 4): ``approval.dry_run`` and "Try it first".

The engine runs in this process with the live executor on a plain namespace (a real fork each time);
``tests/test_sandbox_kernel.py`` runs the probes through a real kernel.
"""

from __future__ import annotations

import asyncio

import pytest

from agentstack_lab.config import Config, ConfigError
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor, SubprocessExecutor
from agentstack_lab.events import UserQuery
from agentstack_lab.providers.base import ToolResultBlock
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.workspace import Workspace

pytestmark = pytest.mark.slow

# the path is built at run time, so the approval rules cannot see it leaves the folder (a literal one is denied
# by deny-write-outside before any card): the card asks, and the dry run shows the sandbox refusing the write
CODE = ("data.append(4)\ntotal = sum(data)\nprint('total', total)\ntry:\n    open('/etc/' + 'agentstack-probe', 'w')\n"
        "except OSError:\n    pass\n")
NO = {"needs_clarification": False, "has_question": False}


def _model(code: str):
    async def fn(req):
        step = req.metadata["step"]
        if step in ("clarify", "blocking", "final"):
            return NO
        if step == "subquestions":
            return {"subquestions": []}
        last = req.messages[-1]
        done = last.role == "user" and not isinstance(last.content, str) and any(
            isinstance(b, ToolResultBlock) for b in last.content)
        if step == "main":
            return "done" if done else [tool_call("python", {"code": code})]
        return "summary"

    return ScriptedProvider(fn)


def _reject_every_card(run: AgentRun) -> list[UserQuery]:
    """The approval cards the run shows, each rejected as it comes."""
    cards: list[UserQuery] = []

    def on_event(ev):
        if isinstance(ev, UserQuery) and ev.kind == "approval":
            cards.append(ev)
            run.respond(ev.query_id, "reject")

    run.subscribe(on_event)
    return cards


def _workspace(tmp_path, dry_run: bool) -> Workspace:
    return Workspace.open(tmp_path / "ws", config=Config.from_dict({"approval": {"dry_run": dry_run}}), announce=False)


async def test_config_dry_run_puts_the_report_on_the_approval_card_and_reject_changes_nothing(tmp_path):
    ns = {"data": [1, 2, 3]}
    with _workspace(tmp_path, True) as ws:
        run = AgentRun("sum it", workspace=ws, provider=_model(CODE), executor=LiveKernelExecutor(namespace=ns))
        cards = _reject_every_card(run)
        await run
        (card,) = cards
        dry = card.options["dryRun"]
        assert {c["name"]: (c["action"], c["before"], c["after"]) for c in dry["changes"]} == {
            "data": ("changed", "list[3]", "list[4]"), "total": ("created", "", "int = 10")}
        assert dry["stdout"] == "total 10\n" and not dry["clean"]
        assert dry["refused"][0]["target"] == "'/etc/agentstack-probe'"
        assert dry["protections"]["timeout"].startswith("active")
        assert ws.decisions.get(card.query_id).options["dryRun"] == dry  # the persisted card carries it
    assert ns == {"data": [1, 2, 3]}  # rejected: the dry run and the rejection left everything as it was


async def test_try_it_first_then_run_for_real_gives_the_same_summary(tmp_path):
    ns = {"data": [1, 2, 3]}
    with _workspace(tmp_path, False) as ws:
        run = AgentRun("sum it", workspace=ws, provider=_model(CODE), executor=LiveKernelExecutor(namespace=ns))
        tried: list = []

        async def try_then_approve(ev: UserQuery):
            assert "dryRun" not in ev.options  # off in config: only on demand
            result = await run.try_first(ev.query_id)
            tried.append((result, ws.decisions.get(ev.query_id)))
            assert ns == {"data": [1, 2, 3]}
            run.respond(ev.query_id, "approve")

        pending: list[asyncio.Task] = []
        run.subscribe(lambda ev: isinstance(ev, UserQuery) and pending.append(
            asyncio.ensure_future(try_then_approve(ev))))
        await run
        await asyncio.gather(*pending)
        ((result, decision),) = tried
        assert decision.metadata["dryRun"]["changes"] == result.to_dict()["changes"]
        node = run.agents[run.root_id]
        assert node.metadata["dryRuns"][decision.id]["stdout"] == "total 10\n"
        real = [e for e in run.events if getattr(e, "tool", None) == "python" and hasattr(e, "output")][-1]
        assert real.output["changes"] == result.changes
        with pytest.raises(ValueError, match="no pending python approval"):
            await run.try_first(decision.id)  # answered: nothing to try any more
    assert ns["data"] == [1, 2, 3, 4] and ns["total"] == 10


async def test_executors_without_a_dry_run_say_so_and_config_checks_the_field(tmp_path):
    with pytest.raises(RuntimeError, match="has no dry run"):
        await SubprocessExecutor().dry_run("x = 1")
    with pytest.raises(ConfigError, match="dry_run"):
        Config.from_dict({"approval": {"dry_run": "sometimes"}})


def _policy_workspace(tmp_path) -> Workspace:
    rules = [{"id": "try-changes", "action": "dry_run_then_allow", "any_of": ["rebinds", "mutates", "unknown"]}]
    return Workspace.open(tmp_path / "ws", config=Config.from_dict({"approval": {"rules": rules}}), announce=False)


async def test_dry_run_then_allow_runs_clean_code_without_asking(tmp_path):
    ns = {"data": [1, 2, 3]}
    with _policy_workspace(tmp_path) as ws:
        run = AgentRun("sum it", workspace=ws, provider=_model("data.append(4)\ntotal = sum(data)"),
                       executor=LiveKernelExecutor(namespace=ns), options={"on_query": "fail"})
        await run
        assert not [e for e in run.events if isinstance(e, UserQuery)]      # nobody was asked
        (decision,) = ws.decisions.list(run=run.run_id)
        assert (decision.answered_by, decision.answer) == ("rule:try-changes", {"approved": True})
        dry = decision.metadata["verdict"]["dryRun"]
        assert dry["clean"] and {c["name"] for c in dry["changes"]} == {"data", "total"}
    assert ns["data"] == [1, 2, 3, 4] and ns["total"] == 10                # then it ran for real, once


async def test_dry_run_then_allow_asks_a_person_when_the_sandbox_refused_something_even_under_auto_approve(tmp_path):
    ns = {"data": [1, 2, 3]}
    with _policy_workspace(tmp_path) as ws:
        run = AgentRun("sum it", workspace=ws, provider=_model(CODE), executor=LiveKernelExecutor(namespace=ns),
                       options={"auto_approve": True})
        cards = _reject_every_card(run)
        await run
        (card,) = cards                                                      # auto_approve did not answer it
        assert "dry run was not clean" in card.options["why"] and "open" in card.options["why"]
        assert card.options["dryRun"]["refused"][0]["target"] == "'/etc/agentstack-probe'"
    assert ns == {"data": [1, 2, 3]}
