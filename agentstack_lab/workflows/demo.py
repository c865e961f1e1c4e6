"""Small sample projects so the built-in workflows run out of the box (Binder, first try)."""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["demo_docs_project", "demo_review_file"]

_CODE = '''"""Tiny sample package."""


def greet(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


class Counter:
    """Counts things."""

    def add(self, n: int = 1) -> int:
        return n
'''

_README = """# Sample project

Call `sample.greet()` to say hello, or use `sample.Counter.add` to count.
The code lives in [the package](sample/__init__.py); see the [guide](guide.md#installing).

```python
from sample import greet, farewell
```

The old helper `sample.wave()` was removed.
"""

_GUIDE = """# Guide

## Install

Run `scripts/install.sh` (see [above](#install)). Details are in [setup](setup.md).
"""

_REVIEW = '''import os
import json

_CACHE = {}


def load(path):
\tif path in _CACHE:
\t\treturn json.loads(_CACHE[path])
\ttry:
\t\tdata = open(path).read()<WS>
\texcept:
\t\tdata = ""
\t_CACHE[path] = data
\treturn data  # TODO: parse
'''.replace("<WS>", "   ")  # trailing whitespace, on purpose


def demo_docs_project(root: str | Path | None = None) -> Path:
    """Write a sample package with docs that contradict it in a few ways; return its folder."""
    base = Path(root or tempfile.mkdtemp(prefix="agentstack-doc-sync-demo-"))
    (base / "sample").mkdir(parents=True, exist_ok=True)
    (base / "sample" / "__init__.py").write_text(_CODE, "utf-8")
    (base / "README.md").write_text(_README, "utf-8")
    (base / "guide.md").write_text(_GUIDE, "utf-8")
    return base


def demo_review_file(root: str | Path | None = None) -> Path:
    """Write a small Python file with typical review findings; return its path."""
    base = Path(root or tempfile.mkdtemp(prefix="agentstack-code-review-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    path = base / "loader.py"
    path.write_text(_REVIEW, "utf-8")
    return path
