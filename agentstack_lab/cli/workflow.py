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


def _parameters(params: tuple[tuple[str, str], ...] = (), raw: tuple[tuple[str, str], ...] = (),
                files: tuple[str, ...] = (), yamls: tuple[str, ...] = (), b64s: tuple[str, ...] = (),
                paths: dict[str, str] | None = None) -> dict[str, Any]:
    """The run's parameters, merged in papermill's order: injected paths, -b, -f, -y, -p, -r (later wins)."""
    import base64
    import binascii

    from agentstack_lab.workflows.params import (
        ParameterError,
        check_name,
        load_params_file,
        parse_value,
        parse_yaml_text,
    )

    values: dict[str, Any] = dict(paths or {})
    for text in b64s:
        try:
            decoded = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ParameterError(f"-b {text[:40]!r} is not base64") from None
        values.update(parse_yaml_text(decoded, "-b (decoded)"))
    for path in files:
        values.update(load_params_file(path))
    for text in yamls:
        values.update(parse_yaml_text(text, "-y"))
    for name, text in params:
        values[name] = parse_value(name, text)
    for name, text in raw:
        values[name] = text
    for name in values:
        check_name(name)
    return values


def _help_notebook(notebook: str) -> int:
    """Papermill's ``--help-notebook``: the parameters a notebook declares, with their defaults."""
    import nbformat

    from agentstack_lab.workflows.catalog import resolve_notebook
    from agentstack_lab.workflows.params import ParameterError, declared_parameters

    path = resolve_notebook(notebook)
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read notebook {path}: {exc}") from None
    click.echo("Usage: agentstack-lab workflow run [OPTIONS] NOTEBOOK [OUTPUT]")
    click.echo(f"\nParameters inferred for notebook '{notebook}':")
    try:
        declared = declared_parameters(nb)
    except ParameterError as exc:
        raise CommandError(str(exc)) from None
    if declared is None:
        click.echo("\n  No cell tagged 'parameters'")
        return EXIT_FAIL
    if not declared:
        click.echo("\n  Can't infer anything about this notebook's parameters. It may not have any parameter defined.")
    for name, default in declared.items():
        click.echo(f"  {name}: (default {default or 'None'})")
    return 0


class _Streams:
    """``--log-output``, ``--stdout-file``, ``--stderr-file``: each output of a cell as it arrives, as papermill."""

    def __init__(self, log_output: bool, stdout_file: str | None, stderr_file: str | None) -> None:
        self.log_output = log_output
        self.files: dict[str, Any] = {}
        for name, path, flag in (("stdout", stdout_file, "--stdout-file"), ("stderr", stderr_file, "--stderr-file")):
            if path:
                require_writable(path, flag)
                self.files[name] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    @property
    def wanted(self) -> bool:
        return self.log_output or bool(self.files)

    def __call__(self, output: Any) -> None:
        if output.get("output_type") == "stream":
            text = "".join(output.get("text", ""))
            if self.log_output:
                click.echo(text, err=True, nl=False)
            if output.get("name") in self.files:
                self.files[output["name"]].write(text)
                self.files[output["name"]].flush()
        elif self.log_output and "text/plain" in output.get("data", {}):
            click.echo("".join(output["data"]["text/plain"]), err=True)

    def close(self) -> None:
        for f in self.files.values():
            f.close()


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@click.command("run")
@click.argument("notebooks", nargs=-1, metavar="NOTEBOOK [OUTPUT] | NOTEBOOK...")
@click.option("-p", "--parameter", "--parameters", "params", nargs=2, multiple=True, metavar="NAME VALUE",
              help="Set a parameter; VALUE typed as papermill types it: True/False/None, int, float "
                   "(nan, inf), else the text as a string. Lists and mappings: -y or -f.")
@click.option("-r", "--raw", "--parameters_raw", "raw", nargs=2, multiple=True, metavar="NAME VALUE",
              help="Set a parameter to VALUE as a plain string.")
@click.option("-f", "--parameters-file", "--parameters_file", "files", multiple=True, metavar="PARAMS.yaml",
              help="YAML mapping of parameters.")
@click.option("-y", "--parameters_yaml", "yamls", multiple=True, metavar="YAML",
              help="Parameters as a YAML mapping given inline, e.g. -y '{items: [1, 2]}'.")
@click.option("-b", "--parameters_base64", "b64s", multiple=True, metavar="B64",
              help="Parameters as a base64-encoded YAML mapping.")
@click.option("--inject-input-path", is_flag=True, help="Add the input path as parameter PAPERMILL_INPUT_PATH.")
@click.option("--inject-output-path", is_flag=True, help="Add the output path as parameter PAPERMILL_OUTPUT_PATH.")
@click.option("--inject-paths", is_flag=True, help="Both of the above.")
@click.option("--grid", "grid_file", metavar="GRID.yaml",
              help="YAML mapping of name: [values]; one run per combination.")
@click.option("--batch", is_flag=True,
              help="Read every NOTEBOOK as an input, even two of them (without it, two are IN OUT).")
@click.option("-o", "--output", metavar="OUT", help="Executed notebook (a folder when several runs).")
@click.option("--report", metavar="R.json", help="Report JSON (with several runs: a summary of all runs).")
@click.option("-k", "--kernel", "kernel_name", metavar="K", help="Kernelspec name (default: the notebook's).")
@click.option("-l", "--language", metavar="LANG",
              help="Language of the injected parameters (default: the kernel's; python, R, julia, scala, bash).")
@click.option("--prepare-only/--prepare-execute", default=False, show_default=True,
              help="Only inject the parameters and save the notebook; execute nothing.")
@click.option("--timeout", type=float, metavar="S", help="Seconds the whole run may take (kernel start included).")
@click.option("--cell-timeout", "--execution-timeout", "cell_timeout", type=float, metavar="S",
              help="Seconds one cell may take (default: workflows.cell_timeout of the config, 600).")
@click.option("--start-timeout", "--start_timeout", "start_timeout", type=float, default=60.0, show_default=True,
              metavar="S", help="Seconds a kernel may take to start.")
@click.option("--log-output/--no-log-output", default=False, show_default=True,
              help="Write each cell's output to stderr as it arrives.")
@click.option("--stdout-file", metavar="FILE", help="Write the cells' stdout to FILE as it arrives.")
@click.option("--stderr-file", metavar="FILE", help="Write the cells' stderr to FILE as it arrives.")
@click.option("--report-mode/--no-report-mode", default=False, show_default=True,
              help="Hide every code cell's input in the output notebook.")
@click.option("--request-save-on-cell-execute/--no-request-save-on-cell-execute", "save_while_running",
              default=None, help="Save the output notebook as the run starts and as each cell starts and ends, as"
                                 " papermill (default: on for one run; several runs are saved as each ends).")
@click.option("--autosave-cell-every", type=int, default=None, metavar="S",
              help="During a long cell, save the output notebook when an output arrives S seconds after the last"
                   " save (default 30; 0: never; one run).")
@click.option("--progress-bar/--no-progress-bar", default=None,
              help="A progress bar of the cells on stderr (default: when stderr is a terminal).")
@click.option("--help-notebook", is_flag=True, help="Print the parameters NOTEBOOK declares, and exit.")
@click.option("--log-level", type=click.Choice(_LOG_LEVELS, case_sensitive=False), default="WARNING",
              show_default=True, help="Level of the log lines written to stderr.")
@click.option("--version", "show_version", is_flag=True, help="Print the version and exit.")
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
def run_command(notebooks: tuple[str, ...], params: tuple[tuple[str, str], ...] = (),
                raw: tuple[tuple[str, str], ...] = (), files: tuple[str, ...] = (), yamls: tuple[str, ...] = (),
                b64s: tuple[str, ...] = (), inject_input_path: bool = False, inject_output_path: bool = False,
                inject_paths: bool = False, grid_file: str | None = None, batch: bool = False,
                output: str | None = None, report: str | None = None, kernel_name: str | None = None,
                language: str | None = None, prepare_only: bool = False, timeout: float | None = None,
                cell_timeout: float | None = None, start_timeout: float = 60.0, log_output: bool = False,
                stdout_file: str | None = None, stderr_file: str | None = None, report_mode: bool = False,
                progress_bar: bool | None = None, save_while_running: bool | None = None,
                autosave_cell_every: int | None = None, help_notebook: bool = False, log_level: str = "WARNING",
                show_version: bool = False, cwd: str | None = None, parallel: int | None = None,
                fork: bool = True, cluster: str | None = None, record: str | None = None,
                replay: str | None = None, replay_mode: str = "strict") -> None:
    """Run workflow NOTEBOOK(s) headless, or one notebook papermill's way: NOTEBOOK OUTPUT.

    Two arguments are papermill's form, IN OUT (unless -o, --grid or --batch is given): OUT is
    written. "-" as IN reads the notebook from stdin, as OUT writes it to stdout (status lines go
    to stderr). One argument, three and more, or --batch: every argument is an input. NOTEBOOK is
    a path, or the name of a built-in workflow (doc_sync, code_review; see ``agentstack-lab
    workflow list``); an existing file of that name wins.

    Exit 0 PASS (also a notebook stopped by sys.exit(), sys.exit(0) or raise SystemExit, as
    papermill); 1 FAIL (the report's verdict is FAIL, or a cell raised AssertionError); 2 error,
    the check could not run (any other exception in a cell, bad parameter, missing notebook,
    unwritable -o/--report, dead kernel, timeout; the report's verdict is then ERROR). The executed
    notebook is always saved, partial on failure, and the failing cell named.
    """
    # A plain click command run standalone (see ``_run`` below): expected errors end it here with
    # one line and exit 2; anything else propagates to the root group, which reports it as a bug.
    import logging

    if show_version:
        from agentstack_lab._version import __version__

        click.echo(f"agentstack-lab {__version__}")
        raise SystemExit(0)
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    streams = None
    try:
        if not notebooks:
            raise CommandError("give a NOTEBOOK to run (NOTEBOOK OUTPUT for papermill's form); see --help")
        first: str = notebooks[0]
        if help_notebook:
            raise SystemExit(_help_notebook(first))
        if len(notebooks) == 2 and not (batch or output or grid_file):
            notebooks, output = (notebooks[0],), notebooks[1]  # papermill's positional form: IN OUT
        if "-" in notebooks and len(notebooks) > 1:
            raise CommandError("'-' (a notebook on stdin) runs alone: give it as the only input")
        several = len(notebooks) > 1 or bool(grid_file)
        if several and (output == "-" or prepare_only):
            raise CommandError(("-o -" if output == "-" else "--prepare-only") + " is for one run, not several")
        if several and (save_while_running or autosave_cell_every is not None):
            raise CommandError(("--request-save-on-cell-execute" if save_while_running else "--autosave-cell-every")
                               + " is for one run: several runs are saved as each ends")
        if autosave_cell_every is not None:
            check_int("--autosave-cell-every", autosave_cell_every, minimum=0)
        if "-" in notebooks and cluster:
            raise CommandError("a notebook on stdin ('-') cannot run on a cluster: give its path")
        paths = {}
        if inject_input_path or inject_paths:
            paths["PAPERMILL_INPUT_PATH"] = first
        if inject_output_path or inject_paths:
            if several:
                raise CommandError("--inject-output-path is for one run: each of several runs has its own output")
            paths["PAPERMILL_OUTPUT_PATH"] = output or "-"
        check_float("--start-timeout", start_timeout, above=0)
        streams = _Streams(log_output, stdout_file, stderr_file)
        single = _SingleOptions(language=language, prepare_only=prepare_only, report_mode=report_mode,
                                start_timeout=start_timeout, streams=streams if streams.wanted else None,
                                progress_bar=sys.stderr.isatty() if progress_bar is None else progress_bar,
                                save_while_running=save_while_running is not False,
                                autosave_every=30 if autosave_cell_every is None else autosave_cell_every)
        cassette = _cassette(record, replay, replay_mode, several=several)
        code = _run_notebooks(notebooks, params, raw, files, grid_file, output, report, kernel_name, timeout,
                              cell_timeout, cwd, parallel, fork, cluster, cassette, yamls=yamls, b64s=b64s,
                              paths=paths, single=single)
    except AgentstackError as exc:
        _echo(f"error: {message(exc)}")
        raise SystemExit(EXIT_ERROR) from None
    finally:
        if streams is not None:
            streams.close()
    raise SystemExit(code)


class _SingleOptions:
    """What only a single run takes: papermill's per-notebook options."""

    def __init__(self, *, language: str | None = None, prepare_only: bool = False, report_mode: bool = False,
                 start_timeout: float = 60.0, streams: _Streams | None = None, progress_bar: bool = False,
                 save_while_running: bool = False, autosave_every: float = 30.0) -> None:
        self.language, self.prepare_only, self.report_mode = language, prepare_only, report_mode
        self.start_timeout, self.streams, self.progress_bar = start_timeout, streams, progress_bar
        self.save_while_running, self.autosave_every = save_while_running, autosave_every


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
                   cluster: str | None = None, cassette: dict[str, str] | None = None, *,
                   yamls: tuple[str, ...] = (), b64s: tuple[str, ...] = (), paths: dict[str, str] | None = None,
                   single: _SingleOptions | None = None) -> int:
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
        values = _parameters(params, raw, files, yamls, b64s, paths)
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
    single = single or _SingleOptions()
    stdin = notebooks == ("-",)
    inputs: list[Any] = [_read_stdin()] if stdin else [resolve_notebook(n) for n in notebooks]
    several = len(inputs) > 1 or bool(grid)
    if report:
        require_writable(report, "--report")
    if output and output != "-" and not several:
        require_writable(output, "-o")
    if copy_from is not None and Path(copy_from).resolve() != Path(values["cassette"]).resolve():
        import shutil

        shutil.copyfile(copy_from, values["cassette"])  # checked above: now the run starts
    if cluster:
        from agentstack_lab.workflows.batch import plan_runs

        specs = plan_runs(inputs, values, grid, Path(output or "workflow-runs") if several else Path.cwd())
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
            return asyncio.run(_many(inputs, values, grid, out_dir, report, kernel_name, cwd, cell_timeout, timeout,
                                     parallel, fork))
    with _announcing_decisions(cwd):
        return asyncio.run(_single(inputs[0], values, output, report, kernel_name, cwd, cell_timeout, timeout,
                                   single))


def _announcing_decisions(cwd: str | None) -> Any:
    """While notebooks run: one line on stderr per decision their agents wait on, with how to answer it.

    The kernels run in ``cwd`` and find their workspace from there, as this does; its database is only
    read once it exists (a workflow whose notebooks use no agent creates no workspace).
    """
    from agentstack_lab.decisions.announce import PendingAnnouncer
    from agentstack_lab.workspace import Workspace, root_for

    ws = Workspace.open(root_for(Path(cwd or ".").resolve()), announce=False)

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


def _read_stdin() -> Any:
    """The notebook given as ``-``: read from stdin, one line naming what is wrong if it is not a notebook."""
    import nbformat

    text = sys.stdin.read()
    if not text.strip():
        raise CommandError("'-': nothing on stdin (pipe a notebook in: ... < notebook.ipynb)")
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises JSON, validation and version errors alike
        raise CommandError(f"'-': stdin is not a notebook: {str(exc).splitlines()[0]}") from None


async def _single(path: Any, values: dict[str, Any], output: str | None, report: str | None,
                  kernel_name: str | None, cwd: str | None, cell_timeout: float | None,
                  timeout: float | None, single: _SingleOptions | None = None) -> int:
    from agentstack_lab.workflows.execute import run_notebook

    single = single or _SingleOptions()
    progress, on_cell = _cell_progress(path, bool(values)) if single.progress_bar else (None, None)
    try:
        res = await run_notebook(path, parameters=values, output=output, report_path=report,
                                 kernel_name=kernel_name, cwd=cwd, cell_timeout=cell_timeout, timeout=timeout,
                                 language=single.language, prepare_only=single.prepare_only,
                                 report_mode=single.report_mode, start_timeout=single.start_timeout,
                                 on_cell=on_cell, on_output=single.streams,
                                 save_while_running=single.save_while_running, autosave_every=single.autosave_every)
    finally:
        if progress is not None:
            progress.stop()
    if res.notebook_text is not None:
        sys.stdout.write(res.notebook_text)
        sys.stdout.flush()
    _print_result(res)
    return res.exit_code


def _cell_progress(notebook: Any, injecting: bool) -> tuple[Any, Any]:
    """Papermill's ``--progress-bar``: a bar on stderr advanced as each cell ends (markdown too, as papermill).

    Its total counts the notebook's cells, plus the injected-parameters cell when parameters are
    given and the notebook has none from an earlier run.
    """
    import nbformat
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentstack_lab.workflows.execute import ERROR_MARKER_TAG

    nb: Any = notebook if isinstance(notebook, dict) else nbformat.read(notebook, as_version=4)
    total = sum(ERROR_MARKER_TAG not in c.get("metadata", {}).get("tags", []) for c in nb.cells)
    if injecting and not any("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        total += 1
    progress = Progress(TextColumn("Executing"), BarColumn(), MofNCompleteColumn(), TextColumn("cells"),
                        TimeElapsedColumn(), console=Console(stderr=True), transient=False)
    task = progress.add_task("cells", total=total)
    progress.start()

    def on_cell(index: int, cell: Any, when: str) -> None:
        if when == "end":
            progress.advance(task)

    return progress, on_cell


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
