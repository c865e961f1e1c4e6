"""Gather a provider stream, and ask for structured output validated by pydantic."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentstack_lab.providers.base import (
    Completion,
    Message,
    Provider,
    ProviderError,
    ProviderRequest,
    StopEvent,
    TextBlock,
    TextDeltaEvent,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    ToolUseEvent,
    Usage,
    UsageEvent,
)

__all__ = ["complete", "structured", "StructuredOutputError", "STRUCTURED_TOOL"]

T = TypeVar("T", bound=BaseModel)
STRUCTURED_TOOL = "respond"


class StructuredOutputError(ProviderError):
    """The model's reply did not match the requested schema, even after one retry.

    ``usage`` is what the failed attempts used (they were billed all the same).
    """

    def __init__(self, message: str, usage: Usage | None = None):
        super().__init__(message)
        self.usage = usage or Usage()


async def complete(provider: Provider, request: ProviderRequest,
                   on_text: Callable[[str], Any] | None = None) -> Completion:
    """Run a request and gather the whole stream; ``on_text(delta)`` sees the text as it streams."""
    out = Completion()
    parts: list[str] = []
    async for ev in provider.stream(request):
        if isinstance(ev, TextDeltaEvent):
            parts.append(ev.text)
            if on_text is not None and ev.text:
                on_text(ev.text)
        elif isinstance(ev, ToolUseEvent):
            out.tool_calls.append(ev)
        elif isinstance(ev, UsageEvent):
            out.usage.add(ev)
        elif isinstance(ev, StopEvent):
            out.stop_reason = ev.reason
    if out.usage.basis == "none":  # the provider said nothing about tokens: unknown, not zero
        out.usage.basis = "unknown"
    out.text = "".join(parts)
    return out


def _extract(completion: Completion) -> Any:
    for call in completion.tool_calls:
        if call.name == STRUCTURED_TOOL:
            return call.input
    text = completion.text.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    return json.loads(text) if text else None


async def structured(provider: Provider, request: ProviderRequest, schema: type[T]) -> tuple[T, Completion]:
    """Ask for output matching ``schema`` through a forced tool call; retry once with the error, then fail.

    Returns the validated object and the last completion (for its usage).
    """
    tool = ToolSpec(name=STRUCTURED_TOOL, description=f"Reply with a {schema.__name__} object.",
                    input_schema=schema.model_json_schema())
    req = dataclasses.replace(request, tools=[tool], tool_choice=STRUCTURED_TOOL)
    total = Completion()
    last_error = ""
    for attempt in range(2):
        completion = await complete(provider, req)
        total.usage.add(completion.usage)  # type: ignore[arg-type]
        try:
            raw = _extract(completion)
            value = schema.model_validate(raw)
            completion.usage = total.usage
            return value, completion
        except (ValidationError, json.JSONDecodeError, TypeError) as exc:
            last_error = str(exc)
            if attempt == 1:
                break
            call = next((c for c in completion.tool_calls if c.name == STRUCTURED_TOOL), None)
            if call is not None:
                assistant = Message(role="assistant", content=[ToolUseBlock(id=call.id, name=call.name, input=call.input)])
                feedback = Message(role="user", content=[ToolResultBlock(
                    tool_use_id=call.id, is_error=True,
                    content=f"Invalid {schema.__name__}: {last_error}. Call {STRUCTURED_TOOL} again with valid input.")])
            else:
                assistant = Message(role="assistant", content=[TextBlock(text=completion.text or "(empty)")])
                feedback = Message(role="user", content=f"Invalid {schema.__name__}: {last_error}. "
                                   f"Call the {STRUCTURED_TOOL} tool with valid input.")
            req = dataclasses.replace(req, messages=[*req.messages, assistant, feedback])
    raise StructuredOutputError(f"{getattr(provider, 'name', 'provider')}: reply did not match "
                                f"{schema.__name__} after a retry: {last_error.splitlines()[0] if last_error else 'empty reply'}",
                                total.usage)
