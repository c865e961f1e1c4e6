"""``agentstack-lab agent ...``: run an agent headless, list agents, show a run's tree, watch activity live.

``run`` streams one run's events to the terminal: exit 0 when the root agent completed, 1 when it
failed or was stopped (the run happened; its outcome is a failure), 2 when it could not start (bad
input). ``list``, ``tree`` and ``watch`` read the workspace database only, so they show runs of any
process (a notebook kernel, another terminal, the MCP server); all take ``--json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import typer

from agentstack_lab.cli.common import (
    EXIT_FAIL,
    JSON_OPTION,
    console,
    duration,
    fail,
    open_workspace,
    print_json,
    short,
    table,
)
from agentstack_lab.decisions.announce import PendingAnnouncer, how_to_answer
from agentstack_lab.errors import UsageError
from agentstack_lab.events import AGENT_STATUSES, QUESTION_KINDS, UNFINISHED
from agentstack_lab.validation import check_float, check_int

__all__ = ["STATUS_STYLE", "Watch", "app", "how_to_answer"]

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database
    from agentstack_lab.workspace import Workspace

app = typer.Typer(no_args_is_help=True, help="Run agents headless, list them, show a run's tree, watch live.")

# statuses that start a new line in `agent watch` (waiting is said by the decision line itself)
SHOWN_STATUSES = tuple(s for s in AGENT_STATUSES if s not in ("pending", "idle", "waiting_user"))
_STYLES = {"running": "cyan", "waiting_user": "yellow", "paused": "yellow", "completed": "green", "failed": "red",
           "stopped": "magenta"}
STATUS_STYLE = {status: _STYLES.get(status, "dim") for status in AGENT_STATUSES}  # every status, from events.py
QUERY_KINDS = QUESTION_KINDS  # approvals are given with --auto-approve, not --answer


def _tokens(row: dict[str, Any]) -> int:
    return int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)


def _own_tokens(row: dict[str, Any]) -> str:
    """An agents row's own figure, labelled by its basis (the column header names the scope)."""
    from agentstack_lab.engine.state import token_text

    usage = {"input_tokens": row.get("input_tokens"), "output_tokens": row.get("output_tokens"),
             "basis": row.get("token_basis")}
    return token_text(usage, "this agent").replace(", this agent)", ")").removesuffix(" (this agent)")


# --- run ------------------------------------------------------------------------------------------
class _Printer:
    """Streams a run's events: text deltas inline under an agent header, tool calls and states as lines."""

    def __init__(self, out: Any, announced: set[str] | None = None):
        self.console = out
        self.announced = set() if announced is None else announced   # decision ids shown (shared with the announcer)
        self.names: dict[str, str] = {}
        self.shown_status: dict[str, str] = {}
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
            status = st.get("status")
            if status in SHOWN_STATUSES \
                    and status != self.shown_status.get(ev.agent_id):
                self.shown_status[ev.agent_id] = status
                self._newline()
                style = STATUS_STYLE.get(status, "")
                self.console.print(f"[{style}]● {escape(self.names[ev.agent_id])} {status}[/{style}]"
                                   + (f" [dim]{escape(short(st.get('error'), 160))}[/dim]" if st.get("error") else ""))
                self.current = None
        elif kind == "text-delta":
            self._header(ev.agent_id)
            self.console.print(escape(ev.delta), end="")
            self.mid_line = not ev.delta.endswith("\n")
        elif kind == "tool-call":
            self._header(ev.agent_id)
            self._newline()
            shown = ev.input.get("code") if isinstance(ev.input, dict) and "code" in ev.input else ev.input
            self.console.print(f"[yellow]⚙ {escape(ev.tool)}[/yellow] [dim]{escape(short(shown, 200))}[/dim]")
        elif kind == "user-query":
            self.announced.add(ev.query_id)
            self._newline()
            label = f"{ev.kind} {'question' if ev.kind in QUERY_KINDS else 'decision'}"
            self.console.print(f"[yellow]? {escape(label)} {escape(ev.query_id)} from "
                               f"{escape(self.names.get(ev.agent_id, ''))}: "
                               f"{escape(short(ev.prompt, 200))}[/yellow]\n[dim]  waiting for an answer: "
                               f"{escape(how_to_answer(ev.kind, ev.query_id, ev.agent_id))}[/dim]")
        elif kind == "tool-result":
            self._newline()
            style, text = ("red", ev.error) if ev.error else ("dim", ev.output)
            self.console.print(f"[{style}]↳ {escape(ev.tool)}: {escape(short(text, 200))}[/{style}]")


def _failure_line(run: Any, auto_approve: bool) -> str:
    from agentstack_lab.engine import HeadlessQueryError

    failure = run.failure
    error = run.error or (run.tree.get("error") if run.agents else None) or run.status
    if isinstance(failure, HeadlessQueryError) and run.options.query_policy == "wait":
        return f"run failed closed: {failure}"
    if isinstance(failure, HeadlessQueryError):
        kind = failure.kind
        if kind == "approval" and not auto_approve:
            return ("approval required: an agent wants to run Python code, and `agent run` is headless, so the run "
                    "failed closed; rerun with --auto-approve to allow it")
        if kind in QUERY_KINDS:
            return (f"an agent asked a {kind} question and `agent run` is headless, so the run failed closed; "
                    f"give the answer up front with --answer {kind}=TEXT")
        if kind == "intervention":
            reason = next((n.metadata.get("resources", {}).get("reason") for n in run.agents.values()
                           if n.metadata.get("resources", {}).get("phase") == "intervention"), None)
            return (f"the resource monitor paused an agent at its intervention ({reason or 'a limit reached'}) and "
                    "`agent run` is headless (--on-query fail), so the run failed closed; rerun with --on-query "
                    "wait to answer it (resume or stop) from any surface, or raise the limit in the workspace "
                    "config's monitoring section")
        if kind == "consensus":
            return ("a consensus checkpoint needs a person's review (consensus.reviewer_strategy: human) and "
                    "`agent run` is headless (--on-query fail), so the run failed closed; rerun with --on-query "
                    "wait to approve or reject it from any surface, or --on-query auto to approve it")
    return f"run {run.status}: {short(error, 500)}"


async def _run(prompt: str, *, ws: Workspace, agent_type: str | None, provider: str | None, model: str | None,
               options: Any, session: str | None, as_json: bool) -> Any:
    from agentstack_lab.engine import AgentRun

    run = AgentRun(prompt, workspace=ws, provider=provider, agent_type=agent_type, options=options, model=model,
                   session_id=session, origin="terminal")
    # every decision the run waits on gets its line, even with --json (on stderr) and even when a
    # subagent in another process (a coordinated worker) opened it; the printer's own lines count
    announcer = PendingAnnouncer(ws.db, lambda line: typer.echo(line, err=True), runs={run.id})
    if not as_json:
        console(stderr=True).print(f"[dim]run {run.id} · provider {getattr(run.provider, 'name', '?')} · "
                                   f"executor {run.executor.name}[/dim]")
        run.subscribe(_Printer(console(stream=True), announced=announcer.announced))
    watching = asyncio.get_running_loop().create_task(announcer.run())
    try:
        await run.wait(raise_on_error=False)
    except asyncio.CancelledError:  # Ctrl-C: stop the tree, keep the log consistent
        run.stop(reason="interrupted")
        with contextlib.suppress(BaseException):
            await run.wait(raise_on_error=False)
        raise
    finally:
        watching.cancel()
    if options.cluster is not None and run.status == "failed":
        from agentstack_lab.coordination.dask import ClusterError

        try:
            await run.wait()
        except ClusterError:  # the run could not start its subagents: one line, exit 2 (not a verdict)
            raise
        except Exception:  # noqa: BLE001 - any other failure is the run's verdict, reported by the caller
            pass
    return run


def _answers(items: list[str]) -> dict[str, str]:
    answers: dict[str, str] = {}
    for item in items:
        kind, sep, text = item.partition("=")
        if not sep or kind not in QUERY_KINDS:
            raise UsageError(f"--answer expects KIND=TEXT with KIND clarification, blocking or final; got {item!r}")
        answers[kind] = text
    return answers


@app.command("run")
def run_command(ctx: typer.Context, prompt: str = typer.Argument(..., help="What to ask."),
                agent_type: str = typer.Option(None, "--type", "-t", help="Root agent type (default: config)."),
                provider: str = typer.Option(None, "--provider", "-p", help="Provider name (default: config)."),
                model: str = typer.Option(None, "--model", "-m", help="Model name for the provider."),
                auto_approve: bool = typer.Option(None, "--auto-approve/--no-auto-approve", show_default=False,
                                                  help="Let agents run Python without asking (default: config "
                                                       "agents.auto_approve, else fail closed)."),
                executor: str = typer.Option(None, "--executor", "-e",
                                             help="Where code runs: subprocess (isolated) or live (this process); "
                                                  "default: config agents.executor, else subprocess."),
                answer: list[str] = typer.Option(None, "--answer", "-a", metavar="KIND=TEXT",
                                                 help="Answer a clarification/blocking/final question up front."),
                on_query: str = typer.Option(None, "--on-query", metavar="fail|wait|auto",
                                             help="A question nobody answered up front: fail closed, wait for an "
                                                  "answer from any surface (`agentstack-lab decisions`), or "
                                                  "auto-approve (default: config agents.on_query, else fail)."),
                decision_timeout: str = typer.Option(None, "--decision-timeout", metavar="DURATION",
                                                     help="With --on-query wait: expire a question after this long "
                                                          "(e.g. 90s, 10m) and fail closed (default: wait forever)."),
                no_subagents: bool = typer.Option(False, "--no-subagents", help="Do not split into subagents."),
                coordinate: bool = typer.Option(False, "--coordinate",
                                                help="Queue the root's subquestions on the durable queue (workers run them)."),
                max_workers: int = typer.Option(None, "--max-workers", help="In-process workers of a --coordinate run."),
                cluster: str = typer.Option(None, "--cluster", metavar="ADDR",
                                            help="Place a --coordinate run's subagents on a Dask cluster: "
                                                 "tcp://scheduler:8786, or 'local' (default: agents.cluster of "
                                                 "the config; needs the dask extra)."),
                max_depth: int = typer.Option(None, "--max-depth", help="Deepest level of subagents (default 2)."),
                max_children: int = typer.Option(None, "--max-children", help="Subagents per agent (default 4)."),
                max_agents: int = typer.Option(None, "--max-agents", help="Agents in the whole tree (default 16)."),
                max_tokens: int = typer.Option(None, "--max-tokens", help="Token budget of the whole tree."),
                timeout: float = typer.Option(None, "--timeout", help="Wall-clock budget in seconds."),
                session: str = typer.Option(None, "--session", "-s", help="Run within this session."),
                identity: str = typer.Option(None, "--identity", "-i",
                                             help="Act as this persistent identity (id or display name; not retired)."),
                record: str = typer.Option(None, "--record", metavar="PATH",
                                           help="Record every model request and reply (and tool results) to this "
                                                "cassette (JSON Lines; secrets redacted)."),
                replay: str = typer.Option(None, "--replay", metavar="PATH",
                                           help="Serve the model's replies from this cassette: no network, no key."),
                replay_mode: str = typer.Option(None, "--replay-mode", metavar="strict|new_episodes",
                                                help="A request the cassette lacks: fail (strict, the default) or ask "
                                                     "the real provider and record it (new_episodes; with --record, "
                                                     "to that file, else appended to the cassette)."),
                as_json: bool = JSON_OPTION):
    """Run an agent tree headless, streaming its text and tool calls; exit 1 unless it completed."""
    if executor is not None and executor not in ("subprocess", "live"):
        raise UsageError(f"--executor must be 'subprocess' or 'live', got {executor!r}")
    if on_query is not None and on_query not in ("fail", "wait", "auto"):
        raise UsageError(f"--on-query must be fail, wait or auto; got {on_query!r}")
    given: dict[str, Any] = {"auto_approve": auto_approve, "executor": executor, "on_query": on_query,
                             "decision_timeout": decision_timeout, "identity": identity, "record": record,
                             "replay": replay, "replay_mode": replay_mode,
                             "subagents": False if no_subagents else None, "coordinate": True if coordinate else None}
    if answer:
        given["answers"] = _answers(answer)
    for name, flag, value in (("max_workers", "--max-workers", max_workers), ("max_depth", "--max-depth", max_depth),
                              ("max_children", "--max-children", max_children),
                              ("max_agents", "--max-agents", max_agents)):
        if value is not None:
            given[name] = check_int(flag, value, minimum=1 if name == "max_agents" else 0, maximum=1_000)
    if max_tokens is not None:
        given["max_tokens"] = check_int("--max-tokens", max_tokens, minimum=1)
    if timeout is not None:
        given["timeout_s"] = check_float("--timeout", timeout, above=0)
    if cluster is not None:
        from agentstack_lab.coordination.dask import check_address

        check_address(cluster)
        given["cluster"] = cluster
    given = {k: v for k, v in given.items() if v is not None}
    from agentstack_lab.engine.options import run_options

    run_options(None, surface="terminal", given=given)  # bad values: one line before the workspace is even opened
    ws = open_workspace(ctx)
    options = run_options(ws.config, surface="terminal", given=given)
    if decision_timeout is not None and options.query_policy != "wait":
        raise UsageError("--decision-timeout only applies with --on-query wait")
    if cluster is not None and not options.coordinate:
        raise UsageError("--cluster only applies with --coordinate")
    if session is not None:  # "" is an error, never "no session"
        ws.sessions.require_active(session)
    run = asyncio.run(_run(prompt, ws=ws, agent_type=agent_type, provider=provider, model=model,
                           options=options, session=session, as_json=as_json))
    if as_json:
        print_json({"run_id": run.id, "status": run.status, "result": run.result, "error": run.error,
                    "options": run.options.to_dict(), "tree": run.tree})
    elif run.status == "completed":
        console().print(f"\n[green]✔ completed[/green] [dim](run {run.id})[/dim]")
    if run.status != "completed":
        raise fail(_failure_line(run, run.options.auto_approve), EXIT_FAIL)


# --- list / tree ----------------------------------------------------------------------------------
@app.command("list")
def list_command(ctx: typer.Context, run: str = typer.Option(None, "--run", "-r", help="Only this run (id or prefix)."),
                 status: str = typer.Option(None, "--status", help="Only agents with this status."),
                 runs_only: bool = typer.Option(False, "--runs", help="Only run roots (one row per run)."),
                 limit: int = typer.Option(50, "--limit", "-l"), as_json: bool = JSON_OPTION):
    """List agents from the workspace database, newest first."""
    from agentstack_lab.agents.spawner import STATUSES
    from agentstack_lab.engine.activity import agent_rows, elapsed_s, resolve_run, run_costs
    from agentstack_lab.engine.liveness import reap_orphans
    from agentstack_lab.providers.prices import NO_COST, PriceTable

    check_int("--limit", limit, minimum=1)
    if status is not None and status not in STATUSES:
        raise UsageError(f"--status must be one of {', '.join(STATUSES)}; got {status!r}")
    ws = open_workspace(ctx)
    db, prices = ws.db, PriceTable.from_config(ws.config)
    reap_orphans(db)  # agents whose process died show as failed, not running
    rows = agent_rows(db, run_id=resolve_run(db, run) if run else None, status=status, roots=runs_only, limit=limit,
                      prices=prices)
    if runs_only:  # one row per run: its cost is the whole run's
        costs = run_costs(db, [r["run_id"] for r in rows if r["run_id"]], prices)
        for r in rows:
            r["runCost"] = costs.get(r["run_id"], NO_COST).to_wire()
    if as_json:
        print_json(rows)
        return
    cost = "cost (whole run)" if runs_only else "cost (this agent)"
    table(f"{len(rows)} agent(s)", ["id", "type", "status", "run", "tokens (this agent)", cost, "elapsed", "prompt"],
          [[r["id"][:8], r["type"], r["status"], (r["run_id"] or "")[:8], _own_tokens(r),
            (r["runCost"] if runs_only else r["cost"])["text"] or "-", duration(elapsed_s(r)), short(r["prompt"], 60)]
           for r in rows])


def _render_tree(node: dict[str, Any], branch: Any = None) -> Any:
    from rich.markup import escape
    from rich.tree import Tree

    from agentstack_lab.engine.state import token_text, tree_scope

    style = STATUS_STYLE.get(node.get("status", ""), "")
    usage = node.get("usage") or {}
    label = (f"[bold]{escape(node.get('name') or node['id'][:8])}[/bold] [{style}]{node.get('status')}[/{style}]"
             f" [dim]{node.get('type')} · {escape(token_text(usage, tree_scope(node)))}"
             + (f" · cost {escape(node['cost']['text'])}" if (node.get("cost") or {}).get("text") else "") + "[/dim]"
             f"\n[dim]{escape(short(node.get('prompt'), 100))}[/dim]")
    outcome = node.get("result") if node.get("status") == "completed" else node.get("error")
    if outcome:
        label += f"\n{escape(short(outcome, 200))}"
    here = Tree(label) if branch is None else branch.add(label)
    for child in node.get("children", []):
        _render_tree(child, here)
    return here


@app.command("tree")
def tree_command(ctx: typer.Context, run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
                 as_json: bool = JSON_OPTION):
    """Show a run's agent tree, rebuilt from the event log."""
    from agentstack_lab.engine.activity import resolve_run
    from agentstack_lab.engine.liveness import reap_orphans
    from agentstack_lab.engine.log import rebuild_tree
    from agentstack_lab.errors import NotFoundError
    from agentstack_lab.providers.prices import PriceTable, price_tree

    ws = open_workspace(ctx)
    db = ws.db
    reap_orphans(db)
    tree = rebuild_tree(db, resolve_run(db, run_id))
    if not tree:
        raise NotFoundError(f"run {run_id!r} has no logged agent state yet")
    price_tree(tree, PriceTable.from_config(ws.config))
    if as_json:
        print_json(tree)
    else:
        console().print(_render_tree(tree))


# --- watch ----------------------------------------------------------------------------------------
class Watch:
    """What ``agent watch`` shows: agent rows plus each agent's last event, following the log by ``seq``."""

    def __init__(self, db: Database, *, run_id: str | None = None, limit: int = 30):
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

    def _sorted(self) -> list[dict[str, Any]]:
        return sorted(self.rows, key=lambda r: (r["status"] not in UNFINISHED, r["created_at"]))

    def snapshot(self) -> dict[str, Any]:
        """The same content as :meth:`table`, as JSON-ready data (``agent watch --json``)."""
        from agentstack_lab.engine.activity import elapsed_s

        now = time.time()
        return {"seq": self.follower.seq, "at": now,
                "agents": [{**r, "tokens": _tokens(r), "elapsed_s": elapsed_s(r, now),
                            "last_event": self.last.get(r["id"])} for r in self._sorted()]}

    def table(self) -> Any:
        from rich.markup import escape
        from rich.table import Table

        from agentstack_lab.engine.activity import elapsed_s

        now = time.time()
        rows = self._sorted()
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        summary = "  ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no agents yet"
        out = Table(title=f"agentstack-lab agents · {summary} · seq {self.follower.seq}",
                    caption=time.strftime("%H:%M:%S") + " · Ctrl-C to stop", expand=False)
        for col in ("id", "type", "status", "tokens", "elapsed"):
            out.add_column(col, no_wrap=True, overflow="ellipsis", max_width=14)
        out.add_column("last event", min_width=24, overflow="fold")
        for r in rows:
            last = self.last.get(r["id"])
            ago = f" [dim]({duration(now - last['at'])} ago)[/dim]" if last else ""
            style = STATUS_STYLE.get(r["status"], "")
            out.add_row(r["id"][:8], r["type"], f"[{style}]{r['status']}[/{style}]",
                        _own_tokens(r), duration(elapsed_s(r, now)),
                        (escape(last["text"]) + ago) if last else "")
        return out


@app.command("watch")
def watch_command(ctx: typer.Context, run: str = typer.Option(None, "--run", "-r", help="Only this run (id or prefix)."),
                  interval: float = typer.Option(1.0, "--interval", "-i", help="Seconds between refreshes (>= 0.1)."),
                  once: bool = typer.Option(False, "--once", help="Print the table once and exit."),
                  limit: int = typer.Option(30, "--limit", "-l", help="Most recent agents shown."),
                  as_json: bool = typer.Option(False, "--json",
                                               help="Print JSON: one document with --once, else one line per refresh.")):
    """A live table of agents (id, type, status, tokens, elapsed, last event) read from the workspace database."""
    from agentstack_lab.engine.activity import resolve_run

    check_float("--interval", interval, minimum=0.1)
    check_int("--limit", limit, minimum=1)
    db = open_workspace(ctx).db
    watch = Watch(db, run_id=resolve_run(db, run) if run else None, limit=limit)
    if as_json:
        if once:
            print_json(watch.snapshot())
            return
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                print_json(watch.snapshot(), line=True)
                time.sleep(interval)
                watch.refresh()
        return
    out = console()
    if once:
        out.print(watch.table())
        return
    from rich.live import Live

    try:
        with Live(watch.table(), console=out, refresh_per_second=4, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                watch.refresh()
                live.update(watch.table(), refresh=True)
    except KeyboardInterrupt:
        pass
    out.print("Watch stopped.")


# --- interventions --------------------------------------------------------------------------------
def _intervene(ctx: typer.Context, agent_id: str, action: str, text: str | None = None) -> None:
    import getpass

    from agentstack_lab.decisions import Interventions
    from agentstack_lab.engine.liveness import reap_orphans

    ws = open_workspace(ctx)
    reap_orphans(ws.db)  # a dead run's agents are failed first, so they refuse interventions
    item = Interventions(ws.db).request(agent_id, action, text, surface="cli", by=getpass.getuser())
    typer.echo(f"{action} queued for agent {item.agent_id[:8]} (run {item.run_id[:8]}); "
               "its run applies it within a second")


@app.command("comment")
def comment_command(ctx: typer.Context, agent_id: str = typer.Argument(..., help="Agent id (or prefix)."),
                    text: str = typer.Argument(..., help="The comment; the agent reads it in its next model call.")):
    """Add a comment to a running agent (in any process)."""
    _intervene(ctx, agent_id, "comment", text)


@app.command("pause")
def pause_command(ctx: typer.Context, agent_id: str = typer.Argument(..., help="Agent id (or prefix).")):
    """Pause an agent (and its subagents) before its next step or tool call."""
    _intervene(ctx, agent_id, "pause")


@app.command("resume")
def resume_command(ctx: typer.Context, agent_id: str = typer.Argument(..., help="Agent id (or prefix).")):
    """Resume a paused agent."""
    _intervene(ctx, agent_id, "resume")


@app.command("stop")
def stop_command(ctx: typer.Context, agent_id: str = typer.Argument(..., help="Agent id (or prefix).")):
    """Stop an agent and its subtree (the root's id stops the whole run)."""
    _intervene(ctx, agent_id, "stop")
