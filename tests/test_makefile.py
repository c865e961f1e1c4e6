"""The Makefile's venv stamp changes with everything that decides what the venv holds.

``make test`` / ``make demo`` reinstall the virtualenv when the stamp's name (a hash) changes. Its inputs:
pyproject.toml, the stamp rule's own recipe (pip lines, the torch CPU wheel pin), and the files the
wheel's shared-data copies into the venv (labextension/dist, the server extension's jupyter-config).
Each is changed in a copy of the checkout and ``make -n -p`` (nothing runs) prints the new stamp.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _stamp(root: Path, *args: str) -> str:
    out = subprocess.run(["make", "-n", "-p", *args, "clean"], cwd=root, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    found = re.search(r"^STAMP := (\S+)$", out, re.MULTILINE)
    assert found, out[-2000:]
    return found.group(1)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    for sub in ("labextension/dist", "labextension/jupyter-config"):
        shutil.copytree(REPO / sub, tmp_path / sub)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


@pytest.mark.slow
def test_the_stamp_follows_every_install_input(checkout):
    first = _stamp(checkout)
    assert re.fullmatch(r"\.venv/\.installed-[0-9a-f]{12}", first)
    assert _stamp(checkout) == first  # stable: an unchanged checkout does not reinstall
    seen = {first}
    edits = [
        (checkout / "pyproject.toml", 'requires-python = ">=3.11"', 'requires-python = ">=3.12"'),
        (checkout / "Makefile", "'torch==2.13.0+cpu' 2>/dev/null", "'torch==2.14.0+cpu' 2>/dev/null"),
        (checkout / "Makefile", "ipykernel install --sys-prefix", "ipykernel install --user"),
        (checkout / "labextension/dist/package.json", '"name"', '"name" '),
        (checkout / "labextension/jupyter-config/jupyter_server_config.d/agentstack_lab.json", "{", "{ "),
    ]
    for path, old, new in edits:
        _edit(path, old, new)
        stamp = _stamp(checkout)
        assert stamp not in seen, f"editing {path.relative_to(checkout)} left the stamp at {stamp}"
        seen.add(stamp)
    (checkout / "labextension/dist/static/new.js").write_text("// a rebuilt bundle's new file\n")
    assert _stamp(checkout) not in seen


@pytest.mark.slow
def test_the_rest_of_the_makefile_does_not_reinstall(checkout):
    first = _stamp(checkout)
    _edit(checkout / "Makefile", "$(BIN)/python benchmarks/bench_import.py",
          "$(BIN)/python benchmarks/bench_import.py --quiet")
    assert _stamp(checkout) == first


def _fake_venv_python(checkout: Path, version: str) -> None:
    python = checkout / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(f"#!/bin/sh\necho {version}\n")
    python.chmod(0o755)


@pytest.mark.slow
def test_a_venv_made_by_another_python_is_made_again(checkout):
    """A .venv whose Python is another minor version than $(PY)'s is removed and made again, not reused."""
    import sys

    ours = "{}.{}".format(*sys.version_info[:2])   # the test runs make with PY=this interpreter
    py = f"PY={sys.executable}"
    _fake_venv_python(checkout, ours)
    same = _stamp(checkout, py)
    plan = subprocess.run(["make", "-n", py, same], cwd=checkout, capture_output=True, text=True, timeout=60).stdout
    assert "rm -rf .venv" not in plan and "test -x .venv/bin/python ||" in plan
    _fake_venv_python(checkout, "3.9")
    other = _stamp(checkout, py)
    assert other == f"{same}-made-by-python-3.9"   # a name no install writes: the recipe runs
    plan = subprocess.run(["make", "-n", py, other], cwd=checkout, capture_output=True, text=True, timeout=60).stdout
    lines = [ln for ln in plan.splitlines() if not ln.startswith("make")]   # "make[1]: Entering ..." under make
    assert lines[0].startswith("rm -rf .venv") and lines[1].startswith("test -x .venv/bin/python ||"), plan
    assert f"touch {same}" in plan   # the stamp written is the plain one, found by the next make


@pytest.mark.slow
def test_make_lab_starts_in_notebooks_with_the_venv_on_path(tmp_path):
    """`make lab`'s server (and so JupyterLab's Terminal) starts in notebooks/ with the venv first on PATH and a
    non-login shell, which keeps that PATH (the browser test drives it: test_make_lab_browser.py)."""
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    plan = subprocess.run(["make", "--no-print-directory", "-n", "lab", f"BIN={tmp_path}/v/bin", "STAMP=",
                           "LAB_ARGS=--port=1"],  # under `make test` a nested make would name its directory
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True).stdout
    script = plan.replace("\\\n", " ")
    assert script.lstrip().startswith("cd notebooks && "), plan
    assert f'PATH="{tmp_path}/v/bin:$PATH"' in script and f'VIRTUAL_ENV="{tmp_path}/v"' in script, plan
    assert f'"{tmp_path}/v/bin/jupyter" lab --ServerApp.root_dir=. ' in script and script.rstrip().endswith("--port=1")
    assert """shell_command=["'"${SHELL:-/bin/bash}"'","-i"]""" in script, plan   # not a login shell (-l)
