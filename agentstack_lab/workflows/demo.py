"""Small sample projects so the built-in workflows run out of the box (Binder, first try).

Without a ``root`` the sample goes to one stable folder of the workspace under the working directory,
``.agentstack/demo/code-review`` or ``.agentstack/demo/doc-sync`` (next to the workspace database the
reviewer agent writes there anyway, and git-ignored with it), and is rewritten on every call. A fresh
``mkdtemp`` folder per call was never removed: /tmp of one machine had collected 457 + 216 of them
from notebook runs. Each file is replaced atomically, so two runs sharing a folder never read half a file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from agentstack_lab.workspace import DB_DIRNAME

__all__ = ["demo_docs_project", "demo_review_file", "demo_root"]

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


def demo_root(name: str) -> Path:
    """The stable folder of sample ``name`` in the working directory's workspace (``.agentstack/demo/NAME``)."""
    return Path.cwd() / DB_DIRNAME / "demo" / name


def _write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (a reader sees the old file or the new one, never half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def demo_docs_project(root: str | Path | None = None) -> Path:
    """Write a sample package with docs that contradict it in a few ways; return its folder.

    Args:
        root: Folder to write into (default :func:`demo_root` ``("doc-sync")``, rewritten each call).
    """
    base = Path(root) if root else demo_root("doc-sync")
    _write(base / "sample" / "__init__.py", _CODE)
    _write(base / "README.md", _README)
    _write(base / "guide.md", _GUIDE)
    return base


def demo_review_file(root: str | Path | None = None) -> Path:
    """Write a small Python file with typical review findings; return its path.

    Args:
        root: Folder to write ``loader.py`` into (default :func:`demo_root` ``("code-review")``, rewritten each call).
    """
    path = (Path(root) if root else demo_root("code-review")) / "loader.py"
    _write(path, _REVIEW)
    return path
