"""The main agent's tools: ``python`` (approval, executor, fork/wait), ``memory_search``, ``memory_store``."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.executors import ExecContext, redact, secret_values
from agentstack_lab.events import ToolCall, ToolResult
from agentstack_lab.providers.base import ToolResultBlock, ToolSpec, ToolUseEvent

if TYPE_CHECKING:
    from agentstack_lab.engine.run import AgentRun
    from agentstack_lab.engine.state import AgentNode

__all__ = ["tool_specs", "dispatch", "parse_approval"]

_PYTHON_DOC = ("Run Python code. {where} The value of the last expression is returned with stdout, stderr "
               "and any error.{fork}")
_FORK_DOC = (" Inside the code, fork(prompt, type='researcher') starts a nested agent and returns a handle; "
             "wait(handle) blocks until it finishes and returns its result.")


def tool_specs(executor: Any, memory: bool) -> list[ToolSpec]:
    """The tool specs offered to the main agent."""
    live = getattr(executor, "name", "") == "live"
    where = ("It runs in the user's live Jupyter kernel: you can read and create the user's variables."
             if live else "It runs in an isolated Python subprocess.")
    specs = [ToolSpec(name="python", description=_PYTHON_DOC.format(
        where=where, fork=_FORK_DOC if getattr(executor, "supports_fork", False) else ""),
        input_schema={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})]
    if memory:
        specs.append(ToolSpec(name="memory_search", description="Search this session's memory.", input_schema={
            "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"]}))
        specs.append(ToolSpec(name="memory_store", description="Store a note in this session's memory.", input_schema={
            "type": "object", "properties": {"key": {"type": "string"}, "content": {"type": "string"},
                                             "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["key", "content"]}))
    return specs


def parse_approval(response: Any, code: str) -> tuple[bool, str]:
    """Normalise an approval answer to ``(approved, code)``; anything else is a ``ValueError``."""
    if isinstance(response, bool):
        return response, code
    if isinstance(response, str) and response.strip().lower() in ("approve", "approved", "yes", "y", "ok", "run"):
        return True, code
    if isinstance(response, str) and response.strip().lower() in ("reject", "rejected", "no", "n", "deny"):
        return False, code
    if isinstance(response, dict) and isinstance(response.get("approved"), bool):
        edited = response.get("code", code)
        if not isinstance(edited, str) or not edited.strip():
            raise ValueError("approval: 'code' must be a non-empty string when given")
        return response["approved"], edited
    raise ValueError(f"approval answer must be True/False, 'approve'/'reject' or "
                     f"{{'approved': bool, 'code': str}}, got {response!r}")


async def dispatch(run: AgentRun, node: AgentNode, call: ToolUseEvent) -> ToolResultBlock:
    """Run one tool call, emitting ``tool-call`` and ``tool-result``; errors go back to the model."""
    await run.checkpoint(node)  # a paused agent waits here
    run.emit(ToolCall(agent_id=node.id, tool=call.name, input=call.input))
    try:
        if call.name == "python":
            output, error = await _python(run, node, call)
        elif call.name == "memory_search":
            output, error = await _memory_search(run, node, call.input), None
        elif call.name == "memory_store":
            output, error = await _memory_store(run, node, call.input), None
        else:
            output, error = None, f"unknown tool {call.name!r}"
    except (ValueError, KeyError, TypeError, RuntimeError, PermissionError) as exc:
        if isinstance(exc, run.HeadlessQueryError):
            raise  # fails the run closed, never reported to the model as a tool error
        output, error = None, f"{type(exc).__name__}: {exc}"
    # code may print an API key (the live kernel holds the user's environment): never log or send it on
    hidden = _secrets(run)
    output, error = redact(output, hidden), redact(error, hidden)
    run.emit(ToolResult(agent_id=node.id, tool=call.name, output=output, error=error))
    text = error if output is None else (output["text"] if isinstance(output, dict) and "text" in output
                                         else json.dumps(output, default=str))
    if error and output is not None:
        text = f"{text}\n{error}" if error not in text else text
    return ToolResultBlock(tool_use_id=call.id, content=text or "(no output)", is_error=error is not None)


async def _python(run: AgentRun, node: AgentNode, call: ToolUseEvent) -> tuple[Any, str | None]:
    code = call.input.get("code")
    if not isinstance(code, str) or not code.strip():
        return None, "python: input needs a non-empty 'code' string"
    edited = False
    if not run.options.auto_approve:
        answer = await run.ask(node, "approval", "Run this Python code?", {"code": code, "toolUseId": call.id},
                               validate=lambda r: parse_approval(r, code))
        approved, new_code = parse_approval(answer, code)
        if not approved:
            why = answer.get("reason") if isinstance(answer, dict) else None
            return {"text": "The user rejected running this code" + (f" ({why})" if why else "") + ". Do not run it "
                            "again; continue without it or propose something different."}, "rejected by the user"
        edited, code = new_code != code, new_code
    ctx = ExecContext(agent_id=node.id, fork=run.fork_from_thread(node), wait=run.wait_from_thread())
    result = await run.executor.run(code, context=ctx)
    out = result.to_dict()
    prefix = "(The user edited the code before it ran.)\n" if edited else ""
    out["text"] = prefix + result.to_text()
    if edited:
        out["code"] = code
    return out, result.error


def _secrets(run: AgentRun) -> list[str]:
    """Secret values to hide from tool results: secret-looking env vars, configured API keys, the provider's key."""
    providers = run.workspace.config.providers
    keys: list[Any] = [providers.anthropic.api_key, providers.openai.api_key, providers.ollama.api_key]
    keys.append(getattr(run.provider, "_key", None))
    return secret_values([k for k in keys if k is not None])


def _namespace(run: AgentRun) -> str:
    return f"session:{run.session_id}"


def _memory(run: AgentRun, node: AgentNode) -> Any:
    """The workspace memory acting for this run's session and agent."""
    return run.workspace.memory.scoped(run.session_id, agent_id=node.id)


async def _memory_search(run: AgentRun, node: AgentNode, args: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(run, node)
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("memory_search: 'query' must be a non-empty string")
    limit = int(args.get("limit") or 5)
    hits = await asyncio.to_thread(memory.search, query, namespace=_namespace(run), limit=limit)
    items = [{"key": h.key, "content": h.content, "score": round(float(h.score), 4)} for h in hits]
    text = "\n".join(f"- {i['key']}: {i['content'][:300]}" for i in items) or "(no matches)"
    degraded = getattr(hits, "degraded", None)
    if degraded:   # the model should know the search ran on keywords only
        text = f"({degraded})\n{text}"
    return {"results": items, "text": text, "degraded": degraded}


async def _memory_store(run: AgentRun, node: AgentNode, args: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(run, node)
    key, content = args.get("key"), args.get("content")
    if not isinstance(key, str) or not key.strip() or not isinstance(content, str):
        raise ValueError("memory_store: 'key' (non-empty string) and 'content' (string) are required")
    tags = args.get("tags") or None
    await asyncio.to_thread(memory.store, key, content, namespace=_namespace(run), agent_id=node.id, tags=tags)
    return {"stored": key, "namespace": _namespace(run), "text": f"stored {key!r} in {_namespace(run)}"}
