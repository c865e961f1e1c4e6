"""The docs stay true: the site builds in strict mode, the config reference is current, the README is a front page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_configuration_reference_is_generated_from_the_config_models():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_config
    finally:
        sys.path.remove(str(ROOT / "docs"))
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert page == gen_config.render(), "stale: run python docs/gen_config.py docs/reference/configuration.md"
    from agentstack_lab.config import Config

    for section in Config.model_fields:   # every section of the config has its heading
        assert f"## `{section}`" in page or f"## `{section}." in page, section


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for page in ("docs/notebook.md", "docs/architecture.md", "docs/reference/configuration.md", "CONTRIBUTING.md",
                 "CHANGELOG.md"):
        assert f"({page})" in text and (ROOT / page).is_file(), page
    assert "## Not built yet" in text


@pytest.mark.slow
def test_mkdocs_builds_the_site_in_strict_mode(tmp_path):
    proc = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "architecture" / "index.html").is_file()
    built = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "max_depth" in built
