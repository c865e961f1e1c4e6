"""``agentstack-lab memory ...``: store, get, search, list and delete entries; re-embed the whole memory.

Reads take ``--json``. Numbers are checked before any work (:mod:`agentstack_lab.validation`):
``--threshold`` is a finite score in 0..1, ``--limit``/``--offset`` fit SQLite's 64-bit integers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import typer

from agentstack_lab.cli.common import (
    JSON_OPTION,
    CommandError,
    open_workspace,
    print_json,
    read_stdin,
    table,
    timestamp,
)
from agentstack_lab.errors import NotFoundError, UsageError
from agentstack_lab.validation import check_int, check_threshold

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Store, get, search, list and delete memory entries.")

NS = typer.Option(None, "--namespace", "-n", help="Namespace (default: 'default', or the session's own).")
SESSION = typer.Option(None, "--session", "-s", help="Act within this session (its private namespace).")
AGENT = typer.Option(None, "--agent", "-a", help="Agent id.")


def _memory(ctx: typer.Context, session: str | None, agent: str | None = None) -> Any:
    ws = open_workspace(ctx)
    if session is not None:  # "" is an error, never "no session"
        ws.sessions.require_active(session)  # unknown, ended or empty session id -> clear error  # unknown or ended session -> clear error
        return ws.memory.scoped(session, agent_id=agent)
    return ws.memory


def _missing(mem: Any, key: str, namespace: str | None) -> NotFoundError:
    from agentstack_lab.memory.access import derive_namespace

    return NotFoundError(f"no entry {key!r} in namespace {derive_namespace(mem.context, namespace)!r}")


@app.command("store")
def memory_store(ctx: typer.Context, key: str,
                 content: str = typer.Argument(None, help="Text, or '-' / omitted for stdin."),
                 namespace: str = NS, session: str = SESSION, agent: str = AGENT,
                 tag: list[str] = typer.Option(None, "--tag", "-t", help="Tag (repeatable)."),
                 metadata: str = typer.Option(None, "--metadata", help="JSON object."),
                 as_json: bool = JSON_OPTION):
    """Store (or update) an entry."""
    meta = None
    if metadata is not None:
        try:
            meta = json.loads(metadata)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--metadata is not valid JSON: {exc.msg}") from None
    if content is None or content == "-":
        content = read_stdin()  # before the workspace opens: bad input changes nothing, not even a new file
    entry = _memory(ctx, session, agent).store(key, content, namespace=namespace, agent_id=agent, tags=tag or None, metadata=meta)
    if as_json:
        print_json(entry.to_dict())
    else:
        typer.echo(f"stored {entry.namespace}/{entry.key} (version {entry.version})")


@app.command("get")
def memory_get(ctx: typer.Context, key: str, namespace: str = NS, session: str = SESSION, agent: str = AGENT,
               as_json: bool = JSON_OPTION):
    """Print one entry."""
    mem = _memory(ctx, session, agent)
    entry = mem.get(key, namespace=namespace)
    if entry is None:
        raise _missing(mem, key, namespace)
    if as_json:
        print_json(entry.to_dict())
        return
    typer.echo(f"{entry.namespace}/{entry.key}  v{entry.version}  {timestamp(entry.updated_at)}"
               + (f"  agent={entry.agent_id}" if entry.agent_id else "")
               + (f"  tags={','.join(entry.tags)}" if entry.tags else ""))
    typer.echo(entry.content)


@app.command("search")
def memory_search(ctx: typer.Context, query: str,
                  mode: str = typer.Option("hybrid", "--mode", "-m", help="hybrid | fts | vector"),
                  namespace: str = NS, session: str = SESSION, agent: str = AGENT,
                  no_shared: bool = typer.Option(False, "--no-shared", help="With --agent: skip shared entries."),
                  limit: int = typer.Option(10, "--limit", "-l"),
                  threshold: float = typer.Option(None, "--threshold", help="Minimum score (0..1)."),
                  as_json: bool = JSON_OPTION):
    """Search memory by keywords, meaning, or both."""
    if not query.strip():
        raise CommandError("the search query is empty; 'memory list' shows every entry")
    check_int("--limit", limit, minimum=1)
    check_threshold("--threshold", threshold)
    results = _memory(ctx, session, agent).search(query, mode, namespace=namespace, agent_id=agent,
                                                  include_shared=not no_shared, limit=limit, threshold=threshold)
    if getattr(results, "degraded", None):
        typer.echo(f"warning: {results.degraded}", err=True)
    if as_json:
        print_json([r.to_dict() for r in results])
        return
    table(f"{len(results)} result(s) for {query!r} ({mode})", ["#", "score", "key", "namespace", "matched", "snippet"],
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


@app.command("list")
def memory_list(ctx: typer.Context, namespace: str = NS, session: str = SESSION, agent: str = AGENT,
                no_shared: bool = typer.Option(False, "--no-shared"), tag: str = typer.Option(None, "--tag", "-t"),
                limit: int = typer.Option(50, "--limit", "-l"), offset: int = typer.Option(0, "--offset"),
                as_json: bool = JSON_OPTION):
    """List entries, newest first."""
    check_int("--limit", limit)
    check_int("--offset", offset)
    entries = _memory(ctx, session, agent).list(namespace=namespace, agent_id=agent, include_shared=not no_shared,
                                                tag=tag, limit=limit, offset=offset)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    table(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}",
          ["key", "namespace", "agent", "tags", "updated", "content"],
          [[e.key, e.namespace, e.agent_id, ",".join(e.tags), timestamp(e.updated_at),
            (e.content[:80] + "…") if len(e.content) > 80 else e.content] for e in entries])


@app.command("delete")
def memory_delete(ctx: typer.Context, key: str, namespace: str = NS, session: str = SESSION, agent: str = AGENT):
    """Delete an entry."""
    mem = _memory(ctx, session, agent)
    if not mem.delete(key, namespace=namespace):
        raise _missing(mem, key, namespace)
    typer.echo(f"deleted {key}")




@app.command("reembed")
def memory_reembed(ctx: typer.Context,
                   batch_size: int = typer.Option(256, "--batch-size", help="Entries embedded per batch."),
                   as_json: bool = JSON_OPTION):
    """Re-embed every entry with the configured embedder (resumable; the memory stays searchable)."""
    check_int("--batch-size", batch_size, minimum=1)
    mem = open_workspace(ctx).memory
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TaskProgressColumn(), TimeRemainingColumn(), console=Console(stderr=True)) as bar:
        task = bar.add_task("re-embedding", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            result = mem.reembed(batch_size=batch_size, progress=progress)
        except KeyboardInterrupt:
            bar.stop()
            typer.echo("memory reembed: interrupted; run it again to resume where it stopped", err=True)
            raise typer.Exit(130) from None
    if as_json:
        print_json(dataclasses.asdict(result))
        return
    typer.echo(f"re-embedded {result.total} entries with {result.embedder} (model {result.model!r}, dimension"
               f" {result.dimensions}){'; resumed an interrupted run' if result.resumed else ''}")
