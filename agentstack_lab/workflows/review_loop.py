"""The adversarial review loop (docs/mcp.md review-loop tools): a reviewer agent judges, a coder agent revises.

Each iteration runs a headless ``reviewer`` agent on the current code (or diff) through the engine
(:class:`~agentstack_lab.engine.AgentRun`: its events, agent rows and budgets as for any run); its reply
must be a structured verdict (:mod:`agentstack_lab.workflows.verdict`). PASS ends the loop ``passed``;
FAIL hands the findings to a ``coder`` agent whose reply is the revised code, and the reviewer looks
again, up to ``max_iterations`` reviews (default 3), after which the loop ends ``failed``. A reply that is
not a valid verdict ends the loop ``error`` with the field named, never a PASS. Everything is persisted
(:mod:`agentstack_lab.workflows.review_store`), so status, issues and the current code are readable from
any process, and ``abort`` from any process stops the loop within 0.2 s (in this process: at once).

Example (inside a running event loop, e.g. a notebook cell)::

    loops = ReviewLoops(ws)
    loop = loops.start(open("loader.py").read(), path="loader.py", provider="anthropic")
    state = await loop          # ReviewLoopState: status, verdict, iteration, code
    loops.issues(loop.id)       # every finding of every iteration

Offline, ``provider="scripted"`` with a :class:`ReviewScript` plays the reviewer's verdicts and the
coder's revisions in order (the last one repeats); without a script no model reviews anything, so the
review is skipped and the loop ends ``error`` saying so (never ``passed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import AgentstackError, UsageError
from agentstack_lab.workflows.review_store import ReviewIssue, ReviewLoopState, ReviewStore
from agentstack_lab.workflows.verdict import ReviewVerdict, extract_code, parse_verdict, verdict_instructions

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = ["SKIP_REASON", "ReviewLoop", "ReviewLoops", "ReviewOutcome", "ReviewScript", "ask_coder", "ask_reviewer",
           "reviews_nothing"]

log = logging.getLogger(__name__)

SKIP_REASON = ("no model reviewed anything: the reviewer was the offline scripted provider with no script "
               "(set ANTHROPIC_API_KEY or OPENAI_API_KEY, choose a provider, or give a review script)")
POLL_S = 0.2  # how often a running loop reads its abort flag (an abort from another process)
_OFFLINE = "[offline scripted demo]"
_NO_QUESTIONS = {"clarification": "No clarification is available: work from the request as given.",
                 "blocking": "Nothing more is known: proceed.", "approval": False}


class ReviewLoopError(AgentstackError, RuntimeError):
    """An agent of the loop did not complete (the message names which and why)."""


@dataclass(frozen=True, kw_only=True)
class ReviewScript:
    """Canned replies for the offline scripted provider: reviewer verdicts and coder revisions, in order.

    A verdict is a dict (sent as JSON) or a string (sent as is, e.g. a malformed reply); the last
    verdict and the last revision repeat when the loop asks for more.
    """

    verdicts: tuple[Any, ...]
    revisions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.verdicts:
            raise UsageError("review script: 'verdicts' must list at least one reviewer verdict")
        if any(not isinstance(v, dict | str) for v in self.verdicts):
            raise UsageError("review script: each verdict must be an object or a string")
        if any(not isinstance(r, str) for r in self.revisions):
            raise UsageError("review script: each revision must be a string (the revised code)")

    @classmethod
    def coerce(cls, value: ReviewScript | dict[str, Any] | str | Path | None) -> ReviewScript | None:
        """From a ReviewScript, a dict ``{"verdicts": [...], "revisions": [...]}``, or a JSON file's path."""
        if value is None or value == "":
            return None
        if isinstance(value, cls):
            return value
        if isinstance(value, str | Path):
            path = Path(value)
            try:
                value = json.loads(path.read_text("utf-8"))
            except FileNotFoundError:
                raise UsageError(f"review script not found: {path}") from None
            except json.JSONDecodeError as exc:
                raise UsageError(f"review script {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(value, dict):
            raise UsageError(f"review script must be an object with 'verdicts', got {type(value).__name__}")
        unknown = sorted(set(value) - {"verdicts", "revisions"})
        if unknown:
            raise UsageError(f"review script: unknown field {unknown[0]!r}; expected verdicts, revisions")
        verdicts, revisions = value.get("verdicts"), value.get("revisions", [])
        if not isinstance(verdicts, list) or not isinstance(revisions, list):
            raise UsageError("review script: 'verdicts' and 'revisions' must be lists")
        return cls(verdicts=tuple(verdicts), revisions=tuple(revisions))


class _RoleScript:
    """A scripted provider's function for one role: the demo's replies for every step but ``main``."""

    def __init__(self, replies: Sequence[Any] | None, role: str):
        self.replies, self.role, self.calls = list(replies or ()), role, 0

    def __call__(self, request: Any) -> Any:
        from agentstack_lab.providers.demo import demo_reply

        meta = request.metadata or {}
        if meta.get("step") != "main":
            return demo_reply(request)
        self.calls += 1
        if self.replies:
            reply = self.replies[min(self.calls, len(self.replies)) - 1]
            return json.dumps(reply) if isinstance(reply, dict) else reply
        prompt = meta.get("prompt") or ""
        if self.role == "coder":  # offline coder: hands back the code it was given, unchanged
            body = prompt.rpartition("\n```\n")[0]
            starts = (body.rfind(f"```{lang}\n") for lang in ("python", "diff", "markdown"))
            return body[max(starts):].partition("\n")[2] + "\n"
        listed = [ln[2:].strip() for ln in prompt.partition("Static check findings:\n")[2].split("\n\n")[0]
                  .splitlines() if ln.startswith("- ")]
        summary = (f"{_OFFLINE} Reviewed {len(listed)} item(s). Most important: {'; '.join(listed[:3])}."
                   if listed else f"{_OFFLINE} Reviewed: nothing to contest.")
        return json.dumps({"verdict": "PASS", "summary": summary + " (Offline scripted reviewer; no model was "
                           "called, so this verdict reviewed nothing.)", "findings": []})


def _providers(provider: Any, script: ReviewScript | None) -> tuple[Any, Any, str]:
    """The reviewer's and the coder's providers, and the name to record."""
    from agentstack_lab.providers.scripted import ScriptedProvider

    if provider in (None, "scripted") or script is not None:
        if provider not in (None, "scripted"):
            raise UsageError(f"a review script needs provider 'scripted', got {provider!r}")
        return (ScriptedProvider(_RoleScript(script.verdicts if script else None, "reviewer")),
                ScriptedProvider(_RoleScript(script.revisions if script else None, "coder")), "scripted")
    name = provider if isinstance(provider, str) else str(getattr(provider, "name", type(provider).__name__))
    return provider, provider, name


def _options(timeout_s: float | None, extra: dict[str, Any] | None = None) -> Any:
    from agentstack_lab.engine import RunOptions

    return RunOptions(max_depth=0, subagents=False, interactive=False, final_question=False, executor="subprocess",
                      answers=dict(_NO_QUESTIONS), timeout_s=timeout_s, **(extra or {}))


def _fence(code: str, kind: str) -> str:
    lang = {"diff": "diff", "docs": "markdown"}.get(kind, "python")
    return f"```{lang}\n{code.rstrip(chr(10))}\n```"


@dataclass(frozen=True, kw_only=True)
class ReviewOutcome:
    """One review: the verdict, the reviewer run's id, the provider, and whether it was the offline one.

    ``skipped``: no model reviewed anything (the offline scripted reviewer with no script, or a replay of
    its cassette); its PASS is a placeholder that must never decide a gate.
    """

    verdict: ReviewVerdict
    run_id: str
    provider: str
    offline: bool
    skipped: bool = False
    text: str = field(default="", repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = {**self.verdict.to_wire(), "runId": self.run_id, "provider": self.provider, "offline": self.offline,
               "text": self.text}
        if self.skipped:
            out |= {"skipped": True, "skipReason": SKIP_REASON}
        return out


async def _agent(ws: Workspace, prompt: str, provider: Any, agent_type: str, timeout_s: float | None,
                 role: str, options: dict[str, Any] | None = None) -> tuple[str, str]:
    """Run one headless agent of the loop; its result text and run id (a failed run is an error naming it)."""
    from agentstack_lab.engine import AgentRun

    run = AgentRun(prompt, workspace=ws, provider=provider, agent_type=agent_type,
                   options=_options(timeout_s, options), origin="review-loop")
    try:
        text = await run
    except asyncio.CancelledError:  # the loop was aborted: let the run settle (stopped, logged) first
        run.stop(reason="the review loop was aborted")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(run.wait(raise_on_error=False), 10)
        raise
    except AgentstackError as exc:
        raise ReviewLoopError(f"the {role} agent ({agent_type}, run {run.id[:8]}) failed: {exc}") from exc
    return str(text or ""), run.id


async def ask_reviewer(ws: Workspace, code: str, *, kind: str = "code", path: str | None = None,
                       context: str = "", provider: Any = None, script: ReviewScript | dict | str | None = None,
                       agent_type: str = "reviewer", timeout_s: float | None = 300.0,
                       options: dict[str, Any] | None = None) -> ReviewOutcome:
    """Ask a reviewer agent for a verdict on ``code`` (one review: the workflows' gate).

    ``kind`` is ``code``, ``diff`` or ``docs``. ``context`` (e.g. the static checks' findings as ``- ``
    lines under ``Static check findings:``) is shown to the reviewer. A reply that is not a valid verdict raises
    :class:`~agentstack_lab.workflows.verdict.VerdictError`; a reviewer run that fails raises
    :class:`ReviewLoopError`. Neither is ever a PASS. ``options``: more ``RunOptions`` fields for the
    reviewer run (a cassette to record or replay, :func:`~agentstack_lab.workflows.api.cassette_options`).
    """
    reviewer, _coder, name = _providers(provider, ReviewScript.coerce(script))
    return await _review(ws, code, reviewer, name, kind=kind, path=path, context=context, agent_type=agent_type,
                         timeout_s=timeout_s, options=options)


async def _review(ws: Workspace, code: str, reviewer: Any, name: str, *, kind: str, path: str | None,
                  context: str, agent_type: str, timeout_s: float | None,
                  options: dict[str, Any] | None = None) -> ReviewOutcome:
    where = f" ({path})" if path else ""
    what = {"diff": "diff", "docs": "documentation"}.get(kind, "code")
    prompt = (f"You are an adversarial reviewer. Review this {what}{where} and "
              f"decide whether it may be merged.\n{verdict_instructions()}\n\n"
              + (f"{context.strip()}\n\n" if context.strip() else "") + _fence(code, kind) + "\n")
    text, run_id = await _agent(ws, prompt, reviewer, agent_type, timeout_s, "reviewer", options)
    if options and options.get("replay") and options.get("replay_mode", "strict") == "strict":
        from agentstack_lab.providers.cassette import load_cassette

        recorded = load_cassette(options["replay"])[0].get("provider", "?")
        return ReviewOutcome(verdict=parse_verdict(text), run_id=run_id, provider=f"replay:{recorded}", offline=True,
                             skipped=recorded == "scripted" and _offline_demo(reviewer), text=text)
    return ReviewOutcome(verdict=parse_verdict(text), run_id=run_id, provider=name, offline=name == "scripted",
                         skipped=_offline_demo(reviewer), text=text)


def reviews_nothing(provider: Any, script: Any) -> bool:
    """Whether a loop or gate with this ``provider`` and ``script`` would use the offline reviewer that reviews nothing."""
    return provider in (None, "scripted") and not script


def _offline_demo(reviewer: Any) -> bool:
    """Whether ``reviewer`` is the offline scripted reviewer with no script (it reviews nothing)."""
    fn = getattr(reviewer, "fn", None)
    return isinstance(fn, _RoleScript) and not fn.replies


async def ask_coder(ws: Workspace, code: str, verdict: ReviewVerdict, *, kind: str = "code",
                    path: str | None = None, provider: Any = None, agent_type: str = "coder",
                    timeout_s: float | None = 300.0) -> tuple[str, str]:
    """Ask a coder agent to fix the verdict's findings; the revised code and the coder run's id."""
    listing = "\n".join(f"- [{f.severity}] {f.file or path or ''}:{f.line or ''} {f.claim}"
                        + (f" (evidence: {f.evidence})" if f.evidence else "") for f in verdict.findings)
    what = "diff" if kind == "diff" else "file"
    prompt = (f"Revise this {what}{f' ({path})' if path else ''} so the reviewer's findings are fixed. Reply with "
              f"the complete revised {what} in one fenced code block and nothing else.\n\nReviewer's findings:\n"
              f"{listing}\n\n{_fence(code, kind)}\n")
    text, run_id = await _agent(ws, prompt, provider, agent_type, timeout_s, "coder")
    return extract_code(text), run_id


class ReviewLoop:
    """A loop started in this process: ``await loop`` for its final :class:`ReviewLoopState`."""

    def __init__(self, loops: ReviewLoops, loop_id: str, task: asyncio.Task[None]):
        self.id, self._loops, self.task = loop_id, loops, task

    @property
    def state(self) -> ReviewLoopState:
        return self._loops.status(self.id)

    async def wait(self) -> ReviewLoopState:
        await asyncio.shield(self.task)  # the loop records its own end, aborted included
        return self.state

    def __await__(self):
        return self.wait().__await__()

    def abort(self) -> ReviewLoopState:
        return self._loops.abort(self.id)

    def __repr__(self) -> str:
        return f"ReviewLoop({self.id[:8]}, done={self.task.done()})"


class ReviewLoops:
    """Review loops of one workspace: start here; status, issues, code, list and abort from any process."""

    def __init__(self, workspace: Workspace):
        self.ws = workspace
        self.store = ReviewStore(workspace.db)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # loops running in this process
        self._work: dict[str, asyncio.Future[Any]] = {}  # their work, which abort cancels

    def start(self, code: str, *, path: str | None = None, kind: str | None = None, max_iterations: int = 3,
              provider: Any = None, script: ReviewScript | dict | str | None = None,
              reviewer_type: str = "reviewer", coder_type: str = "coder", context: str = "",
              timeout_s: float | None = 300.0) -> ReviewLoop:
        """Start a loop on the running event loop and return at once (its row exists when this returns).

        Args:
            code: The code (or unified diff) to review.
            path: Its file name, shown to the agents.
            kind: ``code`` or ``diff`` (default: ``diff`` when ``code`` looks like a unified diff).
            max_iterations: Reviews at most; FAIL at the last one ends the loop ``failed``.
            provider: A provider name or object for both agents (default: offline ``scripted``; with no
                ``script`` it reviews nothing, so the loop ends ``error``).
            script: With ``scripted``: the :class:`ReviewScript` to play (or its dict, or a JSON file).
            reviewer_type: Agent type of the reviewer (``ws.agent_types``).
            coder_type: Agent type of the coder.
            context: Extra text for the reviewer (requirements, static findings).
            timeout_s: Wall-clock budget of each agent run.
        """
        if not isinstance(code, str) or not code.strip():
            raise UsageError("review loop: code must be a non-empty string")
        if not isinstance(max_iterations, int) or isinstance(max_iterations, bool) or not 1 <= max_iterations <= 50:
            raise UsageError(f"review loop: max_iterations must be an integer from 1 to 50, got {max_iterations!r}")
        kind = kind or ("diff" if code.lstrip().startswith(("diff --git", "--- ")) else "code")
        if kind not in ("code", "diff"):
            raise UsageError(f"review loop: kind must be 'code' or 'diff', got {kind!r}")
        for agent_type in (reviewer_type, coder_type):
            self.ws.agent_types.get(agent_type)  # unknown type: a clear error before anything starts
        script = ReviewScript.coerce(script)
        if script is not None and provider not in (None, "scripted"):
            raise UsageError(f"a review script needs provider 'scripted', got {provider!r}")
        if isinstance(provider, str) and provider != "scripted":
            provider = self.ws.get_provider(provider)  # unknown name or missing key: a clear error, no row
        reviewer, coder, name = _providers(provider, script)
        asyncio.get_running_loop()  # a clear RuntimeError before a row is written
        loop_id = str(uuid.uuid4())
        self.store.create(loop_id, kind=kind, path=path, code=code, max_iterations=max_iterations, provider=name)
        args = dict(kind=kind, path=path, max_iterations=max_iterations, reviewer=reviewer, coder=coder, name=name,
                    reviewer_type=reviewer_type, coder_type=coder_type, context=context, timeout_s=timeout_s)
        task = asyncio.get_running_loop().create_task(self._guarded(loop_id, code, args),
                                                      name=f"agentstack-review-{loop_id[:8]}")
        self._tasks[loop_id] = task
        task.add_done_callback(lambda _t: self._tasks.pop(loop_id, None))
        return ReviewLoop(self, loop_id, task)

    async def run(self, code: str, **kwargs: Any) -> ReviewLoopState:
        """Start a loop and wait for its end (same arguments as :meth:`start`)."""
        return await self.start(code, **kwargs)

    async def _guarded(self, loop_id: str, code: str, args: dict[str, Any]) -> None:
        """Run the loop's work as its own task (what ``abort`` cancels) and record how it ended."""
        work = asyncio.ensure_future(self._iterate(loop_id, code, args))
        self._work[loop_id] = work
        watcher = asyncio.ensure_future(self._watch_abort(loop_id, work))
        outer_cancelled = False
        try:
            status, error = await work
        except asyncio.CancelledError:
            status, error = "aborted", "aborted"
            current = asyncio.current_task()
            outer_cancelled = bool(current and current.cancelling())
        except AgentstackError as exc:
            status, error = "error", str(exc)
        except Exception as exc:  # a bug: logged with its traceback, and the loop still ends
            log.exception("review loop %s failed unexpectedly", loop_id)
            status, error = "error", f"internal error: {type(exc).__name__}"
        finally:
            watcher.cancel()
            self._work.pop(loop_id, None)
        self.store.finish(loop_id, status, error)  # type: ignore[arg-type]
        log.info("review loop %s ended %s", loop_id[:8], status)
        if outer_cancelled:
            raise asyncio.CancelledError

    async def _watch_abort(self, loop_id: str, work: asyncio.Future[Any]) -> None:
        while not work.done():
            await asyncio.sleep(POLL_S)
            if self.store.abort_requested(loop_id):
                work.cancel()
                return

    async def _iterate(self, loop_id: str, code: str, a: dict[str, Any]) -> tuple[str, str | None]:
        for iteration in range(1, a["max_iterations"] + 1):
            if self.store.abort_requested(loop_id):
                return "aborted", "aborted"
            outcome = await _review(self.ws, code, a["reviewer"], a["name"], kind=a["kind"], path=a["path"],
                                    context=a["context"], agent_type=a["reviewer_type"], timeout_s=a["timeout_s"])
            if outcome.skipped:  # the reviewer is the loop's only gate: nothing was decided
                return "error", f"{SKIP_REASON}; the review was skipped and nothing was decided"
            self.store.record_review(loop_id, iteration, code, outcome.verdict.to_wire(), outcome.run_id)
            if outcome.verdict.passed:
                return "passed", None
            if iteration == a["max_iterations"]:
                return "failed", (f"the reviewer still found {len(outcome.verdict.findings)} problem(s) after "
                                  f"{iteration} review(s)")
            if self.store.abort_requested(loop_id):
                return "aborted", "aborted"
            code, coder_run = await ask_coder(self.ws, code, outcome.verdict, kind=a["kind"], path=a["path"],
                                              provider=a["coder"], agent_type=a["coder_type"],
                                              timeout_s=a["timeout_s"])
            self.store.record_revision(loop_id, iteration, code, coder_run)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- reads and control, from any process ----------------------------------------------------------
    def status(self, loop_id: str) -> ReviewLoopState:
        """The loop's persisted state (an id or a unique prefix)."""
        return self.store.get(loop_id)

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ReviewLoopState]:
        """Loops, newest first; ``status="running"`` lists the active ones."""
        return self.store.list(status=status, limit=limit)

    def issues(self, loop_id: str, *, iteration: int | None = None) -> list[ReviewIssue]:
        """The reviewer's findings of every iteration (or one)."""
        return self.store.issues(loop_id, iteration=iteration)

    def reviews(self, loop_id: str) -> list[dict[str, Any]]:
        """Every review: code reviewed, verdict, summary, findings, agent run ids."""
        return self.store.reviews(loop_id)

    def get_code(self, loop_id: str) -> str:
        """The loop's current code (the coder's latest revision, or the original)."""
        return self.store.get(loop_id).code

    def abort(self, loop_id: str) -> ReviewLoopState:
        """Stop a running loop: at once when it runs in this process, else within ``POLL_S`` seconds."""
        state = self.store.request_abort(loop_id)
        work = self._work.get(state.id)
        if work is not None and not work.done():
            work.cancel()
        return state

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Abort the loops running in this process and wait for them to record it."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        for loop_id in list(self._tasks):
            with contextlib.suppress(AgentstackError):
                self.abort(loop_id)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
