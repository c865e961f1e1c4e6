"""The ``agentstack-lab`` command line: memory, sessions and config (other layers add their groups).

Every read command takes ``--json``. Errors print one line to stderr and exit 1;
no traceback reaches the terminal.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from agentstack_lab.errors import AgentstackError

__all__ = ["app", "main"]

app = typer.Typer(name="agentstack-lab", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, help="Recursive LLM agents at home in Jupyter.")
memory_app = typer.Typer(no_args_is_help=True, help="Store, get, search, list and delete memory entries.")
session_app = typer.Typer(no_args_is_help=True, help="Start, end and inspect sessions.")
config_app = typer.Typer(no_args_is_help=True, help="Show or validate the configuration.")
app.add_typer(memory_app, name="memory")
app.add_typer(session_app, name="session")
app.add_typer(config_app, name="config")
# Other layers register their groups here, one line each, e.g. app.add_typer(workflow_app, name="workflow").
app.add_typer(__import__("agentstack_lab.workflows.cli", fromlist=["app"]).app, name="workflow")
app.add_typer(__import__("agentstack_lab.agent_cli", fromlist=["app"]).app, name="agent")
app.command("mcp")(__import__("agentstack_lab.mcp.cli", fromlist=["mcp"]).mcp)


class CliError(AgentstackError):
    """An error to show as one line (exit 1)."""


def _expected_errors() -> tuple[type[BaseException], ...]:
    from agentstack_lab.config import ConfigError
    from agentstack_lab.memory import (
        AccessDeniedError,
        EmbedderMismatchError,
        MemoryValidationError,
        SessionError,
    )
    from agentstack_lab.store.connection import sqlite

    return (CliError, ConfigError, AccessDeniedError, EmbedderMismatchError, MemoryValidationError, SessionError,
            ValueError, LookupError, OSError, sqlite.Error)


@contextlib.contextmanager
def _handled() -> Iterator[None]:
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except _expected_errors() as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.callback()
def _root(ctx: typer.Context,
          workspace: Path = typer.Option(None, "--workspace", "-w", help="Workspace folder (default: found from cwd)."),
          verbose: bool = typer.Option(False, "--verbose", "-v", help="Show log messages (warnings and up).")):
    import logging

    if not verbose:  # the error line says it; keep stderr to one line
        logging.getLogger("agentstack_lab").addHandler(logging.NullHandler())
    ctx.obj = {"workspace": workspace}


def _ws(ctx: typer.Context):
    from agentstack_lab.workspace import Workspace

    root = ctx.find_root()
    path = (root.obj or {}).get("workspace") if root.obj else None
    ws = Workspace.open(path, announce=False)
    ws.announce = not ws.db_path.exists()   # the path is printed when a command creates the database
    ctx.call_on_close(ws.close)
    return ws


def _memory(ctx: typer.Context, session: str | None, agent: str | None = None):
    ws = _ws(ctx)
    if session is not None:  # "" is an error, never "no session"
        ws.sessions.require_active(session)  # unknown, ended or empty session id -> clear error
        return ws.memory.scoped(session, agent_id=agent)
    return ws.memory


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else v if isinstance(v, Text) else str(v) for v in row])
    Console().print(table)


def _ts(t: float | None) -> str:
    import datetime as dt

    return "" if t is None else dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


# --- memory ---------------------------------------------------------------------------------------
NS = typer.Option(None, "--namespace", "-n", help="Namespace (default: 'default', or the session's own).")
SESSION = typer.Option(None, "--session", "-s", help="Act within this session (its private namespace).")
AGENT = typer.Option(None, "--agent", "-a", help="Agent id.")
JSON = typer.Option(False, "--json", help="Print JSON.")


@memory_app.command("store")
def memory_store(ctx: typer.Context, key: str, content: str = typer.Argument(None, help="Text, or '-' / omitted for stdin."),
                 namespace: str = NS, session: str = SESSION, agent: str = AGENT,
                 tag: list[str] = typer.Option(None, "--tag", "-t", help="Tag (repeatable)."),
                 metadata: str = typer.Option(None, "--metadata", help="JSON object."),
                 as_json: bool = JSON):
    """Store (or update) an entry."""
    with _handled():
        if content is None or content == "-":
            content = sys.stdin.read()
        meta = None
        if metadata is not None:
            try:
                meta = json.loads(metadata)
            except json.JSONDecodeError as exc:
                raise CliError(f"--metadata is not valid JSON: {exc.msg}") from None
        entry = _memory(ctx, session, agent).store(key, content, namespace=namespace, agent_id=agent,
                                                   tags=tag or None, metadata=meta)
        if as_json:
            _print_json(entry.to_dict())
        else:
            typer.echo(f"stored {entry.namespace}/{entry.key} (version {entry.version})")


@memory_app.command("get")
def memory_get(ctx: typer.Context, key: str, namespace: str = NS, session: str = SESSION, agent: str = AGENT,
               as_json: bool = JSON):
    """Print one entry."""
    with _handled():
        mem = _memory(ctx, session, agent)
        entry = mem.get(key, namespace=namespace)
        if entry is None:
            from agentstack_lab.memory.access import derive_namespace

            raise CliError(f"no entry {key!r} in namespace {derive_namespace(mem.context, namespace)!r}")
        if as_json:
            _print_json(entry.to_dict())
            return
        typer.echo(f"{entry.namespace}/{entry.key}  v{entry.version}  {_ts(entry.updated_at)}"
                   + (f"  agent={entry.agent_id}" if entry.agent_id else "")
                   + (f"  tags={','.join(entry.tags)}" if entry.tags else ""))
        typer.echo(entry.content)


@memory_app.command("search")
def memory_search(ctx: typer.Context, query: str,
                  mode: str = typer.Option("hybrid", "--mode", "-m", help="hybrid | fts | vector"),
                  namespace: str = NS, session: str = SESSION, agent: str = AGENT,
                  no_shared: bool = typer.Option(False, "--no-shared", help="With --agent: skip shared entries."),
                  limit: int = typer.Option(10, "--limit", "-l", min=1),
                  threshold: float = typer.Option(None, "--threshold", help="Minimum score (0..1)."),
                  as_json: bool = JSON):
    """Search memory by keywords, meaning, or both."""
    with _handled():
        results = _memory(ctx, session, agent).search(query, mode, namespace=namespace, agent_id=agent,
                                                      include_shared=not no_shared, limit=limit, threshold=threshold)
        if getattr(results, "degraded", None):
            typer.echo(f"warning: {results.degraded}", err=True)
        if as_json:
            _print_json([r.to_dict() for r in results])
            return
        _table(f"{len(results)} result(s) for {query!r} ({mode})", ["#", "score", "key", "namespace", "matched", "snippet"],
               [[i, f"{r.score:.3f}", r.key, r.namespace, "+".join(sorted(r.matched)), _marked(r.snippet)]
                for i, r in enumerate(results, 1)])


def _marked(snippet: str) -> Any:
    """A search snippet (HTML with ``<mark>``) as rich text with the matches highlighted."""
    import html

    from rich.text import Text

    text = Text()
    for i, part in enumerate(snippet.replace("</mark>", "<mark>").split("<mark>")):
        text.append(html.unescape(part), style="bold reverse" if i % 2 else "")
    return text


@memory_app.command("list")
def memory_list(ctx: typer.Context, namespace: str = NS, session: str = SESSION, agent: str = AGENT,
                no_shared: bool = typer.Option(False, "--no-shared"), tag: str = typer.Option(None, "--tag", "-t"),
                limit: int = typer.Option(50, "--limit", "-l", min=0), offset: int = typer.Option(0, "--offset", min=0),
                as_json: bool = JSON):
    """List entries, newest first."""
    with _handled():
        entries = _memory(ctx, session, agent).list(namespace=namespace, agent_id=agent, include_shared=not no_shared,
                                                    tag=tag, limit=limit, offset=offset)
        if as_json:
            _print_json([e.to_dict() for e in entries])
            return
        _table(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}", ["key", "namespace", "agent", "tags", "updated", "content"],
               [[e.key, e.namespace, e.agent_id, ",".join(e.tags), _ts(e.updated_at),
                 (e.content[:80] + "…") if len(e.content) > 80 else e.content] for e in entries])


@memory_app.command("delete")
def memory_delete(ctx: typer.Context, key: str, namespace: str = NS, session: str = SESSION, agent: str = AGENT):
    """Delete an entry."""
    with _handled():
        mem = _memory(ctx, session, agent)
        if not mem.delete(key, namespace=namespace):
            from agentstack_lab.memory.access import derive_namespace

            raise CliError(f"no entry {key!r} in namespace {derive_namespace(mem.context, namespace)!r}")
        typer.echo(f"deleted {key}")


# --- sessions -------------------------------------------------------------------------------------
def _show_sessions(sessions: list[Any], as_json: bool, title: str) -> None:
    if as_json:
        _print_json([s.to_dict() for s in sessions])
        return
    _table(title, ["id", "name", "status", "started", "ended", "entries"],
           [[s.id, s.name, s.status, _ts(s.started_at), _ts(s.ended_at), s.entries] for s in sessions])


@session_app.command("start")
def session_start(ctx: typer.Context, name: str = typer.Option(None, "--name"), as_json: bool = JSON):
    """Start a session; prints its id."""
    with _handled():
        s = _ws(ctx).sessions.start(name)
        _print_json(s.to_dict()) if as_json else typer.echo(s.id)


@session_app.command("end")
def session_end(ctx: typer.Context, session_id: str, as_json: bool = JSON):
    """End a session and delete its private memory."""
    with _handled():
        s = _ws(ctx).sessions.end(session_id)
        if as_json:
            _print_json(s.to_dict())
        else:
            typer.echo(f"ended {s.id}; removed {s.entries} memory entr{'y' if s.entries == 1 else 'ies'}")


@session_app.command("status")
def session_status(ctx: typer.Context, session_id: str, as_json: bool = JSON):
    """Show one session."""
    with _handled():
        _show_sessions([_ws(ctx).sessions.status(session_id)], as_json, "session")


@session_app.command("active")
def session_active(ctx: typer.Context, as_json: bool = JSON):
    """List active sessions."""
    with _handled():
        _show_sessions(_ws(ctx).sessions.active(), as_json, "active sessions")


# --- config ---------------------------------------------------------------------------------------
@config_app.command("show")
def config_show(ctx: typer.Context, as_json: bool = JSON):
    """Print the effective configuration (secrets masked)."""
    with _handled():
        from agentstack_lab.workspace import Workspace

        root = ctx.find_root().obj or {}
        ws = Workspace.open(root.get("workspace"))
        data = ws.config.to_public_dict()
        if as_json:
            _print_json(data)
            return
        from rich.console import Console
        from rich.json import JSON as RichJSON

        src = ws.config.source
        typer.echo(f"# {src if src else 'defaults (no agentstack.config.json found)'}; database {ws.db_path}")
        Console().print(RichJSON(json.dumps(data, default=str)))


@config_app.command("validate")
def config_validate(path: Path = typer.Argument(None, help="Config file (default: found from cwd)."),
                    as_json: bool = JSON):
    """Check a config file; errors name the field."""
    with _handled():
        from agentstack_lab.config import find_config_file, load_config

        file = path or find_config_file()
        if file is not None and not Path(file).is_file():
            raise CliError(f"{file}: no such file")
        if file is not None:
            load_config(file)
        if as_json:
            _print_json({"ok": True, "file": str(Path(file).resolve()) if file else None})
        else:
            typer.echo(f"ok: {file}" if file else "ok: no agentstack.config.json found; using defaults")


def main() -> None:
    """Console entry point: one-line errors, never a traceback."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # last resort: one line, non-zero exit
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
