"""The type checker gates: pyright finds 0 errors in the package, and a planted error fails the gate.

``[tool.pyright]`` in pyproject.toml is the contract: standard mode for the package, strict for the layers
every other module leans on (``events.py``, ``engine/``, ``decisions/``, ``store/``). `make lint` runs the
same command. The planted-error test runs pyright with that very section on a throwaway tree, so a config
that stopped checking (an emptied ``include``, a lost ``strict`` list) fails here too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYRIGHT = shutil.which("pyright", path=str(Path(sys.executable).parent))

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PYRIGHT is None, reason="pyright is not installed (pip install -e '.[dev]')")]


def _pyright(*args: str, cwd: Path) -> tuple[int, dict]:
    proc = subprocess.run([PYRIGHT, "--outputjson", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    return proc.returncode, json.loads(proc.stdout)


def test_the_package_has_no_type_errors():
    code, report = _pyright(cwd=ROOT)
    problems = [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
                for d in report["generalDiagnostics"] if d["severity"] in ("error", "warning")]
    assert code == 0 and not problems, "\n".join(problems[:40])
    assert report["summary"]["filesAnalyzed"] > 100   # the whole package, not an empty selection


def test_a_planted_error_fails_the_gate_and_strict_covers_exactly_its_layers(tmp_path):
    section = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    config = {**section, "venvPath": str(ROOT)}   # the same rules, over a throwaway tree
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    untyped = "def f(x):\n    return x\n"                      # only strict mode objects to this
    wrong = "def g(x: int) -> str:\n    return x\n"            # every mode objects to this
    files = {"agentstack_lab/__init__.py": "", "agentstack_lab/engine/__init__.py": "",
             "agentstack_lab/cli/__init__.py": "",
             "agentstack_lab/engine/planted.py": untyped, "agentstack_lab/cli/planted.py": untyped,
             "agentstack_lab/cli/wrong.py": wrong}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    code, report = _pyright(cwd=tmp_path)
    flagged = {(Path(d["file"]).relative_to(tmp_path).as_posix(), d["range"]["start"]["line"] + 1)
               for d in report["generalDiagnostics"] if d["severity"] == "error"}
    assert code == 1
    assert ("agentstack_lab/cli/wrong.py", 2) in flagged                  # a type error anywhere fails
    assert ("agentstack_lab/engine/planted.py", 1) in flagged             # strict in engine/
    assert not any(f == "agentstack_lab/cli/planted.py" for f, _ in flagged)   # standard elsewhere
