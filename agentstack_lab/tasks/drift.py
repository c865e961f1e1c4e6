"""Drift detection (docs/tasks.md): is a new subtask just its ancestor's task again?

An agent that re-delegates its own prompt to a subagent (which may do the same) burns the budget
without progress. When a task with a parent is created, its input is embedded with the workspace
embedder, stored in ``task_embeddings``, and compared (cosine) with its ancestors' embeddings up to
``ancestor_depth`` levels up. The highest similarity decides, as in the seed: at or above
``threshold`` (default 0.95) → ``warned`` or ``prevented`` (``behavior``); at or above
``warning_threshold`` (optional, lower) → ``warned``; else ``allowed``. Every check at or above the
warning level is a row in ``drift_detection_events``. Disabled by default (as the seed).

With the default hashed n-gram embedder a verbatim repeat scores 1.0 and a related but different
question about 0.3-0.6, so 0.95 flags near-copies only.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import AgentstackError
from agentstack_lab.tasks.store import TaskStore

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["DriftDetector", "DriftResult", "DriftPreventedError"]


class DriftPreventedError(AgentstackError):
    """A task was not created: its input repeats an ancestor's (``behavior: prevent``)."""

    def __init__(self, message: str, result: DriftResult):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True, kw_only=True)
class DriftResult:
    """The outcome of one check (``action``: allowed, warned or prevented)."""

    is_drift: bool = False
    highest_similarity: float = 0.0
    most_similar_task_id: str | None = None
    most_similar_task_input: str | None = None
    action: str = "allowed"
    checked_ancestors: int = 0
    threshold: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    def describe(self) -> str:
        return (f"{self.action}: similarity {self.highest_similarity:.3f} to ancestor task "
                f"{self.most_similar_task_id} (threshold {self.threshold:g})")


class DriftDetector:
    """Checks, indexes and reports drift for one workspace (``config`` is its ``drift`` section)."""

    def __init__(self, db: Database, embedder: Any, config: Any):
        self.db = db
        self.embedder = embedder
        self.config = config
        self.tasks = TaskStore(db)

    @property
    def enabled(self) -> bool:
        return bool(self.config.enabled)

    def _embed(self, text: str) -> Any:
        import numpy as np

        vec = np.asarray(self.embedder.embed([text]), dtype=np.float32)[0]
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def index(self, task_id: str, text: str | None, *, vector: Any = None) -> None:
        """Store the embedding of a task's input (replacing an older one)."""
        if not self.enabled or not text:
            return
        import numpy as np

        vec = self._embed(text) if vector is None else vector
        with self.db.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO task_embeddings (task_id, embedding, model, dimensions, created_at)"
                         " VALUES (?,?,?,?,?)", (task_id, np.asarray(vec, dtype=np.float32).tobytes(),
                                                 self.embedder.model, int(vec.shape[0]), time.time()))

    def _stored(self, task_id: str) -> Any:
        import numpy as np

        rows = self.db.query("SELECT embedding, model, dimensions FROM task_embeddings WHERE task_id = ?", (task_id,))
        if not rows:
            return None
        blob, model, dims = rows[0]
        if model != self.embedder.model or dims != self.embedder.dimensions:
            return None  # embedded by another model: not comparable
        return np.frombuffer(blob, dtype=np.float32)

    def check(self, text: str, task_type: str, parent_task_id: str | None, *, task_id: str | None = None,
              run_id: str | None = None, record: bool = True) -> tuple[DriftResult, Any]:
        """Compare ``text`` with the ancestors of a would-be child of ``parent_task_id``.

        Returns the result and the new input's embedding (to index the task once it exists).
        ``record=False`` (``task_check_drift``) only reports: no event row.
        """
        cfg = self.config
        if not self.enabled or not parent_task_id or not text:
            return DriftResult(threshold=cfg.threshold), None
        self.tasks.get(parent_task_id)  # unknown parent: a clear error
        ancestors = [(parent_task_id, 1)] + self.tasks.ancestors(parent_task_id, max(cfg.ancestor_depth - 1, 0))
        vec = self._embed(text)
        best, best_id = 0.0, None
        for ancestor_id, _distance in ancestors:
            other = self._stored(ancestor_id)
            if other is None:
                continue
            sim = float(vec @ other)
            if sim > best:
                best, best_id = sim, ancestor_id
        action, is_drift = "allowed", False
        if best >= cfg.threshold:
            is_drift, action = True, ("prevented" if cfg.behavior == "prevent" else "warned")
        elif cfg.warning_threshold is not None and best >= cfg.warning_threshold:
            action = "warned"
        best_input = self.tasks.get(best_id).input if best_id else None
        result = DriftResult(is_drift=is_drift, highest_similarity=best, most_similar_task_id=best_id,
                             most_similar_task_input=best_input, action=action, checked_ancestors=len(ancestors),
                             threshold=cfg.threshold)
        if record and action != "allowed" and best_id is not None:
            with self.db.transaction() as conn:
                conn.execute("INSERT INTO drift_detection_events (id, task_id, task_type, ancestor_task_id,"
                             " similarity_score, threshold, action_taken, task_input, run_id, created_at)"
                             " VALUES (?,?,?,?,?,?,?,?,?,?)",
                             (str(uuid.uuid4()), task_id if action != "prevented" else None, task_type, best_id,
                              best, cfg.threshold, action, text, run_id, time.time()))
        return result, vec

    def metrics(self, since: float | None = None) -> dict[str, Any]:
        """Counts by action and the average similarity of the logged checks (since epoch ``since``)."""
        row = self.db.query(
            "SELECT COUNT(*), SUM(action_taken = 'allowed'), SUM(action_taken = 'warned'),"
            " SUM(action_taken = 'prevented'), AVG(similarity_score) FROM drift_detection_events"
            " WHERE created_at >= ?", (since or 0.0,))[0]
        return {"total_events": row[0], "allowed_count": row[1] or 0, "warned_count": row[2] or 0,
                "prevented_count": row[3] or 0, "average_similarity": row[4] or 0.0,
                "enabled": self.enabled, "threshold": self.config.threshold,
                "warning_threshold": self.config.warning_threshold, "behavior": self.config.behavior}

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest logged checks, newest first."""
        rows = self.db.query("SELECT * FROM drift_detection_events ORDER BY created_at DESC LIMIT ?", (int(limit),))
        return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]
