"""What a Python cell does, read from its syntax tree before it runs.

:func:`classify` walks the cell's AST and names every effect it can see: ``read_only`` (names read and
calls on the known-safe list: ``df.head()``, ``describe``, ``len``, ``print``), ``rebinds``, ``mutates``
(in place), ``file_read``, ``file_write`` (plus ``write_outside`` when a literal target resolves outside
the working folder), ``file_delete``, ``network``, ``subprocess``, ``imports``, ``dynamic`` (``exec``,
``eval``, ``__import__``, computed ``getattr``, dunder chains, ``globals()``, pickle loads) and
``unknown``. Unknown is never safe: a call that is not on a safe list is at least ``unknown``, and a
cell that does not parse is ``unknown``. Names are resolved through the cell's own imports
(``import os as o; o.system`` is ``os.system``); a module the kernel imported earlier is recognised by
its usual name only (``os``, ``subprocess``, ``np``, ``pd``).

The classifier judges what code *does*, not what it costs: a read-only loop over a huge range is
still read-only (``while`` loops, which may not end, are ``unknown``).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from agentstack_lab.config import CodeClass

__all__ = ["Classification", "Finding", "classify"]


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One reason for one class: where in the cell, the code there, and why."""

    kind: CodeClass
    line: int
    snippet: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.why} ({self.snippet})"


@dataclass(frozen=True, kw_only=True)
class Classification:
    """The classes a cell falls into, each with its reasons (a cell with no effect is ``read_only``)."""

    findings: tuple[Finding, ...]
    classes: frozenset[CodeClass] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", frozenset(f.kind for f in self.findings) or frozenset({"read_only"}))

    @property
    def reasons(self) -> Mapping[CodeClass, tuple[Finding, ...]]:
        """For each class, the findings that put the cell in it (in line order)."""
        out: dict[CodeClass, tuple[Finding, ...]] = {}
        for f in self.findings:
            out[f.kind] = (*out.get(f.kind, ()), f)
        return MappingProxyType(out)

    @property
    def read_only(self) -> bool:
        """Whether the only thing the cell does is read."""
        return self.classes == frozenset[CodeClass]({"read_only"})

    def summary(self) -> str:
        """One line: the classes, each with its first reason."""
        reasons = self.reasons
        return "; ".join(f"{k}: {reasons[k][0]}" for k in sorted(self.classes) if k in reasons) or "read_only"


# --- what is known ---------------------------------------------------------------------------------------

SAFE_BUILTINS = frozenset({
    "len", "print", "repr", "str", "int", "float", "bool", "complex", "type", "isinstance", "issubclass", "sorted",
    "min", "max", "sum", "abs", "round", "range", "enumerate", "zip", "list", "tuple", "dict", "set", "frozenset",
    "any", "all", "id", "hash", "dir", "format", "reversed", "divmod", "pow", "chr", "ord", "bin", "hex", "oct",
    "callable", "display", "ascii", "slice", "bytes", "map", "filter", "Path", "PurePath", "hasattr", "getattr",
})
"""Builtins (and IPython's ``display``) that only read: safe to call with safe arguments."""

SAFE_METHODS = frozenset({
    # pandas / numpy inspection
    "head", "tail", "describe", "info", "value_counts", "nunique", "unique", "isna", "isnull", "notna", "notnull",
    "sum", "mean", "median", "mode", "std", "var", "sem", "min", "max", "count", "corr", "cov", "quantile",
    "sample", "groupby", "agg", "aggregate", "keys", "values", "items", "get", "copy", "astype", "round", "abs",
    "sort_values", "sort_index", "reset_index", "set_index", "drop", "dropna", "fillna", "drop_duplicates",
    "duplicated", "isin", "between", "nlargest", "nsmallest", "idxmax", "idxmin", "argmax", "argmin", "cumsum",
    "cumprod", "cummax", "cummin", "diff", "pct_change", "rolling", "expanding", "resample", "shift", "rank",
    "merge", "join", "concat", "pivot_table", "pivot", "melt", "stack", "unstack", "crosstab", "memory_usage",
    "select_dtypes", "to_string", "to_markdown", "to_html", "to_json", "to_csv", "to_dict", "to_list", "tolist",
    "to_numpy", "to_frame", "to_records", "to_latex", "to_period", "to_timestamp", "first_valid_index",
    "last_valid_index", "any", "all", "prod", "product", "skew", "kurt", "kurtosis", "clip", "where", "mask",
    "equals", "explode", "squeeze", "transpose", "T", "reindex", "align", "combine_first", "interpolate",
    "describe_option", "apply", "map", "transform", "pipe", "filter", "size", "ngroups", "nth", "first", "last",
    "cut", "qcut", "to_datetime", "to_numeric", "to_timedelta", "date_range", "DataFrame", "Series", "Index",
    "Timestamp", "Timedelta", "Categorical", "array", "asarray", "arange", "linspace", "zeros", "ones", "full",
    "eye", "reshape", "ravel", "flatten", "dot", "matmul", "sqrt", "log", "log10", "log2", "exp", "floor", "ceil",
    "percentile", "nanmean", "nanmedian", "nanstd", "nansum", "nanmin", "nanmax", "histogram", "bincount",
    "corrcoef", "allclose", "isclose", "isnan", "isfinite", "argsort", "searchsorted",
    "nonzero", "count_nonzero", "hstack", "vstack", "column_stack", "concatenate", "split", "tile",
    "repeat", "diag", "trace", "norm", "inv", "det", "eig", "svd", "plot", "hist", "boxplot", "bar", "barh",
    "scatter", "line", "pie", "area", "kde", "density", "style", "background_gradient", "format", "hide",
    "loc", "iloc", "at", "iat", "xs", "dt", "str", "cat", "show", "legend", "set_title", "set_xlabel",
    "set_ylabel", "xlabel", "ylabel", "figure", "subplots", "tight_layout", "heatmap", "histplot", "scatterplot",
    "lineplot", "barplot", "countplot", "pairplot", "displot", "kdeplot", "violinplot", "head_rows",
    # strings
    "lower", "upper", "title", "capitalize", "casefold", "strip", "lstrip", "rstrip", "startswith", "endswith",
    "contains", "find", "rfind", "index", "rindex", "partition", "rpartition", "splitlines", "rsplit", "zfill",
    "ljust", "rjust", "center", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "len", "match",
    "fullmatch", "extract", "extractall", "findall", "search", "encode", "decode", "hexdigest", "isoformat",
    "strftime", "total_seconds", "day_name", "month_name", "normalize", "tz_localize", "tz_convert", "date", "time",
    "replace", "rename",
})
"""Method (and pure module-function) names that return a value and change nothing, on a non-system receiver."""

WRITE_TARGET_METHODS = frozenset({"to_csv", "to_json", "to_string", "to_markdown", "to_html", "to_latex",
                                  "to_excel", "to_parquet", "to_pickle", "to_feather", "to_hdf", "to_stata",
                                  "to_orc", "to_xml", "to_sql", "savefig", "save", "savez", "savetxt", "tofile",
                                  "write_text", "write_bytes", "write_html", "write_image", "to_clipboard", "info",
                                  "dump"})
"""Methods that write a file when given a target (``df.to_csv()`` alone returns text; ``to_csv("x")`` writes)."""

_PATH_KWARGS = ("path", "path_or_buf", "buf", "fname", "file", "excel_writer", "filename", "fp", "con")
_OUTPUT_ONLY = frozenset({"to_string", "to_markdown", "to_html", "to_latex", "to_json", "to_csv", "to_xml", "info"})
"""Of the methods above, those that are read-only when called without a target."""

MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                              "add", "discard", "popitem", "reverse", "sort", "fill", "put", "itemset", "resize",
                              "setflags", "seed", "close", "set_option", "reset_option", "set_axis", "fit",
                              "partial_fit", "set_params", "set_index_inplace", "__setitem__"})
_PURE_SORT_ROOTS = frozenset({"np", "numpy", "pd", "pandas"})

CALLABLE_FIRST = frozenset({"apply", "map", "transform", "pipe", "agg", "aggregate", "applymap", "reduce",
                            "filter"})
"""Calls whose first argument (or ``func=``) may be called: it must be a literal, a lambda or a known-safe function."""
_KEY_CALLS = frozenset({"sorted", "min", "max", "sort_values", "nlargest", "nsmallest"})
"""Calls whose ``key=`` is called."""
_CERTAIN_MODULES = frozenset({"subprocess", "socket", "importlib", "ctypes", "builtins", "marshal", "pickle",
                              "multiprocessing", "pty", "requests", "urllib", "urllib3", "httpx", "shutil", "cffi",
                              "dill", "cloudpickle", "runpy", "codeop", "paramiko", "ftplib", "smtplib", "telnetlib"})
"""Module names that stand for the module even when the cell did not import them (``x = subprocess``)."""
_AMBIGUOUS_ROOTS = frozenset({"signal", "code", "types", "http", "sh", "site", "commands", "inspect", "grpc",
                              "glob", "websocket", "plumbum", "pexpect", "shelve", "tempfile", "atexit"})
"""Module names that are also common variable names: they count as the module only when the cell imports it."""
_DYNAMIC_NAMES = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr",
                            "delattr", "breakpoint", "get_ipython", "memoryview"})

PURE_MODULES = frozenset({"math", "cmath", "statistics", "fractions", "decimal", "datetime", "calendar", "string",
                          "textwrap", "itertools", "collections", "difflib", "unicodedata", "html", "hashlib",
                          "re", "json", "time", "random", "uuid", "heapq", "bisect", "pprint", "dataclasses"})
"""Modules whose functions only compute (``json.load``/``dump`` and a few others are looked up first)."""

SYSTEM_ROOTS = frozenset({"os", "sys", "shutil", "subprocess", "pathlib", "io", "tempfile", "glob", "pickle",
                          "marshal", "socket", "builtins", "importlib", "ctypes", "signal", "pty", "multiprocessing",
                          "threading", "asyncio", "gc", "inspect", "types", "code", "codeop", "runpy", "shelve",
                          "dill", "cloudpickle", "joblib", "zipfile", "tarfile", "sqlite3", "atexit", "operator",
                          "functools", "platform", "resource", "posix", "nt", "fcntl", "mmap", "select", "selectors",
                          "codecs", "base64", "binascii", "zlib", "bz2", "lzma", "gzip", "IPython", "ipykernel",
                          "torch", "keyring", "getpass", "webbrowser", "logging", "warnings", "weakref", "site",
                          "sysconfig", "cffi"})
"""Modules where a safe-sounding name proves nothing (``shutil.copy`` writes): only the tables below count."""

_QUALIFIED: tuple[tuple[str, CodeClass, str], ...] = (
    # prefix (a dotted name, matched whole or as a prefix at a dot), class, why
    ("subprocess", "subprocess", "runs a program"),
    ("os.system", "subprocess", "runs a shell command"),
    ("os.popen", "subprocess", "runs a shell command"),
    ("os.exec", "subprocess", "replaces the kernel with a program"),
    ("os.spawn", "subprocess", "runs a program"),
    ("os.posix_spawn", "subprocess", "runs a program"),
    ("os.fork", "subprocess", "forks the kernel"),
    ("os.kill", "subprocess", "signals a process"),
    ("os.killpg", "subprocess", "signals a process group"),
    ("os.abort", "subprocess", "kills the kernel"),
    ("os._exit", "subprocess", "kills the kernel"),
    ("os.startfile", "subprocess", "opens a program"),
    ("pty", "subprocess", "runs a program on a terminal"),
    ("multiprocessing", "subprocess", "starts processes"),
    ("concurrent.futures.ProcessPoolExecutor", "subprocess", "starts processes"),
    ("signal", "subprocess", "signals or handles signals"),
    ("asyncio.create_subprocess_exec", "subprocess", "runs a program"),
    ("asyncio.create_subprocess_shell", "subprocess", "runs a shell command"),
    ("pexpect", "subprocess", "runs a program"),
    ("sh", "subprocess", "runs programs"),
    ("plumbum", "subprocess", "runs programs"),
    ("commands", "subprocess", "runs a shell command"),
    ("platform.popen", "subprocess", "runs a shell command"),
    ("socket", "network", "opens a socket"),
    ("urllib", "network", "makes a request"),
    ("urllib2", "network", "makes a request"),
    ("urllib3", "network", "makes a request"),
    ("http", "network", "makes a request"),
    ("requests", "network", "makes a request"),
    ("httpx", "network", "makes a request"),
    ("aiohttp", "network", "makes a request"),
    ("ftplib", "network", "talks FTP"),
    ("smtplib", "network", "sends mail"),
    ("telnetlib", "network", "talks telnet"),
    ("poplib", "network", "reads mail"),
    ("imaplib", "network", "reads mail"),
    ("nntplib", "network", "talks NNTP"),
    ("xmlrpc", "network", "makes a remote call"),
    ("ssl", "network", "opens a TLS connection"),
    ("websocket", "network", "opens a websocket"),
    ("websockets", "network", "opens a websocket"),
    ("paramiko", "network", "opens an SSH connection"),
    ("pycurl", "network", "makes a request"),
    ("webbrowser", "network", "opens a browser"),
    ("grpc", "network", "makes a remote call"),
    ("boto3", "network", "calls AWS"),
    ("botocore", "network", "calls AWS"),
    ("zmq", "network", "opens a ZeroMQ socket"),
    ("asyncio.open_connection", "network", "opens a connection"),
    ("asyncio.start_server", "network", "opens a server"),
    ("shutil.rmtree", "file_delete", "deletes a folder tree"),
    ("os.remove", "file_delete", "deletes a file"),
    ("os.unlink", "file_delete", "deletes a file"),
    ("os.rmdir", "file_delete", "deletes a folder"),
    ("os.removedirs", "file_delete", "deletes folders"),
    ("send2trash", "file_delete", "deletes a file"),
    ("exec", "dynamic", "runs code from a string"),
    ("eval", "dynamic", "runs code from a string"),
    ("compile", "dynamic", "compiles code from a string"),
    ("__import__", "dynamic", "imports by a computed name"),
    ("globals", "dynamic", "reaches the namespace as a dict"),
    ("locals", "dynamic", "reaches the namespace as a dict"),
    ("vars", "dynamic", "reaches a namespace as a dict"),
    ("setattr", "dynamic", "sets an attribute by name"),
    ("delattr", "dynamic", "deletes an attribute by name"),
    ("breakpoint", "dynamic", "starts a debugger"),
    ("get_ipython", "dynamic", "reaches the kernel's shell (system, run_cell, magics)"),
    ("memoryview", "dynamic", "reaches raw memory"),
    ("type.__subclasses__", "dynamic", "walks the class tree"),
    ("importlib", "dynamic", "imports by a computed name"),
    ("builtins", "dynamic", "reaches the builtins module"),
    ("ctypes", "dynamic", "calls native code"),
    ("cffi", "dynamic", "calls native code"),
    ("sys.modules", "dynamic", "reaches loaded modules"),
    ("sys._getframe", "dynamic", "reaches stack frames"),
    ("sys.settrace", "dynamic", "hooks execution"),
    ("sys.setprofile", "dynamic", "hooks execution"),
    ("sys.meta_path", "dynamic", "hooks imports"),
    ("sys.path_hooks", "dynamic", "hooks imports"),
    ("sys.addaudithook", "dynamic", "hooks auditing"),
    ("inspect", "dynamic", "reaches frames and source"),
    ("gc.get_objects", "dynamic", "reaches every object"),
    ("gc.get_referrers", "dynamic", "reaches objects by reference"),
    ("gc.get_referents", "dynamic", "reaches objects by reference"),
    ("types", "dynamic", "builds functions or code objects"),
    ("code", "dynamic", "runs an interpreter"),
    ("codeop", "dynamic", "compiles code"),
    ("runpy", "dynamic", "runs a module or file"),
    ("pickle.load", "dynamic", "unpickles (runs code)"),
    ("pickle.loads", "dynamic", "unpickles (runs code)"),
    ("pickle.Unpickler", "dynamic", "unpickles (runs code)"),
    ("_pickle", "dynamic", "unpickles (runs code)"),
    ("cPickle", "dynamic", "unpickles (runs code)"),
    ("marshal", "dynamic", "loads code objects"),
    ("dill", "dynamic", "unpickles (runs code)"),
    ("cloudpickle", "dynamic", "unpickles (runs code)"),
    ("shelve", "dynamic", "unpickles (runs code)"),
    ("joblib.load", "dynamic", "unpickles (runs code)"),
    ("torch.load", "dynamic", "unpickles (runs code)"),
    ("pd.read_pickle", "dynamic", "unpickles (runs code)"),
    ("pandas.read_pickle", "dynamic", "unpickles (runs code)"),
    ("operator.attrgetter", "dynamic", "reads attributes by computed name"),
    ("operator.methodcaller", "dynamic", "calls methods by computed name"),
    ("atexit", "dynamic", "registers code to run at exit"),
    ("threading", "dynamic", "runs code on another thread"),
    ("site", "dynamic", "changes the import system"),
    ("os.environ", "unknown", "reads or changes the environment (secrets live there)"),
    ("os.getenv", "unknown", "reads the environment (secrets live there)"),
    ("os.putenv", "mutates", "changes the environment"),
    ("os.chdir", "mutates", "changes the working folder"),
    ("os.umask", "mutates", "changes the file mode mask"),
    ("keyring", "unknown", "reads stored secrets"),
    ("getpass", "unknown", "asks for or reads credentials"),
    ("shutil.copy", "file_write", "copies a file"),
    ("shutil.copy2", "file_write", "copies a file"),
    ("shutil.copyfile", "file_write", "copies a file"),
    ("shutil.copytree", "file_write", "copies a folder"),
    ("shutil.move", "file_write", "moves a file"),
    ("shutil.make_archive", "file_write", "writes an archive"),
    ("shutil.unpack_archive", "file_write", "unpacks an archive"),
    ("shutil.chown", "file_write", "changes a file's owner"),
    ("os.rename", "file_write", "renames a file"),
    ("os.renames", "file_write", "renames files"),
    ("os.replace", "file_write", "replaces a file"),
    ("os.makedirs", "file_write", "creates folders"),
    ("os.mkdir", "file_write", "creates a folder"),
    ("os.chmod", "file_write", "changes a file's mode"),
    ("os.chown", "file_write", "changes a file's owner"),
    ("os.symlink", "file_write", "creates a link"),
    ("os.link", "file_write", "creates a link"),
    ("os.truncate", "file_write", "truncates a file"),
    ("os.write", "file_write", "writes to a file descriptor"),
    ("os.utime", "file_write", "changes a file's times"),
    ("os.mkfifo", "file_write", "creates a pipe"),
    ("os.open", "file_write", "opens a file descriptor"),
    ("tempfile", "file_write", "creates a temporary file"),
    ("zipfile", "file_write", "reads or writes an archive"),
    ("tarfile", "file_write", "reads or writes an archive"),
    ("sqlite3", "file_write", "opens a database"),
    ("json.dump", "file_write", "writes JSON to a file"),
    ("pickle.dump", "file_write", "writes a pickle"),
    ("joblib.dump", "file_write", "writes a pickle"),
    ("np.save", "file_write", "writes an array file"),
    ("numpy.save", "file_write", "writes an array file"),
    ("json.load", "file_read", "reads JSON from a file"),
    ("os.listdir", "file_read", "lists a folder"),
    ("os.scandir", "file_read", "lists a folder"),
    ("os.walk", "file_read", "walks a folder"),
    ("os.stat", "file_read", "reads file metadata"),
    ("os.lstat", "file_read", "reads file metadata"),
    ("os.read", "file_read", "reads a file descriptor"),
    ("os.path.exists", "file_read", "checks a file"),
    ("os.path.isfile", "file_read", "checks a file"),
    ("os.path.isdir", "file_read", "checks a folder"),
    ("os.path.getsize", "file_read", "reads file metadata"),
    ("os.path.getmtime", "file_read", "reads file metadata"),
    ("glob", "file_read", "lists files"),
    ("np.load", "file_read", "reads an array file"),
    ("numpy.load", "file_read", "reads an array file"),
    ("np.loadtxt", "file_read", "reads a text file"),
    ("np.genfromtxt", "file_read", "reads a text file"),
    ("np.fromfile", "file_read", "reads a file"),
    ("os.path", "read_only", "computes a path"),
    ("os.getcwd", "read_only", "reads the working folder"),
    ("os.sep", "read_only", "a constant"),
    ("os.linesep", "read_only", "a constant"),
    ("os.cpu_count", "read_only", "counts CPUs"),
    ("sys.version", "read_only", "the Python version"),
    ("sys.version_info", "read_only", "the Python version"),
    ("sys.platform", "read_only", "the platform"),
    ("sys.maxsize", "read_only", "a constant"),
    ("sys.getsizeof", "read_only", "measures an object"),
    ("pathlib.Path", "read_only", "builds a path"),
    ("pathlib.PurePath", "read_only", "builds a path"),
    ("functools.reduce", "read_only", "folds a sequence"),
    ("operator.itemgetter", "read_only", "reads items"),
    ("operator.add", "read_only", "adds"),
    ("platform.python_version", "read_only", "the Python version"),
    ("platform.system", "read_only", "the platform"),
)
_DUNDER = re.compile(r"__\w+__")
_SAFE_DUNDER_NAMES = frozenset({"__name__", "__doc__", "__file__"})
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_READ_MODES = re.compile(r"^[rbt]*$")
_MAX_POW = 1000


def _lookup(qualified: str) -> tuple[CodeClass, str] | None:
    """The most specific table entry for a dotted name (``os.path.join`` → ``os.path``)."""
    best: tuple[int, CodeClass, str] | None = None
    for prefix, kind, why in _QUALIFIED:
        if qualified == prefix or qualified.startswith(prefix + ".") or (
                prefix in ("os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.popen")
                and qualified.startswith(prefix)):
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), kind, why)
    return None if best is None else (best[1], best[2])


# --- the walk -------------------------------------------------------------------------------------------

class _Walker(ast.NodeVisitor):
    def __init__(self, code: str, cwd: Path):
        self.lines = code.splitlines()
        self.cwd = cwd
        self.found: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.depth = 0            # > 0 inside a function or lambda body (assignments there are local)
        self.scoped: list[set[str]] = []   # comprehension / function-local names
        self.call_funcs: set[int] = set()   # ids of call targets (judged with their call, not again alone)

    # --- recording --------------------------------------------------------------------------------------
    def add(self, kind: CodeClass, node: ast.AST, why: str) -> None:
        line = getattr(node, "lineno", 0)
        try:
            text = ast.get_source_segment("\n".join(self.lines), node) if isinstance(node, ast.expr | ast.stmt) \
                else None
        except (ValueError, IndexError):  # pragma: no cover - positions out of the cell's text
            text = None
        text = (text or (self.lines[line - 1] if 0 < line <= len(self.lines) else "")).strip().splitlines()
        snippet = text[0] if text else ""
        self.found.append(Finding(kind=kind, line=line, snippet=snippet[:120], why=why))

    # --- names --------------------------------------------------------------------------------------------
    def qualname(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for, through the cell's imports (``None``: not a name)."""
        if isinstance(node, ast.Name):
            if any(node.id in s for s in self.scoped):
                return None
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            base = self.qualname(node.args[0])
            return f"{base}.{node.args[1].value}" if base else None
        return None

    def check_name(self, qualified: str, node: ast.AST, *, called: bool) -> bool:
        """Record what a dotted name is known to be; ``True`` when a table decided."""
        root = qualified.split(".", 1)[0]
        if self.ambiguous(root):
            return False   # `signal.mean()`: a variable called signal, unless the cell imported the module
        hit = _lookup(qualified)
        if hit is None:
            root = qualified.split(".", 1)[0]
            if root in SYSTEM_ROOTS and "." in qualified:
                self.add("unknown", node, f"{qualified} is not on the safe list")
                return True
            return False
        kind, why = hit
        if kind == "read_only":
            return True
        if kind in ("file_write", "file_delete") and called and isinstance(node, ast.Call):
            self.add(kind, node, f"{qualified} {why}")
            self.write_target(node, qualified)
            return True
        self.add(kind, node, f"{qualified} {why}")
        return True

    def ambiguous(self, root: str) -> bool:
        """Whether ``root`` is a module name the cell did not import and that is also a common variable name."""
        return root in _AMBIGUOUS_ROOTS and root not in {v.split(".", 1)[0] for v in self.aliases.values()}

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if isinstance(node.ctx, ast.Load):
            if any(name in s for s in self.scoped):
                return
            if _DUNDER.fullmatch(name) and name not in _SAFE_DUNDER_NAMES:
                self.add("dynamic", node, f"reaches {name}")
            elif self._in_call_func(node):
                return
            elif name in self.aliases or name in _DYNAMIC_NAMES or name in _CERTAIN_MODULES:
                self.check_name(self.aliases.get(name, name), node, called=False)
            elif name == "open":
                self.add("file_write", node, "refers to open() (may write any file)")
                self.add("unknown", node, "open() passed around: its target is not known")
        else:
            self.bind(name, node)

    def bind(self, name: str, node: ast.AST) -> None:
        if any(name in s for s in self.scoped):
            return
        if name in SAFE_BUILTINS or name in ("open", "exec", "eval"):
            self.add("dynamic", node, f"shadows the builtin {name}")
        self.add("rebinds", node, f"binds {name}")
        self.aliases.pop(name, None)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _DUNDER.fullmatch(node.attr) and node.attr not in _SAFE_DUNDER_NAMES:
            self.add("dynamic", node, f"reaches .{node.attr}")
        qualified = self.qualname(node)
        if qualified is not None and isinstance(node.ctx, ast.Load) and not self._in_call_func(node):
            self.check_name(qualified, node, called=False)
        if isinstance(node.ctx, ast.Store | ast.Del):
            self.add("mutates", node, f"{'sets' if isinstance(node.ctx, ast.Store) else 'deletes'} attribute "
                                      f".{node.attr}")
        self.generic_visit(node)

    def _in_call_func(self, node: ast.AST) -> bool:
        return id(node) in self.call_funcs

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, node)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.bind(node.name, node)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name, node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.bind(node.rest, node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del):
            self.add("mutates", node, "sets an item" if isinstance(node.ctx, ast.Store) else "deletes an item")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _DUNDER.search(node.value):
            self.add("dynamic", node, "a string naming a dunder attribute")

    # --- statements ---------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.add("imports", node, f"imports {a.name}")
            local = a.asname or a.name.split(".", 1)[0]
            self.aliases[local] = a.name if a.asname else local
            self.check_name(a.name, node, called=False)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        for a in node.names:
            self.add("imports", node, f"imports {a.name} from {module}")
            if a.name == "*":
                self.add("dynamic", node, f"imports every name of {module}")
                continue
            self.aliases[a.asname or a.name] = f"{module}.{a.name}"
            self.check_name(f"{module}.{a.name}", node, called=False)

    def visit_Global(self, node: ast.Global) -> None:
        for n in node.names:
            self.add("rebinds", node, f"declares {n} global")

    visit_Nonlocal = visit_Global  # type: ignore[assignment]

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.bind(node.target.id, node.target)
        else:
            self.add("mutates", node, "updates in place")
        self.visit(node.value)
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def visit_While(self, node: ast.While) -> None:
        self.add("unknown", node, "a while loop may not end")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)  # defaults and annotations run now
        if node.returns is not None:
            self.visit(node.returns)
        if self.depth == 0:
            self.bind(node.name, node)
        local = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        local |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
        self._local_body(node.body, local)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_arguments(self, node: ast.arguments) -> None:
        for d in (*node.defaults, *node.kw_defaults):
            if d is not None:
                self.visit(d)
        for a in (*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg):
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        local = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        local |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
        self.scoped.append(local)
        self.depth += 1
        self.visit(node.body)
        self.depth -= 1
        self.scoped.pop()

    def _local_body(self, body: Iterable[ast.stmt], local: set[str]) -> None:
        """A function body: its assignments are local (still walked for everything else)."""
        declared = {n for s in body for g in ast.walk(s) if isinstance(g, ast.Global | ast.Nonlocal) for n in g.names}
        for s in body:
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del) and n.id not in declared:
                    local.add(n.id)
        self.scoped.append(local)
        self.depth += 1
        for s in body:
            self.visit(s)
        self.depth -= 1
        self.scoped.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in (*node.decorator_list, *node.bases, *node.keywords):
            self.visit(d)
        if self.depth == 0:
            self.bind(node.name, node)
        self._local_body(node.body, set())

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        local = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.scoped.append(local)
        self.generic_visit(node)
        self.scoped.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension  # type: ignore[assignment]

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.add("rebinds", node, f"binds {node.target.id} (walrus)")
        self.visit(node.value)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Pow) and not (isinstance(node.right, ast.Constant)
                                                 and isinstance(node.right.value, int | float)
                                                 and abs(node.right.value) <= _MAX_POW):
            if isinstance(node.right, ast.BinOp | ast.Constant):
                self.add("unknown", node, "a power that may not finish")
        self.generic_visit(node)

    # --- calls ----------------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        self.call_funcs.add(id(node.func))
        self.classify_call(node)
        self.generic_visit(node)

    def classify_call(self, node: ast.Call) -> None:
        func = node.func
        for kw in node.keywords:
            if kw.arg == "inplace" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                self.add("mutates", node, "changes an object in place (inplace=)")
            if kw.arg is None:
                self.add("unknown", node, "passes **kwargs (their keys are not known)")
        qualified = self.qualname(func)
        if qualified is not None and self.check_name(qualified, node, called=True):
            self.check_callables(node, qualified.rsplit(".", 1)[-1])
            self.url_args(node)
            return
        if isinstance(func, ast.Name):
            self.builtin_call(node, func.id)
        elif isinstance(func, ast.Attribute):
            self.method_call(node, func, qualified)
        else:
            self.add("unknown", node, "calls the result of an expression")

    def builtin_call(self, node: ast.Call, name: str) -> None:
        if any(name in s for s in self.scoped):
            self.add("unknown", node, f"calls {name}, a local of the cell")
            return
        if name == "open":
            self.open_call(node, node.args[1] if len(node.args) > 1 else self.kwarg(node, "mode"), node.args[:1]
                           or [k.value for k in node.keywords if k.arg == "file"])
            return
        if name in ("getattr", "hasattr"):
            if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value,
                                                                                                   str)):
                self.add("dynamic", node, f"{name} with a computed attribute name")
            elif _DUNDER.fullmatch(node.args[1].value):
                self.add("dynamic", node, f"{name} of a dunder attribute")
            return
        if name == "type" and len(node.args) > 1:
            self.add("dynamic", node, "type() with three arguments builds a class")
            return
        if name == "print" and any(k.arg == "file" for k in node.keywords):
            self.add("file_write", node, "prints to a file")
            return
        if name in SAFE_BUILTINS:
            self.check_callables(node, name)
            return
        self.add("unknown", node, f"{name}() is not on the safe list")

    def method_call(self, node: ast.Call, func: ast.Attribute, qualified: str | None) -> None:
        name = func.attr
        root = qualified.split(".", 1)[0] if qualified else None
        path_receiver = self.literal_path(func.value) if self._is_path_expr(func.value) else None
        if root in PURE_MODULES and qualified is not None and qualified.count(".") >= 1:
            self.check_callables(node, name)
            return
        if name in ("unlink", "rmdir"):
            self.add("file_delete", node, f".{name}() deletes a file or folder")
            self.resolve(node, path_receiver, computed=path_receiver is None)
            return
        if name in ("write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to", "chmod",
                    "lchmod", "link_to"):
            self.add("file_write", node, f".{name}() writes to the file system")
            self.resolve(node, path_receiver, computed=path_receiver is None)
            return
        if name == "open" and self._is_path_expr(func.value):
            self.open_call(node, node.args[0] if node.args else self.kwarg(node, "mode"), [func.value])
            return
        if name in ("read_text", "read_bytes", "exists", "is_file", "is_dir", "iterdir", "glob", "rglob", "stat",
                    "read", "readline", "readlines", "resolve", "absolute", "samefile", "expanduser"):
            self.add("file_read", node, f".{name}() reads the file system")
            return
        if name in ("write", "writelines", "flush", "truncate", "writestr", "extractall", "extract", "commit",
                    "executescript"):
            self.add("file_write", node, f".{name}() writes through a handle")
            return
        if name in ("execute", "executemany", "system", "getoutput", "run_cell", "run_line_magic",
                    "run_cell_magic", "ex", "ev", "magic", "eval", "query"):
            self.add("dynamic", node, f".{name}() runs code or commands given as text")
            return
        if name in ("rename", "replace") and (self._is_path_expr(func.value) or (len(node.args) == 1
                                                                                 and not node.keywords
                                                                                 and name == "replace")
                                               or (name == "rename" and node.args)):
            self.add("file_write", node, f".{name}() may move a file")
            self.resolve(node, self.literal_path(node.args[0]) if node.args else None,
                         computed=not node.args or self.literal_path(node.args[0]) is None)
            return
        if name.startswith("read_"):
            self.add("file_read", node, f".{name}() reads a file")
            self.url_args(node)
            return
        if name in WRITE_TARGET_METHODS:
            target = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in _PATH_KWARGS), None)
            if name in _OUTPUT_ONLY and target is None:
                return
            self.add("file_write", node, f".{name}() writes a file")
            if target is not None:
                lit = self.literal_path(target)
                self.resolve(node, lit, computed=lit is None)
                self.url_arg(node, target)
            else:
                self.add("unknown", node, f".{name}() writes somewhere not named here")
            return
        if name == "sort" and root in _PURE_SORT_ROOTS and qualified and qualified.count(".") == 1:
            return
        if name in MUTATING_METHODS:
            self.add("mutates", node, f".{name}() changes an object in place")
            return
        if name == "format" and not isinstance(func.value, ast.Constant):
            self.add("unknown", node, ".format() of a string that is not a literal")
            return
        if name in SAFE_METHODS:
            if root in SYSTEM_ROOTS and not self.ambiguous(root):
                self.add("unknown", node, f"{qualified} is not on the safe list")
                return
            self.check_callables(node, name)
            return
        self.add("unknown", node, f".{name}() is not on the safe list")

    def check_callables(self, node: ast.Call, name: str) -> None:
        """Arguments a call may call (``df.apply(f)``) must be literals, lambdas or known-safe functions."""
        called: list[ast.expr] = []
        if name in CALLABLE_FIRST:
            called += node.args[:1] + [k.value for k in node.keywords if k.arg in ("func", "function", "arg")]
        if name in _KEY_CALLS:
            called += [k.value for k in node.keywords if k.arg == "key"]
        for arg in called:
            if not self._safe_callable_arg(arg):
                self.add("unknown", arg, f"passes {ast.unparse(arg)[:40]} to {name}(), which may call it")

    def _safe_callable_arg(self, arg: ast.expr) -> bool:
        if isinstance(arg, ast.Constant | ast.Lambda | ast.Starred):
            return True
        if isinstance(arg, ast.List | ast.Tuple | ast.Set):
            return all(self._safe_callable_arg(e) for e in arg.elts)
        if isinstance(arg, ast.Dict):
            return all(self._safe_callable_arg(v) for v in arg.values)
        if isinstance(arg, ast.Name):
            return arg.id in SAFE_BUILTINS and arg.id not in self.aliases
        if isinstance(arg, ast.Attribute):
            q = self.qualname(arg)
            root = q.split(".", 1)[0] if q else None
            return (arg.attr in SAFE_METHODS or root in PURE_MODULES) and root not in SYSTEM_ROOTS
        return False

    # --- files ----------------------------------------------------------------------------------------------
    @staticmethod
    def kwarg(node: ast.Call, name: str) -> ast.expr | None:
        return next((k.value for k in node.keywords if k.arg == name), None)

    def open_call(self, node: ast.Call, mode: ast.expr | None, target: list[ast.expr]) -> None:
        if mode is None or (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                            and _READ_MODES.match(mode.value)):
            self.add("file_read", node, "opens a file to read")
            if target:
                self.url_arg(node, target[0])
            return
        self.add("file_write", node, "opens a file to write" if isinstance(mode, ast.Constant)
                 else "opens a file with a computed mode")
        lit = self.literal_path(target[0]) if target else None
        self.resolve(node, lit, computed=lit is None)

    def write_target(self, node: ast.Call, qualified: str) -> None:
        two = qualified.rsplit(".", 1)[-1] in ("copy", "copy2", "copyfile", "copytree", "move", "rename", "renames",
                                                "replace", "symlink", "link")
        args = node.args
        target = args[1] if two and len(args) > 1 else (args[0] if args and not two else None)
        if qualified.startswith(("json.", "pickle.", "joblib.", "tempfile", "zipfile", "tarfile", "sqlite3",
                                 "os.write", "os.open")):
            if qualified.startswith(("tempfile", "zipfile", "tarfile", "sqlite3", "os.open")):
                self.add("unknown", node, f"{qualified}: where it writes is not judged")
            return
        lit = self.literal_path(target) if target is not None else None
        self.resolve(node, lit, computed=lit is None)

    def _is_path_expr(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call):
            q = self.qualname(node.func)
            return q in ("Path", "PurePath", "pathlib.Path", "pathlib.PurePath", "Path.home", "Path.cwd",
                         "pathlib.Path.home", "pathlib.Path.cwd")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self._is_path_expr(node.left)
        return False

    def literal_path(self, node: ast.expr) -> str | None:
        """The path an expression names when it is made of literals only (``Path("a") / "b"``)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
            return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.literal_path(node.left), self.literal_path(node.right)
            return None if left is None or right is None else os.path.join(left, right)
        if isinstance(node, ast.Call) and not node.keywords:
            q = self.qualname(node.func)
            if q in ("Path.home", "pathlib.Path.home") and not node.args:
                return str(Path.home())
            if q in ("Path.cwd", "pathlib.Path.cwd", "os.getcwd") and not node.args:
                return str(self.cwd)
            if q in ("Path", "PurePath", "pathlib.Path", "pathlib.PurePath", "os.path.join"):
                parts = [self.literal_path(a) for a in node.args]
                if parts and all(p is not None for p in parts):
                    return os.path.join(*[p for p in parts if p is not None])
                return "." if not node.args else None
            if q == "os.path.expanduser" and len(node.args) == 1:
                inner = self.literal_path(node.args[0])
                return None if inner is None else os.path.expanduser(inner)
        return None

    def resolve(self, node: ast.AST, path: str | None, *, computed: bool) -> None:
        """A write's target: outside the working folder is ``write_outside``; a computed one is ``unknown``."""
        if path is None:
            if computed:
                self.add("unknown", node, "writes to a path computed at run time")
            return
        if _URL.match(path):
            self.add("network", node, f"writes to {path}")
            return
        target = Path(os.path.expanduser(path))
        target = target if target.is_absolute() else self.cwd / target
        real, base = os.path.realpath(target), os.path.realpath(self.cwd)
        if not (real == base or real.startswith(base.rstrip(os.sep) + os.sep)):
            self.add("write_outside", node, f"writes {path} outside the working folder {base}")

    def url_args(self, node: ast.Call) -> None:
        for a in (*node.args[:1], *(k.value for k in node.keywords if k.arg in _PATH_KWARGS + ("url",))):
            self.url_arg(node, a)

    def url_arg(self, node: ast.Call, arg: ast.expr) -> None:
        lit = self.literal_path(arg)
        if lit is not None and _URL.match(lit) and not lit.startswith("file://"):
            self.add("network", node, f"reaches {lit.split('://', 1)[0]}:// (a URL)")


def classify(code: str, cwd: str | os.PathLike[str] | None = None) -> Classification:
    """Classify a Python cell from its syntax tree (``cwd``: the working folder writes are judged against)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:   # ValueError: a NUL byte
        line = getattr(exc, "lineno", None) or 0
        return Classification(findings=(Finding(kind="unknown", line=line, snippet=str(getattr(exc, "text", "") or "")
                                                .strip()[:120], why=f"does not parse: {getattr(exc, 'msg', exc)}"),))
    except RecursionError:
        return Classification(findings=(Finding(kind="unknown", line=0, snippet="", why="nested too deeply"),))
    walker = _Walker(code, Path(cwd) if cwd is not None else Path.cwd())
    try:
        walker.visit(tree)
    except RecursionError:
        walker.add("unknown", tree, "nested too deeply to judge")
    found = list(dict.fromkeys(walker.found))   # the same reason found twice is one reason
    if not any(f.kind != "read_only" for f in found):
        found.append(Finding(kind="read_only", line=1, snippet=(code.strip().splitlines() or [""])[0][:120],
                             why="reads names and calls only known-safe functions"))
    return Classification(findings=tuple(sorted(found, key=lambda f: f.line)))
