"""What a memory backend stores and the contract both backends keep (SQLite and PostgreSQL).

Rows of ``memory`` travel as :class:`Entry`; writes arrive as validated :class:`Item` batches
(validation and access control stay in :mod:`agentstack_lab.memory.api`, so both backends refuse
exactly the same input). ``where``/``params`` filters are SQL fragments over ``memory m`` with
``?`` placeholders, written in the SQL both databases speak (``substr``, ``=``, ``IS NULL``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Entry", "Item", "Backend", "Background", "RowReads", "content_hash", "entry_from_row", "stale"]

_Db = TypeVar("_Db", bound="Database")   # each backend's own database class (SQLiteDatabase, PgDatabase)


@dataclass(frozen=True)
class Entry:
    """One stored memory entry."""

    id: str
    key: str
    namespace: str
    content: str
    agent_id: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "namespace": self.namespace, "content": self.content,
                "agent_id": self.agent_id, "tags": list(self.tags), "metadata": dict(self.metadata),
                "version": self.version, "created_at": self.created_at, "updated_at": self.updated_at}


@dataclass
class Item:
    """One validated write: ``meta_json`` ``None`` keeps the stored metadata, ``tags`` ``None`` the tags."""

    key: str
    content: str
    namespace: str
    agent_id: str | None
    tags: list[str] | None
    meta_json: str | None
    hash: str = ""


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def entry_from_row(row: Any) -> Entry:
    """An :class:`Entry` from a row in the column order both backends select.

    ``rid, id, key, namespace, content, content_hash, metadata, agent_id, version, created_at,
    updated_at, tags as JSON``.
    """
    return Entry(id=row[1], key=row[2], namespace=row[3], content=row[4], content_hash=row[5],
                 metadata=json.loads(row[6]), agent_id=row[7], version=row[8], created_at=row[9],
                 updated_at=row[10], tags=sorted(json.loads(row[11])) if row[11] else [])


def stale(it: Item, found: dict) -> bool:
    """True when ``it`` is new or its content changed (so it needs embedding)."""
    old = found.get((it.namespace, it.key))
    return old is None or old[1] != it.hash


class RowReads(Generic[_Db]):
    """The reads both backends answer with the same SQL over ``memory``, ``memory_tags`` and ``memory_versions``.

    A backend sets :attr:`cols` (its select list: PostgreSQL casts ``metadata`` to text) and has ``db``
    with ``conn`` and ``query``; the search paths differ (FTS5 and the shared vector index against tsvector/pgvector) and stay
    in each backend.
    """

    cols: str
    db: _Db

    def get(self, namespace: str, key: str) -> Entry | None:
        row = self.db.conn.execute(f"SELECT {self.cols} FROM memory m WHERE m.namespace = ? AND m.key = ?",
                                   (namespace, key)).fetchone()
        return entry_from_row(row) if row else None

    def list(self, where: str, params: list[Any], tag: str | None, limit: int, offset: int) -> list[Entry]:
        if tag is not None:
            where += " AND EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_rid = m.rid AND t.tag = ?)"
            params = [*params, tag]
        rows = self.db.query(f"SELECT {self.cols} FROM memory m WHERE {where} ORDER BY m.updated_at DESC, m.rid DESC"
                             " LIMIT ? OFFSET ?", [*params, limit, offset])
        return [entry_from_row(r) for r in rows]

    def count(self, where: str, params: list[Any]) -> int:
        return self.db.query(f"SELECT count(*) FROM memory m WHERE {where}", params)[0][0]

    def history(self, namespace: str, key: str) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT v.version, v.content, v.updated_at FROM memory_versions v JOIN memory m"
                             " ON m.rid = v.memory_rid WHERE m.namespace = ? AND m.key = ? ORDER BY v.version",
                             (namespace, key))
        return [{"version": r[0], "content": r[1], "updated_at": r[2]} for r in rows]


class Background:
    """Run ``fn(*args)`` in a thread; :meth:`result` joins it and returns (or re-raises)."""

    def __init__(self, fn: Any, *args: Any):
        self._out: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True, name="memory-embed")
        self._thread.start()

    def _run(self, fn: Any, args: tuple) -> None:
        try:
            self._out.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller in result()
            self._out.append((False, exc))

    def result(self) -> Any:
        self._thread.join()
        ok, value = self._out[0]
        if not ok:
            raise value
        return value


Embed = Callable[[list[Item]], dict[int, np.ndarray]]   # id(item) -> float32 vector
OwnerCheck = Callable[[str, str | None], None]          # (key, stored agent) -> raise if not the caller's


class Backend(Protocol):
    """The memory tables of one database (see :mod:`.sqlite` and :mod:`.postgres`)."""

    db: Database                 # has .conn, .query(sql, params), .transaction() (``?`` placeholders)
    dimensions: int              # the configured embedder's
    mismatch: Any                # EmbedderMismatchError when another embedder made the stored vectors, else None

    def ensure(self, embedder_name: str, model: str) -> None: ...
    def refresh(self) -> None: ...   # follow a re-embedding another process finished
    def write(self, items: list[Item], embed: Embed, owner: OwnerCheck, in_process: bool) -> int: ...
    def delete(self, namespace: str, key: str, owner: OwnerCheck) -> bool: ...
    def purge(self, conn: Any, namespace: str, agent_id: str | None = None) -> int: ...
    def get(self, namespace: str, key: str) -> Entry | None: ...
    def list(self, where: str, params: list[Any], tag: str | None, limit: int, offset: int) -> list[Entry]: ...
    def count(self, where: str, params: list[Any]) -> int: ...
    def history(self, namespace: str, key: str) -> list[dict[str, Any]]: ...
    def stats(self) -> dict[str, int]: ...
    def fts(self, query: str, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]: ...
    def vector(self, query: np.ndarray, flt: Any, where: str, params: list[Any], k: int) -> list[tuple[int, float]]: ...
    def rows(self, rids: list[int]) -> dict[int, Any]: ...
