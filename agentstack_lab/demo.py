"""``make demo``: run the quickstart notebook headless and print the agent tree it produced.

Executes ``notebooks/quickstart.ipynb`` with nbclient in a fresh kernel (offline scripted
provider, no key needed), saves the executed copy next to it as
``quickstart.executed.ipynb`` (widget state included) and prints, from that copy's outputs,
the final agent tree as text, the answer and the memory search.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main", "run_quickstart", "cell_text"]

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"


def cell_text(nb, tag: str, *, streams: bool = True) -> str:
    """The text a plain-text front end shows for the cell tagged ``tag`` (without its printed lines: ``streams=False``)."""
    cell = next(c for c in nb.cells if tag in c.get("metadata", {}).get("tags", []))
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            if not streams:
                continue
            parts.append(out["text"])
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts).rstrip()


def run_quickstart(notebook: Path = NOTEBOOK, output: Path | None = None, timeout: int = 300):
    """Execute ``notebook`` headless; returns the executed notebook (also written to ``output``)."""
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    output = output or notebook.with_name(notebook.stem + ".executed.ipynb")
    nb = nbformat.read(notebook, as_version=4)
    sockets = tempfile.TemporaryDirectory(prefix="agentstack-kernel-")
    config = Config()
    # A local kernel over Unix sockets: no TCP ports, and none of the kernel's "TCP without encryption" warning.
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(Path(sockets.name) / "kernel")  # absolute: the kernel runs in another folder
    client = NotebookClient(nb, kernel_name="python3", timeout=timeout, store_widget_state=True, config=config,
                            resources={"metadata": {"path": str(notebook.parent)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, output)
        sockets.cleanup()
    return nb


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    notebook = Path(argv[0]) if argv else NOTEBOOK
    output = notebook.with_name(notebook.stem + ".executed.ipynb")
    print(f"Executing {notebook} headless (offline scripted provider)…", flush=True)
    try:
        nb = run_quickstart(notebook, output)
    except Exception as exc:  # CellExecutionError carries the failing cell and its error
        print(f"demo failed; partial output saved to {output}\n{exc}", file=sys.stderr)
        return 1
    print(f"Executed in {time.monotonic() - started:.1f} s; saved {output}\n")
    print("Final agent tree:\n")
    print(cell_text(nb, "agent-tree", streams=False))  # the tree, without the database notice printed above it
    status, _, answer = cell_text(nb, "result").partition("\n")
    print(f"\nStatus: {status}\nAnswer (first lines):")
    print("\n".join(answer.splitlines()[:8]))
    print("\nMemory search 'north region growth':\n")
    print(cell_text(nb, "memory-search"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
