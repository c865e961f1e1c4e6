"""The reviewer's structured verdict: PASS or FAIL with findings, parsed strictly from the agent's reply.

A review loop and the ``code_review``/``doc_sync`` workflows let a reviewer agent decide, so a reply
that is not a valid verdict must never count as a PASS: :func:`parse_verdict` raises a
:class:`VerdictError` naming the first bad field (``findings[1].severity``), like
:func:`agentstack_lab.events.from_wire` does for events. The wire form is camelCase JSON::

    {"verdict": "FAIL", "summary": "one line",
     "findings": [{"severity": "high", "file": "loader.py", "line": 12,
                   "claim": "load() returns text; callers expect parsed JSON",
                   "evidence": "return data  # line 12"}]}

Models often wrap JSON in a Markdown fence or add a sentence around it; the first fenced ``json``
block, else the outermost ``{...}`` of the reply, is parsed. A FAIL with no findings is refused (a
reviewer must say why); a PASS may carry low-severity notes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from agentstack_lab.errors import AgentstackError

__all__ = ["REVIEW_SEVERITIES", "ReviewFinding", "ReviewVerdict", "VerdictError", "extract_code", "parse_verdict",
           "verdict_instructions"]

REVIEW_SEVERITIES: tuple[str, ...] = ("low", "medium", "high")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.S)


class VerdictError(AgentstackError, ValueError):
    """The reviewer's reply is not a valid verdict; the message names the field."""


@dataclass(frozen=True, kw_only=True)
class ReviewFinding:
    """One problem the reviewer found: how bad, where, what is wrong, and what shows it."""

    severity: Literal["low", "medium", "high"]
    claim: str
    evidence: str = ""
    file: str | None = None
    line: int | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"severity": self.severity, "claim": self.claim, "evidence": self.evidence}
        if self.file is not None:
            out["file"] = self.file
        if self.line is not None:
            out["line"] = self.line
        return out

    @classmethod
    def from_wire(cls, data: Any, *, where: str = "finding") -> ReviewFinding:
        """Parse one finding; a bad field is a :class:`VerdictError` naming ``where.field``."""
        if not isinstance(data, dict):
            raise VerdictError(f"reviewer verdict: {where} must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"severity", "claim", "evidence", "file", "line"})
        if unknown:
            raise VerdictError(f"reviewer verdict: {where} has unknown field {unknown[0]!r}; expected severity, "
                               "file, line, claim, evidence")
        severity = data.get("severity")
        if severity not in REVIEW_SEVERITIES:
            raise VerdictError(f"reviewer verdict: field '{where}.severity' must be one of "
                               f"{', '.join(REVIEW_SEVERITIES)}, got {severity!r}")
        claim = data.get("claim")
        if not isinstance(claim, str) or not claim.strip():
            raise VerdictError(f"reviewer verdict: field '{where}.claim' must be a non-empty string, got {claim!r}")
        evidence = data.get("evidence", "")
        if not isinstance(evidence, str):
            raise VerdictError(f"reviewer verdict: field '{where}.evidence' must be a string, "
                               f"got {type(evidence).__name__}")
        file = data.get("file")
        if file is not None and not isinstance(file, str):
            raise VerdictError(f"reviewer verdict: field '{where}.file' must be a string, got {type(file).__name__}")
        line = data.get("line")
        if line is not None and (not isinstance(line, int) or isinstance(line, bool) or line < 0):
            raise VerdictError(f"reviewer verdict: field '{where}.line' must be a non-negative integer, got {line!r}")
        return cls(severity=severity, claim=claim.strip(), evidence=evidence.strip(), file=file or None, line=line)


@dataclass(frozen=True, kw_only=True)
class ReviewVerdict:
    """PASS or FAIL, a one-line summary, and the findings behind it."""

    verdict: Literal["PASS", "FAIL"]
    summary: str = ""
    findings: tuple[ReviewFinding, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    def to_wire(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "summary": self.summary, "findings": [f.to_wire() for f in self.findings]}

    @classmethod
    def from_wire(cls, data: Any) -> ReviewVerdict:
        """Parse the verdict object; a bad or missing field is a :class:`VerdictError` naming it."""
        if not isinstance(data, dict):
            raise VerdictError(f"reviewer verdict must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"verdict", "summary", "findings"})
        if unknown:
            raise VerdictError(f"reviewer verdict: unknown field {unknown[0]!r}; expected verdict, summary, findings")
        if "verdict" not in data:
            raise VerdictError("reviewer verdict: missing field 'verdict' (PASS or FAIL)")
        verdict = data["verdict"]
        if verdict not in ("PASS", "FAIL"):
            raise VerdictError(f"reviewer verdict: field 'verdict' must be PASS or FAIL, got {verdict!r}")
        summary = data.get("summary", "")
        if not isinstance(summary, str):
            raise VerdictError(f"reviewer verdict: field 'summary' must be a string, got {type(summary).__name__}")
        raw = data.get("findings", [])
        if not isinstance(raw, list):
            raise VerdictError(f"reviewer verdict: field 'findings' must be a list, got {type(raw).__name__}")
        findings = tuple(ReviewFinding.from_wire(f, where=f"findings[{i}]") for i, f in enumerate(raw))
        if verdict == "FAIL" and not findings:
            raise VerdictError("reviewer verdict: field 'findings' is empty but verdict is FAIL (say what is wrong)")
        return cls(verdict=verdict, summary=summary.strip(), findings=findings)


def parse_verdict(text: str | None) -> ReviewVerdict:
    """The verdict in a reviewer's reply (a fenced ``json`` block, else the outermost ``{...}``)."""
    if not text or not text.strip():
        raise VerdictError("reviewer verdict: the reviewer's reply is empty (expected a JSON verdict object)")
    candidates = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("json", "")]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start:end + 1])
    if not candidates:
        raise VerdictError(f"reviewer verdict: no JSON object in the reviewer's reply: {_clip(text)!r}")
    error: json.JSONDecodeError | None = None
    for body in candidates:
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            error = error or exc
            continue
        return ReviewVerdict.from_wire(data)
    raise VerdictError(f"reviewer verdict: not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
                       if error else "reviewer verdict: not valid JSON")


def extract_code(text: str | None) -> str:
    """The code in a coder's reply: its first fenced block, else the whole reply (trailing newline kept)."""
    if not text or not text.strip():
        raise VerdictError("coder revision: the coder's reply is empty (expected the revised code)")
    m = _FENCE.search(text)
    body = m.group(2) if m else text.strip("\n")
    return body if body.endswith("\n") else body + "\n"


def verdict_instructions() -> str:
    """What the reviewer is told to reply with (the schema above, in words)."""
    return ("Reply with ONLY a JSON object, no prose around it: {\"verdict\": \"PASS\" or \"FAIL\", \"summary\": "
            "one line, \"findings\": [{\"severity\": \"low\"|\"medium\"|\"high\", \"file\": path, \"line\": number, "
            "\"claim\": what is wrong, \"evidence\": the code or fact that shows it}]}. FAIL only for problems that "
            "must be fixed before merging, and then list them; PASS may list low-severity notes.")


def _clip(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
