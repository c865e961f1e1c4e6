"""Run options, the one builder every surface uses, and the errors a run raises.

Every surface builds a run's options the same way (:func:`run_options`): the built-in defaults, then the
surface's own defaults (headless surfaces run code in a subprocess and do not wait for a person), then the
fields the workspace config's ``agents`` section sets, then what the caller chose explicitly. The result
knows where each value came from (:attr:`RunOptions.sources`), so every surface can show a run's effective
options. Network clients (the server's REST and WebSocket) may set only :data:`NETWORK_OPTIONS`, and their
cassette paths stay inside the workspace (:func:`network_options`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, cast

from agentstack_lab.errors import AgentstackError, UsageError
from agentstack_lab.events import QUERY_KINDS
from agentstack_lab.validation import SQLITE_INT_MAX, as_dict

__all__ = ["RunOptions", "Attachment", "QUERY_KINDS", "ON_QUERY", "SURFACES", "NETWORK_OPTIONS", "run_options",
           "network_options", "parse_duration", "AgentRunError", "HeadlessQueryError", "BudgetExceededError",
           "AgentFailedError"]


ON_QUERY = ("fail", "wait", "auto")
"""Headless query policies: fail closed, wait for any surface (with a timeout), auto-approve."""

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any, name: str = "duration") -> float | None:
    """Seconds from a number or ``"250ms"``/``"90s"``/``"10m"``/``"1h"``; ``None`` stays ``None``."""
    if value is None:
        return None
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        unit = next((u for u in ("ms", "s", "m", "h", "d") if text.endswith(u)), "")
        try:
            seconds = float(text[: len(text) - len(unit)] if unit else text) * _UNITS.get(unit, 1.0)
        except ValueError:
            seconds = None
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"{name} must be a positive duration (seconds, or like 90s, 10m, 1h), got {value!r}")
    return seconds


class AgentRunError(AgentstackError, RuntimeError):
    """A run (or a forked agent) did not complete."""


class HeadlessQueryError(AgentRunError):
    """A headless run (``interactive=False``) needed an answer nobody gave: it fails closed.

    ``kind`` is the query kind that went unanswered (``"approval"``, ``"clarification"``, ...).
    """

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


class BudgetExceededError(AgentRunError):
    """A depth, breadth, agent-count, token or wall-clock budget was hit."""


class AgentFailedError(AgentRunError):
    """The root agent failed (the message is its error)."""


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """Where a run's root sits in another run's tree: a subtask a worker runs for a coordinator.

    The root agent gets ``agent_id``, ``parent_id`` and ``depth``; its events and agent rows are
    written under ``run_id`` (the coordinator's run), so ``rebuild_tree`` shows it in place.
    ``retry``: an earlier attempt may have logged text for this agent, which the first snapshot resets
    (on a first attempt the coordinator logged that snapshot already, when it queued the agent).
    """

    run_id: str
    parent_id: str
    agent_id: str
    depth: int
    retry: bool = False


@dataclass(kw_only=True)
class RunOptions:
    """Limits and behaviour of one run (defaults match the ``agents`` config section)."""

    max_depth: int = 2
    max_children: int = 4
    max_agents: int = 16
    max_tokens: int | None = None
    timeout_s: float | None = None
    auto_approve: bool = False
    subagents: bool = True
    interactive: bool = True
    answers: dict[str, Any] = field(default_factory=dict[str, Any])
    executor: str = "live"
    max_turns: int = 8
    final_question: bool = True
    identity: str | None = None  # id or display name of the persistent identity the run acts as
    on_query: str | None = None
    """What a question does when no answer was given up front: ``fail``, ``wait`` or ``auto``.

    ``None``: ``wait`` (for as long as ``decision_timeout``, default forever) when ``interactive``,
    else ``fail``. ``wait`` lets any surface answer (widget, ``agentstack-lab decisions``, MCP)."""
    decision_timeout: float | str | None = None
    """Seconds (or ``"90s"``, ``"10m"``, ``"1h"``) a question waits before it expires and the run fails closed."""
    coordinate: bool = False  # the root's subquestions go through the durable queue (engine/coordinate.py)
    max_workers: int = 4  # in-process workers a coordinated run may spawn (external workers come on top)
    record: str | None = None
    """Write every model request and streamed reply (and the tool results) to this cassette (JSON Lines)."""
    replay: str | None = None
    """Serve the model's replies from this cassette: no network, no key (see :mod:`agentstack_lab.providers.cassette`)."""
    replay_mode: str = "strict"
    """``strict``: a request the cassette lacks fails the agent; ``new_episodes``: ask the real provider, append."""
    cluster: Any = None
    """Where a coordinated run places its subagents instead of in-process workers: a Dask scheduler
    (``tcp://host:8786``), ``"local"`` (a LocalCluster for this run) or a ``distributed.Client``."""

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_children", "max_agents", "max_turns", "max_workers"):
            value = getattr(self, name)
            if (not isinstance(value, int) or isinstance(value, bool)
                    or not (1 if name in ("max_agents", "max_turns") else 0) <= value <= SQLITE_INT_MAX):
                raise ValueError(f"RunOptions.{name} must be a {'positive' if name in ('max_agents', 'max_turns') else 'non-negative'} "
                                 f"integer up to {SQLITE_INT_MAX}, got {value!r}")
        for name in ("auto_approve", "subagents", "interactive", "final_question", "coordinate"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"RunOptions.{name} must be true or false, got {getattr(self, name)!r}")
        # the fields as given: Python callers (and configs) pass anything, so each is checked as an object
        answers, max_tokens, timeout_s, identity = (cast(object, v) for v in (self.answers, self.max_tokens,
                                                                               self.timeout_s, self.identity))
        if not isinstance(answers, Mapping):
            raise ValueError(f"RunOptions.answers must be a mapping of query kind to answer, got {self.answers!r}")
        if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                       or not 0 < max_tokens <= SQLITE_INT_MAX):
            raise ValueError(f"RunOptions.max_tokens must be a positive integer or None, got {self.max_tokens!r}")
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                                      or not 0 < timeout_s < float("inf")):  # nan compares false: refused
            raise ValueError(f"RunOptions.timeout_s must be a finite number > 0 or None, got {self.timeout_s!r}")
        if self.executor not in ("live", "subprocess"):
            raise ValueError(f"RunOptions.executor must be 'live' or 'subprocess', got {self.executor!r}")
        if identity is not None and (not isinstance(identity, str) or not identity.strip()):
            raise ValueError(f"RunOptions.identity must be a non-empty identity id or name, got {self.identity!r}")
        if self.on_query is not None and self.on_query not in ON_QUERY:
            raise ValueError(f"RunOptions.on_query must be one of {', '.join(ON_QUERY)}, got {self.on_query!r}")
        if isinstance(self.cluster, str) and self.cluster != "local" and "://" not in self.cluster:
            raise ValueError(f"RunOptions.cluster must be a Dask scheduler address (tcp://host:8786) or 'local', "
                             f"got {self.cluster!r}")
        if self.cluster is not None and not isinstance(self.cluster, str) and not hasattr(self.cluster, "submit"):
            raise ValueError(f"RunOptions.cluster must be an address, 'local' or a distributed.Client, "
                             f"got {type(self.cluster).__name__}")
        self.decision_timeout = parse_duration(self.decision_timeout, "RunOptions.decision_timeout")
        self._check_cassettes()
        bad = sorted(set(self.answers) - set(QUERY_KINDS))
        if bad:
            raise ValueError(f"RunOptions.answers: unknown query kinds {bad}; expected {', '.join(QUERY_KINDS)}")

    def _check_cassettes(self) -> None:
        """``record``/``replay`` paths and ``replay_mode``: one clear line, and nothing written yet."""
        import os
        from pathlib import Path

        modes = ("strict", "new_episodes")
        if self.replay_mode == "none":  # vcrpy's name for strict
            self.replay_mode = "strict"
        if self.replay_mode not in modes:
            raise UsageError(f"RunOptions.replay_mode must be one of {', '.join(modes)}, got {self.replay_mode!r}")
        for name in ("record", "replay"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str | os.PathLike) or not str(cast(object, value)).strip():
                raise UsageError(f"RunOptions.{name} must be a cassette file path, got {value!r}")
            setattr(self, name, str(cast(object, value)))
        if self.replay is not None:
            path = Path(self.replay)
            if not path.is_file():
                raise UsageError(f"RunOptions.replay: cassette {path} does not exist")
        if self.record is not None:
            path = Path(self.record)
            if path.is_dir():
                raise UsageError(f"RunOptions.record: {path} is a folder; give a cassette file path")
            folder = next((p for p in path.absolute().parents if p.exists()), None)
            if folder is None or not folder.is_dir() or not os.access(folder, os.W_OK):
                raise UsageError(f"RunOptions.record: cannot write a cassette under {path.parent}")
        if self.record is not None and self.replay is not None and self.replay_mode != "new_episodes":
            raise UsageError("RunOptions: record and replay together need replay_mode='new_episodes' "
                             "(replay what the cassette has, record what it lacks)")

    @property
    def given(self) -> frozenset[str]:
        """The fields the caller set (``RunOptions(max_depth=1).given == {"max_depth"}``); the rest come from config."""
        return self.__dict__.get("_given", frozenset(f.name for f in fields(self)))

    @property
    def sources(self) -> dict[str, str]:
        """Where each field's value came from: ``default``, ``surface``, ``config`` or ``explicit``."""
        known: dict[str, str] = self.__dict__.get("_sources") or {}
        return {f.name: known.get(f.name, "explicit" if f.name in self.given else "default") for f in fields(self)}

    @property
    def decision_seconds(self) -> float | None:
        """:attr:`decision_timeout` in seconds (a text duration such as ``"10m"`` is parsed on construction)."""
        value = self.decision_timeout
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        """The effective options as plain JSON values (a cluster client shows as its type's name)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "cluster" and value is not None and not isinstance(value, str):
                value = type(value).__name__
            copied = as_dict(value)
            out[f.name] = dict(copied) if isinstance(value, dict) else value
        return out

    @property
    def query_policy(self) -> str:
        """The effective ``on_query`` policy (see :attr:`on_query`)."""
        return self.on_query or ("wait" if self.interactive else "fail")

    @classmethod
    def coerce(cls, value: Any, config: Any = None) -> RunOptions:
        """From ``RunOptions``, a dict, or ``None``, over the workspace config (see :func:`run_options`).

        A ``RunOptions`` built by :func:`run_options` (every field resolved) is returned as is; one made by
        hand contributes only the fields its caller set, so ``RunOptions(max_depth=1)`` keeps the config's
        other limits.
        """
        if isinstance(value, cls) and value.given == frozenset(f.name for f in fields(cls)):
            return value
        return run_options(config, given=value)


def _track_given(cls: type[RunOptions]) -> type[RunOptions]:
    """Wrap the generated ``__init__`` so an instance remembers which fields its caller passed."""
    generated = cls.__init__

    @functools.wraps(generated)
    def __init__(self: RunOptions, **kwargs: Any) -> None:
        self.__dict__["_given"] = frozenset(kwargs)
        generated(self, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


_track_given(RunOptions)

Surface = Literal["python", "notebook", "terminal", "mcp", "lab", "worker", "acp"]
SURFACES: tuple[str, ...] = ("python", "notebook", "terminal", "mcp", "lab", "worker", "acp")

_HEADLESS: dict[str, Any] = {"interactive": False, "executor": "subprocess"}
_SURFACE_DEFAULTS: dict[str, dict[str, Any]] = {
    "python": {}, "notebook": {}, "lab": {}, "acp": {"executor": "subprocess", "final_question": False},
    "terminal": _HEADLESS, "mcp": _HEADLESS, "worker": {**_HEADLESS, "final_question": False},
}
"""What a surface chooses when neither the config nor its caller does: headless surfaces (no person at a
widget) fail a question closed and run code in a subprocess; the config's ``agents`` section overrides these."""

NETWORK_OPTIONS: frozenset[str] = frozenset({
    "max_depth", "max_children", "max_agents", "max_tokens", "timeout_s", "auto_approve", "subagents", "answers",
    "executor", "max_turns", "final_question", "identity", "on_query", "decision_timeout", "coordinate",
    "max_workers", "record", "replay", "replay_mode"})
"""The options a network client (REST ``POST runs``, WebSocket ``start-agent``) may set; ``interactive``
and ``cluster`` come only from the server's side (config ``agents.cluster``)."""


def config_options(config: Any) -> dict[str, Any]:
    """The run options the workspace config's ``agents`` section sets explicitly (its file names them)."""
    agents = getattr(config, "agents", None)
    if agents is None:
        return {}
    names = {f.name for f in fields(RunOptions)}
    chosen = getattr(agents, "model_fields_set", None)
    present: set[str] = set(cast("set[str]", chosen)) if chosen is not None else set(cast("dict[str, Any]", vars(agents)))
    keys = present & names
    return {k: getattr(agents, k) for k in sorted(keys)}


def run_options(config: Any = None, *, surface: str = "python",
                given: RunOptions | Mapping[str, Any] | None = None) -> RunOptions:
    """The one options builder: built-in defaults < the surface's < the config's ``agents`` < ``given``.

    ``given``: what the caller chose (a mapping, or a ``RunOptions`` whose :attr:`~RunOptions.given` fields
    count). The result has every field resolved and records each one's source.

    Raises:
        UsageError: An unknown option or a bad value (one line naming it); nothing is started.
    """
    if surface not in _SURFACE_DEFAULTS:
        raise UsageError(f"unknown surface {surface!r}; expected one of {', '.join(SURFACES)}")
    names = [f.name for f in fields(RunOptions)]
    if isinstance(given, RunOptions):
        explicit = {k: getattr(given, k) for k in given.given}
    elif given is None:
        explicit: dict[str, Any] = {}
    elif isinstance(cast(object, given), Mapping):   # Python callers pass anything: refused below
        explicit = dict(given)
        unknown = sorted(set(explicit) - set(names))
        if unknown:
            raise UsageError(f"unknown run options {unknown}; valid: {', '.join(names)}")
    else:
        raise UsageError(f"options must be RunOptions or a dict, got {type(given).__name__}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, layer in (("surface", _SURFACE_DEFAULTS[surface]), ("config", config_options(config)),
                          ("explicit", explicit)):
        for key, value in layer.items():
            values[key], sources[key] = value, source
    try:
        options = RunOptions(**values)
    except UsageError:
        raise
    except (ValueError, TypeError) as exc:  # RunOptions' own checks: one line naming the field
        raise UsageError(str(exc)) from None
    options.__dict__["_given"] = frozenset(names)
    options.__dict__["_sources"] = sources
    return options


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def network_options(given: Any, root: Path) -> dict[str, Any]:
    """A network client's options, checked: only :data:`NETWORK_OPTIONS`, cassette paths inside ``root``.

    Keys may be snake_case or camelCase. ``record``/``replay`` are paths relative to the workspace folder
    (absolute paths and ``..`` refused); ``record`` never overwrites an existing file unless it is the
    ``replay`` cassette itself under ``replay_mode="new_episodes"`` (which appends what was new).

    Raises:
        UsageError: One line naming the option that is not allowed or not valid.
    """
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise UsageError(f"options must be a JSON object, got {type(given).__name__}")
    options: dict[str, Any] = {}
    given = cast("Mapping[Any, Any]", given)
    for key, value in given.items():
        name = _snake(str(key))
        if name == "cluster":
            raise UsageError("option cluster cannot be set by a network client; it comes from config agents.cluster")
        if name not in NETWORK_OPTIONS:
            raise UsageError(f"unknown or server-side run option {key!r}; a client may set: "
                             f"{', '.join(sorted(NETWORK_OPTIONS))}")
        options[name] = value
    base = root.resolve()
    for name in ("record", "replay"):
        value = options.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"option {name} must be a cassette path inside the workspace, got {value!r}")
        rel = Path(value)
        if rel.is_absolute() or ".." in rel.parts:
            raise UsageError(f"option {name} must be a path inside the workspace (no absolute path, no ..), "
                             f"got {value!r}")
        path = (base / rel).resolve()
        if base != path and base not in path.parents:  # a symlink leading out
            raise UsageError(f"option {name}: {value!r} leads outside the workspace")
        options[name] = os.fspath(path)
    record = options.get("record")
    if record is not None and Path(record).exists():
        appends = options.get("replay") == record and options.get("replay_mode") == "new_episodes"
        if not appends:
            raise UsageError(f"option record: {given.get('record')!r} exists; a client never overwrites a cassette "
                             "(record to a new file, or replay and record the same file with replay_mode new_episodes)")
    return options
