"""Between the live kernel's journal and the ``provenance`` table: recording and undoing runs.

:class:`~agentstack_lab.engine.provenance.Journal` knows what to put back (it holds the objects,
in this process); :mod:`agentstack_lab.store.provenance` is the record every process can read.
This module turns a python call's changes into rows (redacted once more with the run's secrets),
runs an undo and records it (``restored``/``removed`` rows, so ``%agent_history`` shows it), and
resolves the run id a person typed (a full id or a unique prefix of 4+ characters).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentstack_lab.engine.provenance import Change, UndoRefusedError
from agentstack_lab.redaction import redact, secret_values
from agentstack_lab.store import provenance

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["change_rows", "undo_run", "resolve_run", "workspace_secrets", "MIN_PREFIX"]

MIN_PREFIX = 4


def change_rows(changes: Sequence[dict[str, str] | Change], *, run_id: str, agent_id: str | None,
                call_id: str | None, secrets: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``provenance`` rows for one call's (or one undo's) changes; summaries redacted again."""
    at = time.time()
    rows: list[dict[str, Any]] = []
    for c in changes:
        data = c if isinstance(c, dict) else {"name": c.name, "action": c.action, "before": c.before, "after": c.after}
        rows.append({"run_id": run_id, "agent_id": agent_id, "call_id": call_id, "name": data["name"],
                     "action": data["action"], "before": redact(data.get("before") or "", secrets),
                     "after": redact(data.get("after") or "", secrets), "at": at})
    return rows


def undo_run(executor: Any, db: Database, run_id: str, *, secrets: Sequence[str] = ()) -> list[Change]:
    """Undo ``run_id`` in ``executor``'s namespace and record it; raises :class:`UndoRefusedError` (nothing changed).

    The refusal names what blocks it: names changed since, names too big to snapshot, a run already
    undone, a run whose code ran elsewhere (a subprocess, another kernel, before a restart).
    """
    journal = getattr(executor, "journal", None)
    if journal is None:
        raise UndoRefusedError(f"run {run_id} ran its code with the {getattr(executor, 'name', '?')} executor: "
                               "nothing in this kernel to undo")
    if run_id not in journal.runs(undone=True) and provenance.read(db, run_id=run_id, limit=1):
        raise UndoRefusedError(f"run {run_id} changed kernel variables in another kernel (or before this one "
                               "restarted): its snapshots are gone, nothing was restored")
    changes = journal.undo(executor.namespace, run_id, secrets=secrets)
    provenance.write(db, change_rows(changes, run_id=run_id, agent_id=None, call_id=None, secrets=secrets))
    return changes


def resolve_run(ref: str, db: Database, journal: Any = None) -> str:
    """The run id ``ref`` names: a full id or a unique prefix (4+ characters) of a run with provenance rows."""
    ref = ref.strip()
    if len(ref) < MIN_PREFIX:
        raise UndoRefusedError(f"run id {ref!r} is too short: give the id or its first {MIN_PREFIX}+ characters "
                               "(see %agent_history)")
    known = set(provenance.run_ids(db, ref))
    if journal is not None:
        known |= {r for r in journal.runs(undone=True) if r.startswith(ref)}
    if ref in known:
        return ref
    if not known:
        raise UndoRefusedError(f"unknown run {ref!r}: no run with that id changed kernel variables "
                               "(see %agent_history)")
    if len(known) > 1:
        raise UndoRefusedError(f"run id {ref!r} is ambiguous: it starts {len(known)} runs "
                               f"({', '.join(sorted(known)[:3])}, ...); give more characters")
    return known.pop()


def workspace_secrets(workspace: Any) -> list[str]:
    """Secret values to keep out of summaries: secret-looking environment variables and configured keys."""
    providers = workspace.config.providers
    keys = [providers.anthropic.api_key, providers.openai.api_key, providers.ollama.api_key]
    return secret_values([k for k in keys if k is not None])
