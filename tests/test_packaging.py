"""The wheel carries its package data, and an installed wheel finds its built-in workflows by name.

The wheel is built for real (hatchling, no build isolation) and installed with ``pip --target`` into a
temporary folder; the CLI then runs from an unrelated directory with no source checkout on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from agentstack_lab.agents.registry import CORE_AGENT_TYPES
from agentstack_lab.cli.workflow import run_command
from agentstack_lab.workflows.catalog import builtin_workflows, resolve_notebook

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks" / "workflows"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           str(REPO), "-w", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [whl] = out.glob("agentstack_lab-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q",
                           "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return target.resolve()


def _installed_cli(target: Path, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """``agentstack-lab ARGS`` from the installed wheel only: ``-S`` skips site-packages' .pth files (the
    editable install's path to this checkout); dependencies come from the venv's site-packages."""
    path = os.pathsep.join([str(target), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-S", "-m", "agentstack_lab.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_wheel_carries_prompts_schema_and_builtin_notebooks_and_nothing_else(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for t in CORE_AGENT_TYPES:
            assert f"agentstack_lab/agents/prompts/{t}.md" in names, t
        assert len(CORE_AGENT_TYPES) == 11
        json.loads(zf.read("agentstack_lab/workflows/report.schema.json"))
        assert "agentstack_lab/py.typed" in names   # PEP 561: type checkers read the package's annotations
        shipped = {n.rsplit("/", 1)[1] for n in names if n.startswith("agentstack_lab/workflows/builtin/")}
        in_repo = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
        assert shipped == in_repo == {"doc_sync.ipynb", "code_review.ipynb"}, (shipped, in_repo)
        for name in in_repo:  # the shipped copy is the repository's notebook, byte for byte
            assert zf.read(f"agentstack_lab/workflows/builtin/{name}") == (NOTEBOOKS / name).read_bytes()
        stem = wheel.name.split("-py3")[0]
        # the only data files: the server extension's enabling config (under etc/jupyter) and the lab extension
        data = sorted(n.split("/", 2)[2] for n in names if n.startswith(stem + ".data/"))
        assert data[:1] == ["etc/jupyter/jupyter_server_config.d/agentstack_lab.json"], data
        assert json.loads(zf.read(f"{stem}.data/data/{data[0]}")) == {
            "ServerApp": {"jpserver_extensions": {"agentstack_lab.server": True}}}
        assert all(n.startswith("share/jupyter/labextensions/") for n in data[1:]), data
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"agentstack_lab", stem + ".dist-info", stem + ".data"}, tops
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n or ".agentstack" in n.split("/")
                or "__pycache__" in n or n.endswith(".pyc")]


def test_installed_wheel_lists_and_resolves_builtins_from_an_unrelated_directory(installed, tmp_path):
    elsewhere = tmp_path / "someone-elses-repo"
    elsewhere.mkdir()
    probe = subprocess.run([sys.executable, "-S", "-c", "import agentstack_lab; print(agentstack_lab.__file__)"],
                           cwd=elsewhere, capture_output=True, text=True, timeout=30,
                           env={**os.environ, "PYTHONPATH": str(installed)})
    assert Path(probe.stdout.strip()).resolve().is_relative_to(installed), probe
    listed = _installed_cli(installed, "workflow", "list", cwd=elsewhere)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert set(rows) == {"doc_sync", "code_review"}, listed.stdout
    for name, line in rows.items():
        path = Path(line.rsplit("  ", 1)[1].strip())
        assert path.is_file() and path.resolve().is_relative_to(installed), line
        assert path.resolve() == (installed / "agentstack_lab" / "workflows" / "builtin" / f"{name}.ipynb")
    assert "are the docs still true?" in rows["doc_sync"]
    unknown = _installed_cli(installed, "workflow", "run", "doc_snyc", cwd=elsewhere)
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "error: unknown workflow 'doc_snyc': not a file and not a built-in (built-ins: code_review, doc_sync)"]


def test_installed_builtin_runs_by_name_with_its_sample_project(installed, tmp_path):
    """The shipped notebook imports its sample project from the installed package (no repo files needed)."""
    proc = _installed_cli(installed, "workflow", "run", "code_review", "--report", "review.json", cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "review.json").read_text())
    assert report["verdict"] == "PASS"
    assert Path(report["execution"]["notebook"]).resolve().is_relative_to(installed)
    assert (tmp_path / "code_review.executed.ipynb").is_file()


def test_a_file_wins_over_a_builtin_name_and_paths_pass_through(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_notebook("doc_sync") == builtin_workflows()["doc_sync"].path
    (tmp_path / "doc_sync").write_text("{}")  # a real file of that name wins
    assert resolve_notebook("doc_sync") == Path("doc_sync")
    assert resolve_notebook("missing/doc_sync") == Path("missing/doc_sync")  # a path: runner says not found
    assert resolve_notebook("code_review.ipynb") == Path("code_review.ipynb")


def test_unknown_name_is_exit_2_naming_the_builtins(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        run_command.main(args=["no_such_flow"], standalone_mode=False)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: unknown workflow 'no_such_flow': not a file and not a built-in "
                   "(built-ins: code_review, doc_sync)"]
