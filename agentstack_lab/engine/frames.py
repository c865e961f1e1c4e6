"""``run.events_frame()``: a run's event log as a pandas DataFrame (compact for a first look, or full).

:meth:`AgentRun.events_frame <agentstack_lab.engine.run.AgentRun.events_frame>` calls it; pandas is
imported when a frame is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentstack_lab.validation import as_dict

__all__ = ["events_frame"]


def events_frame(run: Any, full: bool = False) -> Any:
    """The run's event log as a pandas DataFrame, compact for a first look.

    Compact (default): one row per event, consecutive text deltas of one agent merged, with
    ``time`` (seconds since the run's first event, from the events table), ``agent`` (type, and a
    short number for subagents), ``event`` and a one-line ``text``. ``full=True`` gives every event
    with its wire fields as columns (ids in full).
    """
    pd: Any = importlib.import_module("pandas")   # loosely typed: pandas ships partial types

    from agentstack_lab.events import to_wire

    wires = [to_wire(e) for e in run.events]
    if full:
        columns = ["seq", "type", "agentId"]
        frame = pd.DataFrame.from_records([{"seq": i, **w} for i, w in enumerate(wires)])
        if frame.empty:
            return pd.DataFrame(columns=columns)
        return frame[columns + [c for c in frame.columns if c not in columns]]
    times = _event_times(run)
    names: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for i, w in enumerate(wires):
        agent = str(w.get("agentId"))
        if agent not in names:
            kind = str(as_dict(w.get("state")).get("type") or "agent")
            names[agent] = kind if not names else f"{kind} #{len(names)}"
        at = times[i] - times[0] if i < len(times) and times else float("nan")
        if w["type"] == "text-delta" and rows and rows[-1]["event"] == "text" and rows[-1]["_agent"] == agent:
            rows[-1]["_text"] += w.get("delta", "")
            continue
        rows.append({"time": at, "agent": names[agent], "event": "text" if w["type"] == "text-delta" else w["type"],
                     "_agent": agent, "_text": _event_text(w)})
    from agentstack_lab.validation import excerpt

    frame = pd.DataFrame([{"time": r["time"], "agent": r["agent"], "event": r["event"],
                           "text": excerpt(r["_text"], 100)} for r in rows],
                         columns=["time", "agent", "event", "text"])
    frame["time"] = frame["time"].astype(float).round(3)
    return frame


def _event_times(run: Any) -> list[float]:
    """Wall-clock times of the run's logged events, in order (the log may trail the live list)."""
    db = getattr(getattr(run, "workspace", None), "db", None)
    if db is None:
        return []
    try:
        return [float(r[0]) for r in db.query("SELECT created_at FROM events WHERE run_id = ? ORDER BY seq",
                                              (run.id,))]
    except Exception:  # noqa: BLE001 - a missing time is shown as NaN, never an error
        return []


def _event_text(w: dict[str, Any]) -> str:
    """One line about an event, for the compact frame."""
    kind = w["type"]
    if kind == "agent-state":
        state = as_dict(w.get("state"))
        step = as_dict(state.get("metadata")).get("step")
        return f"{state.get('status', '')}" + (f" ({step})" if step and state.get("status") == "running" else "")
    if kind == "text-delta":
        return w.get("delta", "")
    if kind == "tool-call":
        value = w.get("input")
        code = as_dict(value).get("code")
        return f"{w.get('tool')}: " + (code if isinstance(code, str) else str(value))
    if kind == "tool-result":
        return f"{w.get('tool')}: " + (w.get("error") or "ok")
    if kind == "user-query":
        return f"{w.get('kind')}: {w.get('prompt', '')}"
    if kind == "agent-completed":
        return str(w.get("result", ""))
    return str(w.get("error", ""))
