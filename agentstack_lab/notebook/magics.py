"""IPython extension: ``%agent`` / ``%%agent``, ``%memory`` / ``%%memory``, ``%agent_history``, ``%agent_undo``.

The magics are thin: parse the line into a typed object (:mod:`.args`), then call a plain
function (:func:`start_agent`, :func:`agentstack_lab.notebook.memory_magic.run_memory`).
Loading the extension imports nothing heavy; the engine, pandas and ipywidgets are imported when
first used.

``%agent`` without ``--wait`` starts the run as a task on the kernel's running asyncio loop and
returns the :class:`AgentRun` at once, its live widget shown in the cell (also when the run is
assigned, ``run = %agent ...``). ``%agent --wait`` is rewritten by an input transformer into
``await ...`` on that same loop, so the cell blocks, the
kernel's loop keeps running (ipykernel ≥ 7.4 still dispatches comm messages during an awaiting
cell) and the value of the cell is the finished run. With no running loop (terminal IPython,
plain scripts) the run is driven to completion on a private loop.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import re
import sys
import weakref
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from agentstack_lab.errors import AgentstackError
from agentstack_lab.notebook.args import AgentArgs, MagicUsageError, OneLineError, parse_agent_line

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = [
    "AgentstackMagics",
    "AgentRunFailed",
    "OneLineError",
    "load_ipython_extension",
    "unload_ipython_extension",
    "start_agent",
    "agent_awaitable",
    "await_transformer",
    "magic_call_transformer",
    "display_run",
    "agent_tree",
]

log = logging.getLogger(__name__)

_ENGINE_MODULES = ("agentstack_lab.engine.run", "agentstack_lab.engine")


class AgentRunFailed(OneLineError):
    """``%agent --wait`` finished without a result; ``.run`` is the run (``sys.last_value.run``)."""

    def __init__(self, message: str, run: Any = None):
        super().__init__(message)
        self.run = run


def _usage(exc: Exception) -> UsageError:
    from agentstack_lab.redaction import public_message

    return UsageError(public_message(exc))


# -- the workspace ---------------------------------------------------------------------------------
def _workspace(shell: Any) -> Workspace:
    """The kernel's one workspace, shared with ``agentstack_lab.workspace()``; a fresh one without a shell."""
    from agentstack_lab.workspace import Workspace, for_shell

    return for_shell(shell) if shell is not None else Workspace.open()


def _magics(shell: Any) -> AgentstackMagics | None:
    registry = getattr(getattr(shell, "magics_manager", None), "registry", {})
    return registry.get("AgentstackMagics")


# -- %agent ----------------------------------------------------------------------------------------
def _check_names(args: AgentArgs, workspace: Workspace, namespace: dict[str, Any]) -> tuple[str, Any]:
    """Resolve the agent type and provider, failing with one line listing the valid names.

    Both come from the workspace's registries, so types and providers registered there (or by a
    plugin) are accepted. ``--provider @name`` uses a provider object from the kernel (anything
    with ``stream()``).
    """
    from agentstack_lab.providers.base import ProviderError

    agent_type = args.type or workspace.config.agents.default_type
    registry = workspace.agent_types
    if not registry.has(agent_type):
        raise UsageError(f"unknown agent type {agent_type!r}; valid types: {', '.join(registry.list())}")
    name = args.provider or workspace.config.providers.default
    if name.startswith("@"):
        obj = namespace.get(name[1:])
        if obj is None or not callable(getattr(obj, "stream", None)):
            raise UsageError(f"--provider {name}: no provider object named {name[1:]!r} in the kernel "
                             "(it needs a stream() method)")
        return agent_type, obj
    if name not in workspace.providers:
        from agentstack_lab.redaction import redact, secret_values

        raise UsageError(f"unknown provider {redact(repr(name), secret_values())}; valid providers: {', '.join(workspace.providers.names())}")
    if args.replay and args.replay_mode in (None, "strict"):
        return agent_type, name  # a strict replay never builds the real provider: no key needed
    overrides = {"model": args.model} if args.model else {}
    try:
        provider = workspace.get_provider(name, **overrides)
    except ProviderError as exc:  # a missing key names its variable
        raise UsageError(f"provider {name!r}: {exc}") from None
    return agent_type, provider


def _options(args: AgentArgs, workspace: Workspace) -> Any:
    """The line's options over the workspace's ``agents`` config (the one builder every surface uses)."""
    from agentstack_lab.engine.options import run_options

    return run_options(workspace.config, surface="notebook",
                       given={**args.given_options(), "subagents": args.subagents, "interactive": not args.wait,
                              "answers": dict(args.answers)})


def _running_loop() -> Any:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def build_run(shell: Any, args: AgentArgs, workspace: Workspace | None = None) -> Any:
    """Create (but do not start) the ``AgentRun`` a parsed ``%agent`` line describes.

    Raises:
        UsageError: A ``{expr}`` that fails or an unknown ``@name``, agent type or provider (one line each).
        AgentstackError: An unknown or retired ``--identity`` (one line).
    """
    namespace = shell.user_ns if shell is not None else {}
    workspace = workspace if workspace is not None else _workspace(shell)
    from agentstack_lab.engine import AgentRun

    _install_run_helpers(AgentRun, shell)
    if args.follow_up:  # %agent --continue: the previous run's thread, session, provider and budgets
        from agentstack_lab.notebook.followup import follow_up

        return follow_up(_magics(shell), args, _prompt(args, namespace, isolated=False), workspace, namespace,
                         _check_names, cell_id=_cell_request(shell)[0] if shell is not None else None)
    try:
        options = _options(args, workspace)
    except (ValueError, TypeError) as exc:  # e.g. --max-agents 0: one line, not a traceback
        raise _usage(exc) from None
    isolated = options.executor != "live"
    prompt = _prompt(args, namespace, isolated=isolated)
    agent_type, provider = _check_names(args, workspace, namespace)
    try:
        session_id = _session_id(workspace, args.session)
    except AgentstackError as exc:  # empty, ended: one line
        raise _usage(exc) from None
    from agentstack_lab.notebook.provenance_magic import live_executor

    # the kernel's runs share one undo journal; --executor subprocess gets its own executor from the options
    executor = live_executor(shell) if not isolated and shell is not None else None
    try:
        run = AgentRun(prompt, workspace=workspace, provider=provider, agent_type=agent_type,
                       options=options, model=args.model, session_id=session_id, executor=executor,
                       cell_id=_cell_request(shell)[0] if shell is not None else None)
    except AgentstackError as exc:  # e.g. a retired --identity: one line, not a traceback
        raise _usage(exc) from None
    _note_unseen(args, options.executor)
    return run


def _prompt(args: AgentArgs, namespace: dict[str, Any], *, isolated: bool) -> str:
    from agentstack_lab.notebook.context import PromptError, build_prompt

    try:
        return build_prompt(args.prompt, namespace, isolated=isolated)
    except PromptError as exc:
        raise _usage(exc) from None


def _note_unseen(args: AgentArgs, executor: str) -> None:
    """One line when ``@name`` variables are attached to a run whose code cannot see them."""
    from agentstack_lab.notebook.context import attached_names

    names = attached_names(args.prompt)
    if executor != "live" and names:
        shown = ", ".join(names)
        print(f"%agent: the {executor} executor cannot see {shown}: the agent gets {'its' if len(names) == 1 else 'their'} "
              f"description only (--executor live runs its code in this kernel)", file=sys.stderr)


async def _finish(run: Any) -> Any:
    """Await a run; a run that did not complete shows its tree, then raises :class:`AgentRunFailed`.

    A headless run that failed closed (a question or an approval nobody could give) is one line
    and no tree, as the README promises: the tree would only repeat that line.
    """
    from agentstack_lab.engine import AgentRunError, HeadlessQueryError

    try:
        try:
            await run.wait()
        finally:
            _refresh_live(run)
    except AgentRunError as exc:
        if isinstance(exc, HeadlessQueryError):
            _drop_live(run)
        else:
            _show_failed(run)
        raise AgentRunFailed(f"{type(exc).__name__}: {exc}", run) from None
    if run.status != "completed":
        _show_failed(run)
        raise AgentRunFailed(f"the run ended {run.status}: {run.tree.get('error') or 'no result'}", run)
    return run


def _show_failed(run: Any) -> None:
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is not None:
        display(run)


def _session_id(workspace: Workspace, value: str | None) -> str | None:
    """``--session`` takes a session id or name; an unknown name starts a new session."""
    if value is None:
        return None
    sessions = workspace.sessions
    if sessions.get(value) is not None:   # "" raises SessionError; an ended session cannot take new notes
        return sessions.require_active(value).id
    for session in sessions.active():
        if getattr(session, "name", None) == value:
            return session.id
    session = sessions.start(name=value)
    print(f"started session {value!r} ({session.id})")
    return session.id


# -- a cell's runs (notebook.rerun: cellruns.py) -------------------------------------------------------
def _cell_request(shell: Any) -> tuple[str | None, list[str], str | None]:
    from agentstack_lab.notebook.cellruns import cell_request

    return cell_request(shell)


def _rerun_mode(magics: AgentstackMagics) -> str:
    return magics.workspace.config.notebook.rerun


def _claim_cell(shell: Any, run: Any) -> None:
    """Record ``run`` as its cell's run; the cell's earlier runs stop (``notebook.rerun = stop``) or are listed."""
    from agentstack_lab.notebook.cellruns import claim_cell

    magics = _magics(shell)
    if magics is None:
        return
    cell, deleted, _msg = _cell_request(shell)
    earlier = claim_cell(magics.cell_runs, cell, deleted, run, mode=_rerun_mode(magics))
    if earlier:
        magics.earlier[run] = earlier


def _remember(shell: Any, run: Any) -> None:
    """``run`` is now the kernel's latest: what ``%agent --continue`` follows up."""
    magics = _magics(shell)
    if magics is not None:
        magics.last_run = run


def start_agent(shell: Any, args: AgentArgs, *, workspace: Workspace | None = None) -> Any:
    """Start (or, with ``--wait`` and no running loop, complete) a run; returns the ``AgentRun``.

    Raises:
        UsageError: Bad names, or ``--wait`` where the kernel loop cannot be awaited.
        AgentRunFailed: ``--wait`` and the run failed or was stopped.
    """
    loop = _running_loop()
    if args.wait and loop is not None:
        raise UsageError("%agent --wait must be a top-level statement of a cell (it is awaited on the kernel's "
                         "loop); inside a block, start it without --wait and `await run` at top level")
    headless_note = loop is None and not args.wait
    if headless_note:
        # Terminal IPython / scripts: nothing runs between cells, so nobody could answer a question.
        args = dataclasses.replace(args, wait=True)
    run = build_run(shell, args, workspace)  # validates first: a bad name is one line, with no note before it
    if headless_note:
        print("%agent: no running event loop here (not a Jupyter kernel): running to completion, headless",
              file=sys.stderr)
    _remember(shell, run)
    if loop is None:
        import asyncio

        return asyncio.run(_finish(run))
    _claim_cell(shell, run)
    run.start()
    _show_background(shell, run)
    return run


def _show_background(shell: Any, run: Any) -> None:
    """A background run shows its live tree now, whether or not its value is the cell's result.

    ``run = %agent ...`` (or a run started inside a loop or a function) leaves the cell without a
    result, so the display hook alone would draw nothing, and its approval card would be hidden
    while the run waits. The hook skips a run this cell already shows, so ``%agent ...`` draws it once.
    """
    tree = _show_live(shell, run)
    if tree is not None:
        _update_at_end(run, tree)


def agent_awaitable(shell: Any, line: str, cell: str | None = None) -> Any:
    """What the input transformer puts behind ``await`` for ``%agent --wait``: a coroutine → the run."""
    try:
        args = parse_agent_line(line, cell)
    except MagicUsageError as exc:
        raise _usage(exc) from None
    run = build_run(shell, args)
    _remember(shell, run)
    _claim_cell(shell, run)
    run.start()
    _show_live(shell, run)
    return _finish(run)


def _show_live(shell: Any, run: Any) -> Any:
    """Show the live tree now (``--wait``: while the cell blocks; the finished run then shows nothing more).

    Returns the tree, or ``None`` where nothing can display it.
    """
    if shell is None or getattr(shell, "display_formatter", None) is None:
        return None
    tree = agent_tree(run, shell)
    _display_tree(tree)
    tree.shown_in = _cell_request(shell)[2]
    return tree


def _display_tree(tree: Any) -> None:
    """Show ``tree`` under its one display id, so the end of the run rewrites every output showing it."""
    from IPython.display import display

    handle = getattr(tree, "handle", None)
    shown = display(tree, display_id=handle.display_id if handle is not None else True)
    if handle is None:
        tree.handle = shown


def _update_at_end(run: Any, tree: Any) -> None:
    """Once ``run`` ends, rewrite its outputs with the final tree (widget and every static representation)."""
    if getattr(tree, "updates_at_end", False) or run.done:
        return
    tree.updates_at_end = True
    run.add_done_callback(lambda _run: _publish_final(tree))


def _publish_final(tree: Any) -> None:
    """Update the tree's outputs, sent as output of the request the kernel handles now.

    The run's task inherited the starting cell's request; a headless executor (nbclient) reads only
    the output of the cell it is running, and applies a display update to every earlier output with
    that display id. In a fresh context the kernel's display publisher falls back to its latest request.
    """
    import contextvars

    handle = getattr(tree, "handle", None)
    if handle is None:
        return
    try:
        contextvars.Context().run(handle.update, tree)
    except Exception:  # a view problem must never break the loop's callbacks
        log.exception("agentstack-lab: could not rewrite the finished run's output")


def _refresh_live(run: Any) -> None:
    """Redraw the ``--wait`` tree's output once the run ends, so saved notebooks keep the final text fallback."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = _magics(shell) if shell is not None else None
    tree = magics.trees.get(run) if magics is not None else None
    handle = getattr(tree, "handle", None)
    if handle is not None:
        handle.update(tree)


def _drop_live(run: Any) -> None:
    """Blank the ``--wait`` tree's output: a run that failed closed is its one error line, nothing more."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = _magics(shell) if shell is not None else None
    tree = magics.trees.get(run) if magics is not None else None
    handle = getattr(tree, "handle", None)
    if handle is not None:
        handle.update({"text/plain": ""}, raw=True)


_MAGIC_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<lhs>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)?"
                         r"%(?P<name>agent|memory)(?P<rest>(?:[ \t].*)?)$")


def magic_call_transformer(lines: list[str]) -> list[str]:
    """Turn ``%agent ...`` / ``%memory ...`` lines into explicit calls before IPython's help syntax sees them.

    IPython reads a line ending in ``name?`` as a help request (``%agent how are sales in df?`` would
    show ``df``'s docstring); questions are the natural way to prompt, so these lines are
    rewritten first.
    """
    if lines and lines[0].lstrip().startswith("%%"):
        return lines
    out = []
    for line in lines:
        m = _MAGIC_LINE.match(line.rstrip("\n"))
        if m is None:
            out.append(line)
            continue
        call = f"get_ipython().run_line_magic({m['name']!r}, {m['rest'].strip()!r})"
        out.append(f"{m['indent']}{m['lhs'] or ''}{call}" + ("\n" if line.endswith("\n") else ""))
    return out


def await_transformer(lines: list[str]) -> list[str]:
    """Rewrite top-level ``%agent --wait`` / ``%%agent --wait`` calls into ``await`` expressions."""
    out = []
    for line in lines:
        out.append(_rewrite(line) if "run_" in line and "agent" in line and not line[:1].isspace() else line)
    return out


def _rewrite(line: str) -> str:
    stripped = line.rstrip("\n")
    try:
        tree = ast.parse(stripped)
    except SyntaxError:
        return line
    if len(tree.body) != 1:
        return line
    stmt = tree.body[0]
    if not isinstance(stmt, (ast.Expr, ast.Assign)):
        return line
    call = stmt.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr in ("run_line_magic", "run_cell_magic")
            and isinstance(call.func.value, ast.Call) and getattr(call.func.value.func, "id", "") == "get_ipython"
            and len(call.args) >= 2):
        return line
    consts = [a.value for a in call.args[:3] if isinstance(a, ast.Constant)]
    if len(consts) < len(call.args[:3]) or consts[0] != "agent" or not isinstance(consts[1], str):
        return line
    cell = consts[2] if call.func.attr == "run_cell_magic" and len(consts) > 2 else None
    if cell is not None and not isinstance(cell, str):
        return line
    try:
        if not parse_agent_line(consts[1], cell).wait:
            return line
    except MagicUsageError:
        return line  # let the magic report it
    target = ast.parse("__import__('agentstack_lab.notebook.magics', fromlist=['agent_awaitable'])"
                       ".agent_awaitable", mode="eval").body
    new = ast.Await(ast.Call(func=target, args=[call.func.value, *call.args[1:3]], keywords=[]))
    stmt.value = new
    return ast.unparse(ast.fix_missing_locations(tree)) + ("\n" if line.endswith("\n") else "")


_SHOW = re.compile(r"^\s*show\s+(?P<ref>[0-9a-fA-F][0-9a-fA-F-]{3,35}|\{[A-Za-z_]\w*\})\s*$")


def show_ref(line: str, cell: str | None) -> str | None:
    """The run id of ``%agent show RUN_ID`` (a hex id or prefix of 4+); ``None`` for a prompt.

    ``%agent show me the sales`` stays a prompt: only ``show`` followed by one id-shaped word (or a
    ``{name}`` of the kernel holding one) is the command.
    """
    if cell is not None:
        return None
    m = _SHOW.match(line or "")
    return m["ref"] if m else None


# -- display and helpers -----------------------------------------------------------------------------
def agent_tree(run: Any, shell: Any = None) -> Any:
    """The live ``AgentTree`` widget following ``run`` (one per run while the extension is loaded)."""
    from agentstack_lab.notebook.widget import AgentTree

    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    magics = _magics(shell)
    trees = magics.trees if magics is not None else weakref.WeakKeyDictionary()
    tree = trees.get(run)
    if tree is None:
        tree = trees[run] = AgentTree(run)
        if magics is not None:
            from agentstack_lab.notebook.cellruns import EarlierRuns, output_gone

            tree.on_gone = lambda how: output_gone(run, how, mode=_rerun_mode(magics))
            earlier = magics.earlier.pop(run, None)
            if earlier:
                tree.show_earlier(EarlierRuns(earlier))
    return tree


def display_run(run: Any) -> bool:
    """IPython display hook for ``AgentRun``: the live widget, with text/Markdown fallbacks.

    A run whose tree this cell already shows (``--wait``) is not drawn a second time. Every output of
    the tree is rewritten when the run ends, so a saved notebook holds the final tree.
    """
    from IPython import get_ipython

    shell = get_ipython()
    magics = _magics(shell)
    if magics is not None and getattr(run, "continues", None) == getattr(magics.last_run, "id", False):
        magics.last_run = run  # a shown `run.ask(...)` continues the thread %agent --continue follows
    tree = agent_tree(run, shell)
    msg = _cell_request(shell)[2] if shell is not None else None
    if msg is not None and getattr(tree, "shown_in", None) == msg:
        return True
    _display_tree(tree)
    _update_at_end(run, tree)
    return True


def _install_run_helpers(run_cls: type, shell: Any) -> None:
    formatter = getattr(getattr(shell, "display_formatter", None), "ipython_display_formatter", None)
    if formatter is not None:
        formatter.for_type(run_cls, display_run)


# -- the magics class --------------------------------------------------------------------------------
@magics_class
class AgentstackMagics(Magics):
    """``%agent`` and ``%memory``."""

    def __init__(self, shell: Any = None):
        super().__init__(shell)
        from agentstack_lab.notebook.cellerrors import ErrorRecorder

        self.errors = ErrorRecorder(shell)
        self.reembedding: Any = None   # the last `%memory reembed` of this kernel (notebook/memory_magic.py)
        self.trees: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.cell_runs: dict[str, list[Any]] = {}  # cell id -> its runs still tracked (newest last)
        self.earlier: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()  # run -> to list
        self.last_run: Any = None  # the latest run %agent started (or a shown follow-up of it): --continue's

    @property
    def workspace(self) -> Workspace:
        """The workspace of this kernel, opened on first use (its database path is printed then).

        It is the one ``agentstack_lab.workspace()`` returns in this kernel: what code registers on
        it, ``%agent`` sees.
        """
        return _workspace(self.shell)

    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """Run a recursive agent: ``%agent [options] PROMPT`` or ``%%agent [options]`` + prompt body.

        ``{expr}`` interpolates a kernel value (``{In[n]}``, ``{Out[n]}``, ``{Err[n]}`` too), ``@name`` attaches
        a description of a variable.
        Without ``--wait`` the run starts in the background and the live tree is shown; ``%agent -h``
        lists the options.
        """
        ref = show_ref(line, cell)
        if ref is not None:  # %agent show RUN_ID: a past run's tree, rebuilt from the log
            from agentstack_lab.notebook.snapshot import SavedRun
            from agentstack_lab.providers.prices import PriceTable

            if ref.startswith("{"):
                assert self.shell is not None   # IPython registers magics with their shell
                if ref[1:-1] not in self.shell.user_ns:
                    raise UsageError(f"%agent show: no variable {ref[1:-1]!r} in the kernel")
                ref = str(self.shell.user_ns[ref[1:-1]])
            try:
                return SavedRun(self.workspace.db, ref, PriceTable.from_config(self.workspace.config))
            except AgentstackError as exc:
                raise _usage(exc) from None
        try:
            args = parse_agent_line(line, cell)
        except MagicUsageError as exc:
            if exc.help:
                print(exc)
                return None
            raise _usage(exc) from None
        return start_agent(self.shell, args)

    @line_cell_magic
    def memory(self, line: str, cell: str | None = None) -> Any:
        """Workspace memory: ``%memory store|get|search|list|delete ...`` (``%memory -h`` for options)."""
        from agentstack_lab.notebook.memory_magic import run_memory_line

        return run_memory_line(self, line, cell)


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics, the ``--wait`` transformer, the ``AgentRun`` display hook and ``Err``."""
    if "AgentstackMagics" not in ipython.magics_manager.registry:
        from agentstack_lab.notebook.provenance_magic import ProvenanceMagics

        ipython.register_magics(AgentstackMagics, ProvenanceMagics)
    magics = _magics(ipython)
    if magics is not None:
        magics.errors.install()  # Err[n]: each failed cell's traceback, for {Err[n]} in prompts
    if magic_call_transformer not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(magic_call_transformer)
    if await_transformer not in ipython.input_transformers_post:
        ipython.input_transformers_post.append(await_transformer)
    formatter = ipython.display_formatter.ipython_display_formatter
    for module in _ENGINE_MODULES:
        formatter.for_type_by_name(module, "AgentRun", display_run)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the transformers and the ``Err`` hook, close the workspace (the magics stay until the kernel restarts)."""
    if await_transformer in ipython.input_transformers_post:
        ipython.input_transformers_post.remove(await_transformer)
    if magic_call_transformer in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(magic_call_transformer)
    magics = _magics(ipython)
    if magics is not None:
        magics.errors.uninstall()
    from agentstack_lab.workspace import release_shell

    release_shell(ipython)
