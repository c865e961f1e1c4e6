"""The card shown while an agent waits for a person: a question box or a code approval.

One :class:`QueryCard` per pending query. It answers through ``respond(response)`` and is closed
by the tree when the query is no longer pending (answered here, or from another surface: then
:meth:`QueryCard.close` takes the note to leave, e.g. "answered from the terminal").

Questions: an answer box (:class:`~.controls.AnswerBox`: Enter sends, Shift+Enter adds a line) plus
Send and the offered choices; an empty answer is refused in the card. Approvals say how many lines will run and
where (your live kernel, which can change your variables, or an isolated subprocess); the code is
highlighted (:mod:`.codeview`); code longer than 12 lines shows its first 12 and a "Show all N lines"
control; long lines scroll sideways. Edit makes it an editor with Reset (the model's code back) and
Cancel (the edits discarded, read-only again), and shows the edit's diff against the model's code. Names
too big to snapshot for undo (``notSnapshotted``, see ``engine/provenance.py``) are listed above the code.

"Try it first" (when the card has a ``try_first`` callable: the run's ``try_first`` for this approval) runs
the code in a sandboxed fork of the kernel and shows the report (:mod:`.dryrun_view`); Approve becomes
"Run it for real". A report already in the options (config ``approval.dry_run``) is shown at once.
"Always allow code like this…" shows the rule it would save (``approval.always_rule`` of the card's
classes) and a scope (this session / the whole workspace) before "Approve and always allow" answers
``{"approved": True, "always": scope}``; code a built-in deny covers is not offered it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import ipywidgets as W

from agentstack_lab.approval import always_rule
from agentstack_lab.events import UserQuery
from agentstack_lab.notebook.codeview import diff_html, highlighted_box
from agentstack_lab.notebook.controls import AnswerBox
from agentstack_lab.notebook.dryrun_view import dry_run_html
from agentstack_lab.notebook.render import CODE_PREVIEW_LINES, code_box, markdown, where_code_runs
from agentstack_lab.notebook.sanitize import escape

__all__ = ["QueryCard", "QUERY_LABELS", "GENERIC_APPROVAL_PROMPTS", "undo_note"]

QUERY_LABELS = {"clarification": "The agent asks:", "blocking": "Before it starts, the agent needs to know:",
                "final": "One more question:"}
GENERIC_APPROVAL_PROMPTS = frozenset({"Run this Python code?"})  # the engine's default says nothing more


def approval_heading(agent_type: str, tool: str, code: str, prompt: str, executor: str | None) -> str:
    """Who wants to run how much code, where, and the engine's own words when they add anything."""
    lines = len(code.splitlines()) or 1
    what = f"{lines} line{'s' if lines != 1 else ''} of Python" if tool == "python" else \
        f"{lines} line{'s' if lines != 1 else ''} of code (tool {escape(tool)})"
    where = where_code_runs(executor)
    heading = f"<b>{escape(agent_type)}</b> wants to run {what}" + (f" {where}" if where else "") + ":"
    if prompt.strip() and prompt.strip() not in GENERIC_APPROVAL_PROMPTS:
        heading += markdown(prompt)
    return heading


def undo_note(names: Any) -> str:
    """The warning that undo could not restore ``names`` (too big to snapshot before the code runs), or ``""``."""
    if not names or not isinstance(names, list):
        return ""
    shown = ", ".join(f"<code>{escape(str(n))}</code>" for n in names)
    return (f'<div class="agentstack-undo-note">⚠ too big to snapshot: {shown}; undo cannot restore '
            f'{"it" if len(names) == 1 else "them"} if this code changes {"it" if len(names) == 1 else "them"}'
            "</div>")


class QueryCard:
    """The widgets answering one query; ``box`` goes into the node."""

    def __init__(self, query: UserQuery, respond: Callable[[Any], None], *, agent_type: str = "agent",
                 tool: str = "python", executor: str | None = None,
                 try_first: Callable[[], Awaitable[Any]] | None = None):
        self.query = query
        self.tool = tool
        self._respond = respond
        self._try_first = try_first
        self.trying: asyncio.Task[Any] | None = None
        self.note = W.HTML()
        self.note.add_class("agentstack-card-note")
        if query.kind == "approval":
            children = self._approval(agent_type, tool, executor)
        else:
            children = self._question()
        self.box = W.VBox([*children, self.note], layout=W.Layout(width="auto"))
        self.box.add_class("agentstack-card")

    # -- approval -------------------------------------------------------------------------------
    def _approval(self, agent_type: str, tool: str, executor: str | None) -> list[W.Widget]:
        q = self.query
        code = str(q.options.get("code") or q.prompt)
        self.code = code
        lines = len(code.splitlines()) or 1
        long = lines > CODE_PREVIEW_LINES
        self.heading = W.HTML(approval_heading(agent_type, tool, code, q.prompt, executor)
                              + undo_note(q.options.get("notSnapshotted")))
        self.viewer = W.HTML(self._box(code, clamped=long), layout=W.Layout(width="auto", margin="2px 0"))
        self.viewer.add_class("agentstack-code-view")
        self.expand = W.Button(description=f"Show all {lines} lines", tooltip="show the whole code",
                               layout=W.Layout(width="auto", display=None if long else "none"))
        self.expand.add_class("agentstack-expand")
        self.expand.on_click(self._on_expand)
        self.editor = W.Textarea(value=code, layout=W.Layout(width="auto", margin="2px 0", height=f"{min(max(lines, 4), 30) * 1.5}em",
                                                             display="none"))
        self.editor.add_class("agentstack-code")
        self.approve = W.Button(description="Approve", button_style="primary")
        self.reject = W.Button(description="Reject")
        self.edit = W.Button(description="Edit", tooltip="edit the code, then Approve runs your version")
        # while editing: Reset (back to the model's code) and Cancel (discard the edits, read-only again),
        # and the edit's diff against the model's code
        self.reset = W.Button(description="Reset", tooltip="put the model's code back in the editor",
                              layout=W.Layout(width="auto", display="none"))
        self.cancel_edit = W.Button(description="Cancel", tooltip="discard your edits: Approve runs the model's code",
                                    layout=W.Layout(width="auto", display="none"))
        self.diff = W.HTML(layout=W.Layout(width="auto", display="none"))
        self.diff.add_class("agentstack-edit-diff")
        for b, cls in ((self.approve, "approve"), (self.reject, "reject"), (self.edit, "edit"),
                       (self.reset, "edit-reset"), (self.cancel_edit, "edit-cancel")):
            b.add_class(f"agentstack-{cls}")
        self.approve.on_click(self._on_approve)
        self.reject.on_click(lambda _b: self._respond(False))
        self.edit.on_click(self._on_edit)
        self.reset.on_click(lambda _b: setattr(self.editor, "value", self.code))
        self.cancel_edit.on_click(self._on_cancel_edit)
        self.editor.observe(self._on_edited, names="value")
        # "Try it first": a dry run in a sandboxed fork, its report shown here before anything runs for real
        self.dry = W.HTML(layout=W.Layout(width="auto", display="none"))
        self.dry.add_class("agentstack-dry")
        self.try_button = W.Button(description="Try it first", tooltip="run it in a sandboxed copy of the kernel "
                                   "and show what it would do; nothing changes in your kernel",
                                   layout=W.Layout(width="auto", display=None if self._try_first else "none"))
        self.try_button.add_class("agentstack-try")
        self.try_button.on_click(self._on_try)
        report = q.options.get("dryRun")
        if isinstance(report, dict):
            self.show_dry_run(report)
        # "Always allow code like this": the rule it would save, shown before the person confirms
        classes: Any = q.options.get("classes")
        self.always_rule = always_rule(classes if isinstance(classes, list) else [], code) if tool == "python" else None
        offered = self.always_rule is not None and not self.always_rule.refused
        self.always = W.Button(description="Always allow code like this…", layout=W.Layout(width="auto",
                               display=None if offered else "none"),
                               tooltip="approve, and save a rule so calls like this run without asking")
        self.always.add_class("agentstack-always")
        self.always.on_click(self._on_always)
        self.always_text = W.HTML(("Saves the rule: <b>" + escape(self.always_rule.description) + "</b>. Built-in "
                                   "denies still apply.") if offered and self.always_rule else "")
        self.scope = W.ToggleButtons(options=[("this session", "session"), ("the whole workspace", "workspace")],
                                     value="session", description="Applies to:", style={"button_width": "auto"})
        self.always_confirm = W.Button(description="Approve and always allow", button_style="primary")
        self.always_confirm.add_class("agentstack-always-confirm")
        self.always_confirm.on_click(lambda _b: self._respond({"approved": True, "always": self.scope.value}))
        self.always_cancel = W.Button(description="Cancel")
        self.always_cancel.on_click(lambda _b: self._show(self.always_box, False))
        self.always_box = W.VBox([self.always_text, self.scope, W.HBox([self.always_confirm, self.always_cancel])],
                                 layout=W.Layout(width="auto", display="none"))
        self.always_box.add_class("agentstack-always-box")
        return [self.heading, self.viewer, self.expand, self.editor, self.diff,
                W.HBox([self.approve, self.reject, self.edit, self.reset, self.cancel_edit, self.try_button, self.always],
                       layout=W.Layout(flex_flow="row wrap")),
                self.dry, self.always_box]

    def _box(self, code: str, *, clamped: bool) -> str:
        """The read-only code: Python highlighted (:mod:`.codeview`), another tool's code plain."""
        return highlighted_box(code, clamped=clamped) if self.tool == "python" else code_box(code, clamped=clamped)

    @staticmethod
    def _show(widget: W.DOMWidget, shown: bool) -> None:
        widget.layout.display = None if shown else "none"

    def show_dry_run(self, report: dict[str, Any]) -> None:
        """Show a dry-run report; Approve now reads "Run it for real"."""
        self.dry.value = dry_run_html(report)
        self._show(self.dry, True)
        self._show(self.try_button, False)
        self.approve.description = "Run it for real"

    def _on_try(self, _b: W.Button) -> None:
        if self._try_first is None or self.trying is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.say("cannot try it here: no event loop is running in this kernel")
            return
        self.try_button.disabled = True
        self.say("trying it in a sandboxed copy of the kernel…")
        self.trying = loop.create_task(self._try())

    async def _try(self) -> None:
        try:
            result = await self._try_first() if self._try_first is not None else None
        except Exception as exc:  # the dry run failed to start or the approval was answered meanwhile: said here
            self.say(f"the dry run did not run: {exc}")
            self.try_button.disabled = False
            self.trying = None
            return
        to_dict = getattr(result, "to_dict", None)
        report: Any = to_dict() if callable(to_dict) else result
        if isinstance(report, dict):
            self.show_dry_run(cast("dict[str, Any]", report))
            self.say("")

    def _on_always(self, _b: W.Button) -> None:
        if self.editor.layout.display != "none" and self.editor.value != self.code:
            self.say("\"always\" applies to the code as asked: approve the edited code without it, or undo the edit")
            return
        self._show(self.always_box, True)

    def _on_expand(self, _b: W.Button) -> None:
        clamped = "clamped" in self.viewer.value[:60]
        self.viewer.value = self._box(self.code, clamped=not clamped)
        lines = len(self.code.splitlines())
        self.expand.description = "Show less" if clamped else f"Show all {lines} lines"

    def _on_approve(self, _b: W.Button) -> None:
        value = self.editor.value
        if not value.strip():
            self.say("the code is empty: type code or Reject")
            return
        self._respond(True if value == self.code else {"approved": True, "code": value})

    def _on_edit(self, _b: W.Button) -> None:  # read-only until now: the code box becomes an editor
        self.viewer.layout.display = "none"
        self.expand.layout.display = "none"
        self.editor.layout.display = None
        self.edit.disabled = True
        for b in (self.reset, self.cancel_edit):
            self._show(b, True)
        self._on_edited()

    def _on_cancel_edit(self, _b: W.Button) -> None:
        """Discard the edits: the read-only code as asked, and Approve runs it."""
        self.editor.value = self.code
        self.editor.layout.display = "none"
        self.viewer.layout.display = None
        long = len(self.code.splitlines()) > CODE_PREVIEW_LINES
        self.expand.layout.display = None if long else "none"
        self.edit.disabled = False
        for b in (self.reset, self.cancel_edit, self.diff):
            self._show(b, False)

    def _on_edited(self, _change: Any = None) -> None:
        """While editing: the diff of the edit against the model's code (hidden while they are equal)."""
        edited = self.editor.value != self.code
        self.diff.value = (f"<b>your edit</b>{diff_html(self.code, self.editor.value, context=1)}" if edited else "")
        self._show(self.diff, edited)
        self.reset.disabled = not edited

    # -- questions ------------------------------------------------------------------------------
    def _question(self) -> list[W.Widget]:
        q = self.query
        self.answer = AnswerBox(on_submit=self.send, layout=W.Layout(width="auto", margin="2px 0"))
        self.answer.add_class("agentstack-answer")
        send = W.Button(description="Send", button_style="primary")
        send.add_class("agentstack-send")
        send.on_click(lambda _b: self.send())
        row = [send]
        for choice in q.options.get("choices") or []:
            b = W.Button(description=str(choice)[:40])
            b.on_click(lambda _b, c=choice: self._respond(c))
            row.append(b)
        label = QUERY_LABELS.get(q.kind, q.kind)
        heading = W.HTML(f"<b>{escape(label)}</b>" + markdown(q.prompt))
        return [heading, self.answer, W.HBox(row)]

    def send(self, value: str | None = None) -> None:
        """Send the typed answer (or ``value``, what Enter submitted); an empty one is refused with a note."""
        value = self.answer.value if value is None else value
        if not value.strip():
            self.say("type an answer first (or pick a choice)")
            return
        self._respond(value)

    # -- state ----------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.note.value = f'<span class="agentstack-hint">{escape(text)}</span>' if text else ""

    def close(self) -> None:
        """Close the card's widgets (their comms do not pile up)."""
        _close([self.box])


def _close(widgets: Any) -> None:
    for widget in widgets:
        _close(getattr(widget, "children", ()) or ())
        widget.close()
