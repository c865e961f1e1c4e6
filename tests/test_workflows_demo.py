"""The built-in workflows' sample files: one stable folder of the workspace, rewritten each call, nothing in /tmp.

The notebooks that use them run end to end in test_workflows_notebooks.py (with TMPDIR checked there too).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from agentstack_lab.workflows import docsync, review
from agentstack_lab.workflows.demo import demo_docs_project, demo_review_file


@pytest.fixture
def fresh_tmp(tmp_path, monkeypatch):
    """A private temporary folder (``tempfile.gettempdir()``), so other processes' files never race the check."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def test_review_sample_is_rewritten_in_one_workspace_folder_and_nothing_goes_to_tmp(workdir, fresh_tmp):
    first = demo_review_file()
    assert first == Path.cwd() / ".agentstack" / "demo" / "code-review" / "loader.py"
    original = first.read_text("utf-8")
    assert "except:" in original  # the sample keeps its findings
    first.write_text("print('edited by the user')\n")
    again = demo_review_file()
    assert again == first and again.read_text("utf-8") == original  # same place, reset to the sample
    assert [p.name for p in first.parent.iterdir()] == ["loader.py"]  # no temporary files left beside it
    assert list(fresh_tmp.iterdir()) == []
    [source] = review.load_target(again)
    assert {review.rule_of(f) for f in review.review(source)} >= {"bare-except"}


def test_docs_sample_is_rewritten_in_one_workspace_folder_and_nothing_goes_to_tmp(workdir, fresh_tmp):
    first = demo_docs_project()
    assert first == Path.cwd() / ".agentstack" / "demo" / "doc-sync"
    (first / "README.md").write_text("# fixed by hand\n")
    again = demo_docs_project()
    assert again == first
    assert sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file()) == [
        "README.md", "guide.md", "sample/__init__.py"]
    assert "sample.wave()" in (first / "README.md").read_text("utf-8")  # the contradiction is back
    assert [d.rel for d in docsync.inventory(again, root=again)] == ["README.md", "guide.md"]
    assert list(fresh_tmp.iterdir()) == []


def test_an_explicit_root_is_used_as_given(workdir, fresh_tmp):
    assert demo_review_file(workdir / "r") == workdir / "r" / "loader.py"
    assert (demo_docs_project(workdir / "d") / "guide.md").is_file()
    assert not (workdir / ".agentstack").exists() and list(fresh_tmp.iterdir()) == []
