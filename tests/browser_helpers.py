"""The harness of the browser tests: a Jupyter server on loopback, isolated from this machine's Jupyter
setup and serving this checkout's ``labextension/dist``, and Debian's ``/usr/bin/chromium`` driven by
Playwright (never a downloaded browser), with the page's uncaught errors collected and checked."""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILT = REPO / "labextension" / "dist"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at "
                                    "/usr/bin/chromium (`make browser` installs it as root with apt-get)")
needs_built = pytest.mark.skipif(not (BUILT / "package.json").exists(),
                                 reason="labextension/dist is not built (make labext)")
# JupyterLab's own services reject a kernel request still in flight when its kernel goes (a notebook a test
# opened, closed with the browser); the page error is exactly this.
CANCELED_FUTURE = r"Error: Canceled future for \w+ message before replies were done"

Allowed = str | Callable[[str], bool]   # a regular expression the whole error matches, or a predicate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checkout_extension(tmp_path: Path) -> str:
    """A JUPYTER_PATH whose ``labextensions/agentstack-lab`` is this checkout's ``labextension/dist``.

    A server would otherwise load the copy installed in the venv, which is older than the checkout
    whenever the sources changed after the install (a 404 for its ``remoteEntry``).
    """
    data = tmp_path / "jupyter-data" / "labextensions"
    data.mkdir(parents=True)
    (data / "agentstack-lab").symlink_to(BUILT)
    return str(tmp_path / "jupyter-data")


def isolated_env(tmp_path: Path, extra: Mapping[str, str] | None = None,
                 drop: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment with HOME and Jupyter's folders under ``tmp_path`` (the checkout's extension)."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"), "JUPYTER_PLATFORM_DIRS": "1",
           "JUPYTER_PATH": checkout_extension(tmp_path), **(extra or {})}
    for var in drop:
        env.pop(var, None)
    return env


@contextmanager
def serving(cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path, ready_url: str,
            timeout: float, failure: str, stop_timeout: float = 15, group: bool = False) -> Iterator[None]:
    """Runs ``cmd`` (output to ``log_path``) until ``ready_url`` answers, and terminates it at the end.

    ``group``: the command runs in a process group of its own, and the whole group is terminated.
    """
    with log_path.open("w") as log:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=group)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    urllib.request.urlopen(ready_url, timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"{failure}:\n" + log_path.read_text()[-3000:])
                    time.sleep(0.1)
            yield
        finally:
            # a Jupyter server shuts its kernels down on SIGTERM
            stop = (lambda sig: os.killpg(proc.pid, sig)) if group else proc.send_signal
            stop(signal.SIGTERM)
            try:
                proc.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                stop(signal.SIGKILL)
                proc.wait(5)


@contextmanager
def jupyter_server(tmp_path: Path, root: Path, *, app: Literal["jupyterlab", "notebook"] = "jupyterlab",
                   python: str = sys.executable, extra_args: Sequence[str] = (), ready_path: str = "/api/status",
                   timeout: float = 90, env: Mapping[str, str] | None = None, env_drop: Sequence[str] = (),
                   stop_timeout: float = 15) -> Iterator[tuple[str, str, Path]]:
    """A JupyterLab (``app="jupyterlab"``) or Notebook 7 (``app="notebook"``) server on a free loopback port.

    It serves ``root`` with a random token, in the environment of :func:`isolated_env` (``env`` added,
    ``env_drop`` removed), news and update checks off, ``window.jupyterapp`` exposed. Yields the base URL,
    the token and the server's log once ``ready_path`` answers; a server that does not is one failure line
    with its log's tail.
    """
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = free_port(), secrets.token_hex(16)
    expose = ["--JupyterNotebookApp.expose_app_in_browser=True"] if app == "notebook" else []
    cmd = [python, "-m", app, "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           *expose, "--LabApp.expose_app_in_browser=True",
           f"--LabApp.user_settings_dir={tmp_path / 'lab-settings'}", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", *extra_args]
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / ("notebook.log" if app == "notebook" else "lab.log")
    with serving(cmd, cwd=root, env=isolated_env(tmp_path, env, env_drop), log_path=log_path,
                 ready_url=f"{base}{ready_path}?token={token}", timeout=timeout, stop_timeout=stop_timeout,
                 failure="Notebook 7 did not start" if app == "notebook" else "JupyterLab did not start"):
        yield base, token, log_path


def collect_errors(page: Any, *, stack: bool = False) -> list[str]:
    """The page's uncaught errors from now on (each with its stack if asked), as a list that grows."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc) + ("\n" + str(exc.stack) if stack else "")))
    return errors


def assert_no_errors(errors: list[str], allowed: Sequence[Allowed] = ()) -> None:
    """No page error but ``allowed`` ones (a regular expression the whole error matches, or a predicate)."""
    assert not [e for e in errors if not any(re.fullmatch(a, e) if isinstance(a, str) else a(e)
                                             for a in allowed)], errors


@contextmanager
def browser_context(profile_dir: Path, *, viewport: Mapping[str, int], permissions: Sequence[str] | None = None,
                    tmpdir: Path | None = None) -> Iterator[Any]:
    """A Playwright persistent context of Debian's chromium; ``tmpdir`` is TMPDIR while it is open."""
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as mp, sync_playwright() as pw:
        if tmpdir is not None:
            mp.setenv("TMPDIR", str(tmpdir))  # Playwright's and chromium's scratch folders
        context = pw.chromium.launch_persistent_context(
            str(profile_dir), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport=dict(viewport), **({"permissions": list(permissions)} if permissions is not None else {}))
        try:
            yield context
        finally:
            context.close()


@contextmanager
def browser_page(profile_dir: Path, url: str, *, viewport: Mapping[str, int], ready_js: str | None = None,
                 allowed_errors: Sequence[Allowed] = (), check_errors: bool = True,
                 default_timeout: float | None = None, expect_timeout: float | None = None,
                 permissions: Sequence[str] | None = None) -> Iterator[Any]:
    """The first page of a :func:`browser_context`, at ``url`` once ``ready_js`` holds.

    On a normal exit (after the browser closed) the page had no uncaught error but ``allowed_errors``,
    unless ``check_errors`` is off. ``expect_timeout`` sets Playwright's ``expect`` timeout for the process.
    """
    errors: list[str] = []
    with browser_context(profile_dir, viewport=viewport, permissions=permissions) as context:
        page = context.pages[0] if context.pages else context.new_page()
        if default_timeout is not None:
            page.set_default_timeout(default_timeout)
        if expect_timeout is not None:
            from playwright.sync_api import expect

            expect.set_options(timeout=expect_timeout)
        if check_errors:
            errors = collect_errors(page)
        page.goto(url)
        if ready_js is not None:
            page.wait_for_function(ready_js)
        yield page
    assert_no_errors(errors, allowed_errors)  # reached only when the test's own code did not fail
