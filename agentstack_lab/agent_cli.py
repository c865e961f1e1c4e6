"""``agentstack-lab agent ...``: run an agent headless, list agents, show a run's tree, watch activity live.

``run`` streams one run's events to the terminal (exit 0 when the root agent completed, 1 when it
failed or was stopped, 2 on bad input). ``list``, ``tree`` and ``watch`` read the workspace database
only, so they show runs of any process (a notebook kernel, another terminal, the MCP server).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import typer

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Run agents headless, list them, show a run's tree, watch live.")

STATUS_STYLE = {"pending": "dim", "idle": "dim", "running": "cyan", "waiting_user": "yellow",
                "completed": "green", "failed": "red", "stopped": "magenta"}
JSON = typer.Option(False, "--json", help="Print JSON.")


def _cli() -> Any:
    from agentstack_lab import cli  # the shared helpers (_ws, _handled, _print_json); imported late

    return cli


@contextlib.contextmanager
def _handled() -> Any:
    """The CLI's one-line errors, plus provider and run errors (a missing key, an engine refusal)."""
    cli = _cli()
    from agentstack_lab.engine import AgentRunError
    from agentstack_lab.providers.base import ProviderError

    with cli._handled():
        try:
            yield cli
        except (ProviderError, AgentRunError) as exc:
            raise cli.CliError(str(exc)) from None


def _console(stderr: bool = False, *, stream: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=stream)


def _short(text: Any, size: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _tokens(row: dict[str, Any]) -> int:
    return int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


# --- run ------------------------------------------------------------------------------------------
class _Printer:
    """Streams a run's events: text deltas inline under an agent header, tool calls and states as lines."""

    def __init__(self, console: Any):
        self.console = console
        self.names: dict[str, str] = {}
        self.current: str | None = None
        self.mid_line = False

    def _header(self, agent_id: str) -> None:
        if self.current != agent_id:
            self._newline()
            self.console.print(f"[bold]── {self.names.get(agent_id, agent_id[:8])} ──[/bold]")
            self.current = agent_id

    def _newline(self) -> None:
        if self.mid_line:
            self.console.print()
            self.mid_line = False

    def __call__(self, ev: Any) -> None:
        from rich.markup import escape

        kind = ev.type
        if kind == "agent-state":
            st = ev.state
            self.names[ev.agent_id] = st.get("name") or ev.agent_id[:8]
            if st.get("status") in ("running", "completed", "failed", "stopped") and st.get("status") != \
                    getattr(self, f"_last_{ev.agent_id}", None):
                setattr(self, f"_last_{ev.agent_id}", st.get("status"))
                self._newline()
                style = STATUS_STYLE.get(st["status"], "")
                self.console.print(f"[{style}]● {escape(self.names[ev.agent_id])} {st['status']}[/{style}]"
                                   + (f" [dim]{escape(_short(st.get('error'), 160))}[/dim]" if st.get("error") else ""))
                self.current = None
        elif kind == "text-delta":
            self._header(ev.agent_id)
            self.console.print(escape(ev.delta), end="")
            self.mid_line = not ev.delta.endswith("\n")
        elif kind == "tool-call":
            self._header(ev.agent_id)
            self._newline()
            shown = ev.input.get("code") if isinstance(ev.input, dict) and "code" in ev.input else ev.input
            self.console.print(f"[yellow]⚙ {escape(ev.tool)}[/yellow] [dim]{escape(_short(shown, 200))}[/dim]")
        elif kind == "tool-result":
            self._newline()
            style, text = ("red", ev.error) if ev.error else ("dim", ev.output)
            self.console.print(f"[{style}]↳ {escape(ev.tool)}: {escape(_short(text, 200))}[/{style}]")


def _failure_line(run: Any, auto_approve: bool) -> str:
    from agentstack_lab.engine import HeadlessQueryError

    failure = getattr(run, "_failure", None)
    error = run.error or (run.tree.get("error") if run.nodes else None) or run.status
    if isinstance(failure, HeadlessQueryError):
        kind = failure.kind
        if kind == "approval" and not auto_approve:
            return ("approval required: an agent wants to run Python code, and `agent run` is headless, so the run "
                    "failed closed; rerun with --auto-approve to allow it")
        if kind in ("clarification", "blocking", "final"):
            return (f"an agent asked a {kind} question and `agent run` is headless, so the run failed closed; "
                    f"give the answer up front with --answer {kind}=TEXT")
    return f"run {run.status}: {_short(error, 500)}"


async def _run(prompt: str, *, ws: Any, agent_type: str | None, provider: str | None, model: str | None,
               options: dict[str, Any], session: str | None, as_json: bool) -> Any:
    from agentstack_lab.engine import AgentRun

    run = AgentRun(prompt, workspace=ws, provider=provider, agent_type=agent_type, options=options, model=model,
                   session_id=session)
    if not as_json:
        _console(stderr=True).print(f"[dim]run {run.id} · provider {getattr(run.provider, 'name', '?')} · "
                                    f"executor {run.executor.name}[/dim]")
        run.subscribe(_Printer(_console(stream=True)))
    try:
        await run.wait(raise_on_error=False)
    except asyncio.CancelledError:  # Ctrl-C: stop the tree, keep the log consistent
        run.stop(reason="interrupted")
        with contextlib.suppress(BaseException):
            await run.wait(raise_on_error=False)
        raise
    return run


@app.command("run")
def run_command(ctx: typer.Context, prompt: str = typer.Argument(..., help="What to ask."),
                agent_type: str = typer.Option(None, "--type", "-t", help="Root agent type (default: config)."),
                provider: str = typer.Option(None, "--provider", "-p", help="Provider name (default: config)."),
                model: str = typer.Option(None, "--model", "-m", help="Model name for the provider."),
                auto_approve: bool = typer.Option(False, "--auto-approve",
                                                  help="Let agents run Python without asking (else: fail closed)."),
                executor: str = typer.Option("subprocess", "--executor", "-e",
                                             help="Where code runs: subprocess (isolated) or live (this process)."),
                answer: list[str] = typer.Option(None, "--answer", "-a", metavar="KIND=TEXT",
                                                 help="Answer a clarification/blocking/final question up front."),
                no_subagents: bool = typer.Option(False, "--no-subagents", help="Do not split into subagents."),
                max_depth: int = typer.Option(None, "--max-depth", min=0),
                timeout: float = typer.Option(None, "--timeout", help="Wall-clock budget in seconds."),
                session: str = typer.Option(None, "--session", "-s", help="Run within this session."),
                as_json: bool = JSON):
    """Run an agent tree headless, streaming its text and tool calls; exit 1 unless it completed."""
    with _handled() as cli:
        if executor not in ("subprocess", "live"):
            raise cli.CliError(f"--executor must be 'subprocess' or 'live', got {executor!r}")
        answers: dict[str, Any] = {}
        for item in answer or []:
            kind, sep, text = item.partition("=")
            if not sep or kind not in ("clarification", "blocking", "final"):
                raise cli.CliError(f"--answer expects KIND=TEXT with KIND clarification, blocking or final; got {item!r}")
            answers[kind] = text
        options: dict[str, Any] = {"interactive": False, "auto_approve": auto_approve, "executor": executor,
                                   "answers": answers, "subagents": not no_subagents}
        if max_depth is not None:
            options["max_depth"] = max_depth
        if timeout is not None:
            options["timeout_s"] = timeout
        ws = cli._ws(ctx)
        if session is not None:  # "" is an error, never "no session"
            ws.sessions.require_active(session)
        run = asyncio.run(_run(prompt, ws=ws, agent_type=agent_type, provider=provider, model=model,
                               options=options, session=session, as_json=as_json))
    if as_json:
        cli._print_json({"run_id": run.id, "status": run.status, "result": run.result, "error": run.error,
                         "tree": run.tree})
    elif run.status == "completed":
        _console().print(f"\n[green]✔ completed[/green] [dim](run {run.id})[/dim]")
    if run.status != "completed":
        typer.echo(f"error: {_failure_line(run, auto_approve)}", err=True)
        raise typer.Exit(1)


# --- list / tree ----------------------------------------------------------------------------------
@app.command("list")
def list_command(ctx: typer.Context, run: str = typer.Option(None, "--run", "-r", help="Only this run (id or prefix)."),
                 status: str = typer.Option(None, "--status", help="Only agents with this status."),
                 runs_only: bool = typer.Option(False, "--runs", help="Only run roots (one row per run)."),
                 limit: int = typer.Option(50, "--limit", "-l", min=1), as_json: bool = JSON):
    """List agents from the workspace database, newest first."""
    with _handled() as cli:
        from agentstack_lab.agents.spawner import STATUSES
        from agentstack_lab.engine.activity import agent_rows, elapsed_s, resolve_run
        from agentstack_lab.engine.liveness import reap_orphans

        if status is not None and status not in STATUSES:
            raise cli.CliError(f"--status must be one of {', '.join(STATUSES)}; got {status!r}")
        db = cli._ws(ctx).db
        reap_orphans(db)  # agents whose process died show as failed, not running
        rows = agent_rows(db, run_id=resolve_run(db, run) if run else None, status=status, roots=runs_only,
                          limit=limit)
        if as_json:
            cli._print_json(rows)
            return
        cli._table(f"{len(rows)} agent(s)", ["id", "type", "status", "run", "tokens", "elapsed", "prompt"],
                   [[r["id"][:8], r["type"], r["status"], (r["run_id"] or "")[:8], _tokens(r),
                     _duration(elapsed_s(r)), _short(r["prompt"], 60)] for r in rows])


def _render_tree(node: dict[str, Any], branch: Any = None) -> Any:
    from rich.markup import escape
    from rich.tree import Tree

    style = STATUS_STYLE.get(node.get("status", ""), "")
    usage = node.get("usage") or {}
    label = (f"[bold]{escape(node.get('name') or node['id'][:8])}[/bold] [{style}]{node.get('status')}[/{style}]"
             f" [dim]{node.get('type')} · {usage.get('input_tokens', 0) + usage.get('output_tokens', 0)} tokens[/dim]"
             f"\n[dim]{escape(_short(node.get('prompt'), 100))}[/dim]")
    outcome = node.get("result") if node.get("status") == "completed" else node.get("error")
    if outcome:
        label += f"\n{escape(_short(outcome, 200))}"
    here = Tree(label) if branch is None else branch.add(label)
    for child in node.get("children", []):
        _render_tree(child, here)
    return here


@app.command("tree")
def tree_command(ctx: typer.Context, run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
                 as_json: bool = JSON):
    """Show a run's agent tree, rebuilt from the event log."""
    with _handled() as cli:
        from agentstack_lab.engine.activity import resolve_run
        from agentstack_lab.engine.liveness import reap_orphans
        from agentstack_lab.engine.log import rebuild_tree

        db = cli._ws(ctx).db
        reap_orphans(db)
        tree = rebuild_tree(db, resolve_run(db, run_id))
        if not tree:
            raise cli.CliError(f"run {run_id!r} has no logged agent state yet")
        if as_json:
            cli._print_json(tree)
        else:
            _console().print(_render_tree(tree))


# --- watch ----------------------------------------------------------------------------------------
class Watch:
    """What ``agent watch`` shows: agent rows plus each agent's last event, following the log by ``seq``."""

    def __init__(self, db: Any, *, run_id: str | None = None, limit: int = 30):
        from agentstack_lab.engine.activity import EventFollower, last_events
        from agentstack_lab.engine.liveness import reap_orphans

        reap_orphans(db)
        self.db, self.run_id, self.limit = db, run_id, limit
        self.follower = EventFollower(db, run_id=run_id)
        self.follower.seq = self.follower.head()
        self.rows = self._rows()
        self.last = last_events(db, [r["run_id"] for r in self.rows])
        self.events_seen = 0

    def _rows(self) -> list[dict[str, Any]]:
        from agentstack_lab.engine.activity import agent_rows

        return agent_rows(self.db, run_id=self.run_id, limit=self.limit)

    def refresh(self) -> None:
        from agentstack_lab.engine.activity import describe_event
        from agentstack_lab.engine.liveness import reap_orphans

        reap_orphans(self.db)  # a run whose process dies while watched turns failed (its error events follow)
        for ev in self.follower.poll():
            self.events_seen += 1
            if ev["agent_id"]:
                self.last[ev["agent_id"]] = {"seq": ev["seq"], "type": ev["type"],
                                             "text": describe_event(ev["type"], ev["payload"]), "at": ev["at"]}
        self.rows = self._rows()

    def table(self) -> Any:
        from rich.markup import escape
        from rich.table import Table

        from agentstack_lab.engine.activity import elapsed_s

        now = time.time()
        rows = sorted(self.rows, key=lambda r: (r["status"] not in ("running", "waiting_user"), r["created_at"]))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        summary = "  ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no agents yet"
        table = Table(title=f"agentstack-lab agents · {summary} · seq {self.follower.seq}",
                      caption=time.strftime("%H:%M:%S") + " · Ctrl-C to stop", expand=False)
        for col in ("id", "type", "status", "tokens", "elapsed"):
            table.add_column(col, no_wrap=True, overflow="ellipsis", max_width=14)
        table.add_column("last event", min_width=24, overflow="fold")
        for r in rows:
            last = self.last.get(r["id"])
            ago = f" [dim]({_duration(now - last['at'])} ago)[/dim]" if last else ""
            style = STATUS_STYLE.get(r["status"], "")
            table.add_row(r["id"][:8], r["type"], f"[{style}]{r['status']}[/{style}]",
                          str(_tokens(r)), _duration(elapsed_s(r, now)),
                          (escape(last["text"]) + ago) if last else "")
        return table


@app.command("watch")
def watch_command(ctx: typer.Context, run: str = typer.Option(None, "--run", "-r", help="Only this run (id or prefix)."),
                  interval: float = typer.Option(1.0, "--interval", "-i", min=0.1, help="Seconds between refreshes."),
                  once: bool = typer.Option(False, "--once", help="Print the table once and exit."),
                  limit: int = typer.Option(30, "--limit", "-l", min=1, help="Most recent agents shown.")):
    """A live table of agents (id, type, status, tokens, elapsed, last event) read from the workspace database."""
    with _handled() as cli:
        from agentstack_lab.engine.activity import resolve_run

        db = cli._ws(ctx).db
        watch = Watch(db, run_id=resolve_run(db, run) if run else None, limit=limit)
        console = _console()
        if once:
            console.print(watch.table())
            return
        from rich.live import Live

        try:
            with Live(watch.table(), console=console, refresh_per_second=4, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    watch.refresh()
                    live.update(watch.table(), refresh=True)
        except KeyboardInterrupt:
            pass
        console.print("Watch stopped.")
