"""``%agent_history [NAME]`` and ``%agent_undo RUN_ID``: which agent changed which variable, and taking it back.

Thin, like the other magics: the line becomes a frozen arguments object, then a plain function
runs it. The history is a pandas DataFrame read from the workspace's ``provenance`` table (any
kernel's runs); undo works in the kernel that ran the code, through the journal every ``%agent``
run of this kernel shares (one per kernel, held by the magics, so one run's undo sees what later
runs did to the same names). Every error is one line naming what was wrong, and changes nothing.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from agentstack_lab.errors import AgentstackError
from agentstack_lab.notebook.args import MagicUsageError, _Parser

SHORT_ID = 8  # characters of a run id shown; %agent_undo takes any unique prefix of 4 or more

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = ["HistoryArgs", "UndoArgs", "parse_history_line", "parse_undo_line", "run_history", "run_undo",
           "kernel_journal", "live_executor", "ProvenanceMagics"]


@dataclass(frozen=True, kw_only=True)
class HistoryArgs:
    """The parsed ``%agent_history`` line."""

    name: str | None = None
    run: str | None = None
    limit: int | None = None


@dataclass(frozen=True, kw_only=True)
class UndoArgs:
    """The parsed ``%agent_undo`` line."""

    run: str


def _limit(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of rows, 1 or more, got {text!r}")
    return int(text)


def _tokens(parser: Any, line: str) -> list[str]:
    try:
        tokens = shlex.split(line, comments=True)  # a trailing "# ..." is a comment, as in Python
    except ValueError as exc:
        raise MagicUsageError(f"{parser.prog}: error: {exc} ({parser.prog} -h for help)") from None
    if "-h" in tokens or "--help" in tokens:
        raise MagicUsageError(parser.format_help().strip(), help=True)
    return tokens


def parse_history_line(line: str) -> HistoryArgs:
    """``%agent_history [NAME] [--run RUN_ID] [--limit N]``; a NAME must be a Python identifier."""
    p = _Parser(prog="%agent_history", add_help=False,
                description="What agents did to kernel variables (and the undos), oldest first.")
    p.add_argument("name", nargs="?", help="only this variable")
    p.add_argument("--run", help="only this run (id)")
    p.add_argument("--limit", type=_limit, help="only the newest N rows")
    ns = p.parse_args(_tokens(p, line))
    if ns.name is not None and not ns.name.isidentifier():
        p.error(f"NAME must be a variable name, got {ns.name!r}")
    return HistoryArgs(name=ns.name, run=ns.run, limit=ns.limit)


def parse_undo_line(line: str) -> UndoArgs:
    """``%agent_undo RUN_ID`` (the id or its first 4+ characters)."""
    p = _Parser(prog="%agent_undo", add_help=False,
                description="Put back the kernel variables a run created, changed or deleted.")
    p.add_argument("run", help="the run's id (or its first 4+ characters), as %agent_history shows it")
    ns = p.parse_args(_tokens(p, line))
    return UndoArgs(run=ns.run)


def run_history(workspace: Workspace, args: HistoryArgs, journal: Any = None) -> Any:
    """The history as a DataFrame that reads at notebook width (:mod:`.history_view`).

    Columns ``time, run_id, agent, call_id, name, action, before, after``, then ``undoable`` (the run
    can be undone in this kernel: ``journal`` holds its snapshots) and ``undone``.
    """
    from agentstack_lab.notebook.history_view import history_frame  # imports pandas

    frame = workspace.provenance(name=args.name, run_id=args.run, limit=args.limit)
    runs = journal.runs() if journal is not None else []
    undone = set(journal.runs(undone=True)) - set(runs) if journal is not None else set()
    return history_frame(frame, undoable=runs, undone=undone)


def run_undo(shell: Any, workspace: Workspace, args: UndoArgs) -> str:
    """Undo a run of this kernel; returns the line saying what was put back.

    Raises:
        UndoRefusedError: Unknown or ambiguous id, names changed since (named), too big, already undone.
    """
    from agentstack_lab.engine.history import resolve_run, undo_run, workspace_secrets
    from agentstack_lab.engine.provenance import UndoRefusedError

    executor = live_executor(shell)
    try:
        run_id = resolve_run(args.run, workspace.db, executor.journal)
    except UndoRefusedError:
        quiet = _run_without_changes(workspace, args.run)
        if quiet is None:
            raise
        return f"run {quiet[:SHORT_ID]} changed no kernel variables: nothing to undo"
    changes = undo_run(executor, workspace.db, run_id, secrets=workspace_secrets(workspace))
    removed = sorted(c.name for c in changes if c.action == "removed")
    restored = sorted(c.name for c in changes if c.action == "restored")
    parts = ([f"removed {', '.join(removed)}"] if removed else []) + (
        [f"restored {', '.join(restored)}"] if restored else [])
    return f"undid run {run_id[:SHORT_ID]}: {'; '.join(parts)}"


def _run_without_changes(workspace: Workspace, ref: str) -> str | None:
    """The id of the workspace run ``ref`` names when it exists but recorded no variable changes, else ``None``."""
    from agentstack_lab.engine.activity import resolve_run

    try:
        return resolve_run(workspace.db, ref)
    except AgentstackError:  # unknown, too short, ambiguous: the undo's own refusal says it better
        return None


def kernel_journal(shell: Any) -> Any:
    """The journal this kernel's ``%agent`` runs share (created on first use)."""
    registry = getattr(getattr(shell, "magics_manager", None), "registry", {})
    magics = registry.get("ProvenanceMagics")
    if magics is None:
        from agentstack_lab.engine.provenance import Journal

        return Journal()
    if magics.journal is None:
        from agentstack_lab.engine.provenance import Journal

        magics.journal = Journal()
    return magics.journal


def live_executor(shell: Any) -> Any:
    """A live-kernel executor writing to this kernel's shared journal."""
    from agentstack_lab.engine.executors import LiveKernelExecutor

    return LiveKernelExecutor(shell, journal=kernel_journal(shell))


@magics_class
class ProvenanceMagics(Magics):
    """``%agent_history`` and ``%agent_undo`` (the workspace is the one ``%agent`` uses)."""

    def __init__(self, shell: Any = None):
        super().__init__(shell)
        self.journal: Any = None

    def _workspace(self) -> Workspace:
        from agentstack_lab.workspace import for_shell

        return for_shell(self.shell)

    @line_magic
    def agent_history(self, line: str) -> Any:
        """What agents did to kernel variables: ``%agent_history [NAME] [--run RUN_ID] [--limit N]``."""
        try:
            return run_history(self._workspace(), parse_history_line(line), kernel_journal(self.shell))
        except MagicUsageError as exc:
            if exc.help:
                print(exc)
                return None
            raise UsageError(str(exc)) from None
        except AgentstackError as exc:
            raise UsageError(f"%agent_history: {exc}") from None

    @line_magic
    def agent_undo(self, line: str) -> None:
        """Put back what a run did to kernel variables: ``%agent_undo RUN_ID``."""
        try:
            print(run_undo(self.shell, self._workspace(), parse_undo_line(line)))
        except MagicUsageError as exc:
            if exc.help:
                print(exc)
                return
            raise UsageError(str(exc)) from None
        except AgentstackError as exc:
            raise UsageError(f"%agent_undo: {exc}") from None
