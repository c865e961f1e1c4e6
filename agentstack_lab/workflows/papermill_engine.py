"""``papermill --engine agentstack``: papermill's command line and API, our kernels and cell execution.

Users keep their papermill scripts and CI (``papermill --engine agentstack IN OUT -p x 1``, or
``papermill.execute_notebook(..., engine_name="agentstack")``); papermill parameterises, writes the
metadata and the output, and this engine runs the cells the way ``agentstack-lab workflow run``
does (:mod:`~agentstack_lab.workflows.execute`): a kernel started with its log kept, so a kernel that
dies is named with the cell it was running and the kernel's last words; a cell timeout that keeps
the timed-out cell's error output (papermill's nbclient engine raises before the output is written);
outputs logged and written to ``--stdout-file``/``--stderr-file`` as they arrive, as papermill does.

Registered as papermill's ``papermill.engine`` entry point ``agentstack`` (``pyproject.toml``).
Exit codes stay papermill's: 0, 1 for a cell that raised (``sys.exit()``/``sys.exit(0)`` are clean),
138 for a dead kernel (this engine raises nbclient's ``DeadKernelError``, which papermill's CLI maps).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from papermill.engines import Engine

from agentstack_lab.workflows.execute import _client, _describe, _execute_cell, _RunError, _Stopped

__all__ = ["AgentstackEngine"]

logger = logging.getLogger("papermill")


class _Outputs:
    """papermill's ``log_output_message``: each output to the log and the stream files as it arrives.

    With ``nb_man``, each output also gives papermill its chance to autosave a long cell
    (``--autosave-cell-every``), as papermill's own client does for every message.
    """

    def __init__(self, log_output: bool, stdout_file: Any, stderr_file: Any, nb_man: Any = None) -> None:
        self.log_output, self.files = log_output, {"stdout": stdout_file, "stderr": stderr_file}
        self.nb_man = nb_man

    def output(self, output: Any) -> None:
        if self.nb_man is not None:
            self.nb_man.autosave_cell()
        if output.get("output_type") == "stream":
            content = "".join(output.get("text", ""))
            if self.log_output:
                (logger.info if output.get("name") == "stdout" else logger.warning)(content)
            file = self.files.get(output.get("name", ""))
            if file is not None:
                file.write(content)
                file.flush()
        elif self.log_output and "text/plain" in output.get("data", {}):
            logger.info("".join(output["data"]["text/plain"]))


class AgentstackEngine(Engine):
    """A papermill engine executing each cell through agentstack-lab's kernel handling."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                 stdout_file: Any = None, stderr_file: Any = None, start_timeout: float = 60,
                                 execution_timeout: float | None = None, **kwargs: Any) -> Any:
        """Execute ``nb_man.nb`` on a fresh ``kernel_name`` kernel in the current directory (papermill's ``--cwd``)."""
        from jupyter_core.utils import run_sync

        return run_sync(_execute)(nb_man, kernel_name, _Outputs(log_output, stdout_file, stderr_file, nb_man),
                                  start_timeout=float(start_timeout or 60),
                                  execution_timeout=float(execution_timeout) if execution_timeout else None)


async def _execute(nb_man: Any, kernel_name: str, outputs: _Outputs, *, start_timeout: float,
                   execution_timeout: float | None) -> Any:
    from nbclient.exceptions import DeadKernelError

    from agentstack_lab.workflows.pool import discard_kernel, start_kernel

    nb = nb_man.nb
    lease = await start_kernel(kernel_name, cwd=os.getcwd(), startup_timeout=start_timeout)
    try:
        client = _client(nb, lease, outputs)  # type: ignore[arg-type]  # duck-typed: it only calls .output
        reply = await client.async_wait_for_reply(client.kc.kernel_info())
        if reply is not None and "language_info" in reply["content"]:
            nb.metadata["language_info"] = reply["content"]["language_info"]
        for index, cell in enumerate(nb.cells):
            nb_man.cell_start(cell, index)
            try:
                if cell.cell_type == "code" and cell.source.strip():
                    await _execute_cell(client, cell, index, lease, _describe(nb, index), deadline=None,
                                        timeout=None, cell_timeout=execution_timeout)
            except (_RunError, _Stopped) as exc:
                nb_man.cell_exception(cell, cell_index=index, exception=exc)
                died = next((o for o in cell.outputs if o.get("ename") == "DeadKernelError"), None)
                if died is not None:
                    raise DeadKernelError(getattr(exc, "message", str(exc))) from None
                break  # the cell's error output stays; papermill raises for it after saving
            finally:
                nb_man.cell_complete(cell, cell_index=index)
    finally:
        await discard_kernel(lease)
    return nb
