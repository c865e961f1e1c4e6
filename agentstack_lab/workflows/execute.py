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
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.workflows.params import ParameterError, inject_parameters

if TYPE_CHECKING:
    from agentstack_lab.workflows.model import Verdict

__all__ = ["REPORT_MIME", "RunResult", "default_output_path", "run_notebook"]

REPORT_MIME = "application/vnd.agentstack.workflow-report+json"
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "error": EXIT_ERROR}
_VERDICT: dict[str, Verdict] = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}
_STATUS = {v: k for k, v in _VERDICT.items()}
_WATCH_INTERVAL = 0.1


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


async def _execute_cells(client: Any, nb: Any, lease: Any, *, deadline: float | None, timeout: float | None,
                         cell_timeout: float | None) -> None:
    """Execute every cell; raise :class:`_RunError` naming the cell on failure."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    msg_id = client.kc.kernel_info()
    info = await client.async_wait_for_reply(msg_id)
    if info is not None and "language_info" in info["content"]:
        nb.metadata["language_info"] = info["content"]["language_info"]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        described = _describe(nb, index)
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
                raise _died(lease, described)
            if remaining is None or (cell_timeout is not None and cell_timeout < remaining):
                raise _RunError("error", f"{_cell_name(described)} exceeded the per-cell timeout of "
                                         f"{cell_timeout:g}s", described)
            raise _RunError("error", f"run exceeded its timeout of {timeout:g}s while running "
                                     f"{_cell_name(described)}", described)
        try:
            task.result()
        except CellTimeoutError:  # IOPub timeouts
            raise _RunError("error", f"{_cell_name(described)} timed out waiting for output",
                            described) from None
        except DeadKernelError:
            raise _died(lease, described) from None
        except CellExecutionError as exc:
            ename = getattr(exc, "ename", None)
            reason = f"{ename}: {exc.evalue}" if ename else str(exc).splitlines()[-1]
            if ename == "AssertionError":  # a check in the notebook failed: the verdict is FAIL
                raise _RunError("fail", f"{_cell_name(described)} raised {reason}", described) from None
            raise _RunError("error", f"{_cell_name(described)} raised {reason} (a crash, not a failed "
                                     "check: the workflow could not run)", described) from None


async def _watch_kernel(km: Any) -> None:
    while await km.is_alive():
        await asyncio.sleep(_WATCH_INTERVAL)


async def run_notebook(notebook: str | Path, *, parameters: dict[str, Any] | None = None,
                       output: str | Path | None = None, report_path: str | Path | None = None,
                       kernel_name: str | None = None, cwd: str | Path | None = None,
                       cell_timeout: float | None = None, timeout: float | None = None,
                       pool: Any = None) -> RunResult:
    """Inject ``parameters`` into ``notebook``, execute it, save the result, return the verdict.

    Args:
        notebook: Path of the ``.ipynb`` to run.
        parameters: Name → value (int, float, bool, str, list, dict, None).
        output: Where to write the executed notebook (default ``<stem>.executed.ipynb`` in cwd).
        report_path: Where to write the report JSON (optional).
        kernel_name: Kernelspec to use (default: the notebook's, else ``python3``).
        cwd: Working directory of the kernel (default: the current directory, as papermill).
        cell_timeout: Seconds one cell may run.
        timeout: Seconds the whole run may take.
        pool: A started :class:`~agentstack_lab.workflows.pool.KernelPool` to take the kernel from.
    """
    import nbformat

    started, t0 = datetime.now(UTC), time.monotonic()
    parameters = dict(parameters or {})
    src = Path(notebook)
    out_path = Path(output) if output else default_output_path(src)
    result = RunResult(notebook=str(src), status="error", exit_code=EXIT_ERROR, message="",
                       parameters=parameters)
    if not src.is_file():
        result.message = f"notebook not found: {src}"
        return result
    try:
        nb = nbformat.read(src, as_version=4)
    except Exception as exc:
        result.message = f"cannot read notebook {src}: {exc}"
        return result
    status, message, cell_info = "pass", "", None
    lease = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            nb = inject_parameters(nb, parameters, input_path=str(src), output_path=str(out_path))
        result.warnings = [str(w.message) for w in caught]
        run_cwd = str(Path(cwd).resolve() if cwd else Path.cwd())
        if not Path(run_cwd).is_dir():
            raise _RunError("error", f"working directory not found: {run_cwd}")
        kname = kernel_name or nb.metadata.get("kernelspec", {}).get("name") or "python3"
        deadline = None if timeout is None else t0 + timeout  # the kernel's start counts too
        try:
            lease = await asyncio.wait_for(_lease(pool, kname, run_cwd),
                                           None if deadline is None else max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise _RunError("error", f"run exceeded its timeout of {timeout:g}s waiting for a kernel") from None
        client = _client(nb, lease)
        if pool is not None and run_cwd != pool.cwd:
            client.kc.execute(f"__import__('os').chdir({run_cwd!r})", silent=True, store_history=False)
        await _execute_cells(client, nb, lease, deadline=deadline, timeout=timeout, cell_timeout=cell_timeout)
        client.set_widgets_metadata()
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

    report = _find_report(nb)
    if report is None:
        report = _fallback_report(src.stem, started, _VERDICT[status], parameters)
    if status == "pass" and report.get("verdict") in ("FAIL", "ERROR"):
        status, message = _STATUS[report["verdict"]], f"workflow verdict {report['verdict']} ({_summary(report)})"
    message = message or f"workflow verdict PASS ({_summary(report)})"
    reviewer = (report.get("decision") or {}).get("reviewer") or {}
    if reviewer.get("skipped"):  # one line on the terminal: the verdict did not come from a reviewer
        result.warnings.append(f"the reviewer gate was skipped, it decided nothing: {reviewer.get('reason')}")
    result.duration = time.monotonic() - t0

    def finish(status: str, message: str) -> None:  # a run that could not complete is ERROR, never FAIL
        report["verdict"] = _VERDICT[status] if status != "pass" else report.get("verdict", "PASS")
        report["execution"] = {"notebook": str(src), "output": str(out_path), "status": status,
                               "exitCode": _EXIT[status], "message": message, "failingCell": cell_info,
                               "warnings": result.warnings, "kernelSeconds": round(result.duration, 3)}
        nb.metadata.setdefault("agentstack", {})["workflow"] = {"report": report}

    finish(status, message)
    try:  # an unwritable -o/--report makes the run an error (exit 2) naming the path, after the fact
        _write(out_path, lambda p: nbformat.write(nb, p), "executed notebook")
        if report_path:
            _write(Path(report_path), lambda p: p.write_text(json.dumps(report, indent=2) + "\n", "utf-8"), "report")
    except _RunError as exc:
        status, message = "error", exc.message
        finish(status, message)
        with contextlib.suppress(_RunError):  # keep what can be kept: the other file may still be writable
            _write(out_path, lambda p: nbformat.write(nb, p), "executed notebook")
    exit_code = _EXIT[status]
    result.status, result.exit_code, result.message = status, exit_code, message
    result.output, result.report, result.failing_cell = str(out_path), report, cell_info
    result.report_path = str(report_path) if report_path else None
    return result


async def _lease(pool: Any, kernel_name: str, cwd: str) -> Any:
    from agentstack_lab.workflows.pool import start_kernel

    if pool is not None and pool.kernel_name == kernel_name:
        return await pool.acquire()
    return await start_kernel(kernel_name, cwd=cwd)


def _client(nb: Any, lease: Any) -> Any:
    from nbclient import NotebookClient

    client = NotebookClient(nb, km=lease.km, kernel_name=lease.kernel_name, timeout=None,
                            interrupt_on_timeout=False, allow_errors=False, record_timing=True)
    client.kc = lease.kc
    client.reset_execution_trackers()
    return client


def _summary(report: dict[str, Any]) -> str:
    s = report.get("summary", {})
    sev = s.get("findingsBySeverity", {})
    return (f"{s.get('findingsTotal', 0)} findings: {sev.get('high', 0)} high, {sev.get('medium', 0)} medium, "
            f"{sev.get('low', 0)} low; iterations {report.get('iterations', 1)}")
