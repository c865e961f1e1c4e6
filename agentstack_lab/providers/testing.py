"""A step-aware offline model for tests: every engine step is filled unless the test scripts it.

After pydantic-ai's ``TestModel``: a structured step (clarify, blocking, subquestions, final, consensus
review, or any other forced-tool step) is answered from its schema with the neutral reply (no
clarification, no question, no subquestions, the plan approved); the main step answers
``"answer to {prompt}"`` and the summary merges what it was given. A test passes only the steps it is
about, each as a value or as a function of the request (sync or async) returning one; a function
returning ``None`` leaves that call to the default, so a test can script one agent or one call::

    TestModel(subquestions=["part A", ("part B", "coder")])        # the root plans two subagents
    TestModel(clarify="Which year?", code="print(6 * 7)")           # asks once, runs code, answers
    TestModel(main=lambda r: "ok" if r.metadata["depth"] else None)  # subagents say "ok"

Shorthands per step: ``clarify`` / ``blocking`` / ``final`` take the question to ask (a string) or the
full dict; ``subquestions`` takes a list of questions (strings, ``(question, agent_type)`` pairs or
dicts), which a constant gives the root agent only; ``main`` and ``summary`` take whatever
:class:`~agentstack_lab.providers.scripted.ScriptedProvider` streams (text, events, tool calls).
``code`` makes each agent that has the ``python`` tool run that code once before it answers.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

from agentstack_lab.providers.base import ProviderEvent, ProviderRequest, ToolResultBlock, tool_call
from agentstack_lab.providers.scripted import ScriptedProvider

__all__ = ["TestModel", "fill_schema", "has_tool_result"]

Step = Any  # a step's reply, or a function of the request (sync or async) returning one or None

_QUESTION_FLAG = {"clarify": "needs_clarification", "blocking": "has_question", "final": "has_question"}
_NEUTRAL: dict[str, dict[str, Any]] = {  # where the schema's zero value is not the neutral answer
    "consensus_review": {"approved": True},
}


def fill_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The neutral object for a JSON schema: defaults where given, else false, empty, zero or null."""
    return {name: _zero(prop) for name, prop in (schema.get("properties") or {}).items()}


def _zero(prop: dict[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    kinds = [prop.get("type")] + [p.get("type") for p in prop.get("anyOf", [])]
    if "null" in kinds:
        return None
    for kind, zero in (("boolean", False), ("array", []), ("object", {}), ("integer", 0), ("number", 0),
                       ("string", "")):
        if kind in kinds:
            return zero
    return None


def has_tool_result(request: ProviderRequest) -> bool:
    """Whether the request's conversation already carries a tool result (the tool ran)."""
    return any(isinstance(b, ToolResultBlock) for m in request.messages if not isinstance(m.content, str)
               for b in m.content)


class TestModel:
    """The step-aware offline model (a provider); see the module docstring."""

    __test__ = False   # not a pytest test class, despite its name
    name = "scripted"

    def __init__(self, *, main: Step = None, summary: Step = None, subquestions: Step = None,
                 clarify: Step = None, blocking: Step = None, final: Step = None,
                 consensus_review: Step = None, code: str | None = None, latency: float = 0.0):
        self.overrides: dict[str, Step] = {
            "main": main, "summary": summary, "subquestions": subquestions, "clarify": clarify,
            "blocking": blocking, "final": final, "consensus_review": consensus_review}
        self.code = code
        self._scripted = ScriptedProvider(self.reply, latency=latency)

    @property
    def requests(self) -> list[ProviderRequest]:
        """Every request the engine sent, in order."""
        return self._scripted.requests

    def steps(self, step: str) -> list[ProviderRequest]:
        """The requests of one step (``"main"``, ``"clarify"``, ...)."""
        return [r for r in self.requests if (r.metadata or {}).get("step") == step]

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply for ``request`` (through the scripted provider's streaming)."""
        return self._scripted.stream(request)

    async def reply(self, request: ProviderRequest) -> Any:
        """The reply for one request: the test's override for its step, else the default."""
        meta = request.metadata or {}
        step = meta.get("step")
        override = self.overrides.get(step) if isinstance(step, str) else None
        value = override(request) if callable(override) else override
        if inspect.isawaitable(value):
            value = await value
        if step == "subquestions" and not callable(override) and meta.get("depth", 0) > 0:
            value = None   # a constant plan is the root's; subagents plan nothing
        if request.tool_choice:
            return self._structured(request, step, value)
        if value is not None:
            return value
        if step == "main" and self.code is not None and not has_tool_result(request) and any(
                t.name == "python" for t in request.tools):
            return [tool_call("python", {"code": self.code})]
        if step == "summary":
            return "summary:\n" + (request.messages[-1].text() if request.messages else "")
        return f"answer to {meta.get('prompt', '')}"

    def _structured(self, request: ProviderRequest, step: Any, value: Any) -> dict[str, Any]:
        schema = next((t.input_schema for t in request.tools if t.name == request.tool_choice), {})
        out = {**fill_schema(schema), **_NEUTRAL.get(step, {})}
        if isinstance(value, str) and step in _QUESTION_FLAG:
            value = {_QUESTION_FLAG[step]: True, "question": value}
        elif step == "subquestions" and isinstance(value, list | tuple):
            value = {"subquestions": [_subquestion(q) for q in value]}
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"TestModel: step {step!r} takes a dict (or its shorthand), got {type(value).__name__}")
        return {**out, **(value or {})}

    def __repr__(self) -> str:
        scripted = sorted(k for k, v in self.overrides.items() if v is not None)
        return f"TestModel(scripted={scripted}, code={self.code is not None})"


def _subquestion(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"question": item, "agent_type": "researcher"}
    if isinstance(item, tuple):
        question, agent_type = item
        return {"question": question, "agent_type": agent_type}
    return dict(item)

