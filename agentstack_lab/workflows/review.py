"""Checks behind the ``code_review`` workflow: static review of Python files or of a diff's added lines.

``load_target`` reads a file, a folder or a unified diff into :class:`Source` objects (a diff keeps
only the new side of each Python file and remembers which lines were added). ``review`` finds
problems; ``plan_fixes``/``apply_fixes`` make the mechanical ones go away on a working copy.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentstack_lab.workflows.model import Finding

__all__ = ["Source", "apply_fixes", "diff_of", "load_target", "review", "SEVERITY_RANK"]

SEVERITY_RANK = {"low": 0, "medium": 1, "high": 2}
_FIXABLE = ("trailing-whitespace", "tab-indent", "final-newline", "bare-except")


@dataclass
class Source:
    """A Python file under review: name, original text, working text, and the lines in scope."""

    name: str
    original: str
    text: str
    added: set[int] | None = None  # None: every line is in scope
    applied: list[str] = field(default_factory=list)

    def in_scope(self, line: int) -> bool:
        return self.added is None or line in self.added


def load_target(target: str | Path) -> list[Source]:
    """Python sources from a ``.py`` file, a folder of them, or a ``.diff``/``.patch`` file."""
    path = Path(target)
    if not path.exists():
        raise FileNotFoundError(f"code_review target not found: {path}")
    if path.is_dir():
        return [Source(p.relative_to(path).as_posix(), t := p.read_text("utf-8", errors="replace"), t)
                for p in sorted(path.rglob("*.py")) if ".venv" not in p.parts]
    text = path.read_text("utf-8", errors="replace")
    if path.suffix in (".diff", ".patch") or text.startswith(("diff --git", "--- ")):
        return _from_diff(text)
    return [Source(path.name, text, text)]


def _from_diff(text: str) -> list[Source]:
    """New-side text of each Python file in a unified diff (context and added lines) and its added lines."""
    sources: list[Source] = []
    name, lines, added, new_no = None, [], set(), 0

    def flush() -> None:
        if name and name.endswith(".py"):
            body = "\n".join(lines) + "\n"
            sources.append(Source(name, body, body, added=set(added)))

    for raw in text.splitlines():
        if raw.startswith("+++ "):
            flush()
            target = raw[4:].split("\t")[0].strip()
            name = None if target == "/dev/null" else re.sub(r"^[ab]/", "", target)
            lines, added, new_no = [], set(), 0
        elif raw.startswith("@@"):
            m = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", raw)
            start = int(m.group(1)) if m else 1
            while len(lines) < start - 1:  # lines the hunk does not show
                lines.append("")
            new_no = start - 1
        elif name is not None and raw.startswith("+") and not raw.startswith("+++"):
            new_no += 1
            lines.append(raw[1:])
            added.add(new_no)
        elif name is not None and raw.startswith(" "):
            new_no += 1
            lines.append(raw[1:])
    flush()
    return sources


def _f(src: Source, line: int, rule: str, claim: str, contradiction: str, severity: str) -> Finding | None:
    if not src.in_scope(line):
        return None
    return Finding(claim=claim, contradiction=contradiction, severity=severity,  # type: ignore[arg-type]
                   evidence=[f"{src.name}:{line} [{rule}]", _line(src.text, line)], file=src.name, line=line)


def _line(text: str, no: int) -> str:
    lines = text.splitlines()
    return lines[no - 1].strip()[:160] if 0 < no <= len(lines) else ""


def review(src: Source) -> list[Finding]:
    """Static findings for one source (only lines in scope)."""
    out: list[Finding | None] = []
    try:
        tree = ast.parse(src.text)
    except SyntaxError as exc:
        line = exc.lineno or 1
        return [Finding(claim="the code parses", contradiction=f"SyntaxError: {exc.msg}", severity="high",
                        evidence=[f"{src.name}:{line} [syntax]"], file=src.name, line=line)]
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    exported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
        if isinstance(node, ast.ExceptHandler) and node.type is None:
            out.append(_f(src, node.lineno, "bare-except", "errors are handled deliberately",
                          "bare `except:` also swallows KeyboardInterrupt and SystemExit", "medium"))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                if isinstance(default, ast.List | ast.Dict | ast.Set):
                    out.append(_f(src, default.lineno, "mutable-default", f"`{node.name}` has safe defaults",
                                  "a mutable default argument is shared between calls", "medium"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
            out.append(_f(src, node.lineno, "eval", "no dynamic code execution",
                          f"`{node.func.id}()` runs arbitrary code", "high"))
        elif isinstance(node, ast.Import | ast.ImportFrom) and node.col_offset == 0:
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                if name != "*" and name not in used and name not in exported and not _is_attr_root(tree, name):
                    out.append(_f(src, node.lineno, "unused-import", f"`{name}` is needed",
                                  "imported but never used", "low"))
    spaces = [no for no, ln in enumerate(src.text.splitlines(), 1) if ln != ln.rstrip() and src.in_scope(no)]
    tabs = [no for no, ln in enumerate(src.text.splitlines(), 1) if ln.startswith("\t") and src.in_scope(no)]
    for rule, lines, claim, what in (("trailing-whitespace", spaces, "clean whitespace", "trailing whitespace"),
                                     ("tab-indent", tabs, "PEP 8 indentation", "indented with tabs")):
        if lines:
            finding = _f(src, lines[0], rule, claim, f"{what} on {len(lines)} line(s)", "low")
            if finding is not None:
                finding.evidence.append("lines " + ", ".join(map(str, lines[:20])))
            out.append(finding)
    for no, line in enumerate(src.text.splitlines(), 1):
        if re.search(r"#\s*(TODO|FIXME|XXX)\b", line):
            out.append(_f(src, no, "todo", "the change is finished", "leaves a TODO/FIXME", "low"))
    if src.text and not src.text.endswith("\n"):
        last = src.text.count("\n") + 1
        out.append(_f(src, last, "final-newline", "files end with a newline", "no newline at end of file", "low"))
    return [f for f in out if f is not None]


def _is_attr_root(tree: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
               for n in ast.walk(tree))


def rule_of(finding: Finding) -> str:
    m = re.search(r"\[([\w-]+)\]", finding.evidence[0] if finding.evidence else "")
    return m.group(1) if m else ""


def apply_fixes(src: Source, findings: list[Finding]) -> int:
    """Apply the mechanical fixes named by ``findings`` to ``src.text``; return how many applied."""
    rules = {rule_of(f) for f in findings if f.file == src.name} & set(_FIXABLE)
    lines = src.text.splitlines()
    before = src.text
    if "trailing-whitespace" in rules:
        lines = [ln.rstrip() for ln in lines]
    if "tab-indent" in rules:
        lines = [re.sub(r"^\t+", lambda m: "    " * len(m.group()), ln) for ln in lines]
    if "bare-except" in rules:
        lines = [re.sub(r"^(\s*)except\s*:", r"\1except Exception:", ln) for ln in lines]
    src.text = "\n".join(lines) + "\n"
    src.applied.extend(sorted(rules))
    return int(src.text != before)


def diff_of(src: Source) -> str:
    """Unified diff from the original to the working text."""
    return "".join(difflib.unified_diff(src.original.splitlines(keepends=True), src.text.splitlines(keepends=True),
                                        fromfile=f"a/{src.name}", tofile=f"b/{src.name}"))
