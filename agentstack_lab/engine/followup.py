"""Follow-ups: a new run that continues an earlier run's conversation (``run.ask(...)``, ``%agent --continue``).

A follow-up is its own run (own tree, events and id) whose root agent sees, before its request, the
thread so far as chat turns: each earlier question as a ``user`` message and its final answer as an
``assistant`` message. Only the roots' questions and results travel, not their trees (a run with
four subagents and two tool calls is still one question and one answer). To keep a long thread from
filling the context, the last :data:`MAX_TURNS` (8) turns are kept and each answer is cut to
:data:`MAX_ANSWER_CHARS` (6000 characters, about 1500 tokens), so the transcript stays under
~13k tokens however long the thread grows.

The follow-up keeps its predecessor's session (memory namespace) when a caller gave it one (a session the
predecessor started itself ended with it, so the follow-up starts its own), and its provider, model, agent type, executor
and budgets. Permissions and cassettes do not carry over: ``auto_approve``, ``on_query``, up-front
``answers`` and ``record``/``replay`` belong to the run they were given to (the provider a cassette
wrapped is the one a follow-up keeps). The root's metadata records ``continues: <previous run id>``
(in its ``agent-state`` events and ``agents`` row), so a surface can draw the thread. A run that is
still going is refused with one line: a follow-up needs the answer it follows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentstack_lab.agents.spawner import TERMINAL
from agentstack_lab.engine.options import RunOptions
from agentstack_lab.errors import UsageError
from agentstack_lab.providers.base import Message

if TYPE_CHECKING:
    from agentstack_lab.engine.context import FinishedRun

__all__ = ["Turn", "RunStillGoingError", "thread_of", "transcript", "follow_options", "base_provider", "MAX_TURNS",
           "MAX_ANSWER_CHARS", "NOT_INHERITED"]

MAX_TURNS = 8
MAX_ANSWER_CHARS = 6000
NOT_INHERITED = ("auto_approve", "on_query", "answers", "interactive", "record", "replay", "replay_mode")
"""Run options a follow-up does not take from the run it continues: permissions, per-run answers and cassettes
(a follow-up recording to its predecessor's cassette would overwrite it; replaying it would miss every request)."""


class RunStillGoingError(UsageError):
    """A follow-up was asked of a run that has not ended (it would race the answer it builds on)."""


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One earlier exchange of a thread: the root's question and how it ended."""

    run_id: str
    prompt: str
    answer: str


def _answer(run: FinishedRun) -> str:
    root = run.nodes.get(run.root_id)
    result = run.result
    if result:
        text = result
    elif root is not None and root.content.strip():  # stopped or failed after writing something
        text = f"(partial answer; the run {run.status})\n{root.content.strip()}"
    else:
        text = f"(no answer: the run {run.status}" + (f": {run.error or root.error}" if root and (run.error or root.error)
                                                       else "") + ")"
    if len(text) > MAX_ANSWER_CHARS:
        text = text[:MAX_ANSWER_CHARS].rstrip() + " […answer shortened for this follow-up]"
    return text


def thread_of(previous: FinishedRun) -> tuple[Turn, ...]:
    """The turns a follow-up of ``previous`` carries: ``previous``'s own thread, then ``previous`` itself.

    Raises:
        RunStillGoingError: ``previous`` has not ended (or was never started).
    """
    if previous.status not in TERMINAL:
        raise RunStillGoingError(
            f"run {previous.run_id[:8]} is still {previous.status}: wait for it (`await run`) or stop it "
            "(`run.stop()`) before asking a follow-up")
    turns = (*previous.thread, Turn(run_id=previous.run_id, prompt=previous.prompt, answer=_answer(previous)))
    return turns[-MAX_TURNS:]


def transcript(turns: tuple[Turn, ...] | list[Turn]) -> list[Message]:
    """The turns as chat messages (``user`` question, ``assistant`` answer), oldest first."""
    out: list[Message] = []
    for turn in turns:
        out += [Message(role="user", content=turn.prompt), Message(role="assistant", content=turn.answer)]
    return out


def follow_options(previous: RunOptions, overrides: RunOptions | dict[str, Any] | None = None) -> RunOptions:
    """``previous``'s options without :data:`NOT_INHERITED`, then ``overrides`` (a dict of fields, or options)."""
    if isinstance(overrides, RunOptions):
        return overrides
    keep = {f.name: getattr(previous, f.name) for f in dataclasses.fields(RunOptions) if f.name not in NOT_INHERITED}
    return RunOptions.coerce({**keep, **dict(overrides or {})})


def base_provider(run: FinishedRun) -> Any:
    """The provider a follow-up of ``run`` keeps: ``run``'s, unwrapped from a record/replay cassette.

    ``None`` (the workspace's default provider) after a strict replay, which had no real provider.
    """
    if run.options.record is None and run.options.replay is None:
        return run.provider
    return getattr(run.provider, "inner", None)
