"""The workspace: one object owning the config, the SQLite store and the registries.

``Workspace.open()`` finds ``agentstack.config.json`` (walking up from the working
directory, or ``$AGENTSTACK_CONFIG``) and puts the database at
``.agentstack/agentstack.db`` next to it (or under the working directory when there
is no file). The database is opened on first use, and its absolute path is printed
to stderr the first time this process opens it (``announce=False`` keeps quiet; the notebook
passes ``announce="stdout"``, as it is information, not an error), with
"(new)" when the file is being created. It is never an in-memory database.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from agentstack_lab.config import Config, find_config_file, load_config

if TYPE_CHECKING:
    from agentstack_lab.embeddings.registry import Embedder
    from agentstack_lab.memory.api import Memory
    from agentstack_lab.memory.sessions import Sessions
    from agentstack_lab.store.connection import Database

__all__ = ["Workspace", "DB_DIRNAME", "DB_FILENAME"]

DB_DIRNAME = ".agentstack"
DB_FILENAME = "agentstack.db"


class Workspace:
    """Config + database + memory + sessions for one project folder. Pass it explicitly; close it when done."""

    _announced: ClassVar[set[str]] = set()   # db paths already shown by this process

    def __init__(self, root: Path, config: Config, db_path: Path, *, announce: bool | str = True):
        self.root = root
        self.config = config
        self.db_path = db_path
        self.announce = announce
        self._lock = threading.RLock()
        self._db: Database | None = None
        self._memory: Memory | None = None
        self._sessions: Sessions | None = None
        self._embedder: Embedder | None = None

    @classmethod
    def open(cls, path: str | Path | None = None, *, config: Config | None = None,
             announce: bool | str = True) -> Workspace:
        """Open the workspace of folder ``path`` (or the one found from the working directory).

        ``path`` may also name a ``.db`` file directly. ``config`` overrides the file lookup.
        """
        if path is not None:
            p = Path(path).expanduser().resolve()
            if p.suffix == ".db" or p.is_file():
                db_path = p
                root = p.parent.parent if p.parent.name == DB_DIRNAME else p.parent
            else:
                root, db_path = p, p / DB_DIRNAME / DB_FILENAME
            if config is None:
                config = load_config(start=root)
        else:
            file = find_config_file() if config is None else config.source
            root = file.parent if file is not None else Path.cwd().resolve()
            if config is None:
                config = load_config(file) if file is not None else Config()
            db_path = root / DB_DIRNAME / DB_FILENAME
        return cls(root, config, db_path, announce=announce)

    # --- lazily opened parts ------------------------------------------------------------------------
    @property
    def db(self) -> Database:
        """The workspace database (opened and migrated on first use)."""
        if self._db is None:
            with self._lock:
                if self._db is None:
                    from agentstack_lab.store.connection import Database

                    existed = Path(self.db_path).is_file()
                    self._db = Database(self.db_path)
                    key = str(self.db_path)
                    if self.announce and key not in Workspace._announced:
                        Workspace._announced.add(key)
                        print(f"agentstack-lab: using database {key}{'' if existed else ' (new)'}",
                              file=sys.stdout if self.announce == "stdout" else sys.stderr)
        return self._db

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from agentstack_lab.embeddings.registry import get_embedder

            cfg = self.config.memory
            self._embedder = get_embedder(cfg.embedder, dimensions=cfg.vector.dimensions, config=self.config)
        return self._embedder

    @property
    def memory(self) -> Memory:
        """The workspace memory, unscoped (use ``ws.memory.scoped(session_id, agent_id=...)`` for agents)."""
        if self._memory is None:
            with self._lock:
                if self._memory is None:
                    from agentstack_lab.memory.api import Memory

                    self._memory = Memory(self.db, embedder=self.embedder, config=self.config.memory)
        return self._memory

    @property
    def sessions(self) -> Sessions:
        if self._sessions is None:
            with self._lock:
                if self._sessions is None:
                    from agentstack_lab.memory.sessions import Sessions

                    self._sessions = Sessions(self.db, self.memory)
        return self._sessions

    def get_provider(self, name: str | None = None, **overrides: Any) -> Any:
        """The provider ``name`` (default ``providers.default``) built with this workspace's config."""
        from agentstack_lab.providers.registry import get_provider

        return get_provider(name or self.config.providers.default, config=self.config, **overrides)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
            self._db = self._memory = self._sessions = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace(root={str(self.root)!r}, db={str(self.db_path)!r})"
