"""The offline demo model: the canned analyst ``--provider scripted`` plays (``ScriptedProvider()``).

Deterministic, it asks nothing, plans two or three subquestions for the root agent, takes a first look
at a variable named in the prompt (e.g. ``df``) with the ``python`` tool (shape, columns, numeric stats,
and a first-vs-last trend when a date-like and a numeric column exist; generic for Series, arrays, lists
and other kinds), then answers by quoting the numbers the code printed, and summarises. Everything it
writes says it is offline.

It sits in the providers layer, not in :mod:`agentstack_lab.demo`, because the ``scripted`` provider
(the configured default, built by the provider registry) and the offline reviewers of the workflows
play it, and both sit below the demo runner in the layers.
"""

from __future__ import annotations

import re
from typing import Any

from agentstack_lab.providers.base import Message, ProviderRequest, ToolResultBlock, ToolUseBlock, tool_call

__all__ = ["OFFLINE_TAG", "demo_reply", "find_variable"]

OFFLINE_TAG = "[offline scripted demo]"

_BACKTICK = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
_DATA_NAME = re.compile(r"\b(df\w*|\w+_df|data(?:set)?|[a-z]+_[a-z0-9_]+)\b")


def find_variable(prompt: str) -> str | None:
    """The variable a prompt names: a backticked identifier, else ``df``-like or snake_case words."""
    m = _BACKTICK.search(prompt) or _DATA_NAME.search(prompt)
    return m.group(1) if m else None


_LOOK = """\
# Offline demo: a first look at `{var}` (deterministic code, no model involved)
def _first_look(v, name):
    print(f"{{name}}: {{type(v).__name__}}", end="")
    if hasattr(v, "columns") and hasattr(v, "describe"):  # a pandas DataFrame
        print(f", {{v.shape[0]}} rows x {{v.shape[1]}} columns")
        print("columns:", ", ".join(map(str, v.columns)))
        times = [c for c in v.columns if str(v[c].dtype).startswith(("datetime", "period"))
                 or str(c).lower() in ("date", "day", "week", "month", "quarter", "year", "period", "time")]
        nums = [c for c in v.select_dtypes("number").columns if c not in times]
        for c in nums[:5]:
            print(f"{{c}}: mean {{v[c].mean():.6g}}, min {{v[c].min():.6g}}, max {{v[c].max():.6g}}")
        if times and nums:  # a simple trend: first vs last period (values summed per period)
            per = v.groupby(times[0])[nums[:3]].sum().sort_index()
            for c in nums[:3]:
                a, b = per[c].iloc[0], per[c].iloc[-1]
                pct = f"{{(b - a) / abs(a) * 100:+.1f}}%" if a else "n/a"
                first, last = (str(p).removesuffix(" 00:00:00") for p in (per.index[0], per.index[-1]))
                print(f"trend of {{c}} by {{times[0]}}: {{a:.6g}} ({{first}}) -> {{b:.6g}} ({{last}}), {{pct}}")
        return v.describe() if nums else v.describe(include="all")
    if hasattr(v, "shape") and hasattr(v, "dtype"):  # a pandas Series or a numpy array
        print(f", shape {{v.shape}}, dtype {{v.dtype}}")
        values = [float(x) for x in list(getattr(v, "values", v).ravel()[:100_000])] if v.dtype.kind in "iuf" else []
    elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v):
        print(f" of {{len(v)}} numbers")
        values = [float(x) for x in v]
    else:
        print(f", length {{len(v)}}" if hasattr(v, "__len__") else "")
        return repr(v)[:500]
    if not values:
        return v.describe() if hasattr(v, "describe") else repr(v)[:500]
    mean = sum(values) / len(values)
    print(f"{{name}}: mean {{mean:.6g}}, min {{min(values):.6g}}, max {{max(values):.6g}}")
    if len(values) > 1 and values[0]:
        a, b = values[0], values[-1]
        print(f"trend of {{name}} by position: {{a:.6g}} (first) -> {{b:.6g}} (last), {{(b - a) / abs(a) * 100:+.1f}}%")
    return v.describe() if hasattr(v, "describe") else {{"count": len(values), "mean": mean,
                                                        "min": min(values), "max": max(values)}}

{var}_summary = _first_look({var}, "{var}")
del _first_look
{var}_summary
"""


def _inspect_code(var: str) -> str:
    """The demo's Python: shape, columns, numeric stats and a first-vs-last trend, generic by kind."""
    return _LOOK.format(var=var)


_TREND = re.compile(r"^trend of (.+?) by (.+?): (\S+) \((.+?)\) -> (\S+) \((.+?)\), ([+-][\d.]+%|n/a)$")


def _findings(var: str, content: str) -> str:
    """An answer quoting the numbers the demo's code printed (read back from the tool result)."""
    stdout = content.partition("stdout:\n")[2].partition("\nresult:\n")[0].partition("\nstderr:\n")[0]
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    facts = [f"- {ln}" for ln in lines if not _TREND.match(ln)]
    trends = []
    for ln in lines:
        m = _TREND.match(ln)
        if m:
            col, by, a, when_a, b, when_b, pct = m.groups()
            way = "rose" if pct.startswith("+") else "fell" if pct.startswith("-") else "changed"
            trends.append(f"- **{col}** {way} from {a} ({when_a}) to {b} ({when_b}): {pct} "
                          + (f"(summed per {by})" if by != "position" else "(first vs last value)"))
    text = "\n".join(facts)
    if trends:
        text += "\n\nTrend (first vs last, a simple comparison, not a fitted model):\n" + "\n".join(trends)
    return text or content.strip()[:400]


def _first_user_text(request: ProviderRequest) -> str:
    """The request's own first user message: after a follow-up's earlier turns, if any."""
    skip = 2 * len(_earlier_questions(request))
    for m in request.messages[skip:]:
        if m.role == "user":
            return m.text()
    return ""


def _earlier_questions(request: ProviderRequest) -> list[str]:
    """A follow-up's earlier questions: the leading (user, assistant) text pairs of the conversation."""
    out, msgs = [], request.messages
    for i in range(0, len(msgs) - 1, 2):
        if not (msgs[i].role == "user" and isinstance(msgs[i].content, str)
                and msgs[i + 1].role == "assistant" and isinstance(msgs[i + 1].content, str)):
            break
        out.append(msgs[i].content)
    return out


def _last_tool_result(messages: list[Message]) -> ToolResultBlock | None:
    if messages and messages[-1].role == "user" and not isinstance(messages[-1].content, str):
        for b in messages[-1].content:
            if isinstance(b, ToolResultBlock):
                return b
    return None


def _has_tool_use(messages: list[Message]) -> bool:
    return any(isinstance(b, ToolUseBlock) for m in messages if not isinstance(m.content, str) for b in m.content)


def demo_reply(request: ProviderRequest) -> Any:
    """The deterministic offline reply for one engine step (see the module docstring)."""
    meta = request.metadata or {}
    step = meta.get("step")
    prompt = meta.get("prompt") or _first_user_text(request)
    if step == "clarify":
        return {"needs_clarification": False, "question": None}
    if step == "blocking":
        return {"has_question": False, "question": None}
    if step == "final":
        return {"has_question": False, "question": None}
    if step == "subquestions":
        if meta.get("depth", 0) > 0:
            return {"subquestions": []}
        topic = prompt.strip().rstrip("?.!") or "the question"
        var = find_variable(prompt)
        subs = [
            {"question": f"What background is needed to answer: {topic}?", "agent_type": "researcher"},
            {"question": f"What caveats or risks apply to: {topic}?", "agent_type": "reviewer"},
        ]
        if var:
            subs.insert(0, {"question": f"Which analyses of `{var}` would answer: {topic}?",
                            "agent_type": "analyst"})
        return {"subquestions": subs}
    if step == "main":
        tools = {t.name for t in request.tools}
        var = find_variable(prompt) if "python" in tools and meta.get("depth", 0) == 0 else None
        result = _last_tool_result(request.messages)
        if var and not _has_tool_use(request.messages):
            return [f"{OFFLINE_TAG} Let me look at `{var}` with Python.\n",
                    tool_call("python", {"code": _inspect_code(var)})]
        if result is not None and var:
            if result.is_error:
                error = result.content.strip().splitlines()[-1] if result.content.strip() else "an error"
                return (f"{OFFLINE_TAG} I tried to look at `{var}` with Python, but it failed: {error}\n"
                        "(Offline demo: no real model was called.)")
            return (f"{OFFLINE_TAG} I looked at `{var}` with Python. What the code computed:\n\n"
                    f"{_findings(var, result.content)}\n\nThe full summary is in `{var}_summary`. "
                    "(Offline demo: no real model was called; the numbers come from running the code.)")
        earlier = _earlier_questions(request)
        follow = f" (a follow-up to: {(earlier[-1].strip().splitlines() or [''])[0][:200]})" if earlier else ""
        return (f"{OFFLINE_TAG} This is an offline demo answer to: {prompt.strip()}{follow}\n"
                "No real model was called; configure a provider for real answers.")
    if step == "consensus_review":  # the adversarial consensus reviewer: offline, it can only let the plan run
        return {"approved": True, "rejected_subtask_ids": [],
                "feedback": f"{OFFLINE_TAG} No model reviewed this plan (offline scripted provider); approved "
                            "unreviewed so the demo runs. Configure a provider for a real adversarial review."}
    if step == "summary":
        return _demo_summary(_first_user_text(request))
    return f"{OFFLINE_TAG} No real model was called. You said: {_first_user_text(request)[:500]}"


def _demo_summary(body: str) -> str:
    main = body.partition("Your answer:\n")[2].partition("\n\nSubagents' results:")[0].strip()
    subs = [line[2:] for line in body.splitlines() if line.startswith("- [")]
    lines = [f"{OFFLINE_TAG} Summary (no real model was called).", "", "Main answer:", main[:2000] or "(none)"]
    if subs:
        lines += ["", f"{len(subs)} subagent(s) explored:"] + [f"- {s}" for s in subs]
    return "\n".join(lines)
