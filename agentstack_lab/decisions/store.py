"""The decision queue: persisted questions any process answers, exactly once.

A decision row is written when a run asks (``create``); any surface answers it (``answer``) with a
conditional ``UPDATE … WHERE state = 'pending'`` inside a ``BEGIN IMMEDIATE`` transaction, so of two
answers racing from two processes exactly one changes the row and the other gets
:class:`DecisionClosedError` ("decision X already answered (by alice, from the terminal)"). A
process killed mid-answer leaves the row pending (its transaction never committed), never half
written: state, answer, who and when are one UPDATE.

The waiting engine (``await decisions.wait(id, timeout)``) sees an answer from another process
within one poll interval (:data:`POLL_S` = 25 ms): it reads ``PRAGMA data_version`` (a counter in
the WAL index, no disk read, ~2 µs) and only when another connection has committed does it read the
row (an indexed lookup, ~15 µs). An answer given in the same process through the same
:class:`Decisions` object wakes the waiter at once through an ``asyncio.Event``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.errors import NotFoundError, UsageError
from agentstack_lab.events import (
    APPROVE_WORDS,
    DECISION_KINDS,
    DECISION_STATES,
    REJECT_WORDS,
    SURFACE_LABELS,
    surface_label,
)
from agentstack_lab.validation import seconds_text

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Decision", "Decisions", "decisions_for", "DecisionError", "DecisionClosedError", "DecisionNotFoundError",
           "SURFACES", "surface_label", "normalise_answer", "cancel_pending", "POLL_S", "ALWAYS_SCOPES"]

POLL_S = 0.025
"""Seconds between two looks at the database while waiting for an answer from another process."""

SURFACES = SURFACE_LABELS
"""Known surfaces and how a person reads them (defined in :mod:`agentstack_lab.events`)."""

_APPROVAL_KINDS = ("approval", "consensus")
ALWAYS_SCOPES = ("session", "workspace")
"""Where an approval answered ``always`` saves its rule: this run's session, or the whole workspace."""
_YES, _NO = APPROVE_WORDS, REJECT_WORDS


class DecisionError(UsageError):
    """A decision cannot take that answer or action (bad input; nothing changed)."""


class DecisionClosedError(DecisionError):
    """The decision is no longer pending: someone else answered it, or it expired or was cancelled."""


class DecisionNotFoundError(NotFoundError):
    """No decision with that id (or id prefix)."""



@dataclass(frozen=True, kw_only=True)
class Decision:
    """One persisted decision (times are unix seconds; ``answer`` is the normalised JSON value)."""

    id: str
    kind: str
    prompt: str
    state: str = "pending"
    run_id: str | None = None
    agent_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict[str, Any])
    code: str | None = None
    answer: Any = None
    answered_by: str | None = None
    surface: str | None = None
    reason: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    created_at: float = 0.0
    answered_at: float | None = None
    expires_at: float | None = None

    @property
    def pending(self) -> bool:
        return self.state == "pending"

    @property
    def approved(self) -> bool | None:
        """For approvals and consensus checkpoints: the verdict once answered, else ``None``."""
        answer: object = self.answer
        if self.state != "answered" or not isinstance(answer, dict):
            return None
        verdict = cast("dict[str, Any]", answer).get("approved")
        return verdict if isinstance(verdict, bool) else None

    @property
    def decided_by(self) -> str | None:
        """Who decided, as one phrase: ``rule allow-read-only``, ``person alice``, ``policy``; ``None`` while open."""
        rule: object = self.metadata.get("rule")
        if isinstance(rule, str):
            return f"rule {rule}"
        if self.state != "answered":
            return None
        if self.surface in ("policy", "options"):
            return self.answered_by or self.surface
        return f"person {self.answered_by}" if self.answered_by else "person"

    def closed_message(self) -> str:
        """Why this decision takes no answer any more, as one line."""
        if self.state == "answered":
            return (f"decision {self.id} already answered (by {self.answered_by or 'unknown'}, "
                    f"from {surface_label(self.surface)})")
        why = f": {self.reason}" if self.reason else ""
        return f"decision {self.id} is {self.state}{why}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (snake_case keys), as the CLI ``--json`` and MCP tools return it."""
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "decided_by": self.decided_by}


def normalise_answer(kind: str, response: Any, code: str | None = None) -> Any:
    """The canonical JSON form of an answer to a ``kind`` decision, or :class:`DecisionError`.

    Approvals and consensus checkpoints become ``{"approved": bool, ...}`` (``True``/``"approve"``/
    ``"reject"`` are accepted); an approval's edited ``code`` must be a non-empty string. Other
    kinds take any JSON value (usually the text of the answer).
    """
    if kind in _APPROVAL_KINDS:
        if isinstance(response, bool):
            response = {"approved": response}
        elif isinstance(response, str) and response.strip().lower() in _YES + _NO:
            response = {"approved": response.strip().lower() in _YES}
        verdict: dict[str, Any] = cast("dict[str, Any]", response) if isinstance(response, dict) else {}
        if not isinstance(verdict.get("approved"), bool):
            raise DecisionError(f"a {kind} answer must be approve/reject (True/False) or "
                                f"{{'approved': bool, ...}}, got {response!r}")
        if kind == "approval" and "code" in verdict:
            edited: object = verdict["code"]
            if not isinstance(edited, str) or not edited.strip():
                raise DecisionError("approval: 'code' must be a non-empty string when given")
            if edited == code:
                verdict = {k: v for k, v in verdict.items() if k != "code"}
        if kind != "approval" and verdict.get("always") is not None:
            raise DecisionError(f"'always' saves a rule for code approvals; a {kind} decision takes none")
        if kind == "approval" and verdict.get("always") is not None:
            scope: object = verdict["always"]
            if scope not in ALWAYS_SCOPES:
                raise DecisionError(f"approval: 'always' must be one of {', '.join(ALWAYS_SCOPES)}, got {scope!r}")
            if verdict["approved"] is not True:
                raise DecisionError("approval: 'always' saves an allow rule, so it needs approved: true")
            if "code" in verdict:
                raise DecisionError("approval: 'always' applies to the code as asked, not to edited code")
        response = verdict
    if kind == "intervention":  # the resource monitor paused an agent: resume it or stop it
        word: object = ("resume" if response else "stop") if isinstance(response, bool) else response
        word = word.strip().lower() if isinstance(word, str) else word
        word = "resume" if word in _YES else "stop" if word in _NO else word
        if word not in ("resume", "stop"):
            raise DecisionError(f"an intervention answer must be 'resume' or 'stop', got {response!r}")
        response = word
    try:
        json.dumps(response)
    except (TypeError, ValueError) as exc:
        raise DecisionError(f"a decision answer must be JSON-able: {exc}") from None
    return response


def cancel_pending(conn: Any, run_id: str, reason: str, now: float | None = None) -> int:
    """Cancel the pending decisions of a run inside the caller's transaction; returns how many."""
    cur = conn.execute("UPDATE decisions SET state = 'cancelled', reason = ?, answered_at = ? "
                       "WHERE run_id = ? AND state = 'pending'", (reason, time.time() if now is None else now, run_id))
    return cur.rowcount or 0


_COLUMNS = ("id", "run_id", "agent_id", "kind", "prompt", "options", "code", "state", "answer", "answered_by",
            "surface", "reason", "metadata", "created_at", "answered_at", "expires_at")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM decisions"


def _row(r: Any) -> Decision:
    d = dict(zip(_COLUMNS, tuple(r), strict=True))
    d["options"] = json.loads(d["options"] or "{}")
    d["metadata"] = json.loads(d["metadata"] or "{}")
    d["answer"] = json.loads(d["answer"]) if d["answer"] is not None else None
    return Decision(**d)


class Decisions:
    """The workspace's decisions (``ws.decisions``); every method is safe from any thread and process.

    Args:
        db: the workspace :class:`~agentstack_lab.store.connection.SQLiteDatabase`.
        poll: seconds between looks at the database in :meth:`wait`.
    """

    def __init__(self, db: Database, *, poll: float = POLL_S):
        self.db = db
        self.poll = poll
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    # --- writing -------------------------------------------------------------------------------------

    def create(self, *, kind: str, prompt: str, run_id: str | None = None, agent_id: str | None = None,
               options: dict[str, Any] | None = None, code: str | None = None, timeout: float | None = None,
               metadata: dict[str, Any] | None = None, id: str | None = None) -> Decision:  # noqa: A002
        """Persist a new pending decision; ``timeout`` (seconds) sets ``expires_at``."""
        if kind not in DECISION_KINDS:
            raise DecisionError(f"unknown decision kind {kind!r}; expected one of {', '.join(DECISION_KINDS)}")
        if not isinstance(cast(object, prompt), str) or not prompt.strip():   # Python callers pass anything
            raise DecisionError("a decision needs a non-empty prompt")
        if timeout is not None and (not isinstance(cast(object, timeout), int | float) or timeout <= 0):
            raise DecisionError(f"decision timeout must be > 0 seconds, got {timeout!r}")
        now = time.time()
        d = Decision(id=id or str(uuid.uuid4()), kind=kind, prompt=prompt, run_id=run_id, agent_id=agent_id,
                     options=dict(options or {}), code=code, metadata=dict(metadata or {}), created_at=now,
                     expires_at=None if timeout is None else now + float(timeout))
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO decisions (id, run_id, agent_id, kind, prompt, options, code, metadata,"
                         " created_at, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                         (d.id, run_id, agent_id, kind, prompt, json.dumps(d.options, default=str), code,
                          json.dumps(d.metadata, default=str), now, d.expires_at))
        return d

    def answer(self, id: str, response: Any, *, by: str | None = None, surface: str = "python") -> Decision:  # noqa: A002
        """Answer a pending decision; exactly one answer wins.

        Raises:
            DecisionNotFoundError: no such decision.
            DecisionClosedError: it was answered (names by whom and from where), expired or cancelled.
            DecisionError: the answer does not fit the decision's kind (nothing changed).
        """
        current = self.get(id)
        if not current.pending:
            raise DecisionClosedError(current.closed_message())
        value = normalise_answer(current.kind, response, current.code)
        now = time.time()
        row: Any = None
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE decisions SET state = 'answered', answer = ?, answered_by = ?, surface = ?, answered_at = ?"
                " WHERE id = ? AND state = 'pending' AND (expires_at IS NULL OR expires_at > ?)",
                (json.dumps(value), by, surface, now, current.id, now)).rowcount
            if not changed:  # lost a race, or it is past its expiry: expire it now so every reader agrees
                conn.execute("UPDATE decisions SET state = 'expired', reason = 'no answer before it expired',"
                             " answered_at = ? WHERE id = ? AND state = 'pending'", (now, current.id))
                row = conn.execute(f"{_SELECT} WHERE id = ?", (current.id,)).fetchone()
        if not changed:
            self._wake(current.id)
            raise DecisionClosedError(_row(row).closed_message())
        self._wake(current.id)
        return self.get(current.id)

    def annotate(self, id: str, *, answered: bool = False, **metadata: Any) -> Decision:  # noqa: A002
        """Add ``metadata`` to a pending decision (a dry run's report for its card); closed ones refuse.

        ``answered``: an answered one takes it too (the rule an ``always`` answer saved).
        """
        current = self.get(id)
        with self.db.transaction() as conn:
            row = conn.execute("SELECT state, metadata FROM decisions WHERE id = ?", (current.id,)).fetchone()
            if row is None or (row[0] != "pending" and not (answered and row[0] == "answered")):
                raise DecisionClosedError(self.get(current.id).closed_message())
            merged = {**json.loads(row[1] or "{}"), **metadata}
            conn.execute("UPDATE decisions SET metadata = ? WHERE id = ?", (json.dumps(merged, default=str), current.id))
        return self.get(current.id)

    def approve(self, id: str, *, code: str | None = None, by: str | None = None,  # noqa: A002
                surface: str = "python", always: str | None = None, **extra: Any) -> Decision:
        """Approve an approval (optionally with edited ``code``) or a consensus checkpoint.

        ``always`` (``session`` or ``workspace``): also save "Always allow code like this" as a rule there
        (the waiting run saves it, see ``agentstack_lab/approval/saved.py``).
        """
        self._require_approvable(id, "approve")
        return self.answer(id, {"approved": True, **({"code": code} if code is not None else {}),
                                **({"always": always} if always is not None else {}), **extra},
                           by=by, surface=surface)

    def reject(self, id: str, *, reason: str | None = None, by: str | None = None,  # noqa: A002
               surface: str = "python", **extra: Any) -> Decision:
        """Reject an approval or a consensus checkpoint (``reason`` is shown to the agent)."""
        self._require_approvable(id, "reject")
        return self.answer(id, {"approved": False, **({"reason": reason} if reason else {}), **extra},
                           by=by, surface=surface)

    def cancel(self, id: str, reason: str) -> bool:  # noqa: A002
        """Cancel one pending decision; ``False`` when it was no longer pending."""
        with self.db.transaction() as conn:
            changed = conn.execute("UPDATE decisions SET state = 'cancelled', reason = ?, answered_at = ?"
                                   " WHERE id = ? AND state = 'pending'", (reason, time.time(), id)).rowcount
        self._wake(id)
        return bool(changed)

    def cancel_for_run(self, run_id: str, reason: str = "the run ended", *,
                       agent_ids: list[str] | None = None) -> int:
        """Cancel every pending decision of a run (it ended, was stopped, or its process died).

        ``agent_ids``: only those agents' (a subtask a worker ran for the run ended, the run goes on).
        """
        with self.db.transaction() as conn:
            ids = [r[0] for r in conn.execute("SELECT id, agent_id FROM decisions WHERE run_id = ? AND state = "
                                              "'pending'", (run_id,)) if agent_ids is None or r[1] in agent_ids]
            if agent_ids is None:
                n = cancel_pending(conn, run_id, reason) if ids else 0
            else:
                now = time.time()
                n = sum(conn.execute("UPDATE decisions SET state = 'cancelled', reason = ?, answered_at = ? "
                                     "WHERE id = ? AND state = 'pending'", (reason, now, i)).rowcount or 0 for i in ids)
        for i in ids:
            self._wake(i)
        return n

    def expire_due(self, now: float | None = None) -> int:
        """Mark pending decisions past their ``expires_at`` as expired; returns how many."""
        now = time.time() if now is None else now
        with self.db.transaction() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM decisions WHERE state = 'pending' AND expires_at"
                                              " IS NOT NULL AND expires_at <= ?", (now,))]
            if ids:
                conn.execute(f"UPDATE decisions SET state = 'expired', reason = 'no answer before it expired',"
                             f" answered_at = ? WHERE state = 'pending' AND id IN ({','.join('?' * len(ids))})",
                             (now, *ids))
        for i in ids:
            self._wake(i)
        return len(ids)

    # --- reading -------------------------------------------------------------------------------------

    def get(self, id: str) -> Decision:  # noqa: A002
        """One decision by id or by a unique id prefix (at least 4 characters)."""
        if not isinstance(cast(object, id), str) or not id.strip():   # ids come from every surface
            raise DecisionError("a decision id must be a non-empty string")
        id = id.strip()  # noqa: A001
        row = self.db.query(f"{_SELECT} WHERE id = ?", (id,))
        if not row and len(id) >= 4:
            row = self.db.query(f"{_SELECT} WHERE id >= ? AND id < ? LIMIT 2", (id, id + "\uffff"))
            if len(row) > 1:
                raise DecisionError(f"decision id prefix {id!r} is ambiguous; give more of it")
        if not row:
            raise DecisionNotFoundError(f"no decision {id!r}")
        return _row(row[0])

    def list(self, *, run: str | None = None, state: str | None = None, kind: str | None = None,
             limit: int = 100) -> list[Decision]:
        """Decisions, newest first, filtered by run id, state and kind."""
        if state is not None and state not in DECISION_STATES:
            raise DecisionError(f"unknown decision state {state!r}; expected one of {', '.join(DECISION_STATES)}")
        if kind is not None and kind not in DECISION_KINDS:
            raise DecisionError(f"unknown decision kind {kind!r}; expected one of {', '.join(DECISION_KINDS)}")
        where: list[str] = []
        params: list[Any] = []
        for col, value in (("run_id", run), ("state", state), ("kind", kind)):
            if value is not None:
                where.append(f"{col} = ?")
                params.append(value)
        sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY created_at DESC LIMIT ?"
        return [_row(r) for r in self.db.query(sql, (*params, int(limit)))]

    def pending_since(self, since: float) -> list[Decision]:
        """Decisions still pending that were opened at or after ``since`` (unix seconds), oldest first."""
        return [_row(r) for r in self.db.query(
            _SELECT + " WHERE state = 'pending' AND created_at >= ? ORDER BY created_at", (since,))]

    async def wait(self, id: str, timeout: float | None = None) -> Decision:  # noqa: A002
        """Wait until the decision leaves ``pending`` and return it.

        ``timeout`` (seconds; default: until its ``expires_at``, else forever) expires the decision,
        unless an answer wins that race, which is then returned. Cancelling the waiting task leaves
        the decision as it is (the caller cancels it when it should not be answered any more).
        """
        current = self.get(id)
        deadline = None if timeout is None else time.monotonic() + timeout
        if deadline is None and current.expires_at is not None:
            deadline = time.monotonic() + max(0.0, current.expires_at - time.time())
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        self._waiters.setdefault(current.id, []).append((loop, wake))
        conn, own = self._poll_conn()
        seen = None
        try:
            while True:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != seen or wake.is_set():
                    seen = version
                    wake.clear()
                    current = self.get(current.id)
                    if not current.pending:
                        return current
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    now = time.time()
                    with self.db.transaction() as tx:
                        tx.execute("UPDATE decisions SET state = 'expired', reason = ?, answered_at = ?"
                                   " WHERE id = ? AND state = 'pending'",
                                   (f"no answer within {seconds_text(timeout)}"
                                    if timeout is not None else "no answer before it expired", now, current.id))
                    return self.get(current.id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.poll if left is None else min(self.poll, left))
        finally:
            entries = self._waiters.get(current.id, [])
            with contextlib.suppress(ValueError):
                entries.remove((loop, wake))
            if not entries:
                self._waiters.pop(current.id, None)
            if own:
                conn.close()

    # --- internals -----------------------------------------------------------------------------------

    def _poll_conn(self) -> tuple[Any, bool]:
        """A connection used only to watch ``data_version`` (and whether :meth:`wait` must close it).

        ``data_version`` changes when *another* connection commits; the thread's own connection (which
        ``answer`` uses) would miss answers given on the same thread, so the watcher opens its own
        (~2 ms, once per wait).
        """
        path = getattr(self.db, "path", None)
        if path is None or str(path) == ":memory:":
            return self.db.conn, False  # one connection is all there is; the asyncio fast path covers it
        from agentstack_lab.store.connection import connect

        return connect(path), True

    def _require_approvable(self, id: str, verb: str) -> None:  # noqa: A002
        d = self.get(id)
        if d.kind not in _APPROVAL_KINDS:
            raise DecisionError(f"decision {d.id} is a {d.kind} question, not an approval: answer it with text "
                                f"instead of {verb}")

    def _wake(self, id: str) -> None:  # noqa: A002
        for loop, event in list(self._waiters.get(id, [])):
            if loop.is_closed():
                continue
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(event.set)


def decisions_for(workspace: Any) -> Decisions:
    """The one :class:`Decisions` of a workspace (cached on it), so in-process answers wake waiters at once.

    Lives here rather than on ``Workspace`` because the workspace sits below the services layer.
    """
    found = workspace.__dict__.get("_decisions_service")
    if found is None:
        found = workspace.__dict__.setdefault("_decisions_service", Decisions(workspace.db))
    return found
