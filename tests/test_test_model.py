"""The step-aware offline test model: every step filled from its schema, only the scripted ones changed."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.engine.steps import BlockingQuestion, Clarification, FinalQuestion, Subquestions
from agentstack_lab.events import ToolCall, UserQuery
from agentstack_lab.providers.base import Message, ProviderRequest
from agentstack_lab.providers.complete import complete, structured
from agentstack_lab.providers.testing import TestModel, fill_schema


def req(step: str, depth: int = 0, prompt: str = "q") -> ProviderRequest:
    return ProviderRequest(messages=[Message(role="user", content=prompt)],
                           metadata={"step": step, "depth": depth, "prompt": prompt, "agent_type": "researcher"})


async def test_every_structured_step_is_filled_from_its_schema_with_the_neutral_answer():
    model = TestModel()
    assert (await structured(model, req("clarify"), Clarification))[0] == Clarification(needs_clarification=False)
    assert (await structured(model, req("blocking"), BlockingQuestion))[0] == BlockingQuestion(has_question=False)
    assert (await structured(model, req("final"), FinalQuestion))[0] == FinalQuestion(has_question=False)
    assert (await structured(model, req("subquestions"), Subquestions))[0].subquestions == []
    assert (await complete(model, req("main", prompt="How big?"))).text == "answer to How big?"
    assert [r.metadata["step"] for r in model.requests] == ["clarify", "blocking", "final", "subquestions", "main"]


class Other(BaseModel):
    """A structured step the model knows nothing about."""

    ok: bool
    count: int
    names: list[str]
    note: str | None
    label: str = "x"


async def test_an_unknown_structured_step_gets_its_schemas_zero_values():
    assert fill_schema(Other.model_json_schema()) == {"ok": False, "count": 0, "names": [], "note": None,
                                                      "label": "x"}
    value, _ = await structured(TestModel(), req("something-new"), Other)
    assert value == Other(ok=False, count=0, names=[], note=None)


async def test_shorthands_and_functions_override_one_step_each():
    model = TestModel(clarify="Which year?", subquestions=["A", ("B", "coder")],
                      main=lambda r: "sub answer" if r.metadata["depth"] else None)
    clarify, _ = await structured(model, req("clarify"), Clarification)
    assert clarify == Clarification(needs_clarification=True, question="Which year?")
    plan, _ = await structured(model, req("subquestions"), Subquestions)
    assert [(s.question, s.agent_type) for s in plan.subquestions] == [("A", "researcher"), ("B", "coder")]
    deeper, _ = await structured(model, req("subquestions", depth=1), Subquestions)
    assert deeper.subquestions == []   # a constant plan is the root's only
    assert (await complete(model, req("main", depth=1))).text == "sub answer"
    assert (await complete(model, req("main", prompt="root q"))).text == "answer to root q"   # None: the default


async def test_a_reply_that_is_not_a_dict_for_a_structured_step_says_which_step():
    with pytest.raises(TypeError, match="step 'blocking' takes a dict"):
        await structured(TestModel(blocking=42), req("blocking"), BlockingQuestion)


async def test_a_run_with_the_defaults_answers_and_code_runs_once(ws):
    ns: dict = {}
    model = TestModel(code="x = 6 * 7", subquestions=["a side question"])
    run = AgentRun("what is x?", workspace=ws, provider=model, executor=LiveKernelExecutor(namespace=ns),
                   options={"auto_approve": True, "max_depth": 1})
    await asyncio.wait_for(run.wait(), 30)
    assert run.status == "completed" and ns["x"] == 42
    assert [e.tool for e in run.events if isinstance(e, ToolCall)] == ["python", "python"]  # root and child
    assert not [e for e in run.events if isinstance(e, UserQuery)]     # nothing asked by default
    assert "answer to what is x?" in run.result and "answer to a side question" in run.result
    assert len(model.steps("clarify")) == 1 and len(model.steps("subquestions")) == 1  # the child plans no further


def test_pytest_does_not_collect_it():
    assert TestModel.__test__ is False
