"""``agentstack-lab worker`` (run queued tasks as agents) and ``agentstack-lab queue`` (add, list).

A worker joins the workspace's durable queue: it claims tasks of its ``--types`` (highest priority
first), runs each as an agent through the engine (its events land in the event log like any run,
inside the coordinator's tree when a coordinated run queued it), and holds a lease renewed every
third of ``--lease``. Ctrl-C or SIGTERM: it stops claiming, lets running tasks finish for ``--grace``
seconds, then releases the rest back to the queue; a SIGKILL loses only the lease, which expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

import typer

from agentstack_lab.cli.common import JSON_OPTION, open_workspace, print_json, short, table, timestamp
from agentstack_lab.errors import UsageError
from agentstack_lab.validation import check_float, check_int

__all__ = ["worker", "queue_app"]

queue_app = typer.Typer(no_args_is_help=True, help="The durable task queue: add and list queued tasks.")


def _types(text: str | None) -> list[str] | None:
    if text is None:
        return None
    types = [t.strip() for t in text.split(",")]
    if not all(types):
        raise UsageError(f"--types must be comma-separated agent types, got {text!r}")
    return types


def _run_flags(auto_approve: bool | None, on_query: str | None, decision_timeout: str | None, no_subagents: bool,
               executor: str | None, max_depth: int | None, answer: list[str] | None) -> dict[str, Any]:
    """The run options a ``queue add`` or ``worker`` line sets (checked by the one builder, one line if bad)."""
    from agentstack_lab.cli.agent import _answers
    from agentstack_lab.engine.options import run_options

    given = {"auto_approve": auto_approve, "on_query": on_query, "decision_timeout": decision_timeout,
             "subagents": False if no_subagents else None, "executor": executor,
             "max_depth": None if max_depth is None else check_int("--max-depth", max_depth, maximum=1_000),
             "answers": _answers(answer) if answer else None}
    given = {k: v for k, v in given.items() if v is not None}
    run_options(None, surface="worker", given=given)
    return given


AUTO_APPROVE = typer.Option(None, "--auto-approve/--no-auto-approve", show_default=False,
                            help="Let the agents run Python without asking (default: config agents.auto_approve).")
ON_QUERY = typer.Option(None, "--on-query", metavar="fail|wait|auto",
                        help="A question nobody answered up front: fail closed (default), wait for any surface, "
                             "or auto-approve.")
DECISION_TIMEOUT = typer.Option(None, "--decision-timeout", metavar="DURATION",
                                help="With --on-query wait: expire a question after this long (e.g. 90s, 10m).")
NO_SUBAGENTS = typer.Option(False, "--no-subagents", help="Answer without subagents.")
EXECUTOR = typer.Option(None, "--executor", "-e", help="Where code runs: subprocess (default) or live.")
MAX_DEPTH = typer.Option(None, "--max-depth", help="Deepest level of subagents.")
ANSWER = typer.Option(None, "--answer", "-a", metavar="KIND=TEXT", help="Answer a question up front.")


def worker(ctx: typer.Context,
           types: str = typer.Option(None, "--types", help="Comma-separated agent types to take (default: all)."),
           concurrency: int = typer.Option(1, "--concurrency", "-c", help="Tasks run at once."),
           lease: float = typer.Option(30.0, "--lease", help="Lease seconds (renewed every third of it)."),
           grace: float = typer.Option(10.0, "--grace", help="Seconds to finish running tasks on Ctrl-C/SIGTERM."),
           provider: str = typer.Option(None, "--provider", "-p", help="Provider for the agents (default: config)."),
           until_empty: bool = typer.Option(False, "--until-empty", help="Exit when no task of its types is left."),
           auto_approve: bool = AUTO_APPROVE, on_query: str = ON_QUERY, decision_timeout: str = DECISION_TIMEOUT,
           no_subagents: bool = NO_SUBAGENTS, executor: str = EXECUTOR, max_depth: int = MAX_DEPTH,
           answer: list[str] = ANSWER, as_json: bool = JSON_OPTION):
    """Claim queued tasks and run each as an agent until Ctrl-C/SIGTERM (or --until-empty)."""
    kinds = _types(types)
    concurrency = check_int("--concurrency", concurrency, minimum=1, maximum=1_000)
    lease = check_float("--lease", lease, above=0)
    grace = check_float("--grace", grace, minimum=0)
    run_flags = _run_flags(auto_approve, on_query, decision_timeout, no_subagents, executor, max_depth, answer)
    ws = open_workspace(ctx)
    if kinds is not None:
        registry = ws.agent_types
        for kind in kinds:
            registry.get(kind)  # an unknown agent type is a clear error before anything starts
    if provider is not None:
        ws.get_provider(provider)  # a missing key or unknown name: one line now, not one failure per task
    from agentstack_lab.decisions.announce import PendingAnnouncer
    from agentstack_lab.engine import AgentRun
    from agentstack_lab.engine.coordinate import Worker

    runs: set[str] = set()

    def make_run(*args: Any, **kwargs: Any) -> Any:
        run = AgentRun(*args, **kwargs)
        runs.add(run.id)
        return run

    w = Worker(ws, run_factory=make_run, types=kinds, concurrency=concurrency, lease_s=lease, provider=provider,
               options=run_flags)
    # a task that waits on a person (--on-query wait) says so here, once per decision, with how to answer
    announcer = PendingAnnouncer(ws.db, lambda line: typer.echo(f"worker {w.id}: {line}", err=True), runs=runs)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, w.stop, grace)
        typer.echo(f"worker {w.id}: taking {', '.join(kinds) if kinds else 'all types'} "
                   f"(concurrency {concurrency}, lease {lease:g}s)", err=True)
        watching = loop.create_task(announcer.run())
        try:
            await w.run(until_empty=until_empty)
        finally:
            watching.cancel()

    asyncio.run(main())
    summary = {"worker": w.id, "completed": w.completed, "failed": w.failed, "released": w.released}
    if as_json:
        print_json(summary)
    else:
        typer.echo(f"worker {w.id}: completed {w.completed}, failed {w.failed}, released {w.released}")


@queue_app.command("add")
def queue_add(ctx: typer.Context, input: str = typer.Argument(..., help="The task (the agent's prompt)."),  # noqa: A002
              agent_type: str = typer.Option("researcher", "--type", "-t", help="Agent type."),
              priority: int = typer.Option(5, "--priority", help="1-10, higher first."),
              auto_approve: bool = AUTO_APPROVE, on_query: str = ON_QUERY, decision_timeout: str = DECISION_TIMEOUT,
              no_subagents: bool = NO_SUBAGENTS, executor: str = EXECUTOR, max_depth: int = MAX_DEPTH,
              answer: list[str] = ANSWER, as_json: bool = JSON_OPTION):
    """Queue a task for any worker; prints its id. Run options given here go with the task (over the worker's)."""
    from agentstack_lab.coordination import TaskQueue

    run_flags = _run_flags(auto_approve, on_query, decision_timeout, no_subagents, executor, max_depth, answer)
    ws = open_workspace(ctx)
    ws.agent_types.get(agent_type)
    task = TaskQueue(ws.db).enqueue(agent_type, input, priority=priority,
                                    payload={"options": run_flags} if run_flags else None)
    if as_json:
        print_json(task.to_dict())
    else:
        typer.echo(task.id)


@queue_app.command("list")
def queue_list(ctx: typer.Context, state: str = typer.Option(None, "--state", help="pending, claimed, completed, ..."),
               limit: int = typer.Option(50, "--limit", "-n"), as_json: bool = JSON_OPTION):
    """Queued tasks in claim order (priority, then age)."""
    from agentstack_lab.coordination import TaskQueue

    tasks = TaskQueue(open_workspace(ctx).db).list(state=state, limit=check_int("--limit", limit, minimum=1))
    if as_json:
        print_json([t.to_dict() for t in tasks])
        return
    table("queue", ["id", "type", "prio", "state", "worker", "tries", "input", "result", "created"],
          [[t.id[:8], t.agent_type, t.priority, t.state, short(t.worker_id or "", 24), t.attempts, short(t.input, 40),
            short(_text(t), 30), timestamp(t.created_at)] for t in tasks])


def _text(task: Any) -> str:
    if task.error:
        return task.error
    return task.result.get("text") or "" if isinstance(task.result, dict) else str(task.result or "")
