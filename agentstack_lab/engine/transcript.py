"""What each agent's tool calls did, as plain records the views keep: the code that ran, its output, its traceback.

A record is ``{tool, code, original, decision, output, traceback, done}``: ``code`` is the code that
actually ran (the person's edited version after an Edit), ``original`` the model's code when it was
edited, ``decision`` ``approved`` / ``edited`` / ``rejected`` for a python call that returned, ``output``
what it printed and returned (or a non-python tool's text), ``traceback`` the error as the code's
own traceback. Saved trees (the notebook's snapshot, ``%agent show``, the Agents panel's run view)
carry them, so a reopened notebook still shows what ran and how it failed.

:func:`user_frames` trims a traceback to the frames of the agent's own code (library frames left
out), which is what the views show first; the whole one stays a click away.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, cast

from agentstack_lab.events import ToolCall, ToolResult, from_wire

__all__ = ["as_text", "tool_record", "tool_records", "user_frames", "code_failed", "MAX_TEXT", "EDITED_NOTE"]

MAX_TEXT = 4000
EDITED_NOTE = "(The user edited the code before it ran.)"  # told to the model, never shown as the code's output
_PYTHON = "python"
_FRAME = re.compile(r'^  File "([^"]*)", line \d+')
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ")


def _clip(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters]"


def as_text(value: Any) -> str:
    """A value as the views show it: a string as is, else indented JSON (``repr`` when not JSON-able)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _dict(value: Any) -> dict[str, Any]:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def tool_record(tool: str, input: Any, output: Any, error: str | None, done: bool) -> dict[str, Any]:  # noqa: A002
    """One tool call as the views keep it (see the module docstring)."""
    inp, out = _dict(input), _dict(output)
    code = out.get("code") if isinstance(out.get("code"), str) else inp.get("code")
    code = code if isinstance(code, str) else None
    decision: str | None = None
    cancelled = done and out.get("cancelled") is True
    if done and tool == _PYTHON:
        decision = ("cancelled" if cancelled else "rejected" if error == "rejected by the user" else
                    "edited" if out.get("edited") is True or isinstance(out.get("code"), str) else "approved")
    original = inp.get("code") if decision == "edited" and inp.get("code") != code else None
    traceback: str | None = None
    if cancelled:  # stopped while it waited for approval or ran: not a failure of the code
        reason = out.get("reason")
        text = f"cancelled: {reason}" if isinstance(reason, str) and reason else "cancelled"
    elif tool == _PYTHON and output is not None and isinstance(output, dict):
        parts = [f"{key}:\n{out[key]}" for key in ("stdout", "stderr", "result")
                 if isinstance(out.get(key), str) and out[key]]
        text = "\n".join(parts) or None
        if text is None and not out.get("traceback") and isinstance(out.get("text"), str):
            text = out["text"]  # a refusal's or a rejection's explanation
            if decision == "edited" and text.startswith(EDITED_NOTE + "\n"):  # a log written before the marker
                text = text[len(EDITED_NOTE) + 1:] or None
        traceback = out.get("traceback") if isinstance(out.get("traceback"), str) else None
        traceback = traceback or (error if error and error != "rejected by the user" else None)
    elif output is not None:
        text = out["text"] if isinstance(out.get("text"), str) else as_text(
            {k: v for k, v in out.items() if not (v is None or (isinstance(v, str | list | dict) and not v))}
            if isinstance(output, dict) else output)
        traceback = error
    else:
        text, traceback = None, error if error != "rejected by the user" else None
    return {"tool": tool, "input": None if code is not None else _clip(as_text(input)) if input is not None else None,
            "code": _clip(code), "original": _clip(original if isinstance(original, str) else None),
            "decision": decision, "output": _clip(text), "traceback": _clip(traceback), "done": done}


def code_failed(records: Iterable[dict[str, Any]]) -> int:
    """How many of an agent's python calls ran and raised (a rejected call did not run)."""
    return sum(1 for r in records if r.get("tool") == _PYTHON and r.get("done") and r.get("traceback")
               and r.get("decision") != "rejected")


def tool_records(events: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """Each agent's tool calls, in order, from its outbound events (dataclasses or wire dicts)."""
    calls: dict[str, list[list[Any]]] = {}
    for ev in events:
        if isinstance(ev, dict):
            ev = from_wire(cast("dict[str, Any]", ev))
        if isinstance(ev, ToolCall):
            calls.setdefault(ev.agent_id, []).append([ev.tool, ev.input, None, None, False])
        elif isinstance(ev, ToolResult):
            mine = calls.setdefault(ev.agent_id, [])
            call = next((c for c in reversed(mine) if c[0] == ev.tool and not c[4]), None)
            if call is None:
                call = [ev.tool, None, None, None, False]
                mine.append(call)
            call[2], call[3], call[4] = ev.output, ev.error, True
    return {agent: [tool_record(c[0], c[1], c[2], c[3], c[4]) for c in cs] for agent, cs in calls.items()}


def user_frames(traceback: str) -> str | None:
    """The traceback with library frames left out (``None`` when it has none to leave out).

    A frame is a library's when its file is under ``site-packages`` / ``dist-packages`` or the
    standard library; the agent's code (``<agent-python-N>``) and the person's own files stay. A
    "… N library frames" line marks each gap.
    """
    lines = traceback.splitlines()
    out: list[str] = []
    hidden = gap = 0
    i = 0
    while i < len(lines):
        match = _FRAME.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].startswith("    "):
            end += 1
        if any(mark in match.group(1) for mark in _LIBRARY):
            hidden += 1
            gap += 1
        else:
            if gap:
                out.append(f"  … {gap} library frame{'s' if gap > 1 else ''}")
                gap = 0
            out.extend(lines[i:end])
        i = end
        if gap and (i >= len(lines) or _FRAME.match(lines[i]) is None):
            out.append(f"  … {gap} library frame{'s' if gap > 1 else ''}")
            gap = 0
    return "\n".join(out) if hidden else None
