"""Workspace configuration: ``agentstack.config.json``, validated with pydantic.

The file is found by walking up from the working directory (or named by the
``AGENTSTACK_CONFIG`` environment variable). String values may use ``${VAR}`` or
``${VAR:-default}`` to read the environment. Every field has a default, so no
file is needed. A wrong type or an unknown key is a :class:`ConfigError` whose
message names the field path, e.g. ``memory.vector.dimensions: expected int``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentstack_lab.errors import AgentstackError

__all__ = ["Config", "ConfigError", "CONFIG_FILENAME", "check_names", "find_config_file", "load_config",
           "mask_secrets", "CodeClass", "BuiltinDeny", "ApprovalConfig", "ApprovalRuleConfig"]

CONFIG_FILENAME = "agentstack.config.json"
ENV_VAR = "AGENTSTACK_CONFIG"


class ConfigError(AgentstackError, ValueError):
    """The configuration file is missing, malformed or invalid; the message names the field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: Any) -> Any:
        """``true`` is not a number here (pydantic's lax mode would read it as 1)."""
        if isinstance(value, bool):
            annotation = cls.model_fields[info.field_name].annotation
            kinds = {annotation, *get_args(annotation)}
            if int in kinds or float in kinds:
                raise PydanticCustomError("int_type" if int in kinds else "float_type", "not a number")
        return value


# --- memory -------------------------------------------------------------------------------------
class VectorConfig(_Section):
    dimensions: int = Field(default=384, ge=8, le=8192)
    cache: bool = True  # False: search with sqlite-vec's own KNN (no index beside the table; memory/vectors.py)
    # "shared": memory-mapped index files shared by every process (PQ + exact rescoring, memory/index.py);
    # "exact": an exact float32 copy of the table in each process (recall 1.0, ~1.5 GB per process at 1M)
    index: Literal["shared", "exact"] = "shared"


class HybridConfig(_Section):
    # how much keyword and vector evidence count in a hybrid score, 1 - (1 - fts)^a (1 - vector)^b with a, b
    # these weights over the larger one (memory/scores.py)
    fts_weight: float = Field(default=1.0, ge=0)
    # the vector side's weight (see fts_weight)
    vector_weight: float = Field(default=1.0, ge=0)
    # reciprocal rank fusion's k: orders hybrid hits of equal score
    rrf_k: int = Field(default=60, ge=1)
    # vector hits below this cosine similarity are dropped (unrelated entries add only noise); None: the
    # embedder's calibrated floor (hash: 0.2 for 1-3 word queries, 0.35 longer; MiniLM and others: 0.3;
    # see memory/scores.py)
    min_vector_score: float | None = Field(default=None, ge=-1, le=1)


class PostgresConfig(_Section):
    # libpq DSN or URI of the team database, e.g. "postgresql://me:${PGPASSWORD}@db.team:5432/agents";
    # a secret (it may carry the password): masked in `config show`, never logged
    dsn: SecretStr | None = None
    index: Literal["hnsw", "exact"] = "hnsw"   # pgvector HNSW (approximate, iterative scan) or an exact scan
    ef_search: int = Field(default=100, ge=1, le=1000)   # hnsw.ef_search: candidates per query (recall vs speed)
    connect_timeout: float = Field(default=10.0, gt=0)


class MemoryConfig(_Section):
    # where memory and sessions live: the workspace's SQLite file, or a team's PostgreSQL + pgvector
    # (engine, agents, tasks and events stay in the SQLite file either way)
    backend: Literal["sqlite", "postgres"] = "sqlite"
    postgres: PostgresConfig = Field(default_factory=PostgresConfig)
    embedder: str = "hash"
    # the embedder's model, e.g. "text-embedding-3-large" (openai) or "nomic-embed-text" (ollama); None: the
    # embedder's default (openai: text-embedding-3-small, ollama: all-minilm, local: all-MiniLM-L6-v2). A memory
    # embedded with another model or dimension keeps keyword search; `agentstack-lab memory reembed` moves it over
    embedder_model: str | None = Field(default=None, min_length=1)
    # largest entry content in UTF-8 bytes (store, store_many, every surface); checked before any work
    max_entry_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    vector: VectorConfig = Field(default_factory=VectorConfig)
    hybrid: HybridConfig = Field(default_factory=HybridConfig)


# --- providers ----------------------------------------------------------------------------------
class ProviderConfig(_Section):
    model: str | None = None
    api_key: SecretStr | None = None
    base_url: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0)


class CliProviderConfig(_Section):
    timeout: float = Field(default=300.0, gt=0)


class AcpProviderConfig(_Section):
    # the ACP agent's command and arguments, e.g. ["agentstack-lab", "acp"] or ["gemini", "--experimental-acp"]
    command: list[str] = Field(default_factory=list[str])
    # the folder its sessions open in (default: the current folder)
    cwd: str | None = None
    # seconds one model call may take; then the session is cancelled and the agent stopped
    timeout: float = Field(default=600.0, gt=0)


class ProvidersConfig(_Section):
    default: str = "scripted"
    anthropic: ProviderConfig = Field(default_factory=ProviderConfig)
    openai: ProviderConfig = Field(default_factory=ProviderConfig)
    ollama: ProviderConfig = Field(default_factory=ProviderConfig)
    cli: CliProviderConfig = Field(default_factory=CliProviderConfig)
    acp: AcpProviderConfig = Field(default_factory=AcpProviderConfig)


# --- agents and services ------------------------------------------------------------------------
class AgentsConfig(_Section):
    default_type: str = "researcher"
    max_depth: int = Field(default=2, ge=0)
    max_children: int = Field(default=4, ge=0)
    max_agents: int = Field(default=16, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float | None = Field(default=None, gt=0)
    auto_approve: bool = False
    executor: Literal["live", "subprocess"] = "live"
    max_turns: int = Field(default=8, ge=1)
    # the longest prompt a run takes (any surface); a longer one is refused in one line before anything starts
    max_prompt_chars: int = Field(default=1_000_000, ge=1)
    # a question nobody answered up front: fail closed, wait for any surface, auto-approve (unset: each
    # surface's own choice, wait where a person is at a widget, fail on headless surfaces)
    on_query: Literal["fail", "wait", "auto"] | None = None
    # seconds an unanswered question waits, then fails closed
    decision_timeout: float | None = Field(default=None, gt=0)
    max_workers: int = Field(default=4, ge=0)  # in-process workers of a coordinated run
    # Dask scheduler where coordinated runs (--coordinate) place their subagents ("tcp://host:8786" or
    # "local"); None: in-process workers and any `agentstack-lab worker` process
    cluster: str | None = None

    @field_validator("cluster")
    @classmethod
    def _cluster_address(cls, value: str | None) -> str | None:
        if value is not None and value != "local" and "://" not in value:
            raise PydanticCustomError("cluster", "must be a Dask scheduler address like tcp://host:8786, or 'local'")
        return value


class DriftConfig(_Section):
    """Drift detection (docs/tasks.md, ``tasks/drift.py``): a subtask whose input repeats an ancestor's."""

    enabled: bool = False
    threshold: float = Field(default=0.95, ge=0, le=1)
    warning_threshold: float | None = Field(default=None, ge=0, le=1)
    ancestor_depth: int = Field(default=3, ge=1)
    behavior: Literal["warn", "prevent"] = "warn"

    @model_validator(mode="after")
    def _warning_below_threshold(self) -> DriftConfig:
        if self.warning_threshold is not None and self.warning_threshold >= self.threshold:
            raise PydanticCustomError("warning_threshold", "warning_threshold must be below threshold")
        return self


class ConsensusConfig(_Section):
    """Consensus checkpoints (docs/tasks.md, ``tasks/consensus.py``): risky subtasks wait for a reviewer."""

    enabled: bool = False
    require_for_risk_levels: list[Literal["low", "medium", "high"]] = Field(default_factory=lambda: ["high", "medium"])
    reviewer_strategy: Literal["human", "adversarial", "auto"] = "adversarial"
    timeout_s: float = Field(default=300.0, gt=0)
    max_depth: int = Field(default=5, ge=1)
    auto_reject: bool = False
    high_risk_agent_types: list[str] = Field(default_factory=lambda: ["coder", "devops", "security-auditor"])
    medium_risk_agent_types: list[str] = Field(default_factory=lambda: ["architect", "coordinator", "analyst"])
    high_risk_patterns: list[str] = Field(default_factory=lambda: [
        "delete", "remove", "drop", "deploy", "production", "credentials", "secret", "password", "token",
        "api key"])
    medium_risk_patterns: list[str] = Field(default_factory=lambda: ["modify", "update", "change", "configure",
                                                                      "install"])


class WorkflowsConfig(_Section):
    max_iterations: int = Field(default=3, ge=1)
    cell_timeout: float = Field(default=600, gt=0)
    pool_size: int = Field(default=2, ge=1)
    # Dask scheduler for `workflow run` batches ("tcp://host:8786", or "local" for a LocalCluster); None: local pool
    cluster: str | None = None


class MonitoringConfig(_Section):
    """The resource-exhaustion monitor (docs/tasks.md, ``monitoring/resources.py``): per-agent limits.

    Each limit's use is a ratio; at ``warning_at`` of any limit the agent is badged (phase ``warning``),
    at ``intervention_at`` it is paused and a decision "resume or stop?" is opened, at
    ``termination_at`` it is stopped with the reason. Defaults are the seed's.
    """

    enabled: bool = True
    max_files_accessed: int = Field(default=50, ge=1)
    max_api_calls: int = Field(default=100, ge=1)
    max_subtasks_spawned: int = Field(default=20, ge=1)
    max_time_without_deliverable_s: float = Field(default=1800.0, gt=0)
    max_tokens_consumed: int = Field(default=500_000, ge=1)
    warning_at: float = Field(default=0.8, gt=0)
    intervention_at: float = Field(default=1.0, gt=0)
    termination_at: float = Field(default=1.5, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> MonitoringConfig:
        if not self.warning_at <= self.intervention_at <= self.termination_at:
            raise PydanticCustomError("phase_order", "need warning_at <= intervention_at <= termination_at")
        return self


class WorkflowTriggerConfig(_Section):
    """A workflow trigger (docs/tasks.md): when a hook event's context matches ``when``, run ``workflow``."""

    id: str = Field(min_length=1)
    name: str = ""
    on: Literal["session_start", "session_end", "pre_task", "post_task"] = "post_task"
    when: dict[str, Any] = Field(default_factory=dict)  # field -> value (or list of values) of the hook context
    workflow: str = Field(min_length=1)  # a notebook path (relative to the workspace) or a built-in name
    parameters: dict[str, Any] = Field(default_factory=dict)


class HooksConfig(_Section):
    """Lifecycle hooks (docs/tasks.md, ``hooks.py``): which events run, and the workflow triggers."""

    session_start: bool = True
    session_end: bool = True
    pre_task: bool = True
    post_task: bool = True
    workflow: bool = True
    triggers: list[WorkflowTriggerConfig] = Field(default_factory=list)


class PluginsConfig(_Section):
    """Plugins (``plugins.py``): entry-point names to leave out of every hook (``default`` cannot be)."""

    disabled: list[str] = Field(default_factory=list)


class UndoConfig(_Section):
    """Undo of what agent code did to the live kernel (``engine/provenance.py``)."""

    # a mentioned mutable value bigger than this is not copied before agent code runs: undo cannot
    # restore it if changed in place (listed on the approval card); 0 snapshots nothing
    max_snapshot_bytes: int = Field(default=256 * 1024 * 1024, ge=0)


class EngineConfig(_Section):
    """The engine's own settings (limits of a run are under ``agents``)."""

    undo: UndoConfig = Field(default_factory=UndoConfig)
    # how long a run keeps retrying an event-log write that fails (disk full, a locked or read-only
    # database) before it stops, failed, saying which events are not stored
    event_log_retry_s: float = Field(default=30.0, gt=0)


CodeClass = Literal["read_only", "rebinds", "mutates", "file_read", "file_write", "write_outside", "file_delete",
                    "network", "subprocess", "imports", "dynamic", "unknown"]
"""What a code cell does, as the approval classifier (``approval/classify.py``) names it."""

BuiltinDeny = Literal["deny-subprocess", "deny-network", "deny-delete", "deny-write-outside"]
"""The built-in deny rules (``approval/rules.py``); a rule lifts one only by naming it in ``lifts``."""

DEFAULT_RULE_IDS = ("allow-read-only",)
_RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


class ApprovalRuleConfig(_Section):
    """One approval rule: when it matches a python call, its ``action`` decides (the last match wins).

    ``any_of``: the cell does at least one of these; ``only``: it does nothing but these; ``code``: a
    regular expression found in the code. A rule needs at least one of the three; all given must hold.
    """

    id: str = Field(min_length=1, max_length=80)
    # dry_run_then_allow: run the code in a sandboxed fork of the kernel first; allow it only if that run was
    # clean (finished, no error, nothing refused), else ask a person (never auto-approved)
    action: Literal["allow", "ask", "deny", "dry_run_then_allow"]
    any_of: list[CodeClass] | None = None
    only: list[CodeClass] | None = None
    code: str | None = None
    # built-in deny rules this rule lifts when it is the one that decides (an explicit, named exception)
    lifts: list[BuiltinDeny] = Field(default_factory=list[BuiltinDeny])
    # only runs in this session (its id); unset: every run of the workspace
    session: str | None = None
    description: str = ""

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _RULE_ID.match(value):
            raise PydanticCustomError("rule_id", "a rule id is letters, digits and _ . : - (starting with a "
                                      "letter or digit)")
        if value in get_args(BuiltinDeny) or value in DEFAULT_RULE_IDS:
            raise PydanticCustomError("rule_id", "{id} is a built-in rule's id; name yours differently",
                                      {"id": value})
        return value

    @field_validator("code")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise PydanticCustomError("regex", "not a regular expression: {why}", {"why": str(exc)}) from None
        return value

    @model_validator(mode="after")
    def _matches_something(self) -> ApprovalRuleConfig:
        if self.any_of is None and self.only is None and self.code is None:
            raise PydanticCustomError("rule_match", "a rule needs any_of, only or code to match on")
        return self


class ApprovalConfig(_Section):
    """Rules that decide the python tool's obvious cases before a person is asked (``approval/``).

    Evaluated in order after the default ``allow-read-only`` rule; the last matching rule wins. The
    built-in deny rules (subprocess, network, deletes, writes outside the working folder) apply unless
    the deciding rule names them in ``lifts``; ``auto_approve`` does not lift them. ``dry_run``: before
    a person is asked, run the code in a sandboxed fork of the live kernel (``engine/sandbox.py``) and
    show what it would do on the approval card.
    """

    # ordered rules, each {id, action: allow|ask|deny, any_of, only, code, lifts, session}; see docs/approval.md
    rules: list[ApprovalRuleConfig] = Field(default_factory=list[ApprovalRuleConfig])
    # False: no default rule, so read-only code is asked about like any other (the built-in denies stay)
    allow_read_only: bool = True
    # before asking, a dry run in a sandboxed fork of the live kernel; its report goes on the approval card
    dry_run: bool = False

    @field_validator("rules")
    @classmethod
    def _unique_ids(cls, value: list[ApprovalRuleConfig]) -> list[ApprovalRuleConfig]:
        seen: set[str] = set()
        for rule in value:
            if rule.id in seen:
                raise PydanticCustomError("rule_id", "two rules have the id {id}", {"id": rule.id})
            seen.add(rule.id)
        return value


class NotebookConfig(_Section):
    """The notebook surface (``notebook/cellruns.py``).

    ``rerun``: what re-running an ``%agent`` cell or clearing its output does to the run it showed:
    ``stop`` it, or ``keep`` it going and list it in the cell's next output.
    """

    rerun: Literal["stop", "keep"] = "stop"


class PriceConfig(_Section):
    """One model's price in USD per million tokens, for the cost each view shows (``providers/prices.py``).

    ``prices`` maps a provider name to models, e.g. ``{"anthropic": {"claude-sonnet-4-6": {"input": 3,
    "output": 15}}, "ollama": {"*": {"input": 0, "output": 0}}}``; ``"*"`` prices every model of that
    provider. An entry replaces the shipped price of that model; a dated snapshot of a model
    (``claude-sonnet-4-5-20250929``) costs what the model does.
    """

    input: float = Field(ge=0)   # USD per million input tokens (not read from the prompt cache)
    output: float = Field(ge=0)  # USD per million output tokens
    # USD per million input tokens read from the prompt cache (None: the input price)
    cache_read: float | None = Field(default=None, ge=0)
    # USD per million input tokens written to the prompt cache (None: the input price)
    cache_write: float | None = Field(default=None, ge=0)
    date: str | None = None  # when the price was taken, shown beside it (None: "config")


class Config(_Section):
    """The whole configuration; every section is defaulted.

    Every field has an effect somewhere (a section is added with the code that reads it), so a file
    that sets an unknown key is told so instead of being silently ignored. ``drift`` and ``consensus``
    are read by ``tasks/`` and the engine's ``gate.py``; ``monitoring`` by ``monitoring/``; ``hooks``
    by ``hooks.py``; ``plugins.disabled`` by ``plugins.py`` and the workspace; ``engine.undo`` by the
    live executor's journal (set by each run); ``notebook.rerun`` by the notebook surface; ``approval`` by
    ``approval/`` through the python tool's gate (``approval.dry_run`` through the live executor); ``prices``
    by every view that shows a cost (``providers/prices.py``).
    """

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    consensus: ConsensusConfig = Field(default_factory=ConsensusConfig)
    workflows: WorkflowsConfig = Field(default_factory=WorkflowsConfig)
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    notebook: NotebookConfig = Field(default_factory=NotebookConfig)
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    # USD per million tokens by provider and model, over the shipped table (see PriceConfig)
    prices: dict[str, dict[str, PriceConfig]] = Field(default_factory=dict[str, dict[str, PriceConfig]])

    _source: Path | None = PrivateAttr(default=None)
    # the config file's own text of every value that came from ${VAR}, by path: shown instead of the value
    _templates: dict[tuple[str, ...], str] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> Path | None:
        """The file this configuration came from (``None``: defaults only)."""
        return self._source

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: Path | None = None,
                  env: dict[str, str] | None = None) -> Config:
        """Validate ``data`` (after ``${VAR}`` interpolation); raise :class:`ConfigError` naming the field."""
        env = dict(os.environ) if env is None else env
        if not isinstance(data, dict):
            raise ConfigError(f"{source or 'config'}: expected a JSON object at the top level")
        filled: set[tuple[str, ...]] = set()
        raw = data
        data = _interpolate(data, env, (), filled)
        try:
            cfg = cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_format_errors(exc, source, filled)) from None
        cfg._source = source
        cfg._templates = {path: _at_path(raw, path) for path in filled}
        return cfg

    def from_environment(self, *path: str) -> bool:
        """Whether the value at ``path`` (e.g. ``"providers", "default"``) came from a ``${VAR}``."""
        return any(path[:len(p)] == p for p in self._templates)

    def to_public_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready data with secrets masked.

        Secret fields show ``***``; any other value that came from the environment (``${VAR}``) is shown as
        the file wrote it, never its value: it may be a secret too (a password in a DSN, a token in a URL).
        """
        data = mask_secrets(self.model_dump(mode="python"))
        for path, template in self._templates.items():
            _set_at_path(data, path, template)
        return data


def _at_path(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def _set_at_path(data: Any, path: tuple[str, ...], value: Any) -> None:
    """Set ``value`` at ``path`` in dumped config data (a path the dump does not have is left alone)."""
    for key in path[:-1]:
        try:
            data = data[int(key)] if isinstance(data, list) else data[key]
        except (KeyError, IndexError, ValueError, TypeError):
            return
    last = path[-1] if path else None
    if isinstance(data, dict) and last in data:
        if data[last] != "***":     # a secret field stays masked as every secret field is
            data[last] = value
    elif isinstance(data, list) and last is not None and last.isdigit() and int(last) < len(data):
        data[int(last)] = value


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(value: Any, env: dict[str, str], path: tuple[str, ...],
                 filled: set[tuple[str, ...]] | None = None) -> Any:
    """Expand ``${VAR}``; the paths of expanded strings go into ``filled`` (their values are never echoed)."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env, (*path, str(k)), filled) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, (*path, str(i)), filled) for i, v in enumerate(value)]
    if isinstance(value, str):
        if filled is not None and _VAR.search(value):
            filled.add(path)

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{'.'.join(path)}: environment variable {name} is not set")

        return _VAR.sub(sub, value)
    return value


_EXPECTED = {
    "int": "int", "float": "number", "bool": "bool", "string": "string", "list": "list",
    "dict": "object", "model": "object", "literal": "one of", "greater": "value", "less": "value",
}


def _format_errors(exc: ValidationError, source: Path | None, filled: set[tuple[str, ...]] | None = None) -> str:
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        kind = err["type"]
        # a value read from the environment may be a secret: name its origin, never show it
        loc = tuple(str(p) for p in err["loc"])
        got = " (from ${...} in the config)" if any(loc[:len(f)] == f for f in filled or ()) \
            else f", got {err.get('input')!r}"
        if kind == "extra_forbidden":
            msg = "unknown key"
        elif kind.startswith(("int_", "float_", "bool_", "string_", "list_", "dict_", "model_")):
            short = kind.split("_", 1)[0]
            msg = f"expected {_EXPECTED.get(short, short)}"
            if "parsing" in kind or "from_float" in kind:
                msg += got
        elif kind == "literal_error":
            msg = f"expected {err.get('ctx', {}).get('expected', 'one of the allowed values')}{got}"
        else:
            msg = err["msg"].lower()
        lines.append(f"{path}: {msg}")
    if len(lines) == 1:
        return lines[0] + (f" ({source})" if source else "")
    return f"{len(lines)} errors{f' in {source}' if source else ''}: " + "; ".join(lines)


def check_names(config: Config, *, providers: list[str], embedders: list[str]) -> Config:
    """Check the names that select a plugin against the registered ones; return ``config``.

    The registries are passed in (this module imports no plugin code), e.g.
    ``check_names(cfg, providers=ws.providers.names(), embedders=ws.embedders.names())``.

    Raises:
        ConfigError: naming the field and listing the valid names, e.g.
            ``providers.default: unknown provider 'antropic'; valid: anthropic, ..., scripted``.
    """
    where = f" ({config.source})" if config.source else ""
    for field, value, kind, valid in (("providers.default", config.providers.default, "provider", providers),
                                      ("memory.embedder", config.memory.embedder, "embedder", embedders)):
        if value not in valid:
            # a value read from the environment may be a secret: name where it came from, never show it
            shown = "(from ${...} in the config)" if config.from_environment(*field.split(".")) else repr(value)
            raise ConfigError(f"{field}: unknown {kind} {shown}; valid: {', '.join(sorted(valid))}{where}")
    return config


def find_config_file(start: Path | None = None) -> Path | None:
    """``$AGENTSTACK_CONFIG`` if set, else the nearest ``agentstack.config.json`` from ``start`` upwards."""
    named = os.environ.get(ENV_VAR)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"{ENV_VAR}={named}: no such file")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
    return None


def load_config(path: str | Path | None = None, *, start: Path | None = None) -> Config:
    """Load and validate the configuration (defaults when no file is found)."""
    file = Path(path) if path is not None else find_config_file(start)
    if file is None:
        return Config()
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          "save it as UTF-8") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{file}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{file}: nested too deeply to be a configuration") from None
    return Config.from_dict(data, source=file.resolve())


def mask_secrets(data: Any) -> Any:
    """Replace every secret value with ``'***'`` (``None`` stays ``None``)."""
    if isinstance(data, dict):
        return {k: mask_secrets(v) for k, v in data.items()}
    if isinstance(data, list):
        return [mask_secrets(v) for v in data]
    if isinstance(data, SecretStr):
        return "***" if data.get_secret_value() else ""
    if isinstance(data, Path):
        return str(data)
    return data
