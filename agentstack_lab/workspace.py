"""The workspace: one object owning the config, the SQLite store and the registries.

The registries (``ws.agent_types``, ``ws.providers``, ``ws.embedders``) are built once per
workspace, on first use, by loading the plugins (``plugins.load_plugins``, entry point group
``agentstack_lab``) and calling their three ``register_*`` hooks; the registry modules never
import the plugin machinery. Every surface and the engine ask the workspace, so a custom agent
type registered once (``ws.agent_types.register(...)`` or a plugin) is visible to all of them.

``Workspace.open()`` finds ``agentstack.config.json`` (walking up from the working
directory, or ``$AGENTSTACK_CONFIG``) and puts the database at
``.agentstack/agentstack.db`` next to it. With no config file it uses the nearest
``.agentstack/agentstack.db`` walking up from the working directory (below the home folder, as
git finds ``.git``: a notebook in ``project/sub/`` shares ``project/``'s runs and memory with the
terminal and the Agents panel), else makes one in the working directory. The database is opened on first use, and its absolute path is printed
to stderr the first time this process opens it (``announce=False`` keeps quiet; the notebook
passes ``announce="stdout"``, as it is information, not an error, and then prints it only when the
file is new or is not the one in the notebook's own folder), with "(new)" when the file is being created. It is never an in-memory database.

An IPython shell (a Jupyter kernel, terminal IPython) has one workspace that Python code and the
magics share: :func:`for_shell` opens it on first use and keeps it on the shell, and the module is
callable, so ``agentstack_lab.workspace()`` returns it (:func:`current`): a type or provider
registered on it from code is one ``%agent`` can use. Outside IPython each call opens the
workspace of the working directory afresh; keep that object and pass it on.
"""

from __future__ import annotations

import logging
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from agentstack_lab.config import Config, find_config_file, load_config

if TYPE_CHECKING:
    import pluggy

    from agentstack_lab.agents.identity import IdentityService
    from agentstack_lab.agents.registry import AgentRegistry
    from agentstack_lab.agents.spawner import Spawner
    from agentstack_lab.decisions import Decisions
    from agentstack_lab.embeddings.registry import Embedder, EmbedderRegistry
    from agentstack_lab.memory.api import Memory
    from agentstack_lab.memory.sessions import Sessions
    from agentstack_lab.providers.base import Provider
    from agentstack_lab.providers.registry import ProviderRegistry
    from agentstack_lab.store.connection import SQLiteDatabase
    from agentstack_lab.store.protocol import Database

__all__ = ["Workspace", "Registries", "build_registries", "current", "for_shell", "release_shell", "DB_DIRNAME",
           "DB_FILENAME"]

log = logging.getLogger(__name__)

DB_DIRNAME = ".agentstack"
DB_FILENAME = "agentstack.db"


@dataclass(frozen=True, kw_only=True)
class Registries:
    """The three registries of one workspace, built together from one plugin manager."""

    agent_types: AgentRegistry
    providers: ProviderRegistry
    embedders: EmbedderRegistry


def build_registries(pm: pluggy.PluginManager) -> Registries:
    """Fill fresh registries from the ``register_*`` hooks of ``pm``.

    A registration the registry refuses (a taken name, a core agent type, a malformed definition)
    is skipped with a warning naming the plugin; the rest load.
    """
    from agentstack_lab.agents.registry import AgentRegistry
    from agentstack_lab.embeddings.registry import EmbedderRegistry
    from agentstack_lab.errors import AgentstackError
    from agentstack_lab.plugins import collect
    from agentstack_lab.providers.registry import ProviderRegistry

    out = Registries(agent_types=AgentRegistry(), providers=ProviderRegistry(), embedders=EmbedderRegistry())
    hooks: tuple[tuple[str, str, Callable[..., Any]], ...] = (
        ("register_providers", "a provider", out.providers.register),
        ("register_embedders", "an embedder", out.embedders.register),
        ("register_agent_types", "an agent type", out.agent_types.register))
    for hook, what, register in hooks:
        for call in collect(hook, pm):
            try:
                register(*call.args, **call.kwargs)
            except (AgentstackError, TypeError) as exc:
                log.warning("agentstack-lab plugin %r: skipped %s: %s", call.plugin, what, exc)
    return out


class Workspace:
    """Config + database + memory + sessions for one project folder. Pass it explicitly; close it when done."""

    # Process-wide on purpose: "print the database path the first time THIS PROCESS opens it" is a
    # fact about the process, not about one Workspace object (a notebook may open several).
    _announced: ClassVar[set[str]] = set()

    def __init__(self, root: Path, config: Config, db_path: Path, *, announce: bool | str = True,
                 plugins: pluggy.PluginManager | None = None):
        self.root = root
        self.config = config
        self.db_path = db_path
        self.announce = announce
        self._lock = threading.RLock()
        self._plugin_manager = plugins
        self._registries: Registries | None = None
        self._db: SQLiteDatabase | None = None
        self._memory_db: Database | None = None   # a PgDatabase when memory.backend = "postgres"
        self._memory: Memory | None = None
        self._sessions: Sessions | None = None
        self._embedder: Embedder | None = None

    @classmethod
    def open(cls, path: str | Path | None = None, *, config: Config | None = None,
             announce: bool | str = True, plugins: pluggy.PluginManager | None = None) -> Workspace:
        """Open the workspace of folder ``path`` (or the one found from the working directory).

        ``path`` may also name a ``.db`` file directly. ``config`` overrides the file lookup.
        ``plugins`` is the plugin manager to build the registries from (default: the built-ins
        plus every installed entry-point plugin, loaded on first use).
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
            root = file.parent if file is not None else existing_root(Path.cwd().resolve())   # as root_for()
            if config is None:
                config = load_config(file) if file is not None else Config()
            db_path = root / DB_DIRNAME / DB_FILENAME
        return cls(root, config, db_path, announce=announce, plugins=plugins)

    # --- registries, built once from the plugin hooks -----------------------------------------------
    @property
    def plugins(self) -> pluggy.PluginManager:
        """The plugin manager the registries were built from (loaded on first use)."""
        if self._plugin_manager is None:
            with self._lock:
                if self._plugin_manager is None:
                    from agentstack_lab.plugins import load_plugins

                    self._plugin_manager = load_plugins(disabled=self.config.plugins.disabled)
        return self._plugin_manager

    def _built(self) -> Registries:
        if self._registries is None:
            with self._lock:
                if self._registries is None:
                    self._registries = build_registries(self.plugins)
        return self._registries

    @property
    def agent_types(self) -> AgentRegistry:
        """Agent types: the 11 core ones plus plugins' and any registered on this workspace."""
        return self._built().agent_types

    @property
    def providers(self) -> ProviderRegistry:
        """Provider factories: the built-ins plus plugins'; build one with :meth:`get_provider`."""
        return self._built().providers

    @property
    def embedders(self) -> EmbedderRegistry:
        """Embedder factories: the built-ins plus plugins'; the configured one is :attr:`embedder`."""
        return self._built().embedders

    # --- lazily opened parts ------------------------------------------------------------------------
    @property
    def db(self) -> SQLiteDatabase:
        """The workspace database (opened and migrated on first use)."""
        if self._db is None:
            with self._lock:
                if self._db is None:
                    from agentstack_lab.store.connection import SQLiteDatabase

                    existed = Path(self.db_path).is_file()
                    self._db = SQLiteDatabase(self.db_path)
                    key = str(self.db_path)
                    # the notebook says so only when it is news: a new file, or one outside the notebook's folder
                    usual = (self.announce == "stdout" and existed
                             and Path(self.db_path).resolve().parent.parent == Path.cwd().resolve())
                    if self.announce and not usual and key not in Workspace._announced:
                        Workspace._announced.add(key)
                        print(f"agentstack-lab: using database {key}{'' if existed else ' (new)'}",
                              file=sys.stdout if self.announce == "stdout" else sys.stderr)
        return self._db

    @property
    def memory_db(self) -> Any:
        """Where memory and sessions live: :attr:`db`, or the team's PostgreSQL (``memory.backend``)."""
        cfg = self.config.memory
        if cfg.backend != "postgres":
            return self.db
        if self._memory_db is None:
            with self._lock:
                if self._memory_db is None:
                    from agentstack_lab.config import ConfigError
                    from agentstack_lab.memory.backends.postgres import PgDatabase

                    pg = cfg.postgres
                    if pg.dsn is None or not pg.dsn.get_secret_value().strip():
                        raise ConfigError("memory.postgres.dsn: required when memory.backend is 'postgres'")
                    self._memory_db = PgDatabase(pg.dsn.get_secret_value(), connect_timeout=pg.connect_timeout)
        return self._memory_db

    @property
    def embedder(self) -> Embedder:
        """The embedder ``memory.embedder`` names (with ``memory.embedder_model``), built once from :attr:`embedders`."""
        if self._embedder is None:
            cfg = self.config.memory
            model = {"model": cfg.embedder_model} if cfg.embedder_model is not None else {}
            self._embedder = self.embedders.build(cfg.embedder, dimensions=cfg.vector.dimensions, config=self.config,
                                                  **model)
        return self._embedder

    @property
    def memory(self) -> Memory:
        """The workspace memory, unscoped (use ``ws.memory.scoped(session_id, agent_id=...)`` for agents)."""
        if self._memory is None:
            with self._lock:
                if self._memory is None:
                    from agentstack_lab.memory.api import Memory

                    self._memory = Memory(self.memory_db, embedder=self.embedder, config=self.config.memory)
        return self._memory

    @property
    def sessions(self) -> Sessions:
        if self._sessions is None:
            with self._lock:
                if self._sessions is None:
                    from agentstack_lab.memory.sessions import Sessions

                    self._sessions = Sessions(self.memory_db, self.memory)
        return self._sessions

    @property
    def session_lookup(self) -> Callable[[str], bool] | None:
        """How tasks check a session id: ``None`` when sessions live in :attr:`db`, else a backend lookup.

        In :attr:`db` the check runs in the task's own transaction; with PostgreSQL memory the session
        is looked up there, as ``tasks.session_id`` cannot hold a foreign key to another database.
        """
        if self.config.memory.backend != "postgres":
            return None
        return lambda session_id: self.sessions.get(session_id) is not None

    @property
    def spawner(self) -> Spawner:
        """Agents persisted in this workspace (``agents`` table), checked against :attr:`agent_types`."""
        from agentstack_lab.agents.spawner import Spawner

        return Spawner(self.db, self.agent_types)

    @property
    def identities(self) -> IdentityService:
        """Persistent agent identities of this workspace, checked against :attr:`agent_types`."""
        from agentstack_lab.agents.identity import IdentityService

        return IdentityService(self.db, self.agent_types)

    @property
    def decisions(self) -> Decisions:
        """The persisted decision queue: one object per workspace, so an in-process answer wakes its waiter at once."""
        from agentstack_lab.decisions import decisions_for

        return decisions_for(self)

    def provenance(self, name: str | None = None, run_id: str | None = None, *, limit: int | None = None) -> Any:
        """Which run, agent and tool call created, changed or deleted kernel variables, and the undos: a DataFrame.

        Oldest first; ``name`` and ``run_id`` filter, ``limit`` keeps the newest rows (pandas imported here).
        """
        from agentstack_lab.store import provenance

        return provenance.frame(provenance.read(self.db, name=name, run_id=run_id, limit=limit))

    def get_provider(self, name: str | None = None, **overrides: Any) -> Provider:
        """The provider ``name`` (default ``providers.default``) built from :attr:`providers` with this config."""
        return self.providers.build(name or self.config.providers.default, config=self.config, **overrides)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
            if self._memory_db is not None:
                self._memory_db.close()
            self._db = self._memory = self._sessions = self._memory_db = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace(root={str(self.root)!r}, db={str(self.db_path)!r})"


def root_for(start: Path) -> Path:
    """The workspace folder ``Workspace.open()`` would use from working directory ``start``.

    For surfaces that serve a folder other than their own working directory (the Jupyter server's root,
    an ACP session's ``cwd``, the kernels of ``workflow run --cwd``): the same rule, so they and the
    kernels they start share one workspace.
    """
    file = find_config_file(start)
    return file.parent if file is not None else existing_root(start.resolve())


def existing_root(here: Path) -> Path:
    """The nearest of ``here`` and its parents holding ``.agentstack/agentstack.db``, else ``here``.

    The walk stops below the home folder and the filesystem's root (only ``here`` itself may be either):
    a stray ``~/.agentstack`` does not become every project's workspace.
    """
    home = Path.home().resolve()
    for folder in (here, *here.parents):
        if folder != here and (folder == home or folder.parent == folder):
            break
        if (folder / DB_DIRNAME / DB_FILENAME).is_file():
            return folder
    return here


# -- the workspace of an IPython shell -------------------------------------------------------------
_SHELL_ATTR = "_agentstack_lab_workspace"  # kept on the shell object: per kernel, not per process


def for_shell(shell: Any) -> Workspace:
    """The workspace ``shell``'s code and magics share, opened on first use (its path printed to stdout then)."""
    ws = getattr(shell, _SHELL_ATTR, None)
    if ws is None:
        ws = Workspace.open(announce="stdout")  # information in a notebook, not an error box
        setattr(shell, _SHELL_ATTR, ws)
    return ws


def release_shell(shell: Any) -> None:
    """Close and forget ``shell``'s workspace (``%unload_ext``); the next use opens it again."""
    ws = getattr(shell, _SHELL_ATTR, None)
    if ws is not None:
        ws.close()
        delattr(shell, _SHELL_ATTR)


def current() -> Workspace:
    """The workspace of this kernel, the one ``%agent`` uses; outside IPython, ``Workspace.open()`` of the working directory.

    In an IPython shell every call returns the same object (do not close it: the magics use it too).
    Outside IPython nothing is shared: each call opens the workspace found from the working
    directory (``agentstack.config.json`` walking up, else the nearest ``.agentstack/`` above, else here); close it
    when done.
    """
    ipython = sys.modules.get("IPython")  # not imported: certainly not inside IPython
    shell = ipython.get_ipython() if ipython is not None else None
    return Workspace.open() if shell is None else for_shell(shell)


class _CallableModule(types.ModuleType):
    """This module, callable: ``agentstack_lab.workspace()`` is :func:`current`.

    The package root cannot hold a function named ``workspace``: importing this module sets the
    package's ``workspace`` attribute to the module, so the module itself answers the call.
    """

    def __call__(self) -> Workspace:
        return current()


sys.modules[__name__].__class__ = _CallableModule
