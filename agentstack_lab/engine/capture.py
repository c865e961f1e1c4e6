"""Per-thread output capture for the live executor, and cheap fingerprints for in-place changes.

Agent code runs in worker threads of the kernel process. While any runs, ``sys.stdout``,
``sys.stderr`` and the IPython display publisher are wrapped by routers that send writes and
``display()`` outputs from agent threads to that thread's buffers and pass everything else
through unchanged, so the user's own cells keep printing and displaying normally.
"""

from __future__ import annotations

import ast
import importlib
import io
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

__all__ = ["fingerprint", "mentioned_names", "keep_bundle", "bundle_text", "Capture", "ThreadOutput", "attach",
           "current_output", "DISPLAY_MIME",
           "MAX_DISPLAYS", "MAX_OUTPUT", "FINGERPRINT_MAX_CELLS", "FINGERPRINT_MAX_BYTES", "FINGERPRINT_MAX_ITEMS"]

MAX_OUTPUT = 1_000_000  # characters kept per stream or MIME form

DISPLAY_MIME = ("text/plain", "text/html", "text/markdown", "image/png", "image/jpeg", "image/svg+xml")
MAX_DISPLAYS = 20  # display() outputs kept per run of code (later ones are counted, not kept)
FINGERPRINT_MAX_CELLS = 1_000_000  # DataFrame/Series cells hashed by value; larger ones: shape and columns
FINGERPRINT_MAX_BYTES = 8 * 1024 * 1024  # ndarray bytes hashed; larger ones: shape and dtype
FINGERPRINT_MAX_ITEMS = 20_000  # list/dict/set items fingerprinted by identity; larger ones: length


_SLOT = "_agentstack_output"  # the one attribute set on a worker thread; only this module touches it


@dataclass(kw_only=True, eq=False)
class ThreadOutput:
    """Where one worker thread's agent code writes: its streams, ``display()`` bundles and exec context."""

    stdout: io.StringIO = field(default_factory=io.StringIO)
    stderr: io.StringIO = field(default_factory=io.StringIO)
    display: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    dropped: int = 0  # display() outputs past MAX_DISPLAYS, counted not kept
    context: Any = None  # the executor's ExecContext (fork/wait, secrets)
    files: dict[str, int] = field(default_factory=lambda: {"read": 0, "written": 0, "modified": 0})
    auditing: bool = False  # the executors' audit hook is classifying an event (its own opens do not count)


def attach(thread: threading.Thread, output: ThreadOutput | None) -> None:
    """Route ``thread``'s writes and displays to ``output`` (``None``: back to the user's cell)."""
    setattr(thread, _SLOT, output)


def current_output() -> ThreadOutput | None:
    """The capture of the calling thread, if agent code runs on it."""
    return getattr(threading.current_thread(), _SLOT, None)


def keep_bundle(data: dict[str, Any]) -> dict[str, Any]:
    """The MIME forms worth keeping from a display bundle (text, HTML, Markdown, images), size-capped."""
    out: dict[str, str] = {}
    for mime in DISPLAY_MIME:
        value = data.get(mime)
        if isinstance(value, str):
            out[mime] = value if len(value) <= MAX_OUTPUT else f"({mime} of {len(value)} characters omitted)"
    return out


def bundle_text(bundle: dict[str, Any]) -> str:
    """A display bundle as text for the model (images are named, not inlined)."""
    images = [m for m in bundle if m.startswith("image/")]
    text = bundle.get("text/plain") or bundle.get("text/markdown") or ""
    if images:
        text = f"{text} [{', '.join(images)}]".strip()
    return text or "[" + ", ".join(bundle) + "]"


def fingerprint(value: Any) -> Any:
    """A cheap, bounded fingerprint of a value's contents, or ``None`` for kinds not tracked.

    pandas objects up to :data:`FINGERPRINT_MAX_CELLS` cells are hashed by value
    (``hash_pandas_object``), numpy arrays up to :data:`FINGERPRINT_MAX_BYTES` by their bytes;
    lists, dicts and sets up to :data:`FINGERPRINT_MAX_ITEMS` items by the identities of their
    items (shallow: a change deep inside a nested item is not seen). Larger values fall back to
    shape/columns/length, so appends and new columns are still seen but value edits are not.
    Measured cost (2 cores, per value, taken before and after the code): a 1M-cell DataFrame
    ~12 ms, an 8 MB array ~16 ms, a 20k-item list ~1 ms (dict ~20 ms); only names the code mentions are taken.
    """
    module = type(value).__module__
    try:
        if module.startswith("pandas") and hasattr(value, "shape"):
            pd: Any = importlib.import_module("pandas")   # loosely typed: pandas ships partial types

            cols = tuple(map(str, getattr(value, "columns", ()))) or None
            cells = int(value.size) if hasattr(value, "size") else 0
            if isinstance(value, pd.DataFrame | pd.Series) and cells <= FINGERPRINT_MAX_CELLS:
                try:
                    digest = int(pd.util.hash_pandas_object(value, index=True).sum())
                except TypeError:  # unhashable cells (lists, dicts): dtypes and shape only
                    digest = None
                return ("pandas", value.shape, cols, str(getattr(value, "dtypes", "")), digest)
            return ("pandas", value.shape, cols)
        if module == "numpy" and hasattr(value, "tobytes") and hasattr(value, "nbytes"):
            import hashlib

            if value.nbytes <= FINGERPRINT_MAX_BYTES and value.dtype != object:
                return ("numpy", value.shape, str(value.dtype), hashlib.blake2b(value.tobytes(), digest_size=16).digest())
            return ("numpy", value.shape, str(value.dtype))
        if isinstance(value, bytearray):
            return ("bytearray", len(value), hash(bytes(value)) if len(value) <= FINGERPRINT_MAX_BYTES else None)
        if isinstance(value, list | dict | set):
            items = cast("list[Any] | dict[Any, Any] | set[Any]", value)
            if len(items) > FINGERPRINT_MAX_ITEMS:
                return (type(items).__name__, len(items))
            if isinstance(items, dict):
                return ("dict", tuple((id(k), id(v)) for k, v in items.items()))
            if isinstance(items, set):
                return ("set", len(items), frozenset(map(id, items)))
            return ("list", tuple(map(id, items)))
    except Exception:  # noqa: BLE001 - a value we cannot fingerprint is simply not tracked
        return None
    return None


def mentioned_names(code: str) -> set[str]:
    """The names a piece of code mentions (in-place changes are looked for only among these)."""
    try:
        return {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


class _StreamRouter:
    """Stands in for sys.stdout/stderr: writes from capturing threads go to their buffer, others pass on."""

    def __init__(self, original: Any, stream: str):
        self._original = original
        self._stream = stream  # "stdout" or "stderr"

    def write(self, s: str) -> int:
        out = current_output()
        if out is not None:
            return getattr(out, self._stream).write(s)
        return self._original.write(s)

    def flush(self) -> None:
        if current_output() is None:
            self._original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class _RoutedPublish:
    """A display publisher's ``publish`` that keeps agent threads' outputs and passes others on."""

    def __init__(self, original: Callable[..., Any]):
        self.original = original

    def __call__(self, data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
        out = current_output()
        if out is None:
            return self.original(data, metadata, *args, **kwargs)
        bundle = keep_bundle(data or {})
        if bundle and len(out.display) < MAX_DISPLAYS:
            out.display.append(bundle)
        elif bundle:
            out.dropped += 1
        return None


def _routed_clear(original: Callable[..., Any]) -> Callable[..., Any]:
    """``clear_output`` from agent code must not clear the user's cell: ignored in agent threads."""

    def clear_output(*args: Any, **kwargs: Any) -> Any:
        if current_output() is None:
            return original(*args, **kwargs)
        return None

    return clear_output


class Capture:
    """Installs the stdout/stderr/display routers while any agent code runs (reference counted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._saved: tuple[Any, Any] | None = None
        self._publisher: Any = None
        self._shell: Any = None

    def __call__(self, shell: Any) -> Capture:
        """Route this shell's display publisher too (``None``: streams only)."""
        self._shell = shell
        return self

    def __enter__(self) -> None:
        with self._lock:
            if self._count == 0:
                self._saved = (sys.stdout, sys.stderr)
                sys.stdout = _StreamRouter(sys.stdout, "stdout")
                sys.stderr = _StreamRouter(sys.stderr, "stderr")
                pub = getattr(self._shell, "display_pub", None)
                if pub is not None and not isinstance(pub.publish, _RoutedPublish):
                    self._publisher = pub
                    pub.publish = _RoutedPublish(pub.publish)
                    pub.clear_output = _routed_clear(pub.clear_output)
            self._count += 1

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0 and self._saved is not None:
                if isinstance(sys.stdout, _StreamRouter):
                    sys.stdout = self._saved[0]
                if isinstance(sys.stderr, _StreamRouter):
                    sys.stderr = self._saved[1]
                self._saved = None
                if self._publisher is not None:  # drop the instance attributes: the class methods show again
                    for attr in ("publish", "clear_output"):
                        self._publisher.__dict__.pop(attr, None)
                    self._publisher = None
