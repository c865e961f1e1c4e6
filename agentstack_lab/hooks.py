"""Lifecycle hooks (docs/tasks.md): ``session_start``, ``session_end``, ``pre_task``, ``post_task``, ``workflow``.

The engine fires them for every run (a run is a session, every agent a task): ``session_start``,
then ``pre_task``/``post_task`` per agent, then ``session_end``. Each event is run as the seed's
``executeHooks`` does: skipped when ``hooks.<event>`` is false in the config, then the built-in
handler, then every plugin's implementation (pluggy hookspecs in ``hookspecs.py``, the workspace's plugin manager
``ws.plugins``; plugins named in ``plugins.disabled`` are left out). A handler that raises is logged with its traceback and skipped:
a hook never breaks the run.

Workflow triggers (docs/tasks.md) are evaluated by the built-in handler of every event: a trigger's
condition over the :class:`HookContext` (a callable, or the config's ``when`` field → value map)
starts its workflow notebook as ``agentstack-lab workflow run`` in a child process (the executed
notebook lands under ``.agentstack/workflows/``) and then fires the ``workflow`` event. Triggers
come from the config (``hooks.triggers``) and from plugins (``register_workflow_triggers``).

Triggers never storm: the started workflow process (its kernel, and anything it starts) carries
``AGENTSTACK_TRIGGERED_BY`` in its environment, and no trigger is evaluated where it is set; the other
hooks still fire there. A trigger that fails when it fires (its notebook is missing, its condition
raises, the process does not start) prints one line on this process's stderr; ``agentstack-lab config
validate`` checks the configured triggers' notebooks beforehand (:func:`check_trigger_notebooks`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentstack_lab.errors import AgentstackError, message

__all__ = ["HOOK_EVENTS", "TRIGGERED_ENV", "HookContext", "WorkflowTrigger", "TriggerError", "fire", "triggers_for",
           "start_workflow", "check_trigger_notebooks", "RunHooks"]

log = logging.getLogger(__name__)

HOOK_EVENTS = ("session_start", "session_end", "pre_task", "post_task", "workflow")
# set (to the trigger's id) in the environment of a workflow a trigger started: no trigger fires there
TRIGGERED_ENV = "AGENTSTACK_TRIGGERED_BY"


class TriggerError(AgentstackError):
    """A workflow trigger could not start its workflow (the message says why, one line)."""


@dataclass(frozen=True, kw_only=True)
class HookContext:
    """What a hook is told: the event and the session, run and agent (task) it is about."""

    event: str
    workspace: Any = field(default=None, repr=False, compare=False)
    session_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    parent_id: str | None = None
    agent_type: str | None = None
    depth: int = 0
    prompt: str | None = None
    status: str | None = None
    result: str | None = None
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The context without the workspace (JSON-able)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "workspace"}


@dataclass(frozen=True, kw_only=True)
class WorkflowTrigger:
    """The seed's trigger: when ``condition(context)`` holds, run the workflow ``workflow_id``.

    ``workflow_id`` is a notebook path (relative to the workspace folder) or a built-in workflow's name;
    ``options`` are its parameters. ``events`` limits the hook events it is evaluated on.
    """

    id: str
    name: str = ""
    condition: Callable[[HookContext], bool]
    workflow_id: str
    options: dict[str, Any] = field(default_factory=dict)
    events: tuple[str, ...] = ("post_task",)


def _matcher(when: dict[str, Any]) -> Callable[[HookContext], bool]:
    """The config's ``when`` map as a condition: every field equals the value (or is one of a list)."""

    def condition(ctx: HookContext) -> bool:
        for key, want in when.items():
            have = getattr(ctx, key, None) if key in HookContext.__dataclass_fields__ else ctx.metadata.get(key)
            if have not in (want if isinstance(want, list) else [want]):
                return False
        return True

    return condition


def triggers_for(workspace: Any) -> list[WorkflowTrigger]:
    """The configured triggers plus those plugins register (a broken plugin is skipped with a warning)."""
    hooks_cfg = workspace.config.hooks
    out = [WorkflowTrigger(id=t.id, name=t.name or t.id, condition=_matcher(t.when), workflow_id=t.workflow,
                           options=dict(t.parameters), events=(t.on,))
           for t in getattr(hooks_cfg, "triggers", ())]
    from agentstack_lab.plugins import collect

    for call in collect("register_workflow_triggers", workspace.plugins, disabled=_disabled(workspace.config)):
        trigger = call.args[0] if call.args else call.kwargs.get("trigger")
        if isinstance(trigger, WorkflowTrigger):
            out.append(trigger)
        else:
            log.warning("agentstack-lab: ignored a workflow trigger that is not a WorkflowTrigger: %r", trigger)
    return out


def _disabled(config: Any) -> tuple[str, ...]:
    return tuple(getattr(getattr(config, "plugins", None), "disabled", ()) or ())


def _is_path(spec: str) -> bool:
    """A path (a separator or an ``.ipynb`` suffix), not a built-in workflow's bare name."""
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return any(s in spec for s in seps) or spec.endswith(".ipynb")


def _notebook(root: Path, spec: str) -> str:
    """The notebook to run for ``spec``: a file under ``root``, else a built-in name for ``workflow run``."""
    if (root / spec).is_file():
        return str(root / spec)
    if _is_path(spec):
        raise TriggerError(f"notebook not found: {root / spec}")
    return spec  # a built-in workflow's name, resolved by `agentstack-lab workflow run`


def check_trigger_notebooks(config: Any, root: Path, builtins: Collection[str]) -> None:
    """Check that every configured trigger's notebook is a file under ``root`` or one of ``builtins``.

    Raises:
        ConfigError: one line naming each trigger whose notebook is missing, and the path looked for.
    """
    from agentstack_lab.config import ConfigError

    problems = []
    for i, t in enumerate(config.hooks.triggers):
        if (root / t.workflow).is_file() or (not _is_path(t.workflow) and t.workflow in builtins):
            continue
        what = "notebook not found" if _is_path(t.workflow) else "no such notebook and no built-in workflow of that name"
        problems.append(f"hooks.triggers[{i}] (id {t.id!r}): workflow {t.workflow!r}: {what}: {root / t.workflow}")
    if problems:
        raise ConfigError("; ".join(problems))


def start_workflow(workspace: Any, trigger: WorkflowTrigger, context: HookContext) -> dict[str, Any]:
    """Start ``trigger``'s workflow notebook headless in a child process; returns where its output goes.

    A child process (``agentstack-lab workflow run``), not this one: a notebook run takes seconds and a
    kernel of its own, and the hook must return at once. The child's environment names the trigger
    (``TRIGGERED_ENV``), so the runs inside that workflow fire no trigger themselves.

    Raises:
        TriggerError: the notebook is a path that does not exist.
    """
    root = Path(workspace.root)
    notebook = _notebook(root, trigger.workflow_id)
    out_dir = Path(workspace.db_path).parent / "workflows"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    output = out_dir / f"{trigger.id}-{stamp}-{(context.agent_id or 'run')[:8]}.ipynb"
    args = [sys.executable, "-m", "agentstack_lab.cli", "workflow", "run", notebook, "-o", str(output),
            "--cwd", str(root)]
    for name, value in trigger.options.items():
        args += ["-p", name, str(value)]
    env = {**os.environ, TRIGGERED_ENV: trigger.id}
    with open(output.with_suffix(".log"), "wb") as logfile:
        proc = subprocess.Popen(args, cwd=root, stdout=logfile, stderr=subprocess.STDOUT,  # noqa: S603
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    log.info("agentstack-lab: trigger %s started workflow %s (pid %s) -> %s", trigger.id, notebook, proc.pid, output)
    return {"trigger": trigger.id, "workflow": notebook, "output": str(output), "pid": proc.pid}


def _failed(trigger: WorkflowTrigger, what: str, exc: BaseException) -> None:
    """One line on stderr for a trigger that failed as it fired (the traceback goes to the debug log)."""
    log.debug("agentstack-lab: workflow trigger %s: %s", trigger.id, what, exc_info=exc)
    print(f"agentstack-lab: workflow trigger {trigger.id!r} failed: {what}: {message(exc)}", file=sys.stderr)


def _call(name: str, fn: Callable[..., Any], context: HookContext) -> None:
    try:
        fn(context=context)
    except Exception:  # a hook never breaks the run: logged with its traceback, the rest still run
        log.exception("agentstack-lab: %s hook %s failed (skipped)", context.event, name)


def _builtin(context: HookContext) -> None:
    """The built-in handler of every event: log it, and evaluate the workflow triggers."""
    log.debug("agentstack-lab hook %s: run %s agent %s", context.event, context.run_id, context.agent_id)
    if context.event == "workflow":
        return
    if os.environ.get(TRIGGERED_ENV):  # inside a workflow a trigger started: no trigger fires (no storm)
        log.debug("agentstack-lab: triggers not evaluated here: a workflow started by trigger %s",
                  os.environ[TRIGGERED_ENV])
        return
    for trigger in triggers_for(context.workspace):
        if context.event not in trigger.events:
            continue
        try:
            matched = bool(trigger.condition(context))
        except Exception as exc:  # noqa: BLE001 - a trigger never breaks the run
            _failed(trigger, "its condition raised", exc)
            continue
        if matched:
            try:
                started = start_workflow(context.workspace, trigger, context)
            except Exception as exc:  # noqa: BLE001
                _failed(trigger, f"could not start workflow {trigger.workflow_id!r}", exc)
                continue
            fire(context.workspace, replace(context, event="workflow",
                                            metadata={**context.metadata, "trigger": started}))


def fire(workspace: Any, context: HookContext) -> None:
    """Run one hook event: config switch, built-in handler, then plugins; errors are logged, never raised."""
    switches = workspace.config.hooks
    if not getattr(switches, context.event, True):
        return
    _call("builtin", _builtin, context)
    from agentstack_lab.plugins import implementations

    try:
        impls = implementations(context.event, workspace.plugins, disabled=_disabled(workspace.config))
    except Exception:
        log.exception("agentstack-lab: could not load the plugins for the %s hook", context.event)
        return
    for impl in impls:
        _call(impl.plugin_name, impl.function, context)


class RunHooks:
    """The hooks of one run (the engine's side): contexts built from its agents."""

    def __init__(self, workspace: Any, *, run_id: str, session_id: str | None):
        self.workspace = workspace
        self.run_id = run_id
        self.session_id = session_id

    def _fire(self, event: str, **fields: Any) -> None:
        with contextlib.suppress(Exception):  # building the context must not break the run either
            fire(self.workspace, HookContext(event=event, workspace=self.workspace, run_id=self.run_id,
                                             session_id=self.session_id, **fields))

    def session_start(self, *, prompt: str, agent_type: str) -> None:
        self._fire("session_start", agent_id=self.run_id, prompt=prompt, agent_type=agent_type, status="pending")

    def session_end(self, *, status: str, result: str | None, error: str | None) -> None:
        self._fire("session_end", agent_id=self.run_id, status=status, result=result, error=error)

    def pre_task(self, node: Any) -> None:
        self._fire("pre_task", **_node_fields(node))

    def post_task(self, node: Any) -> None:
        self._fire("post_task", **_node_fields(node), result=node.result, error=node.error)


def _node_fields(node: Any) -> dict[str, Any]:
    return {"agent_id": node.id, "parent_id": node.parent_id, "agent_type": node.type, "depth": node.depth,
            "prompt": node.prompt, "status": node.status,
            "metadata": {k: v for k, v in node.metadata.items() if k in ("origin", "resources", "drift")}}
