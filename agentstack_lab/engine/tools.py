"""The main agent's tools: ``python`` (approval, executor, fork/wait), ``memory_search``, ``memory_store``.

The python tool's approval: the approval rules (:mod:`agentstack_lab.approval`) go first. ``allow`` runs
the code and ``deny`` refuses it (the result names the rule), each recorded as a decision answered by
``rule:<id>``; ``ask`` asks a person, unless the run has ``auto_approve`` (which answers only the asks:
a built-in or configured deny still refuses). ``dry_run_then_allow`` runs the code in a sandboxed fork of
the kernel first (:mod:`~agentstack_lab.engine.sandbox`): a clean dry run allows it, anything else asks a
person even under ``auto_approve``. An approval answered ``always`` (``session`` or ``workspace``) runs the
code and saves "Always allow code like this" as a rule (:mod:`agentstack_lab.approval.saved`), so the next
call like it is decided by that rule, with no card.

Every tool call gets exactly one ``tool-result``, also when it fails closed (a headless run with
no approval: the result carries the error, then the run fails) and when the agent is stopped while the
call waits or runs (``output: {"cancelled": true, "reason": ...}``). Everything a tool returns is
redacted before it is cut for the model (:mod:`~agentstack_lab.redaction`). Tools see their
run only through :class:`~agentstack_lab.engine.context.AgentContext`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.options import HeadlessQueryError
from agentstack_lab.engine.threads import thread_call
from agentstack_lab.engine.transcript import EDITED_NOTE
from agentstack_lab.events import ToolCall, ToolName, ToolResult
from agentstack_lab.providers.base import ToolResultBlock, ToolSpec, ToolUseEvent
from agentstack_lab.redaction import redact
from agentstack_lab.validation import as_dict

if TYPE_CHECKING:
    from agentstack_lab.engine.context import AgentContext
    from agentstack_lab.engine.state import AgentNode

__all__ = ["tool_specs", "dispatch", "parse_approval", "AgentCallsOf"]

_PYTHON: ToolName = "python"
_SEARCH: ToolName = "memory_search"
_STORE: ToolName = "memory_store"
MODEL_LIMIT = 8000  # characters of a python tool result the model sees (head + tail)
SNIPPET = 300  # characters of each memory hit in the model's text
_APPROVAL_PROMPT = "Run this Python code?"

_PYTHON_DOC = ("Run Python code. {where} The value of the last expression is returned with stdout, stderr "
               "and any error.{fork}")
_FORK_DOC = (" Inside the code, fork(prompt, type='researcher') starts a nested agent and returns a handle; "
             "wait(handle) blocks until it finishes and returns its result.")


def tool_specs(executor: Any, memory: bool) -> list[ToolSpec]:
    """The tool specs offered to the main agent."""
    live = getattr(executor, "name", "") == "live"
    where = ("It runs in the user's live Jupyter kernel: you can read and create the user's variables."
             if live else "It runs in an isolated Python subprocess.")
    specs = [ToolSpec(name=_PYTHON, description=_PYTHON_DOC.format(
        where=where, fork=_FORK_DOC if getattr(executor, "supports_fork", False) else ""),
        input_schema={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})]
    if memory:
        specs.append(ToolSpec(name=_SEARCH, description="Search this session's memory.", input_schema={
            "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"]}))
        specs.append(ToolSpec(name=_STORE, description="Store a note in this session's memory.", input_schema={
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
    answer = as_dict(response)
    verdict = answer.get("approved")
    if isinstance(response, dict) and isinstance(verdict, bool):
        always: object = answer.get("always")
        if always is not None and (always not in ("session", "workspace") or verdict is not True or "code" in answer):
            raise ValueError("approval: 'always' is 'session' or 'workspace', with approved: true and the code as asked")
        edited: object = answer.get("code", code)
        if not isinstance(edited, str) or not edited.strip():
            raise ValueError("approval: 'code' must be a non-empty string when given")
        return verdict, edited
    raise ValueError(f"approval answer must be True/False, 'approve'/'reject' or "
                     f"{{'approved': bool, 'code': str}}, got {response!r}")


async def dispatch(ctx: AgentContext, node: AgentNode, call: ToolUseEvent) -> ToolResultBlock:
    """Run one tool call, emitting ``tool-call`` and exactly one ``tool-result``; errors go back to the model.

    A headless run that needs an approval nobody gave closes the call with a ``tool-result``
    carrying the error, then raises :class:`HeadlessQueryError` (the run fails closed).
    """
    # code may print an API key (the live kernel holds the user's environment): never log or send it on
    await ctx.checkpoint(node)  # a paused agent waits here
    hidden = ctx.secrets()
    ctx.emit(ToolCall(agent_id=node.id, tool=call.name, input=redact(call.input, hidden)))
    closed: HeadlessQueryError | None = None
    try:
        if call.name == _PYTHON:
            output, error = await _python(ctx, node, call, hidden)
        elif call.name == _SEARCH:
            output, error = await _memory_search(ctx, node, call.input, hidden), None
        elif call.name == _STORE:
            output, error = await _memory_store(ctx, node, call.input, hidden), None
        else:
            output, error = None, f"unknown tool {call.name!r}"
    except HeadlessQueryError as exc:  # fails the run closed; the call still gets its result first
        closed, output, error = exc, None, f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:  # stopped while it waited for approval or ran: the call ends cancelled
        reason = node.stop_reason or "the agent was stopped"
        ctx.emit(ToolResult(agent_id=node.id, tool=call.name, output={"cancelled": True, "reason": redact(reason, hidden)},
                            error=redact(f"cancelled: {reason}", hidden)))
        raise
    except (ValueError, KeyError, TypeError, RuntimeError, PermissionError) as exc:
        output, error = None, f"{type(exc).__name__}: {exc}"
    output, error = redact(output, hidden), redact(error, hidden)
    ctx.emit(ToolResult(agent_id=node.id, tool=call.name, output=output, error=error))
    if closed is not None:
        raise closed
    shown = as_dict(output)
    text: str | None = error if output is None else (str(shown["text"]) if isinstance(output, dict) and "text" in shown
                                                     else json.dumps(output, default=str))
    if isinstance(output, dict) and shown.get("edited") is True:
        text = EDITED_NOTE + "\n" + (text or "")
    if error and output is not None:
        text = f"{text}\n{error}" if error not in text else text
    text = text or "(no output)"
    observe = getattr(ctx.provider, "record_tool_result", None)  # a cassette keeps what the model was shown
    if callable(observe):
        observe({"agent": node.type, "prompt": node.prompt, "id": call.id, "tool": call.name,
                 "input": redact(call.input, hidden), "output": text, "error": error})
    return ToolResultBlock(tool_use_id=call.id, content=text, is_error=error is not None)


async def _python(ctx: AgentContext, node: AgentNode, call: ToolUseEvent,
                  hidden: list[str]) -> tuple[Any, str | None]:
    code = call.input.get("code")
    if not isinstance(code, str) or not code.strip():
        return None, "python: input needs a non-empty 'code' string"
    edited = False
    verdict = ctx.approval_verdict(code)
    dry: dict[str, Any] | None = None
    must_ask = False   # a policy dry run that was not clean: a person decides, auto_approve does not
    if verdict.action == "dry_run_then_allow":
        if not ctx.executor.supports_dry_run:
            must_ask, why = True, f"rule {verdict.rule} needs a dry run, which this executor cannot do"
        else:
            report: dict[str, Any] = redact((await ctx.executor.dry_run(code, secrets=hidden)).to_dict(), hidden)
            dry, must_ask = report, not report.get("clean")
            why = (f"rule {verdict.rule}: the dry run was clean" if not must_ask else
                   f"rule {verdict.rule}: the dry run was not clean ({_unclean(report)})")
        verdict = replace(verdict, action="ask" if must_ask else "allow", reason=why)
    if verdict.action in ("allow", "deny"):   # a rule decided: recorded as decided by it, nobody is asked
        shown = redact(verdict.to_dict(), hidden)
        if dry is not None:
            shown["dryRun"] = dry
        ctx.record_rule_decision(node, _APPROVAL_PROMPT, redact(code, hidden), shown)
        if verdict.action == "deny":
            return {"text": f"Refused by approval rule {verdict.rule}: {shown['reason']}. This code will not run; "
                            "do it another way without that, or explain to the user what you need.",
                    "rule": verdict.rule, "classes": verdict.classes}, f"denied by approval rule {verdict.rule}"
    elif must_ask or not ctx.options.auto_approve:
        details: dict[str, Any] = {"code": redact(code, hidden), "toolUseId": call.id, "classes": verdict.classes,
                                   "why": redact(verdict.reason, hidden)}
        if verdict.rule is not None:
            details["rule"] = verdict.rule
        too_big = ctx.executor.undo_plan(code)
        if too_big:  # the card says so before the person approves: undo could not restore these
            details["notSnapshotted"] = too_big
        if dry is not None:
            details["dryRun"] = dry
        elif ctx.executor.dry_run_first and ctx.executor.supports_dry_run:  # what it would do, shown on the card
            details["dryRun"] = redact((await ctx.executor.dry_run(code, secrets=hidden)).to_dict(), hidden)
        asked: str = code
        opened: list[str] = []
        answer = await ctx.ask_user(node, "approval", _APPROVAL_PROMPT, details,
                                    validate=lambda r: parse_approval(r, asked), opened=opened.append)
        approved, new_code = parse_approval(answer, code)
        if not approved:
            why = as_dict(answer).get("reason")
            return {"text": "The user rejected running this code" + (f" ({why})" if why else "") + ". Do not run it "
                            "again; continue without it or propose something different."}, "rejected by the user"
        edited, code = new_code != code, new_code
        always = as_dict(answer).get("always")
        if always in ("session", "workspace") and not edited:   # "Always allow code like this": saved before it runs
            ctx.save_always_rule(node, opened[-1] if opened else None, code, verdict.classes, str(always))
    result = await ctx.executor.run(code, context=ctx.exec_context(node, call.id))
    if ctx.monitor is not None:
        ctx.monitor.files(node, result.files)
    await ctx.record_changes(node, call.id, result.changes)
    out = redact(result.to_dict(), hidden)
    out["text"] = result.to_text(MODEL_LIMIT, hidden)  # redacted, then cut: no half key survives
    if edited:  # a marker on the call (the views show a badge and a diff); the model is told in words
        out["edited"] = True
        out["code"] = redact(code, hidden)
    return out, redact(result.error, hidden)


def _unclean(dry: dict[str, Any]) -> str:
    """Why a dry run was not clean, in a few words."""
    items: list[Any] = dry.get("refused") or []
    refused = [f"{as_dict(r).get('call')} {as_dict(r).get('target', '')}".strip() for r in items]
    parts = [f"it ended: {dry.get('ended')}"] if dry.get("ended") != "finished" else []
    if dry.get("error"):
        parts.append(f"error: {str(dry['error']).splitlines()[-1][:120]}")
    if refused:
        parts.append("the sandbox refused " + ", ".join(refused[:3]) + (" …" if len(refused) > 3 else ""))
    return "; ".join(parts) or "no report"


def _memory(ctx: AgentContext, node: AgentNode) -> Any:
    return ctx.memory(node)


async def _memory_search(ctx: AgentContext, node: AgentNode, args: dict[str, Any], hidden: list[str]) -> dict[str, Any]:
    memory = _memory(ctx, node)
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("memory_search: 'query' must be a non-empty string")
    limit = int(args.get("limit") or 5)
    hits = await thread_call(memory.search, query, namespace=ctx.namespace, limit=limit)
    items: list[dict[str, Any]] = [{"key": h.key, "content": redact(h.content, hidden), "score": round(float(h.score), 4)}
             for h in hits]  # redacted before the snippets below are cut
    text = "\n".join(f"- {i['key']}: {i['content'][:SNIPPET]}" for i in items) or "(no matches)"
    degraded = getattr(hits, "degraded", None)
    if degraded:   # the model should know the search ran on keywords only
        text = f"({degraded})\n{text}"
    return {"results": items, "text": text, "degraded": degraded}


async def _memory_store(ctx: AgentContext, node: AgentNode, args: dict[str, Any], hidden: list[str]) -> dict[str, Any]:
    memory = _memory(ctx, node)
    key, content = args.get("key"), args.get("content")
    if not isinstance(key, str) or not key.strip() or not isinstance(content, str):
        raise ValueError("memory_store: 'key' (non-empty string) and 'content' (string) are required")
    tags = args.get("tags") or None
    namespace = ctx.namespace
    content = redact(content, hidden)  # the database never holds a secret, not even one the model repeats
    await thread_call(memory.store, key, content, namespace=namespace, agent_id=node.id, tags=tags)
    if ctx.monitor is not None:
        ctx.monitor.deliverable(node, "memory")
    text = f"stored {key!r} in {namespace}"
    if ctx.owns_session:  # said to the model and shown in the tree: the note does not outlive the run
        text += " (this run's own session: the note is deleted when the run ends)"
    return {"stored": key, "namespace": namespace, "text": text}


class AgentCallsOf:
    """An agent's side of a model call whose model is itself an agent (``provider: acp``).

    The external agent's tool calls become ``tool-call`` / ``tool-result`` events of ``node`` (named
    ``acp:KIND``); its permission requests are ``approval`` decisions of the run, like the python tool's:
    ``auto_approve`` allows them, ``on_query`` decides who answers (a headless run fails closed).
    """

    def __init__(self, ctx: AgentContext, node: AgentNode, prefix: str = "acp"):
        self.ctx, self.node, self.prefix = ctx, node, prefix
        self._open: dict[str, str] = {}

    def tool_call(self, call_id: str, title: str, kind: str, input: Any) -> None:  # noqa: A002
        tool = f"{self.prefix}:{kind or 'other'}"
        self._open[call_id] = tool
        self.ctx.emit(ToolCall(agent_id=self.node.id, tool=tool, input={"title": title, "id": call_id, "input": input}))

    def tool_result(self, call_id: str, output: Any, error: str | None = None) -> None:
        tool = self._open.pop(call_id, None)
        if tool is not None:
            self.ctx.emit(ToolResult(agent_id=self.node.id, tool=tool, output=output, error=error))

    async def approve(self, title: str, details: dict[str, Any]) -> bool:
        if self.ctx.options.auto_approve:
            return True
        answer = await self.ctx.ask_user(self.node, "approval", f"Allow {title.rstrip('?')}?", details,
                                         validate=lambda r: parse_approval(r, title))
        return parse_approval(answer, title)[0]
