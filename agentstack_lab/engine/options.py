"""Run options and the errors a run raises (re-exported by :mod:`agentstack_lab.engine.run`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from agentstack_lab.errors import AgentstackError, UsageError
from agentstack_lab.events import QUERY_KINDS

__all__ = ["RunOptions", "Attachment", "QUERY_KINDS", "ON_QUERY", "parse_duration", "AgentRunError", "HeadlessQueryError", "BudgetExceededError",
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
    answers: dict[str, Any] = field(default_factory=dict)
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
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name in ("max_agents", "max_turns") else 0):
                raise ValueError(f"RunOptions.{name} must be a {'positive' if name in ('max_agents', 'max_turns') else 'non-negative'} integer, got {value!r}")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens <= 0):
            raise ValueError(f"RunOptions.max_tokens must be a positive integer or None, got {self.max_tokens!r}")
        if self.timeout_s is not None and (isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, int | float)
                                           or not 0 < self.timeout_s < float("inf")):  # nan compares false: refused
            raise ValueError(f"RunOptions.timeout_s must be a finite number > 0 or None, got {self.timeout_s!r}")
        if self.executor not in ("live", "subprocess"):
            raise ValueError(f"RunOptions.executor must be 'live' or 'subprocess', got {self.executor!r}")
        if self.identity is not None and (not isinstance(self.identity, str) or not self.identity.strip()):
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
            if not isinstance(value, str | os.PathLike) or not str(value).strip():
                raise UsageError(f"RunOptions.{name} must be a cassette file path, got {value!r}")
            setattr(self, name, str(value))
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
    def query_policy(self) -> str:
        """The effective ``on_query`` policy (see :attr:`on_query`)."""
        return self.on_query or ("wait" if self.interactive else "fail")

    @classmethod
    def coerce(cls, value: Any, config: Any = None) -> RunOptions:
        """From ``RunOptions``, a dict, or ``None`` (then the workspace's ``agents`` config section)."""
        if isinstance(value, cls):
            return value
        base: dict[str, Any] = {}
        agents_cfg = getattr(config, "agents", None)
        if agents_cfg is not None:
            base = {f.name: getattr(agents_cfg, f.name) for f in fields(cls) if hasattr(agents_cfg, f.name)}
        if value is not None:
            if not isinstance(value, dict):
                raise TypeError(f"options must be RunOptions or a dict, got {type(value).__name__}")
            unknown = sorted(set(value) - {f.name for f in fields(cls)})
            if unknown:
                raise ValueError(f"unknown run options {unknown}; valid: {', '.join(f.name for f in fields(cls))}")
            base.update(value)
        return cls(**base)
