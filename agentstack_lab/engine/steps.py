"""The six steps of one agent, after the design seed's ``agent()`` generator.

Clarify, blocking question, subquestions, spawn, main tool loop, summary (+ an optional final question).

Clarification, blocking and final questions are asked by the root agent only (subagents work
from their subquestion). Every model request carries ``metadata = {"step", "agent_type",
"agent_id", "depth", "prompt"}`` so scripted providers can branch on it.

A follow-up's root (``run.ask``, engine/followup.py) carries the thread so far in ``node.history``
(earlier questions and answers as chat turns); every one of its model calls starts with them.

Steps see their run only through :class:`~agentstack_lab.engine.context.AgentContext` (``ctx``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentstack_lab.engine.options import BudgetExceededError
from agentstack_lab.engine.tools import AgentCallsOf, dispatch, tool_specs
from agentstack_lab.events import QueryKind, TextDelta
from agentstack_lab.providers.base import (
    AGENT_CALLS,
    Completion,
    ContentBlock,
    Message,
    ProviderRequest,
    TextBlock,
    ToolUseBlock,
)
from agentstack_lab.providers.complete import StructuredOutputError, complete, structured
from agentstack_lab.tasks.drift import DriftPreventedError
from agentstack_lab.validation import as_dicts

if TYPE_CHECKING:
    from agentstack_lab.engine.context import AgentContext
    from agentstack_lab.engine.state import AgentNode

__all__ = ["Clarification", "BlockingQuestion", "Subquestion", "Subquestions", "FinalQuestion", "run_steps"]


class Clarification(BaseModel):
    needs_clarification: bool = Field(description="True only if the request is too ambiguous to start")
    question: str | None = Field(default=None, description="The one question to ask the user")


class BlockingQuestion(BaseModel):
    has_question: bool = Field(description="True if something must be known from the user before work starts")
    question: str | None = None


class Subquestion(BaseModel):
    question: str
    agent_type: str = "researcher"


class Subquestions(BaseModel):
    subquestions: list[Subquestion] = Field(default_factory=list[Subquestion], max_length=4,
                                            description="0-4 independent subquestions worth exploring in parallel")


class FinalQuestion(BaseModel):
    has_question: bool = Field(description="True if one follow-up question to the user would improve the answer")
    question: str | None = None


_STEP_INSTRUCTIONS = {
    "clarify": "Decide whether the request is too ambiguous to start. Ask only if truly necessary.",
    "blocking": "Decide whether anything must be known from the user before starting. Usually nothing.",
    "subquestions": ("Split the request into 0-4 independent subquestions worth exploring in parallel by "
                     "subagents, each with the best agent type from: {types}. Return none if the request is simple."),
    "main": "Answer the request. Use the tools when they help; be concise.",
    "summary": "Merge your answer with the subagents' results into one final answer. State failed subagents as such.",
    "final": "Decide whether one follow-up question to the user would clearly improve the final answer.",
}


def _enter(ctx: AgentContext, node: AgentNode, step: str) -> None:
    """Announce the step an agent is in (``metadata.step``), so the views can say what it is doing."""
    if node.metadata.get("step") != step:
        node.metadata["step"] = step
        ctx.emit_state(node)


def _request(ctx: AgentContext, node: AgentNode, step: str, messages: list[Message], **kw: Any) -> ProviderRequest:
    _enter(ctx, node, step)
    definition = ctx.registry.get(node.type)
    instruction = _STEP_INSTRUCTIONS[step].format(types=", ".join(ctx.registry.list()))
    return ProviderRequest(system=f"{definition.system_prompt}\n\n# Current step\n{instruction}",
                           messages=messages, model=ctx.model,
                           metadata={"step": step, "agent_type": node.type, "agent_id": node.id,
                                     "depth": node.depth, "prompt": node.prompt}, **kw)


def _with_comments(node: AgentNode, messages: list[Message]) -> list[Message]:
    """Inject pending user comments into the next model call (and the agent's conversation)."""
    if not node.pending_comments:
        return messages
    text = "\n".join(node.pending_comments)
    node.pending_comments.clear()
    if messages and messages[-1].role == "user":
        last = messages[-1]
        content = (f"{last.content}\n\n{text}" if isinstance(last.content, str)
                   else [*last.content, TextBlock(text=text)])
        return [*messages[:-1], Message(role="user", content=content)]
    return [*messages, Message(role="user", content=text)]


@contextlib.contextmanager
def _calls_of(ctx: AgentContext, node: AgentNode) -> Generator[None]:
    """During one model call: a provider that is itself an agent reports to ``node`` (AGENT_CALLS)."""
    token = AGENT_CALLS.set(AgentCallsOf(ctx, node))
    try:
        yield
    finally:
        AGENT_CALLS.reset(token)


async def _structured(ctx: AgentContext, node: AgentNode, step: str, schema: type[BaseModel], context: str) -> Any:
    """A structured step; a reply that never matches the schema skips the step (noted), it does not fail the agent."""
    await ctx.checkpoint(node)  # a paused agent waits here
    messages = _with_comments(node, [*node.history, Message(role="user", content=context)])
    try:
        with _calls_of(ctx, node):
            value, completion = await structured(ctx.provider, _request(ctx, node, step, messages), schema)
    except StructuredOutputError as exc:
        if exc.usage.total or exc.usage.basis != "none":
            ctx.charge(node, exc.usage)  # the failed attempts count against the budget too
        ctx.note(node, f"{step} step skipped: {exc}")
        return schema.model_validate({"needs_clarification": False, "has_question": False, "subquestions": []})
    ctx.charge(node, completion.usage)
    return value


async def _stream(ctx: AgentContext, node: AgentNode, request: ProviderRequest) -> Completion:
    await ctx.checkpoint(node)  # a paused agent waits here
    def on_text(text: str) -> None:
        node.content += text
        ctx.emit(TextDelta(agent_id=node.id, delta=text))

    with _calls_of(ctx, node):
        out = await complete(ctx.provider, request, on_text)
    if out.usage.total or out.usage.basis != "none":  # an unknown figure is charged too (it is shown, not 0)
        ctx.charge(node, out.usage)
    return out


def _context(node: AgentNode) -> str:
    notes = as_dicts(node.metadata.get("answers"))
    extra = "".join(f"\n\n{a['kind'].title()} question: {a['question']}\nUser's answer: {a['answer']}" for a in notes
                    if a["kind"] in ("clarification", "blocking"))
    return node.prompt + extra


async def _ask_step(ctx: AgentContext, node: AgentNode, kind: QueryKind, step: str, schema: type[BaseModel]) -> None:
    value = await _structured(ctx, node, step, schema, _context(node))
    wants = getattr(value, "needs_clarification", None) or getattr(value, "has_question", False)
    if wants and value.question:
        await ctx.ask_user(node, kind, value.question)


async def _plan_children(ctx: AgentContext, node: AgentNode) -> None:
    opts = ctx.options
    if not opts.subagents or node.depth >= opts.max_depth:
        return
    plan = await _structured(ctx, node, "subquestions", Subquestions, _context(node))
    subs: list[tuple[str, str]] = []
    for sub in plan.subquestions:
        agent_type = sub.agent_type if ctx.registry.has(sub.agent_type) else ctx.default_type
        if agent_type != sub.agent_type:
            ctx.note(node, f"unknown agent type {sub.agent_type!r} from the model; used {agent_type!r}")
        subs.append((sub.question, agent_type))
    for child_id, question, agent_type in await ctx.gate(node, subs):  # consensus may drop some
        try:
            ctx.spawn_child(node, question, agent_type, origin="subquestion", agent_id=child_id)
        except DriftPreventedError:
            pass  # the parent already has a note saying why
        except BudgetExceededError as exc:
            ctx.note(node, f"subquestion not explored: {exc}")


async def _main_loop(ctx: AgentContext, node: AgentNode) -> str:
    specs = tool_specs(ctx.executor, memory=True)  # every workspace has a memory
    node.messages = [*node.history, Message(role="user", content=_context(node))]
    answer = ""
    for _turn in range(ctx.options.max_turns):
        node.messages = _with_comments(node, node.messages)
        completion = await _stream(ctx, node, _request(ctx, node, "main", list(node.messages), tools=specs))
        text = completion.text
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        blocks += [ToolUseBlock(id=c.id, name=c.name, input=c.input) for c in completion.tool_calls]
        node.messages.append(Message(role="assistant", content=blocks or completion.text))
        if text:
            answer = text
        if not completion.tool_calls:
            return answer or completion.text
        results: list[ContentBlock] = [await dispatch(ctx, node, call) for call in completion.tool_calls]
        node.messages.append(Message(role="user", content=results))
    ctx.note(node, f"stopped the tool loop after max_turns={ctx.options.max_turns}")
    return answer


def _child_line(child: AgentNode) -> str:
    if child.status == "completed":
        return f"- [{child.type}, completed] {child.prompt}\n  Result: {child.result}"
    return f"- [{child.type}, {child.status.upper()}] {child.prompt}\n  This subagent {child.status}: {child.error}"


async def _summarise(ctx: AgentContext, node: AgentNode, main_answer: str, children: list[AgentNode]) -> str:
    if not children:
        return main_answer
    body = (f"Request: {node.prompt}\n\nYour answer:\n{main_answer or '(none)'}\n\nSubagents' results:\n"
            + "\n".join(_child_line(c) for c in children))
    if node.content and not node.content.endswith("\n\n"):
        node.content += "\n\n"
        ctx.emit(TextDelta(agent_id=node.id, delta="\n\n"))
    summary = (await _stream(ctx, node, _request(ctx, node, "summary", _with_comments(
        node, [*node.history, Message(role="user", content=body)])))).text
    failed = [c for c in children if c.status != "completed"]
    if failed:
        note = "\n\nSubagents that did not complete: " + "; ".join(
            f"{c.name} ({c.status}: {c.error})" for c in failed)
        node.content += note
        ctx.emit(TextDelta(agent_id=node.id, delta=note))
        summary += note
    return summary


async def run_steps(ctx: AgentContext, node: AgentNode) -> str:
    """Run one agent through its steps and return its result."""
    if node.depth == 0:
        await _ask_step(ctx, node, "clarification", "clarify", Clarification)
        await _ask_step(ctx, node, "blocking", "blocking", BlockingQuestion)
    await _plan_children(ctx, node)
    main_answer = await _main_loop(ctx, node)
    # Wait for every child (subquestions and forks, including forks started late).
    while True:
        pending = [c.task for c in ctx.children(node) if c.task is not None and not c.task.done()]
        if not pending:
            break
        _enter(ctx, node, "subagents")
        await asyncio.gather(*pending, return_exceptions=True)
    children = ctx.children(node)
    result = await _summarise(ctx, node, main_answer, children)
    if node.depth == 0 and ctx.options.final_question:
        value = await _structured(ctx, node, "final", FinalQuestion, f"{node.prompt}\n\nFinal answer:\n{result}")
        if value.has_question and value.question:
            answer = await ctx.ask_user(node, "final", value.question, optional=True)
            if answer:
                follow = (f"Request: {node.prompt}\n\nYour final answer:\n{result}\n\nFollow-up question: "
                          f"{value.question}\nUser's answer: {answer}\n\nGive the updated final answer.")
                node.content += "\n\n"
                ctx.emit(TextDelta(agent_id=node.id, delta="\n\n"))
                result = (await _stream(ctx, node, _request(
                    ctx, node, "summary", [*node.history, Message(role="user", content=follow)]))).text or result
    return result
