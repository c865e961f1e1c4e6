"""``Err``: the tracebacks of the kernel's failed cells, by execution count, for ``{Err[n]}`` in prompts.

jupyter-ai's ``%ai`` keeps ``Err`` (a dict in the user namespace, beside ``In`` and ``Out``) through a
custom exception handler; here a ``post_run_cell`` hook fills it, so IPython's own exception display
(and any other extension's handler) stays as it was. Each entry is the text the user saw: IPython's
traceback without colours, or the one line of an error that renders as one line (``UsageError``,
``%agent --wait`` failures). ``Err[-1]`` is the latest. An existing ``Err`` (jupyter-ai's) is kept
and shared.
"""

from __future__ import annotations

import re
import traceback
from typing import Any

from agentstack_lab.notebook.context import Traceback

__all__ = ["ErrorLog", "ErrorRecorder", "traceback_text"]

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class ErrorLog(dict[int, str]):
    """Execution count → traceback text; ``log[-1]`` is the latest error, a missing cell says which exist."""

    def __missing__(self, key: Any) -> str:
        if isinstance(key, int) and key < 0 and -key <= len(self):
            return self[sorted(self)[key]]
        cells = ", ".join(map(str, sorted(self))) or "none since the extension was loaded"
        raise KeyError(f"cell {key} raised no error (cells with errors: {cells})")


def traceback_text(shell: Any, exc: BaseException) -> Traceback:
    """What the user saw for ``exc``: its one-line rendering, or IPython's traceback without colours."""
    from IPython.core.error import UsageError

    if isinstance(exc, UsageError):
        return Traceback(f"UsageError: {exc}")
    render = getattr(exc, "_render_traceback_", None)
    try:
        if callable(render):
            lines: Any = render()
        else:
            lines = shell.InteractiveTB.structured_traceback(type(exc), exc, exc.__traceback__)
        text = "\n".join(lines) if isinstance(lines, list) else str(lines)
    except Exception:  # noqa: BLE001 - a broken renderer: the standard library's text instead
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Traceback(_ANSI.sub("", text).strip("\n"))


class ErrorRecorder:
    """The ``post_run_cell`` hook that records each failed cell's traceback in ``shell.user_ns["Err"]``."""

    def __init__(self, shell: Any):
        self.shell = shell

    def install(self) -> None:
        ns = self.shell.user_ns
        if not isinstance(ns.get("Err"), ErrorLog):
            ns["Err"] = ErrorLog(ns["Err"] if isinstance(ns.get("Err"), dict) else {})
        self.shell.user_ns_hidden["Err"] = ns["Err"]  # like In and Out: not listed by %who
        if self.record not in self.shell.events.callbacks["post_run_cell"]:
            self.shell.events.register("post_run_cell", self.record)

    def uninstall(self) -> None:
        if self.record in self.shell.events.callbacks["post_run_cell"]:
            self.shell.events.unregister("post_run_cell", self.record)

    def record(self, result: Any) -> None:
        exc = result.error_in_exec or result.error_before_exec
        count = result.execution_count
        if exc is None or count is None:
            return
        log = self.shell.user_ns.get("Err")
        if not isinstance(log, dict):  # the user rebound Err: start a new log
            log = self.shell.user_ns["Err"] = ErrorLog()
        log[count] = traceback_text(self.shell, exc)
