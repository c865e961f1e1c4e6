"""What every command group shares: the exit-code policy, error handling, the workspace, JSON and tables.

Exit codes, one policy for every command (scripts and CI gate on them):

* ``0`` success (a workflow or check PASSed),
* ``1`` a check failed: a workflow's verdict is FAIL, ``config validate`` or ``workflow validate``
  found the file invalid, ``agent run`` ended with its root agent failed or stopped,
* ``2`` the command could not run: bad input (options, parameters, names), a missing or unwritable
  file, a closed session, any other expected error, and bugs.

Expected errors derive from :class:`agentstack_lab.errors.AgentstackError` and print as one line
``error: <message>``. Anything else is a bug: it is logged with its traceback (printed on the
terminal with ``-v``/``--debug``, else saved to a file named in a one-line hint). The root group
(:class:`HandledGroup`) applies this to every command, so a command raises and never prints errors
itself. Everything here is public: command modules import these names, never each other's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer
import typer.exceptions
from typer.core import TyperGroup

from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import camel_keys
from agentstack_lab.redaction import public_message
from agentstack_lab.validation import decode_utf8

if TYPE_CHECKING:
    # TyperGroup.invoke takes the Context of typer's own copy of click (typer >= 0.29), not click's.
    from typer._click import Context as _GroupContext

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAIL",
    "EXIT_OK",
    "JSON_OPTION",
    "CommandError",
    "HandledGroup",
    "configure_logging",
    "console",
    "duration",
    "fail",
    "handled",
    "open_workspace",
    "print_json",
    "read_stdin",
    "require_writable",
    "short",
    "table",
    "timestamp",
]

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
JSON_OPTION = typer.Option(False, "--json", help="Print JSON.")
log = logging.getLogger("agentstack_lab.cli")


class CommandError(AgentstackError):
    """A command could not run; the message says why (one line, exit 2)."""


# --- errors ---------------------------------------------------------------------------------------
def fail(text: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print ``error: text`` on stderr; returns the :class:`typer.Exit` for the caller to raise."""
    typer.echo(f"error: {text}", err=True)
    return typer.Exit(code)


def _bug(exc: BaseException, verbose: bool) -> None:
    """Log an unexpected exception with its traceback; without ``-v`` save it and say where."""
    log.error("unexpected error (a bug in agentstack-lab)", exc_info=exc)
    if verbose:
        typer.echo(f"error: internal error ({type(exc).__name__}), a bug in agentstack-lab; "
                   "the traceback is above", err=True)
        return
    import tempfile

    text = "".join(traceback.format_exception(exc))
    where = ""
    with contextlib.suppress(OSError):
        fd, name = tempfile.mkstemp(prefix="agentstack-lab-traceback-", suffix=".txt")
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        where = f"; traceback saved to {name}"
    typer.echo(f"error: internal error ({type(exc).__name__}), a bug in agentstack-lab{where}; "
               "run again with --debug to print it", err=True)


# click's and typer's own control flow (exits, usage errors with exit 2, aborts) passes through;
# typer >= 0.29 carries its own copy of click, so both sets are listed.
_PASS_THROUGH = (typer.Exit, typer.Abort, getattr(typer.exceptions, "TyperException", click.ClickException),
                 click.exceptions.Exit, click.ClickException, click.Abort,
                 SystemExit, KeyboardInterrupt)


@contextlib.contextmanager
def handled(verbose: bool = False) -> Iterator[None]:
    """Turn what escapes a command into the exit-code policy."""
    try:
        yield
    except _PASS_THROUGH:
        raise
    except AgentstackError as exc:
        raise fail(public_message(exc)) from None
    except Exception as exc:
        from agentstack_lab.store.connection import storage_error

        known = storage_error(exc, _OPENED.get("db", "of the workspace"))   # disk full, read-only, damaged
        if known is not None:
            log.debug("storage error", exc_info=exc)
            raise fail(public_message(known)) from None
        _bug(exc, verbose)
        raise typer.Exit(EXIT_ERROR) from None


_OPENED: dict[str, str] = {}   # the database of the workspace this command opened (named in storage errors)


class HandledGroup(TyperGroup):
    """The root group: every subcommand runs inside :func:`handled`."""

    def invoke(self, ctx: _GroupContext) -> Any:
        verbose = bool(ctx.params.get("verbose") or ctx.params.get("debug"))
        with handled(verbose):
            return super().invoke(ctx)


def configure_logging(*, verbose: bool, debug: bool) -> None:
    """Package logs on stderr with ``-v`` (warnings up) or ``--debug`` (everything); else silent.

    Without either flag stderr carries the one error line only (a NullHandler keeps Python's
    last-resort handler from printing warnings).
    """
    logger = logging.getLogger("agentstack_lab")
    for old in [h for h in logger.handlers if getattr(h, "agentstack_cli", False)]:
        logger.removeHandler(old)
    handler: logging.Handler
    if verbose or debug:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        level = logging.DEBUG if debug else logging.WARNING
        handler.setLevel(level)
        logger.setLevel(level)
    else:
        handler = logging.NullHandler()
    handler.agentstack_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)


# --- inputs ---------------------------------------------------------------------------------------
def open_workspace(ctx: typer.Context, *, announce_new: bool = True) -> Any:
    """The workspace of the global ``--workspace`` (or found from the cwd), closed when the command ends.

    Its database path is printed when this command creates it.
    """
    from agentstack_lab.workspace import Workspace

    root = ctx.find_root().obj or {}
    ws = Workspace.open(root.get("workspace"), announce=False)
    _OPENED["db"] = str(ws.db_path)
    ws.announce = announce_new and not ws.db_path.exists()
    ctx.call_on_close(ws.close)
    return ws


def read_stdin() -> str:
    """Standard input as text; bytes that are not UTF-8 are a one-line error."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return sys.stdin.read()
    return decode_utf8(stream.read(), "standard input")


def require_writable(path: str | Path, option: str) -> Path:
    """Check before a long run that ``path`` can be written (its folder exists or can be made).

    Raises:
        CommandError: naming the option and the path, e.g. ``--report /r.json: folder / is not writable``.
    """
    import os

    p = Path(path)
    if p.is_dir():
        raise CommandError(f"{option} {p}: is a folder, expected a file")
    if p.exists() and not os.access(p, os.W_OK):
        raise CommandError(f"{option} {p}: file is not writable")
    folder = p.parent
    while not folder.exists():          # the nearest existing ancestor decides whether mkdir can work
        folder = folder.parent
    if not folder.is_dir():
        raise CommandError(f"{option} {p}: {folder} is not a folder")
    if not p.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise CommandError(f"{option} {p}: folder {folder} is not writable")
    return p


# --- output ---------------------------------------------------------------------------------------
def print_json(data: Any, *, line: bool = False, as_written: bool = False) -> None:
    """Print ``data`` as indented JSON on stdout (non-JSON values as strings), keys in camelCase.

    Keys go through :func:`agentstack_lab.events.camel_keys`, the converter the MCP server and the lab server
    use too, so user and model data (metadata, inputs, answers) keep theirs. Args:
        data: what to print.
        line: one compact line (a stream of documents, as ``agent watch --json``) instead of indented JSON.
        as_written: ``data`` is a document with its own keys (the config, whose keys are the config file's),
            printed unconverted.
    """
    out = data if as_written else camel_keys(data)
    typer.echo(json.dumps(out, indent=None if line else 2, ensure_ascii=False, default=str))


def console(stderr: bool = False, *, stream: bool = False) -> Any:
    """A rich console (no automatic highlighting; ``stream``: soft-wrapped for streamed text)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=stream)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a rich table; ``None`` cells are blank, rich ``Text`` cells keep their styles."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = Table(title=title, show_lines=False)
    for col in columns:
        out.add_column(col, overflow="fold")
    for row in rows:
        out.add_row(*["" if v is None else v if isinstance(v, Text) else str(v) for v in row])
    Console().print(out)


def timestamp(t: float | None) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS`` (blank for ``None``)."""
    import datetime as dt

    return "" if t is None else dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def short(text: Any, size: int) -> str:
    """``text`` on one line, cut to ``size`` characters with an ellipsis."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= size else text[: size - 1] + "…"


def duration(seconds: float | None) -> str:
    """``12.3s``, ``4m05s`` or ``2h03m`` (blank for ``None``)."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"
