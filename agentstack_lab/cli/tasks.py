"""``agentstack-lab task ...``: create, assign, complete, list, relate tasks; drift metrics.

Every agent of a run is a task (same id), so ``task list --run ID`` shows a run's tree as tasks.
``create`` with ``--parent`` checks drift (``prevent`` refuses with exit 2) and consensus (a
checkpoint is made instead of the task; answer it with ``decisions approve|reject`` or MCP).
"""

from __future__ import annotations

from typing import Any

import typer

from agentstack_lab.cli.common import JSON_OPTION, open_workspace, print_json, short, table, timestamp

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Create, assign, complete, list and relate tasks; drift metrics.")


def _svc(ctx: typer.Context) -> Any:
    from agentstack_lab.tasks import TaskService

    return TaskService.of(open_workspace(ctx))


def _show(tasks: list[Any], as_json: bool, title: str) -> None:
    if as_json:
        print_json([t.to_dict() for t in tasks])
        return
    table(title, ["id", "type", "status", "parent", "input", "output", "created"],
          [[t.id, t.agent_type, t.status, (t.parent_id or "")[:8], short(t.input, 50), short(t.output or t.error, 40),
            timestamp(t.created_at)] for t in tasks])


@app.command("create")
def task_create(ctx: typer.Context, input: str = typer.Argument(..., help="What the task is."),  # noqa: A002
                agent_type: str = typer.Option("researcher", "--type", "-t", help="Agent type."),
                parent: str = typer.Option(None, "--parent", help="Parent task id (drift and consensus checks)."),
                session: str = typer.Option(None, "--session", "-s", help="Session id."),
                risk: str = typer.Option(None, "--risk", help="Risk level override: low, medium or high."),
                as_json: bool = JSON_OPTION):
    """Create a task; prints its id (or the consensus checkpoint that holds it)."""
    out = _svc(ctx).create(agent_type, input, parent_id=parent, session_id=session, risk_level=risk)
    if as_json:
        print_json(out)
    elif out["created"]:
        drift = out.get("drift") or {}
        if drift.get("action") == "warned":
            typer.echo(f"warning: drift: similarity {drift['highest_similarity']:.3f} to ancestor task "
                       f"{drift['most_similar_task_id']}", err=True)
        typer.echo(out["task"]["id"])
    else:
        cp = out["checkpoint"]
        typer.echo(f"consensus checkpoint {cp['id']} (decision {cp['decision_id']}) holds the task: {out['reason']}")


@app.command("assign")
def task_assign(ctx: typer.Context, task_id: str, agent_id: str, as_json: bool = JSON_OPTION):
    """Assign a pending task to an agent (it becomes running)."""
    t = _svc(ctx).store.assign(task_id, agent_id)
    print_json(t.to_dict()) if as_json else typer.echo(f"{t.id} running (agent {t.agent_id})")


@app.command("complete")
def task_complete(ctx: typer.Context, task_id: str, output: str = typer.Argument(None, help="The task's output."),
                  failed: bool = typer.Option(False, "--failed", help="Mark it failed (OUTPUT is the error)."),
                  as_json: bool = JSON_OPTION):
    """Finish a task with its output."""
    t = _svc(ctx).store.complete(task_id, output, status="failed" if failed else "completed")
    print_json(t.to_dict()) if as_json else typer.echo(f"{t.id} {t.status}")


@app.command("list")
def task_list(ctx: typer.Context, status: str = typer.Option(None, "--status"),
              run: str = typer.Option(None, "--run", help="Tasks of one agent run."),
              session: str = typer.Option(None, "--session", "-s"),
              parent: str = typer.Option(None, "--parent"),
              limit: int = typer.Option(100, "--limit", min=1, max=10_000), as_json: bool = JSON_OPTION):
    """List tasks, oldest first."""
    _show(_svc(ctx).store.list(status=status, run_id=run, session_id=session, parent_id=parent, limit=limit),
          as_json, "tasks")


@app.command("get")
def task_get(ctx: typer.Context, task_id: str, as_json: bool = JSON_OPTION):
    """Show one task."""
    t = _svc(ctx).store.get(task_id)
    if as_json:
        print_json(t.to_dict())
        return
    for key, value in t.to_dict().items():
        if value not in (None, {}, ""):
            typer.echo(f"{key}: {timestamp(value) if key.endswith('_at') else value}")


@app.command("relate")
def task_relate(ctx: typer.Context, from_id: str, relationship: str = typer.Argument(
                    ..., help="parent_of, derived_from, depends_on or supersedes"), to_id: str = typer.Argument(...)):
    """Record FROM RELATIONSHIP TO (unique per pair and type)."""
    r = _svc(ctx).store.relate(from_id, to_id, relationship)
    typer.echo(r.id)


@app.command("relationships")
def task_relationships(ctx: typer.Context, task_id: str,
                       direction: str = typer.Option("both", "--direction", help="outgoing, incoming or both"),
                       as_json: bool = JSON_OPTION):
    """A task's relationships, newest first."""
    rels = _svc(ctx).store.relationships(task_id, direction)
    if as_json:
        print_json([r.to_dict() for r in rels])
        return
    table("relationships", ["from", "type", "to", "created"],
          [[r.from_task_id, r.relationship_type, r.to_task_id, timestamp(r.created_at)] for r in rels])


@app.command("drift-metrics")
def task_drift_metrics(ctx: typer.Context, since: float = typer.Option(None, "--since", help="Unix seconds."),
                       recent: int = typer.Option(10, "--recent", min=0, max=500), as_json: bool = JSON_OPTION):
    """Drift detection counts (allowed, warned, prevented) and the latest events."""
    svc = _svc(ctx)
    metrics, events = svc.drift.metrics(since), svc.drift.recent(recent)
    if as_json:
        print_json({"metrics": metrics, "recent_events": events})
        return
    typer.echo(f"drift detection {'enabled' if metrics['enabled'] else 'disabled'} "
               f"(threshold {metrics['threshold']:g}, behavior {metrics['behavior']}): "
               f"{metrics['total_events']} events, {metrics['warned_count']} warned, "
               f"{metrics['prevented_count']} prevented, average similarity {metrics['average_similarity']:.3f}")
    if events:
        table("recent drift events", ["when", "action", "similarity", "type", "input"],
              [[timestamp(e["created_at"]), e["action_taken"], f"{e['similarity_score']:.3f}", e["task_type"],
                short(e["task_input"], 50)] for e in events])
