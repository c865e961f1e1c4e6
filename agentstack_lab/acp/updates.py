"""A pure fold of one run's events into ACP ``session/update`` payloads (as :mod:`notebook.tree` folds them for the cell).

:class:`RunUpdates` takes our outbound events in order and returns, for each, the ACP updates it means:

* the root's ``text-delta`` -> ``agent_message_chunk`` (a subagent's text stays in its tool call);
* every subagent -> one ``plan`` entry (its type and question; pending, in_progress, completed) and a
  ``fork`` tool call whose content is its result or error;
* ``tool-call`` / ``tool-result`` of python and the memory tools -> ``tool_call`` (the code, the query) and
  ``tool_call_update`` (the output or the traceback, completed or failed);
* a ``user-query`` -> nothing here: the session answers it (a permission request or a question, see
  :mod:`agentstack_lab.acp.agent`), and :meth:`RunUpdates.call_for` names the tool call it is about.

Every value returned is a model of the ACP SDK's schema, so what is sent validates by construction; the
conformance test checks the wire messages against the same schema again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp import schema as s

from agentstack_lab.events import (
    TERMINAL,
    AgentCompleted,
    AgentState,
    ErrorEvent,
    OutboundEvent,
    TextDelta,
    ToolCall,
    ToolResult,
)

__all__ = ["RunUpdates", "plan_status", "TOOL_KINDS", "OUTPUT_LIMIT"]

OUTPUT_LIMIT = 8000
"""Characters of a tool's output shown in the host (the event log keeps all of it)."""

TOOL_KINDS: dict[str, s.ToolKind] = {"python": "execute", "memory_search": "search", "memory_store": "edit",
                                     "fork": "think"}
"""How each of our tools reads in an ACP host (its icon and grouping)."""


def plan_status(status: str) -> s.PlanEntryStatus:
    """An agent status as a plan entry's: not started, at work (or waiting on a person), or over."""
    if status in ("pending", "idle"):
        return "pending"
    if status in TERMINAL:
        return "completed"
    return "in_progress"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _text(text: str) -> list[Any]:
    return [s.ContentToolCallContent(type="content", content=s.TextContentBlock(type="text", text=text))]


def _output_text(output: Any, error: str | None) -> str:
    """A tool's output as the host shows it: stdout, the value, then the traceback or error."""
    if isinstance(output, dict):
        out: dict[str, Any] = dict(output)  # pyright: ignore[reportUnknownArgumentType]
        parts = [str(out.get(k)) for k in ("stdout", "stderr") if out.get(k)]
        if out.get("result") not in (None, ""):
            parts.append(str(out["result"]))
        if out.get("traceback") or out.get("error"):
            parts.append(str(out.get("traceback") or out.get("error")))
        text = "\n".join(p.rstrip("\n") for p in parts) if parts else "(no output)"
    else:
        text = output if isinstance(output, str) else repr(output)
    if error and error not in text:
        text = f"{text}\n{error}"
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + f"\n… ({len(text) - OUTPUT_LIMIT:,} more characters)"


@dataclass
class _Agent:
    id: str
    type: str
    prompt: str
    status: str = "pending"
    call_id: str = ""


@dataclass
class RunUpdates:
    """Folds one run's events (``root_id`` its root agent) into ACP session updates; no I/O, no clock."""

    root_id: str
    agents: dict[str, _Agent] = field(default_factory=dict[str, _Agent])
    root_text: int = 0
    """Characters of the root's text streamed so far (a run that streamed none sends its result at the end)."""
    _calls: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    _count: int = 0
    _plan: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])

    def feed(self, event: OutboundEvent) -> list[Any]:
        """The ACP updates ``event`` means, in order (often none)."""
        if isinstance(event, TextDelta):
            if event.agent_id != self.root_id or not event.delta:
                return []
            self.root_text += len(event.delta)
            return [s.AgentMessageChunk(session_update="agent_message_chunk",
                                        content=s.TextContentBlock(type="text", text=event.delta))]
        if isinstance(event, AgentState):
            return self._state(event)
        if isinstance(event, ToolCall):
            return [self._tool_call(event)]
        if isinstance(event, ToolResult):
            return self._tool_result(event)
        if isinstance(event, AgentCompleted | ErrorEvent) and event.agent_id in self.agents:
            agent = self.agents[event.agent_id]
            failed = isinstance(event, ErrorEvent)
            body = event.error if isinstance(event, ErrorEvent) else event.result
            return [s.ToolCallProgress(session_update="tool_call_update", tool_call_id=agent.call_id,
                                       status="failed" if failed else "completed", content=_text(body or "(no result)"),
                                       raw_output={"error": body} if failed else {"result": body})]
        return []

    def call_for(self, agent_id: str, tool: str = "python") -> str | None:
        """The id of ``agent_id``'s open ``tool`` call (the one an approval is about), if any."""
        open_calls = self._calls.get(f"{agent_id}:{tool}")
        return open_calls[-1] if open_calls else None

    def plan(self) -> s.AgentPlanUpdate:
        """The plan as it stands: one entry per subagent, in the order they were created."""
        entries = [s.PlanEntry(content=f"{a.type}: {_short(a.prompt, 200)}", priority="medium",
                               status=plan_status(a.status)) for a in self.agents.values()]
        return s.AgentPlanUpdate(session_update="plan", entries=entries)

    # --- the parts ---------------------------------------------------------------------------------
    def _new_id(self, agent_id: str, tool: str) -> str:
        self._count += 1
        return f"{tool}-{agent_id[:8]}-{self._count}"

    def _state(self, event: AgentState) -> list[Any]:
        state = event.state
        if event.agent_id == self.root_id:
            return []
        out: list[Any] = []
        agent = self.agents.get(event.agent_id)
        if agent is None:
            agent = self.agents[event.agent_id] = _Agent(
                id=event.agent_id, type=str(state.get("type") or "agent"), prompt=str(state.get("prompt") or ""),
                call_id=self._new_id(event.agent_id, "fork"))
            out.append(s.ToolCallStart(session_update="tool_call", tool_call_id=agent.call_id, kind="think",
                                       title=f"Subagent {agent.type}: {_short(agent.prompt, 80)}", status="pending",
                                       raw_input={"type": agent.type, "prompt": agent.prompt}))
        status = str(state.get("status") or agent.status)
        if status != agent.status:
            if agent.status in ("pending", "idle") and plan_status(status) == "in_progress":
                out.append(s.ToolCallProgress(session_update="tool_call_update", tool_call_id=agent.call_id,
                                              status="in_progress"))
            agent.status = status
        plan = [(a.id, plan_status(a.status)) for a in self.agents.values()]
        if plan != self._plan:
            self._plan = plan
            out.append(self.plan())
        return out

    def _tool_call(self, event: ToolCall) -> Any:
        call_id = self._new_id(event.agent_id, event.tool)
        self._calls.setdefault(f"{event.agent_id}:{event.tool}", []).append(call_id)
        data: dict[str, Any] = dict(event.input) if isinstance(event.input, dict) else {"input": event.input}  # pyright: ignore[reportUnknownArgumentType]
        who = "" if event.agent_id == self.root_id else f" ({self.agents[event.agent_id].type})" \
            if event.agent_id in self.agents else ""
        if event.tool == "python":
            code = str(data.get("code", ""))
            first = next((ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "code")
            title, body = f"Python{who}: {_short(first, 70)}", f"```python\n{code}\n```"
        elif event.tool == "memory_search":
            title, body = f"Memory search{who}: {_short(str(data.get('query', '')), 70)}", str(data.get("query", ""))
        else:
            title, body = f"{event.tool}{who}", _short(repr(data), 2000)
        return s.ToolCallStart(session_update="tool_call", tool_call_id=call_id, title=title,
                               kind=TOOL_KINDS.get(event.tool, "other"), status="pending", raw_input=data,
                               content=_text(body))

    def _tool_result(self, event: ToolResult) -> list[Any]:
        open_calls = self._calls.get(f"{event.agent_id}:{event.tool}")
        if not open_calls:
            return []
        call_id = open_calls.pop(0)
        output: Any = event.output
        failed = bool(event.error) or (isinstance(output, dict) and bool(output.get("error")))  # pyright: ignore[reportUnknownMemberType]
        raw = output if isinstance(output, dict) else {"output": output}
        return [s.ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id,
                                   status="failed" if failed else "completed",
                                   content=_text(_output_text(output, event.error)), raw_output=raw)]
