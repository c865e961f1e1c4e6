"""The reviewer gate of the built-in workflows: static checks and a reviewer agent's verdict, either can FAIL.

``code_review`` and ``doc_sync`` record two gates in their adversarial phase: ``static`` (their own
rules) and ``reviewer`` (a reviewer agent's structured verdict, :func:`reviewer_gate`). A FAIL from
either fails the pass; the report's ``decision`` says which gates decided and lists the reviewer's
findings, which also join the phase's findings. A reviewer reply that is not a valid verdict, or a
reviewer run that fails, raises: the workflow ends ERROR (exit 2) naming the field, never PASS.

Offline (no key, ``provider="scripted"``) no model reviews anything, so the ``reviewer`` gate is recorded
``SKIPPED``: it never decides, the report's ``decision.reviewer`` says it was skipped and why, and
``workflow run`` prints one warning line. ``script=`` (a :class:`~agentstack_lab.workflows.review_loop.ReviewScript` or its JSON file) plays
chosen verdicts instead, so a CI job can check its gating without a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentstack_lab.errors import UsageError
from agentstack_lab.workflows.model import Finding
from agentstack_lab.workflows.review_loop import ReviewOutcome, ReviewScript, ask_reviewer

if TYPE_CHECKING:
    from agentstack_lab.workflows.runner import PhaseScope
    from agentstack_lab.workspace import Workspace

__all__ = ["MAX_SUBJECT_CHARS", "bundle", "reviewer_gate"]

MAX_SUBJECT_CHARS = 100_000  # about 25k tokens: what one review may show the model


def bundle(files: Iterable[tuple[str, str]]) -> tuple[str, str | None]:
    """One text for the reviewer from ``(name, text)`` pairs, and the path to show when there is one file."""
    files = list(files)
    if len(files) == 1:
        text, path = files[0][1], files[0][0]
    else:
        text, path = "".join(f"# ---- file: {name} ----\n{body.rstrip()}\n\n" for name, body in files), None
    if len(text) > MAX_SUBJECT_CHARS:
        text = text[:MAX_SUBJECT_CHARS] + f"\n# ... truncated at {MAX_SUBJECT_CHARS} characters\n"
    return text or "(nothing to review)\n", path


async def reviewer_gate(scope: PhaseScope, subject: str, *, kind: str = "code", path: str | None = None,
                        static: Iterable[str] = (), provider: str = "auto", script: Any = None,
                        workspace: Workspace | None = None, options: dict[str, Any] | None = None) -> ReviewOutcome:
    """Ask the reviewer agent about ``subject``; record its verdict as the phase's ``reviewer`` gate.

    Args:
        scope: The adversarial phase's scope.
        subject: What to review (code, a diff, or docs).
        kind: ``code``, ``diff`` or ``docs``.
        path: The file name when it is one file.
        static: The static checks' findings, one line each (shown to the reviewer).
        provider: ``auto`` (anthropic / openai when their key is set, else ``scripted``) or a provider name.
        script: A review script for the scripted provider (its path, dict, or ReviewScript); ``""``: none.
        workspace: Where the agent runs are logged (default: the workspace found from the working directory).
        options: More ``RunOptions`` fields for the reviewer run: the workflow's cassette to record or replay
            (:func:`~agentstack_lab.workflows.api.cassette_options`); a replay miss fails the reviewer (ERROR).
    """
    from agentstack_lab.workflows.api import choose_provider
    from agentstack_lab.workspace import Workspace

    script = ReviewScript.coerce(script)
    if script is not None and provider not in ("auto", "scripted"):
        raise UsageError(f"review_script needs provider 'scripted' (or 'auto'), got {provider!r}")
    name = "scripted" if script is not None else choose_provider(provider)
    lines = [ln.strip() for ln in static if ln.strip()]
    context = "Static check findings:\n" + ("\n".join(f"- {ln}" for ln in lines) if lines else "- none")
    ws = workspace or Workspace.open()
    try:
        outcome = await ask_reviewer(ws, subject, kind=kind, path=path, context=context, provider=name,
                                     script=script, options=options)
    finally:
        if workspace is None:
            ws.close()
    verdict = outcome.verdict
    scope.artifacts["agent"] = outcome.to_dict()
    for f in verdict.findings:
        where = f"{f.file or path or ''}:{f.line}" if f.line is not None else (f.file or path or "")
        scope.add_finding(Finding(claim=f.claim, contradiction=f.evidence or "(the reviewer gave no evidence)",
                                  severity=f.severity, evidence=[f"{where} [reviewer]".strip()], file=f.file or path,
                                  line=f.line))
    if outcome.skipped:  # no model reviewed anything: the gate decides nothing
        scope.skip_gate("reviewer", outcome.to_dict()["skipReason"])
        return outcome
    scope.gate("reviewer", verdict.passed, f"{len(verdict.findings)} finding(s): {verdict.summary}".rstrip(": "))
    return outcome
