"""Every example in README.md and in docs/ is executed here (sqlite-utils ``test_docs`` style).

README.md's examples run in a workspace of their own; the docs pages' run in one workspace, page after
page in the order of mkdocs.yml's ``nav`` (a later page's examples may use what an earlier one made).

Each fenced block is preceded by a marker comment saying how it runs:
``<!-- test: kernel -->`` blocks become the cells of one notebook executed in a real kernel;
``<!-- test: shell -->`` blocks run line by line in bash, each line's exit code checked
(``# exit N`` at the end of a line expects N, otherwise 0); ``<!-- test: setup -->`` blocks
are the two set-up commands, checked against the Makefile's targets; ``<!-- test: config -->``
blocks are written to ``agentstack.config.json`` for the shell blocks that follow.
A block without a marker fails this test, except ``text`` blocks (diagrams, not examples).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.notebook_helpers import run_cells

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(?:<!-- test: (?P<kind>[\w-]+)[^>]*-->\s*\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)```", re.S)


def doc_pages() -> list[Path]:
    """The docs pages in the order of mkdocs.yml's nav."""
    return [ROOT / "docs" / name for name in re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)]


GROUPS = {"readme": lambda: [README], "docs": doc_pages}


def blocks(group: str = "readme") -> list[tuple[str | None, str, str]]:
    return [(m["kind"], m["lang"], m["body"]) for page in GROUPS[group]() for m in BLOCK.finditer(page.read_text())]


def test_every_docs_page_is_in_the_nav():
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages == {p.relative_to(ROOT / "docs").as_posix() for p in doc_pages()}


@pytest.mark.parametrize("group", GROUPS)
def test_every_block_says_how_it_is_tested(group):
    unmarked = [body.splitlines()[0] for kind, lang, body in blocks(group) if kind is None and lang != "text"]
    assert not unmarked, f"{group} blocks with no test marker: {unmarked}"
    assert {kind for kind, lang, _ in blocks(group) if lang != "text"} <= {"kernel", "shell", "setup", "config"}


def test_setup_is_exactly_make_demo_and_make_test():
    setup = [body for kind, _, body in blocks() if kind == "setup"]
    assert len(setup) == 1
    commands = [line.split("#")[0].strip() for line in setup[0].splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _shell_script(body: str) -> str:
    lines = ["cd \"$WORKDIR\""]
    for raw in body.splitlines():
        line = raw.rstrip()
        if not line or line.lstrip().startswith("#"):
            continue
        m = re.search(r"\s+# exit (\d+)\s*$", line)
        expected = int(m.group(1)) if m else 0
        cmd = line[: m.start()] if m else re.sub(r"\s+#(?![^\"']*[\"']).*$", "", line)
        quoted = cmd.replace("'", "'\"'\"'")
        lines.append(f"{cmd}\nrc=$?; [ $rc -eq {expected} ] || {{ echo 'README line exited '$rc' "
                     f"(expected {expected}): {quoted}' >&2; exit 1; }}")
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_shell_examples_run(workdir, group):
    workdir.mkdir(parents=True, exist_ok=True)
    shell = [body for kind, lang, body in blocks(group) if kind == "shell"]
    assert shell, f"{group} has no shell examples"
    configs = [body for kind, _, body in blocks(group) if kind == "config"]
    for body in configs:
        json.loads(body)  # the documented config is valid JSON
        (workdir / "agentstack.config.json").write_text(body)
    for nb in (ROOT / "notebooks").rglob("*.ipynb"):
        if not nb.name.endswith(".executed.ipynb"):
            target = workdir / nb.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(nb, target)
    env = dict(os.environ, WORKDIR=str(workdir), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               PYTHONWARNINGS="ignore")
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    for body in shell:
        proc = subprocess.run(["bash", "-c", _shell_script(body)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, f"{proc.stderr[-3000:]}\n--- stdout ---\n{proc.stdout[-2000:]}"
        assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_kernel_examples_run(workdir, group):
    workdir.mkdir(parents=True, exist_ok=True)
    cells = [body for kind, _, body in blocks(group) if kind == "kernel"]
    assert cells, f"{group} has no notebook examples"
    nb = run_cells(cells, workdir, allow_errors=False)
    for cell in nb.cells:
        for out in cell.outputs:
            assert out.output_type != "error", f"{cell.source}\n{out.get('ename')}: {out.get('evalue')}"
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            assert "Traceback" not in text and "Error:" not in text.split("\n")[0], f"{cell.source}\n{text}"
