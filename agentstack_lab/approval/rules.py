"""Ordered allow / ask / deny rules over a cell's classes: the obvious cases decided without a person.

The rules of a run are the default ``allow-read-only`` (allow when the only class is ``read_only``;
``approval.allow_read_only: false`` drops it), then the workspace's ``approval.rules`` in order (a rule
with a ``session`` applies only to runs of that session); the **last** matching rule wins, as in
pydantic-ai's permission policy. Rules a person saved with "Always allow code like this" come last
(:mod:`agentstack_lab.approval.saved`). No match: a person is asked.

Above them sits the built-in deny list (:data:`BUILTIN_DENIES`: subprocess and signals, network,
deletes, writes outside the working folder). A built-in deny that matches refuses the call unless the
rule that decided names it in ``lifts`` (an explicit, named exception, never a side effect of a broad
``allow``). ``auto_approve`` answers the "ask" cases only: it lifts no deny (see the engine's gate).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from agentstack_lab.approval.classify import Classification, classify
from agentstack_lab.config import DEFAULT_RULE_IDS, ApprovalConfig, ApprovalRuleConfig, BuiltinDeny, CodeClass

__all__ = ["Action", "Rule", "Verdict", "ApprovalPolicy", "BUILTIN_DENIES", "DEFAULT_RULES"]

Action = Literal["allow", "ask", "deny", "dry_run_then_allow"]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One rule: it matches when every condition it has holds (``any_of``, ``only``, ``code``)."""

    id: str
    action: Action
    any_of: frozenset[CodeClass] | None = None
    only: frozenset[CodeClass] | None = None
    code: re.Pattern[str] | None = None
    lifts: frozenset[str] = frozenset()
    session: str | None = None
    builtin: bool = False
    description: str = ""

    @classmethod
    def from_config(cls, rule: ApprovalRuleConfig) -> Rule:
        return cls(id=rule.id, action=rule.action, any_of=None if rule.any_of is None else frozenset(rule.any_of),
                   only=None if rule.only is None else frozenset(rule.only),
                   code=None if rule.code is None else re.compile(rule.code), lifts=frozenset(rule.lifts),
                   session=rule.session, description=rule.description)

    def matches(self, found: Classification, code: str) -> bool:
        """Whether this rule applies to a cell with these classes and this text."""
        if self.any_of is not None and not (found.classes & self.any_of):
            return False
        if self.only is not None and not found.classes <= self.only:
            return False
        return self.code is None or self.code.search(code) is not None

    def explain(self, found: Classification) -> str:
        """The first reason that made this rule match (for the tool result and the decision)."""
        reasons = found.reasons
        for kind in sorted(self.any_of or self.only or ()):
            if kind in reasons:
                return str(reasons[kind][0])
        return found.summary()


BUILTIN_DENIES: tuple[Rule, ...] = (
    Rule(id="deny-subprocess", action="deny", any_of=frozenset({"subprocess"}), builtin=True,
         description="runs a program or shell command, or signals a process"),
    Rule(id="deny-network", action="deny", any_of=frozenset({"network"}), builtin=True,
         description="reaches the network"),
    Rule(id="deny-delete", action="deny", any_of=frozenset({"file_delete"}), builtin=True,
         description="deletes files or folders (shutil.rmtree, os.remove, Path.unlink)"),
    Rule(id="deny-write-outside", action="deny", any_of=frozenset({"write_outside"}), builtin=True,
         description="writes outside the working folder"),
)
"""The built-in deny list; a rule lifts one only by naming its id in ``lifts``."""

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(id="allow-read-only", action="allow", only=frozenset({"read_only"}), builtin=True,
         description="allow code whose only class is read-only inspection"),
)
assert {r.id for r in BUILTIN_DENIES} == set(get_args(BuiltinDeny))
assert {r.id for r in DEFAULT_RULES} == set(DEFAULT_RULE_IDS)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the rules decided about one cell: ``rule`` is the deciding rule's id (``None``: no rule matched)."""

    action: Action
    rule: str | None
    reason: str
    classification: Classification
    lifted: tuple[str, ...] = field(default=())

    @property
    def classes(self) -> list[str]:
        return sorted(self.classification.classes)

    def to_dict(self) -> dict[str, object]:
        """JSON-able form, as a decision's metadata and the approval card carry it."""
        return {"action": self.action, "rule": self.rule, "reason": self.reason, "classes": self.classes,
                **({"lifted": list(self.lifted)} if self.lifted else {})}


class ApprovalPolicy:
    """The rules of one run (its session's and the workspace's), applied to the cells it wants to run."""

    def __init__(self, rules: Iterable[Rule | ApprovalRuleConfig] = (), *, allow_read_only: bool = True,
                 session_id: str | None = None, saved: Iterable[Rule] = ()):
        own = [r if isinstance(r, Rule) else Rule.from_config(r) for r in rules]
        self.session_id = session_id
        self.rules: tuple[Rule, ...] = (*(DEFAULT_RULES if allow_read_only else ()),
                                        *(r for r in (*own, *saved) if r.session is None or r.session == session_id))

    @classmethod
    def from_config(cls, config: ApprovalConfig, *, session_id: str | None = None,
                    saved: Iterable[Rule] = ()) -> ApprovalPolicy:
        """The default rule, then the config's ``approval.rules``, then ``saved`` (the workspace's saved rules)."""
        return cls(config.rules, allow_read_only=config.allow_read_only, session_id=session_id, saved=saved)

    def decide(self, code: str, *, cwd: str | os.PathLike[str] | None = None) -> Verdict:
        """Classify ``code`` (writes judged against ``cwd``, default: this process's) and apply the rules."""
        found = classify(code, cwd)
        return self.apply(found, code)

    def apply(self, found: Classification, code: str) -> Verdict:
        """The verdict for an already classified cell."""
        winner = next((r for r in reversed(self.rules) if r.matches(found, code)), None)
        lifts = winner.lifts if winner is not None else frozenset[str]()
        hits = [b for b in BUILTIN_DENIES if b.matches(found, code)]
        refused = [b for b in hits if b.id not in lifts]
        if refused:
            first = refused[0]
            return Verdict(action="deny", rule=first.id, classification=found,
                           reason=f"{first.description}: {first.explain(found)}")
        lifted = tuple(b.id for b in hits)
        if winner is None:
            return Verdict(action="ask", rule=None, classification=found, lifted=lifted,
                           reason=f"no rule decides this code: {found.summary()}")
        why = winner.description or f"matches rule {winner.id}"
        return Verdict(action=winner.action, rule=winner.id, classification=found, lifted=lifted,
                       reason=f"{why}: {winner.explain(found)}")
