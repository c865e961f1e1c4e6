"""Run one parameterised notebook headless with nbclient and turn the outcome into a verdict.

Exit codes: 0 PASS; 1 FAIL, a check failed (the workflow's verdict is FAIL, or a cell raised
``AssertionError``, papermill-style); 2 error, the check could not run (any other exception in a
cell, bad parameter, missing notebook, kernel failed to start or died, timeout, an output file that
cannot be written). The report's verdict says the same: PASS, FAIL, or ERROR when the run could not
complete (never FAIL: nothing was decided). In every case where a notebook was read, the (partial)
executed notebook is written and the failing cell is named.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.workflows.params import ParameterError, inject_parameters

if TYPE_CHECKING:
    from agentstack_lab.workflows.model import Verdict

__all__ = ["ERROR_MARKER_TAG", "REPORT_MIME", "PapermillMetadata", "RunResult", "add_error_markers", "default_output_path",
           "keep_shown_widgets", "remove_error_markers", "run_notebook"]

REPORT_MIME = "application/vnd.agentstack.workflow-report+json"
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "error": EXIT_ERROR}
_VERDICT: dict[str, Verdict] = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}
_STATUS = {v: k for k, v in _VERDICT.items()}
_WATCH_INTERVAL = 0.1
log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What happened to one notebook run."""

    notebook: str
    status: str  # "pass" | "fail" | "error"
    exit_code: int
    message: str
    output: str | None = None
    report_path: str | None = None
    report: dict[str, Any] | None = None
    failing_cell: dict[str, Any] | None = None
    duration: float = 0.0
    warnings: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    notebook_text: str | None = None  # the executed notebook as JSON text, when ``output`` was "-"


class _Stopped(Exception):
    """A cell raised ``SystemExit`` with no code or code 0: the notebook stops there, cleanly (as papermill)."""

    def __init__(self, cell: dict[str, Any]):
        super().__init__(cell)
        self.cell = cell


class _RunError(Exception):
    def __init__(self, status: str, message: str, cell: dict[str, Any] | None = None):
        super().__init__(message)
        self.status, self.message, self.cell = status, message, cell


def default_output_path(notebook: str | Path) -> Path:
    """``<stem>.executed.ipynb`` in the current directory."""
    return Path.cwd() / f"{Path(notebook).stem}.executed.ipynb"


def _describe(nb: Any, index: int) -> dict[str, Any]:
    cell = nb.cells[index]
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
    return {"index": index, "number": index + 1, "id": cell.get("id"), "firstLine": first[:120]}


def _cell_name(cell: dict[str, Any]) -> str:
    return f"cell {cell['number']} (id {cell['id']}): {cell['firstLine']!r}"


def _find_report(nb: Any) -> dict[str, Any] | None:
    found = None
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = out.get("data", {}) if out.get("output_type") in ("display_data", "execute_result") else {}
            if REPORT_MIME in data:
                found = data[REPORT_MIME]
    return json.loads(json.dumps(found)) if found is not None else None


def _fallback_report(name: str, started: datetime, verdict: Verdict, parameters: dict[str, Any]) -> dict[str, Any]:
    from agentstack_lab.workflows.model import WorkflowReport

    return WorkflowReport(workflow=name, started_at=started, completed_at=datetime.now(UTC), verdict=verdict,
                          phases=[], iterations=1, max_iterations=1, parameters=parameters).to_dict()


def _write(path: Path, write: Any, what: str) -> None:
    """Write one output file; an OS error becomes a :class:`_RunError` naming the path."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except OSError as exc:
        raise _RunError("error", f"cannot write the {what} to {path}: {exc.strerror or exc}") from None


def _died(lease: Any, described: dict[str, Any]) -> _RunError:
    tail = lease.log_tail()
    return _RunError("error", f"kernel died while running {_cell_name(described)}"
                              + (f"; the kernel's last words:\n{tail}" if tail else ""), described)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _version() -> str:
    from agentstack_lab._version import __version__

    return f"agentstack-lab {__version__}"


class PapermillMetadata:
    """Keeps papermill's execution metadata on a notebook as it runs: what papermill itself writes.

    The notebook's ``metadata.papermill`` (``start_time``, ``end_time``, ``duration``, ``exception``,
    ``version``, ``environment_variables``, ``parameters``, ``default_parameters``, ``input_path``,
    ``output_path``) and each cell's (``status`` pending → running → completed | failed, its times,
    ``exception``), so tools that read papermill's output read ours. ``on_cell`` is told when each
    cell starts and ends (the progress bar), ``on_output`` gets each output as it arrives.
    """

    def __init__(self, nb: Any, *, on_cell: Any = None, on_output: Any = None, saver: _Saver | None = None) -> None:
        self.nb, self.on_cell, self.on_output, self.saver = nb, on_cell, on_output, saver
        self._t0 = time.monotonic()

    def _saved(self) -> None:
        if self.saver is not None:
            self.saver.save(self.nb)

    def notebook_start(self) -> None:
        self._t0 = time.monotonic()
        meta = self.nb.metadata.setdefault("papermill", {})
        meta.update(start_time=_now(), end_time=None, duration=None, exception=None)
        meta["version"] = _version()
        for cell in self.nb.cells:
            if cell.cell_type == "code":
                cell.execution_count = None
                cell.outputs = []
            cell.metadata["papermill"] = {"exception": None, "start_time": None, "end_time": None,
                                          "duration": None, "status": "pending"}
        self._saved()

    def cell_start(self, cell: Any, index: int) -> None:
        cell.metadata["papermill"].update(start_time=_now(), status="running", exception=False)
        cell.metadata["papermill"]["_t0"] = time.monotonic()
        if self.on_cell:
            self.on_cell(index, cell, "start")
        self._saved()

    def cell_exception(self, cell: Any, index: int) -> None:
        cell.metadata["papermill"].update(exception=True, status="failed")
        self.nb.metadata["papermill"]["exception"] = True

    def cell_complete(self, cell: Any, index: int) -> None:
        meta = cell.metadata["papermill"]
        t0 = meta.pop("_t0", None)
        meta["end_time"] = _now()
        meta["duration"] = None if t0 is None else round(time.monotonic() - t0, 6)
        if meta["status"] != "failed":
            meta["status"] = "completed"
        if self.on_cell:
            self.on_cell(index, cell, "end")
        self._saved()

    def output(self, output: Any) -> None:
        if self.on_output:
            self.on_output(output)
        if self.saver is not None:
            self.saver.autosave(self.nb)

    def notebook_complete(self) -> None:
        meta = self.nb.metadata.setdefault("papermill", {})
        meta["end_time"] = _now()
        meta["duration"] = round(time.monotonic() - self._t0, 6)
        for cell in self.nb.cells:  # as papermill: cells before the failure count as done, none after it
            pm = cell.metadata.get("papermill", {})
            pm.pop("_t0", None)
            if pm.get("status") == "failed":
                break
            if pm.get("status") == "pending" and cell.cell_type != "code":
                pm["status"] = "completed"


class _Saver:
    """Papermill's saves of the output notebook while it runs (``--request-save-on-cell-execute``, on by default).

    The notebook is written when the run starts and as each cell starts and ends; during a long cell,
    whenever an output arrives ``every`` seconds or more after the last save (``--autosave-cell-every``,
    30; 0: never), the interval doubling when a save takes over a quarter of it, as papermill's. Each
    save replaces the file whole (written beside it, then renamed), so a reader never sees half a
    notebook. A save that fails is logged once and the run goes on; the final write reports it.
    """

    def __init__(self, path: Path, every: float) -> None:
        self.path, self.every = path, every
        self.last = time.monotonic()
        self.failed = False

    def save(self, nb: Any) -> None:
        import nbformat

        if self.failed:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, tmp)
            os.replace(tmp, self.path)
        except OSError as exc:
            self.failed = True
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning("cannot save the running notebook to %s: %s (saved again at the end)", self.path,
                        exc.strerror or exc)
        self.last = time.monotonic()

    def autosave(self, nb: Any) -> None:
        if self.every <= 0 or time.monotonic() - self.last < self.every:
            return
        start = time.monotonic()
        self.save(nb)
        took = time.monotonic() - start
        if took > self.every / 4:
            self.every *= 2
            log.warning("autosave too slow: %.2f s, over 25%% of the interval; now every %g s", took, self.every)


ERROR_MARKER_TAG = "papermill-error-cell-tag"
_ERROR_STYLE = 'style="color:red; font-family:Helvetica Neue, Helvetica, Arial, sans-serif; font-size:2em;"'


_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_MODEL_ID = re.compile(r"[0-9a-f]{32}")


def keep_shown_widgets(nb: Any) -> None:
    """Keep the saved state of the widgets an output shows (and the models they use); drop the rest.

    A widget no output shows (an ``%agent`` tree whose output became its final snapshot) would only
    grow the file, and make ``jupyter nbconvert --to html`` load a widget renderer for nothing.
    """
    widgets = nb.metadata.get("widgets") or {}
    state = (widgets.get(_WIDGET_STATE) or {}).get("state")
    if not state:
        return
    todo = [out["data"][_WIDGET_VIEW].get("model_id") for cell in nb.cells for out in cell.get("outputs", [])
            if _WIDGET_VIEW in (out.get("data") or {})]
    keep: set[str] = set()
    while todo:
        model = todo.pop()
        if model in state and model not in keep:
            keep.add(model)
            todo.extend(_MODEL_ID.findall(json.dumps(state[model])))
    if keep:
        widgets[_WIDGET_STATE]["state"] = {k: v for k, v in state.items() if k in keep}
    else:
        del widgets[_WIDGET_STATE]
        if not widgets:
            del nb.metadata["widgets"]


def remove_error_markers(nb: Any) -> None:
    """Drop the error-marker cells an earlier papermill (or our) run left in the notebook."""
    nb.cells = [c for c in nb.cells if ERROR_MARKER_TAG not in c.get("metadata", {}).get("tags", [])]


def add_error_markers(nb: Any, index: int) -> None:
    """Papermill's two markers: a note at the top linking to the failing cell, an anchor right before it."""
    import nbformat

    count = nb.cells[index].get("execution_count")
    top = nbformat.v4.new_markdown_cell(
        f"<span {_ERROR_STYLE}>An Exception was encountered at "
        f"'<a href=\"#papermill-error-cell\">In [{count}]</a>'.</span>")
    anchor = nbformat.v4.new_markdown_cell(
        f'<span id="papermill-error-cell" {_ERROR_STYLE}>Execution using papermill encountered an exception '
        "here and stopped:</span>")
    for cell in (top, anchor):
        cell.metadata["tags"] = [ERROR_MARKER_TAG]
    nb.cells.insert(index, anchor)
    nb.cells.insert(0, top)


def _error_output(cell: Any, ename: str, evalue: str) -> None:
    """Record why a cell stopped as its error output (a timed-out or killed cell has none of its own)."""
    import nbformat

    cell.outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))


async def _execute_cells(client: Any, nb: Any, lease: Any, *, deadline: float | None, timeout: float | None,
                         cell_timeout: float | None, observer: PapermillMetadata | None = None) -> None:
    """Execute every cell; raise :class:`_RunError` naming the cell on failure, :class:`_Stopped` on ``sys.exit()``."""
    msg_id = client.kc.kernel_info()
    info = await client.async_wait_for_reply(msg_id)
    if info is not None and "language_info" in info["content"]:
        nb.metadata["language_info"] = info["content"]["language_info"]
    for index, cell in enumerate(nb.cells):  # every cell starts and ends, as papermill: markdown too
        described = _describe(nb, index)
        if observer:
            observer.cell_start(cell, index)
        try:
            if cell.cell_type == "code" and cell.source.strip():
                await _execute_cell(client, cell, index, lease, described, deadline=deadline, timeout=timeout,
                                    cell_timeout=cell_timeout)
        except (_RunError, _Stopped):
            if observer:
                observer.cell_exception(cell, index)
            raise
        finally:
            if observer:
                observer.cell_complete(cell, index)


async def _execute_cell(client: Any, cell: Any, index: int, lease: Any, described: dict[str, Any], *,
                        deadline: float | None, timeout: float | None, cell_timeout: float | None) -> None:
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    task = asyncio.ensure_future(
        client.async_execute_cell(cell, index, execution_count=client.code_cells_executed + 1))
    watch = asyncio.ensure_future(_watch_kernel(lease.km))
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    limit = min(x for x in (remaining, cell_timeout, float("inf")) if x is not None)
    done, _ = await asyncio.wait({task, watch}, timeout=None if limit == float("inf") else limit,
                                 return_when=asyncio.FIRST_COMPLETED)
    watch.cancel()
    if task not in done:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if watch in done:
            error = _died(lease, described)
            _error_output(cell, "DeadKernelError", error.message.split("; the kernel's last words")[0])
            raise error
        if remaining is None or (cell_timeout is not None and cell_timeout < remaining):
            error = _RunError("error", f"{_cell_name(described)} exceeded the per-cell timeout of "
                                       f"{cell_timeout:g}s", described)
        else:
            error = _RunError("error", f"run exceeded its timeout of {timeout:g}s while running "
                                       f"{_cell_name(described)}", described)
        _error_output(cell, "CellTimeoutError", error.message)
        raise error
    try:
        task.result()
    except CellTimeoutError:  # IOPub timeouts
        error = _RunError("error", f"{_cell_name(described)} timed out waiting for output", described)
        _error_output(cell, "CellTimeoutError", error.message)
        raise error from None
    except DeadKernelError:
        error = _died(lease, described)
        _error_output(cell, "DeadKernelError", error.message.split("; the kernel's last words")[0])
        raise error from None
    except CellExecutionError as exc:
        ename = getattr(exc, "ename", None)
        if ename == "SystemExit" and (exc.evalue or "") in ("", "0"):  # sys.exit(), sys.exit(0): a clean stop
            raise _Stopped(described) from None
        reason = f"{ename}: {exc.evalue}" if ename else str(exc).splitlines()[-1]
        if ename == "AssertionError":  # a check in the notebook failed: the verdict is FAIL
            raise _RunError("fail", f"{_cell_name(described)} raised {reason}", described) from None
        raise _RunError("error", f"{_cell_name(described)} raised {reason} (a crash, not a failed "
                                 "check: the workflow could not run)", described) from None


async def _watch_kernel(km: Any) -> None:
    while await km.is_alive():
        await asyncio.sleep(_WATCH_INTERVAL)


async def run_notebook(notebook: str | Path | Any, *, parameters: dict[str, Any] | None = None,
                       output: str | Path | None = None, report_path: str | Path | None = None,
                       kernel_name: str | None = None, cwd: str | Path | None = None,
                       cell_timeout: float | None = None, timeout: float | None = None,
                       pool: Any = None, language: str | None = None, prepare_only: bool = False,
                       report_mode: bool = False, start_timeout: float = 60.0,
                       on_cell: Any = None, on_output: Any = None, save_while_running: bool = False,
                       autosave_every: float = 30.0) -> RunResult:
    """Inject ``parameters`` into ``notebook``, execute it, save the result, return the verdict.

    Args:
        notebook: Path of the ``.ipynb`` to run, or a notebook already read (``nbformat.NotebookNode``).
        parameters: Name → value (int, float, bool, str, list, dict, None).
        output: Where to write the executed notebook (default ``<stem>.executed.ipynb`` in cwd); ``"-"``:
            nowhere, the result's ``notebook_text`` holds it (for stdout).
        report_path: Where to write the report JSON (optional).
        kernel_name: Kernelspec to use (default: the notebook's, else ``python3``).
        cwd: Working directory of the kernel (default: the current directory, as papermill).
        cell_timeout: Seconds one cell may run.
        timeout: Seconds the whole run may take.
        pool: A started :class:`~agentstack_lab.workflows.pool.KernelPool` to take the kernel from.
        language: The kernel's language for the injected cell (default: the notebook's).
        prepare_only: Inject the parameters and save, execute nothing (papermill's ``--prepare-only``).
        report_mode: Hide every code cell's input in the output (papermill's ``--report-mode``).
        start_timeout: Seconds a kernel may take to start.
        on_cell: Called ``(index, cell, "start" | "end")`` around each executed cell.
        on_output: Called with each output of a cell as it arrives.
        save_while_running: Write the output notebook as the run starts and as each cell starts and ends,
            not only at the end (papermill's ``--request-save-on-cell-execute``; see :class:`_Saver`).
        autosave_every: With ``save_while_running``: during a long cell, save again when an output arrives
            this many seconds after the last save (papermill's ``--autosave-cell-every``; 0: never).
    """
    import nbformat

    started, t0 = datetime.now(UTC), time.monotonic()
    parameters = dict(parameters or {})
    given = isinstance(notebook, dict)
    src = Path("-" if given else notebook)
    to_stdout = str(output) == "-"
    out_path = Path(output) if output else default_output_path("stdin" if given else src)
    result = RunResult(notebook="-" if given else str(src), status="error", exit_code=EXIT_ERROR, message="",
                       parameters=parameters)
    nb: Any
    if given:
        nb = notebook
    elif not src.is_file():
        result.message = f"notebook not found: {src}"
        return result
    else:
        try:
            nb = nbformat.read(src, as_version=4)
        except Exception as exc:
            result.message = f"cannot read notebook {src}: {exc}"
            return result
    status, message, cell_info = "pass", "", None
    lease = None
    saver = _Saver(out_path, autosave_every) if save_while_running and not to_stdout else None
    tracker = PapermillMetadata(nb, on_cell=on_cell, on_output=on_output, saver=saver)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            nb = inject_parameters(nb, parameters, input_path=str(src), output_path=str(out_path),
                                   kernel_name=kernel_name, language=language, report_mode=report_mode)
        result.warnings = [str(w.message) for w in caught]
        remove_error_markers(nb)
        if report_mode:
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
        tracker.nb = nb
        if prepare_only:
            raise _Prepared
        run_cwd = str(Path(cwd).resolve() if cwd else Path.cwd())
        if not Path(run_cwd).is_dir():
            raise _RunError("error", f"working directory not found: {run_cwd}")
        kname = kernel_name or nb.metadata.get("kernelspec", {}).get("name") or "python3"
        deadline = None if timeout is None else t0 + timeout  # the kernel's start counts too
        tracker.notebook_start()
        try:
            lease = await asyncio.wait_for(_lease(pool, kname, run_cwd, start_timeout),
                                           None if deadline is None else max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise _RunError("error", f"run exceeded its timeout of {timeout:g}s waiting for a kernel") from None
        client = _client(nb, lease, tracker)
        if pool is not None and run_cwd != pool.cwd:
            client.kc.execute(f"__import__('os').chdir({run_cwd!r})", silent=True, store_history=False)
        await _execute_cells(client, nb, lease, deadline=deadline, timeout=timeout, cell_timeout=cell_timeout,
                             observer=tracker)
        client.set_widgets_metadata()
        keep_shown_widgets(nb)
    except _Prepared:
        message = "prepared, not executed (--prepare-only): parameters injected"
    except _Stopped as exc:
        message = f"stopped cleanly by SystemExit in {_cell_name(exc.cell)} (exit 0, as papermill)"
    except ParameterError as exc:
        status, message = "error", f"bad parameter: {exc}"
    except _RunError as exc:
        status, message, cell_info = exc.status, exc.message, exc.cell
    except Exception as exc:  # kernel failed to start, no such kernelspec, ...
        status, message = "error", f"{type(exc).__name__}: {exc}"
    finally:
        if lease is not None:
            from agentstack_lab.workflows.pool import discard_kernel

            if pool is not None:
                pool.discard(lease)
            else:
                await discard_kernel(lease)
    if "start_time" in nb.metadata.get("papermill", {}):
        tracker.notebook_complete()
    if cell_info is not None:
        add_error_markers(nb, cell_info["index"])

    report = _find_report(nb)
    if report is None:
        report = _fallback_report(src.stem if not given else "stdin", started, _VERDICT[status], parameters)
    if status == "pass" and report.get("verdict") in ("FAIL", "ERROR"):
        status, message = _STATUS[report["verdict"]], f"workflow verdict {report['verdict']} ({_summary(report)})"
    message = message or f"workflow verdict PASS ({_summary(report)})"
    reviewer = (report.get("decision") or {}).get("reviewer") or {}
    if reviewer.get("skipped"):  # one line on the terminal: the verdict did not come from a reviewer
        result.warnings.append(f"the reviewer gate was skipped, it decided nothing: {reviewer.get('reason')}")
    result.duration = time.monotonic() - t0

    def finish(status: str, message: str) -> None:  # a run that could not complete is ERROR, never FAIL
        report["verdict"] = _VERDICT[status] if status != "pass" else report.get("verdict", "PASS")
        report["execution"] = {"notebook": result.notebook, "output": "-" if to_stdout else str(out_path),
                               "status": status, "exitCode": _EXIT[status], "message": message,
                               "failingCell": cell_info, "warnings": result.warnings,
                               "kernelSeconds": round(result.duration, 3)}
        nb.metadata.setdefault("agentstack", {})["workflow"] = {"report": report}

    def save(p: Path) -> None:
        nbformat.write(nb, p)

    finish(status, message)
    try:  # an unwritable -o/--report makes the run an error (exit 2) naming the path, after the fact
        if not to_stdout:
            _write(out_path, save, "executed notebook")
        if report_path:
            _write(Path(report_path), lambda p: p.write_text(json.dumps(report, indent=2) + "\n", "utf-8"), "report")
    except _RunError as exc:
        status, message = "error", exc.message
        finish(status, message)
        with contextlib.suppress(_RunError):  # keep what can be kept: the other file may still be writable
            if not to_stdout:
                _write(out_path, save, "executed notebook")
    if to_stdout:
        result.notebook_text = nbformat.writes(nb)
    exit_code = _EXIT[status]
    result.status, result.exit_code, result.message = status, exit_code, message
    result.output, result.report, result.failing_cell = ("-" if to_stdout else str(out_path)), report, cell_info
    result.report_path = str(report_path) if report_path else None
    return result


class _Prepared(Exception):
    """``prepare_only``: the parameters are in, nothing runs."""


async def _lease(pool: Any, kernel_name: str, cwd: str, start_timeout: float = 60.0) -> Any:
    from agentstack_lab.workflows.pool import start_kernel

    if pool is not None and pool.kernel_name == kernel_name:
        return await pool.acquire()
    return await start_kernel(kernel_name, cwd=cwd, startup_timeout=start_timeout)


def _client(nb: Any, lease: Any, tracker: PapermillMetadata | None = None) -> Any:
    """An nbclient client on the leased kernel that hands each output to ``tracker`` as it arrives."""
    from nbclient import NotebookClient

    class _Client(NotebookClient):
        def process_message(self, *args: Any, **kwargs: Any) -> Any:
            out = super().process_message(*args, **kwargs)
            if out is not None and tracker is not None:
                tracker.output(out)
            return out

    client = _Client(nb, km=lease.km, kernel_name=lease.kernel_name, timeout=None,
                     interrupt_on_timeout=False, allow_errors=False, record_timing=True)
    client.kc = lease.kc
    client.reset_execution_trackers()
    return client


def _summary(report: dict[str, Any]) -> str:
    s = report.get("summary", {})
    sev = s.get("findingsBySeverity", {})
    return (f"{s.get('findingsTotal', 0)} findings: {sev.get('high', 0)} high, {sev.get('medium', 0)} medium, "
            f"{sev.get('low', 0)} low; iterations {report.get('iterations', 1)}")
