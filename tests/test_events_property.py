"""The wire format, property-tested: every event round-trips, and garbage is refused naming the field.

Strategies are derived from each event class's type hints, so a new event type or field is
covered without touching this file. Also: the shared vocabularies are defined once in
``events.py`` and the other modules derive from it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstack_lab import events as ev

CLASSES = [ev.AgentState, ev.TextDelta, ev.ToolCall, ev.ToolResult, ev.UserQuery, ev.AgentCompleted, ev.ErrorEvent,
           ev.StartAgent, ev.UserResponse, ev.UserIntervention, ev.GetAgentTree]

json_scalars = st.none() | st.booleans() | st.integers(-(2 ** 53), 2 ** 53) | st.text(max_size=20) | st.floats(
    allow_nan=False, allow_infinity=False)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=8), inner, max_size=3), max_leaves=8)


def strategy(hint: Any) -> st.SearchStrategy:
    """Values fitting an event field's type hint (the shapes events use)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return json_values
    if origin is Literal:
        return st.sampled_from(typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy(h) for h in typing.get_args(hint)])
    if hint is type(None):
        return st.none()
    if hint is str:
        return st.text(max_size=30)
    if (origin or hint) is dict:
        return st.dictionaries(st.text(max_size=8), json_values, max_size=4)
    raise AssertionError(f"no strategy for {hint!r}")


def events_of(cls: type) -> st.SearchStrategy:
    hints = typing.get_type_hints(cls)
    fields = {f.name: strategy(hints[f.name]) for f in dataclasses.fields(cls) if f.name != "type"}
    return st.builds(cls, **fields)


any_event = st.one_of([events_of(c) for c in CLASSES])


@settings(max_examples=300, deadline=None)
@given(any_event)
def test_every_event_round_trips_through_json(event):
    wire = ev.to_wire(event)
    assert all("_" not in key for key in wire), wire  # camelCase on the wire
    assert ev.from_wire(json.loads(json.dumps(wire))) == event


def _wrong_value(hint: Any) -> Any:
    """A JSON value that does not fit ``hint`` (``None`` marks "anything fits")."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return None
    if origin is Literal:
        return "not-a-valid-choice"
    if origin in (typing.Union, types.UnionType):
        return 12345 if all(h is not int for h in typing.get_args(hint)) else None
    if hint is str:
        return 12345
    if (origin or hint) is dict:
        return ["a", "list"]
    raise AssertionError(hint)


GARBAGE = [(cls, f.name) for cls in CLASSES for f in dataclasses.fields(cls)
           if f.name != "type" and _wrong_value(typing.get_type_hints(cls)[f.name]) is not None]


@settings(max_examples=50, deadline=None)
@given(data=st.data(), case=st.sampled_from(GARBAGE))
def test_a_wrong_value_is_refused_naming_its_wire_field(data, case):
    cls, name = case
    wire = ev.to_wire(data.draw(events_of(cls)))
    key = next(k for k in wire if k.lower() == name.replace("_", ""))
    wire[key] = _wrong_value(typing.get_type_hints(cls)[name])
    with pytest.raises(ev.EventDecodeError) as info:
        ev.from_wire(wire)
    assert f"{wire['type']}: field {key!r}" in str(info.value)


@settings(max_examples=50, deadline=None)
@given(any_event, st.text(min_size=1, max_size=10))
def test_unknown_and_missing_fields_are_named(event, extra):
    wire = ev.to_wire(event)
    if extra not in wire:
        with pytest.raises(ev.EventDecodeError) as info:
            ev.from_wire({**wire, extra: 1})
        assert f"unknown field {extra!r}" in str(info.value)
    required = [f for f in dataclasses.fields(type(event)) if f.name != "type"
                and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for f in required:
        key = next(k for k in wire if k.lower() == f.name.replace("_", ""))
        broken = {k: v for k, v in wire.items() if k != key}
        with pytest.raises(ev.EventDecodeError) as info:
            ev.from_wire(broken)
        assert f"missing field {key!r}" in str(info.value)


@given(json_values)
def test_garbage_is_an_event_decode_error_never_a_crash(value):
    try:
        ev.from_wire(value)
    except ev.EventDecodeError:
        pass


# --- the vocabularies are defined once -----------------------------------------------------------------

def test_vocabularies_are_derived_from_events():
    from agentstack_lab.agents import spawner
    from agentstack_lab.cli.agent import QUERY_KINDS as CLI_KINDS
    from agentstack_lab.cli.agent import STATUS_STYLE
    from agentstack_lab.engine import options
    from agentstack_lab.mcp import tools as mcp_tools
    from agentstack_lab.notebook import args, tree

    assert spawner.TRANSITIONS is ev.TRANSITIONS and spawner.TERMINAL is ev.TERMINAL
    assert spawner.STATUSES == ev.AGENT_STATUSES == tuple(ev.TRANSITIONS)
    assert ev.TERMINAL == {"completed", "failed", "stopped"}
    assert options.QUERY_KINDS is ev.QUERY_KINDS and args.QUERY_KINDS is ev.QUESTION_KINDS
    assert set(ev.QUERY_KINDS) == set(ev.QUESTION_KINDS) | {"approval"}
    assert tree.TERMINAL is ev.TERMINAL and set(tree.STATUS_ICONS) <= set(ev.AGENT_STATUSES)
    assert set(STATUS_STYLE) == set(ev.AGENT_STATUSES) and CLI_KINDS is ev.QUESTION_KINDS
    assert mcp_tools.Status is ev.AgentStatus
    assert ev.RELATIONSHIP_TYPES == ("parent_of", "derived_from", "depends_on", "supersedes")
    assert ev.TOOL_NAMES == ("python", "memory_search", "memory_store")


def test_wire_keys_is_the_casing_rule_for_rows():
    assert ev.wire_keys({"run_id": "r", "input_tokens": 3, "id": "x"}) == {"runId": "r", "inputTokens": 3, "id": "x"}


def _status_copies(source: str, name: str) -> list[str]:
    """Collections of string literals in ``source`` holding three or more agent statuses (a copied vocabulary)."""
    import ast

    statuses = set(ev.AGENT_STATUSES) - {"pending"}  # "pending" is also a decision and task state
    found = []
    for node in ast.walk(ast.parse(source)):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None) \
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else None
        words = {i.value for i in items or () if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if len(words & statuses) >= 3:
            found.append(f"{name}:{node.lineno} {sorted(words & statuses)}")
    return found


def test_no_module_copies_the_status_vocabulary():
    """Statuses are defined once, in events.py; a table keyed by every status (the CLI's colours, the widget's
    icons) is checked against it above and listed here by name."""
    from pathlib import Path

    root = Path(ev.__file__).parent
    allowed = {"cli/agent.py", "notebook/tree.py", "notebook/render.py"}  # per-status presentation tables
    copies = [c for p in sorted(root.rglob("*.py")) if (rel := str(p.relative_to(root))) not in allowed | {"events.py"}
              for c in _status_copies(p.read_text(), rel)]
    assert not copies, copies


def test_the_vocabulary_check_finds_a_stray_copy():
    stray = 'DONE = ("completed", "failed", "stopped")\nif s in {"running", "paused", "waiting_user"}: pass\n'
    assert len(_status_copies(stray, "x.py")) == 2
    assert _status_copies("OK = ('completed', 'pending')\n", "x.py") == []


# --- the lab extension's copy is generated from events.py ----------------------------------------------
_LABEXT = __import__("pathlib").Path(__file__).parent.parent / "labextension"


def _ts_status_copies(source: str, name: str) -> list[str]:
    """Array literals in TypeScript ``source`` holding three or more agent statuses."""
    import re

    statuses = set(ev.AGENT_STATUSES) - {"pending"}
    found = []
    for m in re.finditer(r"\[([^\[\]]*)\]", source):
        words = set(re.findall(r"""['"]([a-z_]+)['"]""", m.group(1)))
        if len(words & statuses) >= 3:
            found.append(f"{name}:{source[:m.start()].count(chr(10)) + 1} {sorted(words & statuses)}")
    return found


def test_the_lab_extension_vocabulary_is_generated_from_events():
    import importlib.util

    spec = importlib.util.spec_from_file_location("labext_vocabulary", _LABEXT / "vocabulary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.TARGET.read_text("utf-8") == module.render(), "run python labextension/vocabulary.py"
    assert '"paused"' in module.render() and "waiting for you" in module.render()


def test_no_lab_extension_source_copies_the_status_vocabulary():
    sources = sorted((_LABEXT / "src").glob("*.ts"))
    assert len(sources) >= 4
    copies = [c for p in sources if p.name != "vocabulary.ts" for c in _ts_status_copies(p.read_text(), p.name)]
    assert not copies, copies
    assert _ts_status_copies("const T = ['completed', 'failed', 'stopped'];", "x.ts")   # the check can fail
