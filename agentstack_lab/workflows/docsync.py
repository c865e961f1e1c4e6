"""Checks behind the ``doc_sync`` workflow: Markdown docs versus the code they describe.

``inventory`` finds the docs, ``extract_claims`` pulls out what a doc asserts about the code
(linked files, file paths and Python names in inline code, imports in Python code blocks,
anchors), ``check_claims`` verifies them against a :class:`CodeIndex`, ``suggest_fix`` proposes
the closest real name, and ``apply_fixes`` rewrites docs when asked.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentstack_lab.workflows.model import Finding

__all__ = ["Claim", "CodeIndex", "Doc", "apply_fixes", "check_anchors", "check_claims", "extract_claims",
           "inventory", "slugify", "suggest_fix"]

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^(```|~~~)\s*([\w+-]*)")
_PATHLIKE = re.compile(r"^[\w.\-/]+\.(py|md|toml|ya?ml|json|ipynb|txt|cfg|ini|sh|js|ts|css|html)$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(\(\))?$")
_CALL = re.compile(r"^([A-Za-z_]\w*)\(\)$")
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".agentstack", "build", "dist"}


@dataclass
class Doc:
    """A Markdown document: where it is, its title, headings (text, line) and text."""

    path: Path
    rel: str
    title: str | None
    headings: list[tuple[str, int]]
    text: str

    @property
    def lines(self) -> int:
        return self.text.count("\n") + 1


@dataclass
class Claim:
    """One checkable assertion in a doc."""

    kind: str  # link | path | symbol | import | anchor
    value: str
    line: int
    doc: str


@dataclass
class CodeIndex:
    """Python modules and the names they define, under a code root."""

    root: Path
    modules: dict[str, set[str]] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, root: str | Path) -> CodeIndex:
        root = Path(root).resolve()
        index = cls(root=root)
        for path in _walk(root):
            rel = path.relative_to(root).as_posix()
            index.files.add(rel)
            if path.suffix != ".py":
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and parts[0] == "src":
                parts = parts[1:]
            if not parts:
                continue
            try:
                tree = ast.parse(path.read_text("utf-8", errors="replace"))
            except SyntaxError:
                tree = ast.Module(body=[], type_ignores=[])
            names: set[str] = set()
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                    if isinstance(node, ast.ClassDef):
                        names.update(f"{node.name}.{n.name}" for n in node.body
                                     if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.ImportFrom | ast.Import):
                    names.update((a.asname or a.name).split(".")[0] for a in node.names)
            index.modules[".".join(parts)] = names
        return index

    @property
    def packages(self) -> set[str]:
        return {m.split(".")[0] for m in self.modules}

    def all_names(self) -> set[str]:
        return {n.split(".")[-1] for names in self.modules.values() for n in names}

    def resolve(self, dotted: str) -> bool:
        """True if ``pkg.mod`` or ``pkg.mod.Name`` (or ``pkg.mod.Class.method``) exists."""
        if dotted in self.modules:
            return True
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self.modules:
                return ".".join(parts[cut:]) in self.modules[module]
        return False


def _walk(root: Path):
    """Files under ``root``, skipping hidden folders (``.git``, ``.pytest_cache``...) and build/venv folders."""
    for path in sorted(root.rglob("*")):
        folders = path.relative_to(root).parts[:-1]
        if path.is_file() and not any(part in _SKIP_DIRS or part.startswith(".") for part in folders):
            yield path


def slugify(heading: str) -> str:
    """GitHub-style anchor of a heading."""
    text = re.sub(r"[`*_~]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def inventory(target: str | Path, *, root: str | Path | None = None) -> list[Doc]:
    """Every ``*.md`` under ``target`` (a folder or one file), sorted."""
    target = Path(target)
    if not target.exists():
        raise FileNotFoundError(f"doc_sync target not found: {target}")
    base = Path(root).resolve() if root else (target if target.is_dir() else target.parent).resolve()
    paths = [target] if target.is_file() else [p for p in _walk(target) if p.suffix.lower() == ".md"]
    docs = []
    for path in paths:
        text = path.read_text("utf-8", errors="replace")
        headings, fence = [], False
        for no, line in enumerate(text.splitlines(), 1):
            if _FENCE.match(line):
                fence = not fence
            elif not fence and (m := _HEADING.match(line)):
                headings.append((m.group(2), no))
        try:
            rel = path.resolve().relative_to(base).as_posix()
        except ValueError:
            rel = path.as_posix()
        docs.append(Doc(path=path, rel=rel, title=headings[0][0] if headings else None, headings=headings,
                        text=text))
    return docs


def extract_claims(doc: Doc, index: CodeIndex) -> list[Claim]:
    """What ``doc`` asserts about the code: links, paths, Python names, imports, anchors."""
    claims: list[Claim] = []
    fence_lang: str | None = None
    for no, line in enumerate(doc.text.splitlines(), 1):
        fence = _FENCE.match(line)
        if fence:
            fence_lang = None if fence_lang is not None else (fence.group(2) or "")
            continue
        if fence_lang is not None:
            if fence_lang in ("python", "py", "pycon"):
                stripped = line.lstrip(">. ").strip()
                if m := re.match(r"from\s+([\w.]+)\s+import\s+(.+)", stripped):
                    for name in re.split(r"\s*,\s*", m.group(2).strip("() ")):
                        name = name.split(" as ")[0].strip()
                        if name and name != "*":
                            claims.append(Claim("import", f"{m.group(1)}.{name}", no, doc.rel))
                elif m := re.match(r"import\s+([\w.]+)", stripped):
                    claims.append(Claim("import", m.group(1), no, doc.rel))
            continue
        for m in _LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue
            claims.append(Claim("anchor" if target.startswith("#") else "link", target, no, doc.rel))
        for m in _CODE.finditer(_LINK.sub("", line)):
            span = m.group(1).strip()
            if _PATHLIKE.match(span) and "/" in span:
                claims.append(Claim("path", span, no, doc.rel))
            elif _DOTTED.match(span) and span.split(".")[0] in index.packages:
                claims.append(Claim("symbol", span.removesuffix("()"), no, doc.rel))
            elif (c := _CALL.match(span)) and index.modules:
                claims.append(Claim("symbol", c.group(1), no, doc.rel))
    return claims


def _exists(path: str, doc: Doc, index: CodeIndex) -> bool:
    candidates = [doc.path.parent / path, index.root / path]
    return any(c.exists() for c in candidates)


def check_claims(doc: Doc, claims: list[Claim], index: CodeIndex, docs: list[Doc]) -> list[Finding]:
    """A finding for every claim the code contradicts."""
    out: list[Finding] = []
    for c in claims:
        if c.kind == "link":
            path, _, anchor = c.value.partition("#")
            if path and not _exists(path, doc, index):
                out.append(_finding(c, f"links to {path}", "no such file", "high", index, doc))
            elif anchor and path.endswith(".md"):
                other = next((d for d in docs if d.path.resolve() == (doc.path.parent / path).resolve()), None)
                if other and anchor not in {slugify(h) for h, _ in other.headings}:
                    out.append(_finding(c, f"links to section #{anchor} of {path}",
                                        f"{path} has no heading with that anchor", "medium", index, doc))
        elif c.kind == "path" and not _exists(c.value, doc, index):
            out.append(_finding(c, f"mentions file {c.value}", "no such file in the code", "medium", index, doc))
        elif c.kind in ("symbol", "import"):
            ok = index.resolve(c.value) if "." in c.value else c.value in index.all_names()
            top = c.value.split(".")[0]
            if not ok and (c.kind == "symbol" or top in index.packages):
                what = "imports" if c.kind == "import" else "refers to"
                out.append(_finding(c, f"{what} {c.value}", "not defined in the code", "high", index, doc))
    return out


def check_anchors(doc: Doc, claims: list[Claim]) -> list[Finding]:
    """Same-page ``#anchor`` links that match no heading, and headings defined twice."""
    slugs = [slugify(h) for h, _ in doc.headings]
    out = [Finding(claim=f"links to section {c.value}", contradiction="no heading with that anchor on the page",
                   severity="medium", evidence=[f"{doc.rel}:{c.line}"], file=doc.rel, line=c.line)
           for c in claims if c.kind == "anchor" and c.value[1:] not in slugs]
    seen: dict[str, int] = {}
    for (heading, line), slug in zip(doc.headings, slugs, strict=True):
        if slug in seen:
            out.append(Finding(claim=f"section '{heading}'", contradiction=f"heading repeated (first at line "
                               f"{seen[slug]}); its anchor is ambiguous", severity="low",
                               evidence=[f"{doc.rel}:{line}"], file=doc.rel, line=line))
        seen.setdefault(slug, line)
    return out


def _finding(c: Claim, claim: str, contradiction: str, severity: str, index: CodeIndex, doc: Doc) -> Finding:
    evidence = [f"{doc.rel}:{c.line}: `{c.value}`"]
    fix = suggest_fix(c, index, doc)
    if fix:
        evidence.append(f"closest match: {fix}")
    return Finding(claim=claim, contradiction=contradiction, severity=severity, evidence=evidence,  # type: ignore[arg-type]
                   file=doc.rel, line=c.line)


def suggest_fix(c: Claim, index: CodeIndex, doc: Doc) -> str | None:
    """The closest existing file or name to a broken claim, if one is close enough."""
    if c.kind in ("link", "path"):
        path, sep, anchor = c.value.partition("#")
        base = doc.path.parent.resolve()
        if anchor and (base / path).is_file():
            text = (base / path).read_text("utf-8", errors="replace")
            slugs = [slugify(m.group(2)) for ln in text.splitlines() if (m := _HEADING.match(ln))]
            match = difflib.get_close_matches(anchor, slugs, n=1, cutoff=0.6)
            return f"{path}#{match[0]}" if match else None
        pool = {Path(f).name: f for f in index.files}
        match = difflib.get_close_matches(Path(path).name, list(pool), n=1, cutoff=0.75)
        if not match:
            return None
        full = index.root / pool[match[0]]
        try:
            fixed = Path(full).relative_to(base).as_posix() if c.kind == "link" else pool[match[0]]
        except ValueError:
            fixed = pool[match[0]]
        return fixed + (sep + anchor if sep else "")
    if c.kind in ("symbol", "import"):
        *head, last = c.value.split(".")
        module = ".".join(head)
        names = index.modules.get(module) if module else index.all_names()
        if names is None:
            return None
        match = difflib.get_close_matches(last, sorted(names), n=1, cutoff=0.75)
        return ".".join([*head, match[0]]) if match else None
    return None


def apply_fixes(docs: list[Doc], fixes: list[tuple[Claim, str]]) -> int:
    """Replace each broken claim by its suggestion on its line; return how many docs changed."""
    by_doc: dict[str, list[tuple[Claim, str]]] = {}
    for claim, fix in fixes:
        by_doc.setdefault(claim.doc, []).append((claim, fix))
    changed = 0
    for doc in docs:
        items = by_doc.get(doc.rel)
        if not items:
            continue
        lines = doc.text.splitlines(keepends=True)
        for claim, fix in items:
            i = claim.line - 1
            lines[i] = lines[i].replace(claim.value, fix, 1)
        text = "".join(lines)
        if text != doc.text:
            doc.path.write_text(text, "utf-8")
            doc.text = text
            changed += 1
    return changed
