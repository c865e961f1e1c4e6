"""Rules a person saved with "Always allow code like this", kept in the workspace database.

An approval answered ``{"approved": True, "always": "session" | "workspace"}`` runs the call and saves
the rule :func:`always_rule` derives from the card's classes: "allow cells that only do: read_only,
rebinds". A cell with a class the classifier cannot name (``unknown``, ``dynamic``) is matched by its
exact text instead, so "always" never turns unknown code into a class of allowed code. A saved rule
never lifts a built-in deny, and code a built-in deny covers gets no saved rule at all
(:func:`always_rule` says why). Saved rules apply after the config's ``approval.rules``; a ``session``
one only to runs of that session.

    rules = SavedRules(ws.db)
    rule = rules.add(always_rule(["read_only", "rebinds"], "x = df.head()"), scope="session",
                     session_id=sid, created_by="alice")
    rules.list()                 # [SavedRule(id="saved-…", …)], oldest first
    rules.remove(rule.id)
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from agentstack_lab.approval.rules import BUILTIN_DENIES, Rule
from agentstack_lab.config import CodeClass
from agentstack_lab.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from agentstack_lab.store.protocol import Database

__all__ = ["Scope", "SCOPES", "AlwaysRule", "SavedRule", "SavedRules", "always_rule", "SavedRuleError",
           "SavedRuleNotFoundError"]

Scope = Literal["session", "workspace"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
_NAMELESS = frozenset({"unknown", "dynamic"})   # classes too vague to allow as a class: the exact code instead
_CLASSES = frozenset(get_args(CodeClass))


class SavedRuleError(UsageError):
    """A saved rule cannot be made or changed that way (bad input; nothing changed)."""


class SavedRuleNotFoundError(NotFoundError):
    """No saved rule with that id."""


@dataclass(frozen=True, kw_only=True)
class AlwaysRule:
    """What "Always allow code like this" would save for one card: shown to the person before they confirm.

    ``refused`` says why no rule can be saved (then the other fields are empty).
    """

    only: tuple[str, ...] = ()
    code: str | None = None
    description: str = ""
    refused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as the REST API and the lab panel show it."""
        return {"only": list(self.only), "code": self.code, "description": self.description, "refused": self.refused}


def always_rule(classes: Iterable[str], code: str) -> AlwaysRule:
    """The rule "always" saves for a cell with these classes and this text (or why it cannot)."""
    found = frozenset(str(c) for c in classes)
    odd = sorted(found - _CLASSES)
    if odd:
        return AlwaysRule(refused=f"unknown code classes {', '.join(odd)}")
    if not found:
        return AlwaysRule(refused="the card names no code classes to match on")
    covered = [b.id for b in BUILTIN_DENIES if b.any_of and found & b.any_of]
    if covered:
        return AlwaysRule(refused=f"a built-in deny covers this code ({', '.join(covered)}); a saved rule never "
                                  "lifts one")
    only = tuple(sorted(found))
    vague = sorted(found & _NAMELESS)
    if vague:
        return AlwaysRule(only=only, code="^" + re.escape(code) + r"\Z",
                          description=f"allow exactly this code again (it does things the classifier cannot "
                                      f"name: {', '.join(vague)})")
    return AlwaysRule(only=only, description=f"allow cells that only do: {', '.join(only)}")


@dataclass(frozen=True, kw_only=True)
class SavedRule:
    """One saved rule, as the ``approval_rules`` table holds it."""

    id: str
    action: str
    only: tuple[str, ...] | None
    any_of: tuple[str, ...] | None
    code: str | None
    scope: Scope
    session_id: str | None
    description: str
    decision_id: str | None
    created_by: str | None
    created_at: float

    def rule(self) -> Rule:
        """The :class:`Rule` the policy applies (never lifting a built-in deny)."""
        return Rule(id=self.id, action=cast("Any", self.action),
                    any_of=None if self.any_of is None else cast("frozenset[Any]", frozenset(self.any_of)),
                    only=None if self.only is None else cast("frozenset[Any]", frozenset(self.only)),
                    code=None if self.code is None else re.compile(self.code),
                    session=self.session_id if self.scope == "session" else None, description=self.description)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (snake_case keys), as the CLI ``--json`` and the REST API return it."""
        out: dict[str, Any] = dict(self.__dict__)
        for key in ("only", "any_of"):
            out[key] = None if out[key] is None else list(out[key])
        return out


_COLUMNS = ("id", "action", "any_of", "only", "code", "scope", "session_id", "description", "decision_id",
            "created_by", "created_at")


def _row(r: Any) -> SavedRule:
    d = dict(zip(_COLUMNS, tuple(r), strict=True))
    for key in ("any_of", "only"):
        d[key] = None if d[key] is None else tuple(json.loads(d[key]))
    return SavedRule(**d)


class SavedRules:
    """The workspace's saved approval rules (``approval_rules``), oldest first."""

    def __init__(self, db: Database):
        self.db = db

    def add(self, rule: AlwaysRule, *, scope: str, session_id: str | None = None, created_by: str | None = None,
            decision_id: str | None = None, action: str = "allow") -> SavedRule:
        """Save ``rule`` for this session or the whole workspace; a refused one is a :class:`SavedRuleError`."""
        if rule.refused:
            raise SavedRuleError(f"no rule saved: {rule.refused}")
        if scope not in SCOPES:
            raise SavedRuleError(f"scope must be session or workspace, got {scope!r}")
        if scope == "session" and not session_id:
            raise SavedRuleError("a session-scoped rule needs the session id")
        saved = SavedRule(id=f"saved-{uuid.uuid4().hex[:8]}", action=action, only=rule.only or None, any_of=None,
                          code=rule.code, scope=scope,
                          session_id=session_id if scope == "session" else None,
                          description=rule.description, decision_id=decision_id, created_by=created_by,
                          created_at=time.time())
        with self.db.transaction() as conn:
            conn.execute(f"INSERT INTO approval_rules ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                         (saved.id, saved.action, None, json.dumps(list(rule.only)) if rule.only else None,
                          saved.code, saved.scope, saved.session_id, saved.description, decision_id, created_by,
                          saved.created_at))
        return saved

    def list(self, *, session_id: str | None = None, applying: bool = False) -> list[SavedRule]:
        """Saved rules, oldest first; ``applying``: only those a run of ``session_id`` applies."""
        rows = [_row(r) for r in self.db.query(f"SELECT {', '.join(_COLUMNS)} FROM approval_rules "
                                               "ORDER BY created_at, rowid")]
        if applying:
            rows = [r for r in rows if r.scope == "workspace" or r.session_id == session_id]
        return rows

    def rules(self, session_id: str | None) -> list[Rule]:
        """The :class:`Rule` objects a run of ``session_id`` applies after its config rules."""
        return [r.rule() for r in self.list(session_id=session_id, applying=True)]

    def get(self, id: str) -> SavedRule:  # noqa: A002
        found = [r for r in self.list() if r.id == id.strip()]
        if not found:
            raise SavedRuleNotFoundError(f"no saved approval rule {id!r} (see `agentstack-lab approval rules`)")
        return found[0]

    def remove(self, id: str) -> SavedRule:  # noqa: A002
        """Delete one saved rule; runs decide by the remaining rules from their next call on."""
        rule = self.get(id)
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM approval_rules WHERE id = ?", (rule.id,))
        return rule
