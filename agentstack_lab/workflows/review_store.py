"""Review loops in the workspace database: the rows behind ``review_loop_status|list|issues|get_code``.

Every state change of a loop is one short transaction on ``review_loops`` / ``review_loop_reviews``
(migration ``workflows_review_loops``), so a loop run by a notebook is read by the CLI or an MCP
client in another process, and ``abort`` from anywhere is a flag its owner sees within its poll
interval (0.2 s). A loop whose owner process died is reported ``error`` the next time anyone reads it,
instead of ``running`` forever.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentstack_lab.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["LOOP_STATUSES", "LoopStatus", "ReviewIssue", "ReviewLoopState", "ReviewStore"]

LoopStatus = Literal["running", "passed", "failed", "aborted", "error"]
LOOP_STATUSES: tuple[str, ...] = ("running", "passed", "failed", "aborted", "error")
_COLUMNS = ("id, status, kind, path, code, max_iterations, iteration, verdict, error, provider, abort_requested, "
            "owner_pid, created_at, updated_at, finished_at")


@dataclass(frozen=True, kw_only=True)
class ReviewLoopState:
    """One loop as the database has it (``code`` is the current code; ``verdict`` the last review's)."""

    id: str
    status: LoopStatus
    kind: str
    path: str | None
    iteration: int
    max_iterations: int
    verdict: str | None
    error: str | None
    provider: str | None
    abort_requested: bool
    owner_pid: int | None
    created_at: float
    updated_at: float
    finished_at: float | None
    code: str

    @property
    def done(self) -> bool:
        return self.status != "running"

    def to_dict(self, *, with_code: bool = False) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "code"}
        out["done"] = self.done
        if with_code:
            out["code"] = self.code
        return out


@dataclass(frozen=True, kw_only=True)
class ReviewIssue:
    """One reviewer finding of one iteration."""

    iteration: int
    verdict: str
    severity: str
    claim: str
    evidence: str
    file: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _alive(pid: int | None) -> bool:
    if pid is None or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ReviewStore:
    """Reads and writes of review loops in one workspace database."""

    def __init__(self, db: Database):
        self.db = db

    # --- writes ----------------------------------------------------------------------------------
    def create(self, loop_id: str, *, kind: str, path: str | None, code: str, max_iterations: int,
               provider: str | None) -> None:
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO review_loops (id, status, kind, path, original, code, max_iterations, provider, "
                         "owner_pid, created_at, updated_at) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (loop_id, kind, path, code, code, max_iterations, provider, os.getpid(), now, now))

    def record_review(self, loop_id: str, iteration: int, code: str, verdict: dict[str, Any],
                      reviewer_run_id: str | None) -> None:
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO review_loop_reviews (loop_id, iteration, code, verdict, summary, findings, "
                         "reviewer_run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (loop_id, iteration, code, verdict["verdict"], verdict.get("summary", ""),
                          json.dumps(verdict.get("findings", [])), reviewer_run_id, now))
            conn.execute("UPDATE review_loops SET iteration = ?, verdict = ?, updated_at = ? WHERE id = ?",
                         (iteration, verdict["verdict"], now, loop_id))

    def record_revision(self, loop_id: str, iteration: int, code: str, coder_run_id: str | None) -> None:
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("UPDATE review_loop_reviews SET coder_run_id = ? WHERE loop_id = ? AND iteration = ?",
                         (coder_run_id, loop_id, iteration))
            conn.execute("UPDATE review_loops SET code = ?, updated_at = ? WHERE id = ?", (code, now, loop_id))

    def finish(self, loop_id: str, status: LoopStatus, error: str | None = None) -> None:
        """End a running loop (a loop already ended keeps its first ending)."""
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("UPDATE review_loops SET status = ?, error = ?, updated_at = ?, finished_at = ? "
                         "WHERE id = ? AND status = 'running'", (status, error, now, now, loop_id))

    def request_abort(self, loop_id: str) -> ReviewLoopState:
        """Flag a running loop for abort; its owner stops it (a loop whose owner is gone is aborted here)."""
        full = self.resolve(loop_id)
        state = self._state(self.db.query(f"SELECT {_COLUMNS} FROM review_loops WHERE id = ?", (full,))[0])
        if state.done:
            raise UsageError(f"review loop {state.id} has already ended ({state.status})")
        with self.db.transaction() as conn:
            conn.execute("UPDATE review_loops SET abort_requested = 1, updated_at = ? WHERE id = ?",
                         (time.time(), state.id))
        return self.get(state.id)

    def abort_requested(self, loop_id: str) -> bool:
        row = self.db.query("SELECT abort_requested FROM review_loops WHERE id = ?", (loop_id,))
        return bool(row and row[0][0])

    # --- reads -----------------------------------------------------------------------------------
    def resolve(self, loop_id: str) -> str:
        """The full id of ``loop_id`` (an id or a unique prefix of at least 4 characters)."""
        if not isinstance(loop_id, str) or not loop_id.strip():
            raise UsageError("a review loop id must be a non-empty string")
        if self.db.query("SELECT 1 FROM review_loops WHERE id = ?", (loop_id,)):
            return loop_id
        found = [] if len(loop_id) < 4 else [r[0] for r in self.db.query(
            "SELECT id FROM review_loops WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
            (loop_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UsageError(f"review loop id prefix {loop_id!r} is ambiguous; give more characters")
        raise NotFoundError(f"no review loop {loop_id!r}")

    def get(self, loop_id: str) -> ReviewLoopState:
        full = self.resolve(loop_id)
        row = self.db.query(f"SELECT {_COLUMNS} FROM review_loops WHERE id = ?", (full,))[0]
        return self._reap(self._state(row))

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ReviewLoopState]:
        """Loops, newest first; ``status`` filters (``running`` lists the active ones)."""
        if status is not None and status not in LOOP_STATUSES:
            raise UsageError(f"unknown review loop status {status!r}; valid: {', '.join(LOOP_STATUSES)}")
        if not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be a positive integer, got {limit!r}")
        rows = self.db.query(f"SELECT {_COLUMNS} FROM review_loops ORDER BY created_at DESC, id LIMIT ?", (limit,)) \
            if status is None else self.db.query(
                f"SELECT {_COLUMNS} FROM review_loops WHERE status = ? ORDER BY created_at DESC, id LIMIT ?",
                (status, limit))
        states = [self._reap(self._state(r)) for r in rows]
        return [s for s in states if status is None or s.status == status]

    def issues(self, loop_id: str, *, iteration: int | None = None) -> list[ReviewIssue]:
        """The reviewer's findings, every iteration (or one), in order."""
        full = self.resolve(loop_id)
        sql = "SELECT iteration, verdict, findings FROM review_loop_reviews WHERE loop_id = ?"
        params: tuple[Any, ...] = (full,)
        if iteration is not None:
            sql, params = sql + " AND iteration = ?", (full, iteration)
        out = []
        for it, verdict, findings in self.db.query(sql + " ORDER BY iteration", params):
            for f in json.loads(findings):
                out.append(ReviewIssue(iteration=it, verdict=verdict, severity=f["severity"], claim=f["claim"],
                                       evidence=f.get("evidence", ""), file=f.get("file"), line=f.get("line")))
        return out

    def reviews(self, loop_id: str) -> list[dict[str, Any]]:
        """Every iteration: the code reviewed, verdict, summary, findings, and the agent runs."""
        full = self.resolve(loop_id)
        rows = self.db.query("SELECT iteration, verdict, summary, findings, reviewer_run_id, coder_run_id, code "
                             "FROM review_loop_reviews WHERE loop_id = ? ORDER BY iteration", (full,))
        return [{"iteration": r[0], "verdict": r[1], "summary": r[2], "findings": json.loads(r[3]),
                 "reviewer_run_id": r[4], "coder_run_id": r[5], "code": r[6]} for r in rows]

    @staticmethod
    def _state(row: Any) -> ReviewLoopState:
        (id_, status, kind, path, code, max_it, it, verdict, error, provider, abort, pid, created, updated,
         finished) = row
        return ReviewLoopState(id=id_, status=status, kind=kind, path=path, code=code, max_iterations=max_it,
                               iteration=it, verdict=verdict, error=error, provider=provider,
                               abort_requested=bool(abort), owner_pid=pid, created_at=created, updated_at=updated,
                               finished_at=finished)

    def _reap(self, state: ReviewLoopState) -> ReviewLoopState:
        """A running loop whose owner process is gone ends now (aborted if asked, else error)."""
        if state.done or _alive(state.owner_pid):
            return state
        if state.abort_requested:
            self.finish(state.id, "aborted", "aborted (its process had exited)")
        else:
            self.finish(state.id, "error", f"the process running this loop (pid {state.owner_pid}) exited")
        return self._state(self.db.query(f"SELECT {_COLUMNS} FROM review_loops WHERE id = ?", (state.id,))[0])
