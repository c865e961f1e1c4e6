"""``agentstack-lab workflow ...``: run workflow notebooks headless (exit code = verdict), list, validate.

Notebooks are paths or built-in names (``agentstack-lab workflow list``). Exit codes follow the CLI's
policy (:mod:`agentstack_lab.cli.common`): 0 PASS; 1 FAIL (verdict FAIL, or a cell raised
``AssertionError``); 2 the check could not run (any other exception, a bad or keyword parameter
name, an unconvertible ``-p`` value, a missing notebook, an unwritable ``-o``/``--report`` path, a
dead kernel, a timeout). Everything that can be checked before a kernel starts is checked first.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click
import typer

from agentstack_lab.cli.common import (
    EXIT_ERROR,
    EXIT_FAIL,
    JSON_OPTION,
    CommandError,
    fail,
    print_json,
    require_writable,
)
from agentstack_lab.errors import AgentstackError, message
from agentstack_lab.validation import check_float, check_int

__all__ = ["app", "run_command"]

_LABEL = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}


def _echo(text: str) -> None:
    click.echo(text, err=True)


def _skip_slow_imports() -> None:
    """Keep jsonschema (imported by nbformat) from importing ``rfc3987_syntax`` in this short-lived process.

    It builds a grammar at import (~2 s, most of a run's start-up) only to check the "iri" format,
    which neither nbformat's schema nor the report schema uses.
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def _parameters(params: tuple[tuple[str, str], ...], raw: tuple[tuple[str, str], ...],
                files: tuple[str, ...]) -> dict[str, Any]:
    from agentstack_lab.workflows.params import check_name, load_params_file, parse_value

    values: dict[str, Any] = {}
    for path in files:
        values.update(load_params_file(path))
    for name, text in params:
        values[name] = parse_value(name, text)
    for name, text in raw:
        values[name] = text
    for name in values:
        check_name(name)
    return values


@click.command("run")
@click.argument("notebooks", nargs=-1, required=True, metavar="NOTEBOOK...")
@click.option("-p", "--parameter", "params", nargs=2, multiple=True, metavar="NAME VALUE",
              help="Set a parameter; VALUE typed like papermill (int, float, True/False/None, [list], {dict}).")
@click.option("-r", "--raw", "raw", nargs=2, multiple=True, metavar="NAME VALUE",
              help="Set a parameter to VALUE as a plain string.")
@click.option("-f", "--parameters-file", "files", multiple=True, metavar="PARAMS.yaml",
              help="YAML mapping of parameters (applied before -p/-r).")
@click.option("--grid", "grid_file", metavar="GRID.yaml",
              help="YAML mapping of name: [values]; one run per combination.")
@click.option("-o", "--output", metavar="OUT", help="Executed notebook (a folder when several runs).")
@click.option("--report", metavar="R.json", help="Report JSON (with several runs: a summary of all runs).")
@click.option("--kernel", "kernel_name", metavar="K", help="Kernelspec name (default: the notebook's).")
@click.option("--timeout", type=float, metavar="S", help="Seconds the whole run may take (kernel start included).")
@click.option("--cell-timeout", type=float, metavar="S",
              help="Seconds one cell may take (default: workflows.cell_timeout of the config, 600).")
@click.option("--cwd", metavar="DIR", help="Kernel working directory (default: the current directory).")
@click.option("--parallel", type=int, metavar="N",
              help="Runs at once, on kernels from a pool started ahead of time "
                   "(default: workflows.pool_size of the config, 2).")
@click.option("--fork/--no-fork", default=True, show_default=True,
              help="Fork pooled kernels from a pre-warmed template process.")
@click.option("--cluster", metavar="ADDR",
              help="Run on a Dask cluster: tcp://scheduler:8786, or 'local' for a LocalCluster of worker "
                   "processes (default: workflows.cluster of the config; needs the dask extra).")
@click.option("--record", metavar="PATH",
              help="Record the workflow agents' model calls to this cassette (the notebook's cassette parameter).")
@click.option("--replay", metavar="PATH",
              help="Replay the agents' model calls from this cassette: no network, no key.")
@click.option("--replay-mode", type=click.Choice(["strict", "new_episodes"]), default="strict", show_default=True,
              help="A call the cassette lacks: stop the run (strict) or ask the real model and record it.")
def run_command(notebooks: tuple[str, ...], params: tuple[tuple[str, str], ...],
                raw: tuple[tuple[str, str], ...], files: tuple[str, ...], grid_file: str | None,
                output: str | None, report: str | None, kernel_name: str | None, timeout: float | None,
                cell_timeout: float | None, cwd: str | None, parallel: int | None, fork: bool,
                cluster: str | None, record: str | None = None, replay: str | None = None,
                replay_mode: str = "strict") -> None:
    """Run workflow NOTEBOOK(s) headless.

    NOTEBOOK is a path, or the name of a built-in workflow (doc_sync, code_review; see
    ``agentstack-lab workflow list``); an existing file of that name wins.

    Exit 0 PASS; 1 FAIL (the report's verdict is FAIL, or a cell raised AssertionError); 2 error, the
    check could not run (any other exception in a cell, bad parameter, missing notebook, unwritable
    -o/--report, dead kernel, timeout; the report's verdict is then ERROR). The executed notebook is
    always saved, partial on failure, and the failing cell named.
    """
    # A plain click command run standalone (see ``_run`` below): expected errors end it here with
    # one line and exit 2; anything else propagates to the root group, which reports it as a bug.
    try:
        cassette = _cassette(record, replay, replay_mode, several=len(notebooks) > 1 or bool(grid_file))
        code = _run_notebooks(notebooks, params, raw, files, grid_file, output, report, kernel_name, timeout,
                              cell_timeout, cwd, parallel, fork, cluster, cassette)
    except AgentstackError as exc:
        _echo(f"error: {message(exc)}")
        raise SystemExit(EXIT_ERROR) from None
    raise SystemExit(code)


def _cassette(record: str | None, replay: str | None, mode: str, *, several: bool) -> dict[str, str]:
    """``--record``/``--replay``/``--replay-mode`` as the notebooks' ``cassette``/``cassette_mode`` parameters."""
    from agentstack_lab.providers.cassette import load_cassette

    if record is None and replay is None:
        if mode != "strict":
            raise CommandError("--replay-mode needs --replay")
        return {}
    if record is not None and replay is not None and mode != "new_episodes":
        raise CommandError("--record with --replay needs --replay-mode new_episodes "
                           "(replay what the cassette has, record what it lacks)")
    if record is not None and several:
        raise CommandError("--record records one run; give one notebook (several runs would share one cassette)")
    if replay is not None:
        load_cassette(replay)  # missing or not a cassette: one line before a kernel starts
    if record is not None:
        require_writable(record, "--record")
        if replay is not None:  # replay from the reviewed cassette, write it plus what is new to --record
            return {"cassette": str(Path(record).absolute()), "cassette_mode": "new_episodes",
                    "_copy_from": str(Path(replay).absolute())}
        return {"cassette": str(Path(record).absolute()), "cassette_mode": "record"}
    assert replay is not None
    return {"cassette": str(Path(replay).absolute()),
            "cassette_mode": "replay" if mode == "strict" else "new_episodes"}


def _run_notebooks(notebooks: tuple[str, ...], params: tuple[tuple[str, str], ...],
                   raw: tuple[tuple[str, str], ...], files: tuple[str, ...], grid_file: str | None,
                   output: str | None, report: str | None, kernel_name: str | None, timeout: float | None,
                   cell_timeout: float | None, cwd: str | None, parallel: int | None, fork: bool,
                   cluster: str | None = None, cassette: dict[str, str] | None = None) -> int:
    from agentstack_lab.config import load_config
    from agentstack_lab.workflows.catalog import resolve_notebook

    _skip_slow_imports()
    if cwd and not Path(cwd).is_dir():
        raise CommandError(f"--cwd: directory not found: {cwd}")
    settings = load_config(start=Path(cwd or ".")).workflows
    parallel = settings.pool_size if parallel is None else parallel
    cluster = cluster or settings.cluster
    cell_timeout = settings.cell_timeout if cell_timeout is None else cell_timeout
    from agentstack_lab.workflows.params import ParameterError, check_name, load_params_file

    try:
        values = _parameters(params, raw, files)
        grid = None
        if grid_file:
            from agentstack_lab.workflows.batch import expand_grid

            grid = expand_grid(load_params_file(grid_file))
            for name in grid[0] if grid else {}:
                check_name(name)
    except ParameterError as exc:
        raise CommandError(f"bad parameter: {exc}") from None
    copy_from = None
    if cassette:
        cassette = dict(cassette)
        copy_from = cassette.pop("_copy_from", None)
        given = sorted(set(cassette) & set(values))
        if given:
            raise CommandError(f"give either --record/--replay or -p {given[0]}, not both")
        values.update(cassette)
    check_int("--parallel", parallel, minimum=1, maximum=1_000)
    for name, value in (("--timeout", timeout), ("--cell-timeout", cell_timeout)):
        if value is not None:
            check_float(name, value, above=0)
    paths = [resolve_notebook(n) for n in notebooks]
    several = len(paths) > 1 or bool(grid)
    if report:
        require_writable(report, "--report")
    if output and not several:
        require_writable(output, "-o")
    if copy_from is not None and Path(copy_from).resolve() != Path(values["cassette"]).resolve():
        import shutil

        shutil.copyfile(copy_from, values["cassette"])  # checked above: now the run starts
    if cluster:
        from agentstack_lab.workflows.batch import plan_runs

        specs = plan_runs(paths, values, grid, Path(output or "workflow-runs") if several else Path.cwd())
        if not several:
            specs[0].output, specs[0].report = Path(output) if output else specs[0].output, \
                Path(report) if report else None
        with _announcing_decisions(cwd):
            return _on_cluster(specs, cluster, report if several else None, kernel_name, cwd, cell_timeout, timeout,
                               fork)
    if several:
        out_dir = Path(output or "workflow-runs")
        if out_dir.suffix == ".ipynb":
            raise CommandError(f"with several runs -o must be a folder, got {out_dir}")
        require_writable(out_dir / "x.ipynb", "-o")
        with _announcing_decisions(cwd):
            return asyncio.run(_many(paths, values, grid, out_dir, report, kernel_name, cwd, cell_timeout, timeout,
                                     parallel, fork))
    with _announcing_decisions(cwd):
        return asyncio.run(_single(paths[0], values, output, report, kernel_name, cwd, cell_timeout, timeout))


def _announcing_decisions(cwd: str | None) -> Any:
    """While notebooks run: one line on stderr per decision their agents wait on, with how to answer it.

    The kernels run in ``cwd`` and find their workspace from there, as this does; its database is only
    read once it exists (a workflow whose notebooks use no agent creates no workspace).
    """
    from agentstack_lab.decisions.announce import PendingAnnouncer
    from agentstack_lab.workspace import Workspace

    start = Path(cwd or ".").resolve()
    from agentstack_lab.config import find_config_file

    file = find_config_file(start)
    ws = Workspace.open(file.parent if file is not None else start, announce=False)

    def db() -> Any:
        return ws.db if Path(ws.db_path).is_file() else None

    return PendingAnnouncer(db, lambda line: _echo(line))


def _on_cluster(specs: list[Any], cluster: str, report: str | None, kernel_name: str | None, cwd: str | None,
                cell_timeout: float | None, timeout: float | None, fork: bool) -> int:
    """The runs as Dask tasks (see :mod:`agentstack_lab.workflows.cluster`); one line per run, then a summary."""
    from agentstack_lab.workflows.cluster import run_batch_on_cluster

    def done(spec: Any, run: Any) -> None:
        res = run.result
        again = (f" [executed {run.attempts} times: it was in flight when a worker was lost]" if run.repeated
                 else "")
        _echo(f"{_LABEL[res.status]} {spec.output} ({res.duration:.1f}s): {res.message}{again}")

    runs = run_batch_on_cluster(specs, cluster=cluster, kernel_name=kernel_name, fork=fork, cwd=cwd,
                                cell_timeout=cell_timeout, timeout=timeout, on_done=done)
    results = [r.result for r in runs]
    counts = {s: sum(r.status == s for r in results) for s in _LABEL}
    _echo(f"{len(results)} runs on {cluster}: {counts['pass']} PASS, {counts['fail']} FAIL, {counts['error']} ERROR"
          f" ({sum(r.repeated for r in runs)} executed again: in flight on a lost worker)")
    if report:
        summary = [{"notebook": r.result.notebook, "status": r.result.status, "exitCode": r.result.exit_code,
                    "message": r.result.message, "output": r.result.output, "attempts": r.attempts,
                    "repeated": r.repeated, "workers": r.workers} for r in runs]
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(json.dumps({"runs": summary}, indent=2) + "\n", "utf-8")
    return EXIT_ERROR if counts["error"] else EXIT_FAIL if counts["fail"] else 0


def _print_result(res: Any) -> None:
    for warning in res.warnings:
        _echo(f"warning: {warning}")
    where = f" → {res.output}" if res.output else ""
    _echo(f"{_LABEL[res.status]} {res.notebook}{where} ({res.duration:.1f}s): {res.message}")


async def _single(path: Path, values: dict[str, Any], output: str | None, report: str | None,
                  kernel_name: str | None, cwd: str | None, cell_timeout: float | None,
                  timeout: float | None) -> int:
    from agentstack_lab.workflows.execute import run_notebook

    res = await run_notebook(path, parameters=values, output=output, report_path=report, kernel_name=kernel_name,
                             cwd=cwd, cell_timeout=cell_timeout, timeout=timeout)
    _print_result(res)
    return res.exit_code


async def _many(paths: list[Path], values: dict[str, Any], grid: list[dict[str, Any]] | None,
                out_dir: Path, report: str | None, kernel_name: str | None, cwd: str | None,
                cell_timeout: float | None, timeout: float | None, parallel: int, fork: bool) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentstack_lab.workflows.batch import plan_runs, run_batch

    specs = plan_runs(paths, values, grid, out_dir)
    console = Console(stderr=True)
    with Progress(TextColumn("workflows"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        task = progress.add_task("runs", total=len(specs))

        def done(spec: Any, res: Any) -> None:
            progress.console.print(f"{_LABEL[res.status]} {spec.output} ({res.duration:.1f}s): {res.message}",
                                   markup=False, highlight=False)
            progress.advance(task)

        results = await run_batch(specs, parallel=parallel, kernel_name=kernel_name, fork=fork,
                                  cwd=cwd, cell_timeout=cell_timeout, timeout=timeout, on_done=done)
    counts = {s: sum(r.status == s for r in results) for s in _LABEL}
    _echo(f"{len(results)} runs ({parallel} at a time): {counts['pass']} PASS, {counts['fail']} FAIL, "
          f"{counts['error']} ERROR")
    if report:
        summary = [{"notebook": r.notebook, "parameters": r.parameters, "status": r.status, "exitCode": r.exit_code,
                    "message": r.message, "output": r.output, "report": r.report_path,
                    "verdict": (r.report or {}).get("verdict")} for r in results]
        try:
            Path(report).parent.mkdir(parents=True, exist_ok=True)
            Path(report).write_text(json.dumps({"runs": summary}, indent=2) + "\n", "utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write the --report summary to {report}: {exc.strerror or exc}") from None
    return EXIT_ERROR if counts["error"] else EXIT_FAIL if counts["fail"] else 0


app = typer.Typer(no_args_is_help=True,
                  help="Run workflow notebooks headless (exit code = verdict: 0 PASS, 1 FAIL, 2 error).")


@app.command("run", add_help_option=False,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def _run(ctx: typer.Context) -> None:
    """Run workflow NOTEBOOK(s) headless; exit 0 PASS, 1 FAIL, 2 error (see --help)."""
    # ``run`` is a plain click command (typer cannot express ``-p NAME VALUE``, repeated); it runs
    # standalone so click itself handles --help and usage errors (exit 2) and its exit code stands.
    run_command.main(args=list(ctx.args), prog_name=ctx.command_path, standalone_mode=True)


@app.command("list")
def list_command(as_json: bool = JSON_OPTION) -> None:
    """List the built-in workflows (run one by name: agentstack-lab workflow run NAME)."""
    from agentstack_lab.workflows.catalog import builtin_dirs, builtin_workflows

    found = builtin_workflows()
    if as_json:
        print_json([{"name": w.name, "description": w.description, "path": str(w.path)} for w in found.values()])
        return
    if not found:
        raise CommandError("no built-in workflows found in " + " or ".join(str(d) for d in builtin_dirs()))
    name_w = max(len(w.name) for w in found.values())
    desc_w = max(len(w.description) for w in found.values())
    for wf in found.values():
        typer.echo(f"{wf.name:<{name_w}}  {wf.description:<{desc_w}}  {wf.path}")


@app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of workflow reports (JSON already)."""
    from agentstack_lab.workflows.schema import report_schema

    typer.echo(json.dumps(report_schema(), indent=2))


@app.command("validate")
def validate_command(report: Path, as_json: bool = JSON_OPTION) -> None:
    """Check a report JSON file against the schema (exit 1 when invalid, 2 when it cannot be read)."""
    from agentstack_lab.workflows.schema import ReportValidationError, validate_report

    _skip_slow_imports()
    try:
        text = report.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{report}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        validate_report(json.loads(text))
    except (ValueError, ReportValidationError) as exc:  # json.JSONDecodeError is a ValueError
        if as_json:
            print_json({"valid": False, "file": str(report), "error": str(exc)})
        raise fail(f"{report}: {exc}", EXIT_FAIL) from None
    if as_json:
        print_json({"valid": True, "file": str(report)})
    else:
        typer.echo(f"{report}: valid")
