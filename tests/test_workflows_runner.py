"""Phase runner, report model and schema, parameter parsing and injection (no kernels)."""

from __future__ import annotations

import ast
import json
import warnings

import nbformat
import pytest

from agentstack_lab.workflows.model import Finding, WorkflowConfig
from agentstack_lab.workflows.params import (
    ParameterError,
    UndeclaredParameterWarning,
    declared_parameters,
    inject_parameters,
    load_params_file,
    parse_value,
    parse_yaml_text,
    render_literal,
)
from agentstack_lab.workflows.runner import PhaseError, PhaseRunner
from agentstack_lab.workflows.schema import ReportValidationError, validate_report

ALL = ("inventory", "analysis", "sync", "consistency", "adversarial", "reconciliation")


def _runner(adversarial_results, max_iterations=3, calls=None):
    calls = calls if calls is not None else []
    outcomes = iter(adversarial_results)

    def record(name):
        def fn(scope):
            calls.append((name, scope.iteration))
        return fn

    async def adversarial(scope):
        calls.append(("adversarial", scope.iteration))
        ok = next(outcomes)
        if not ok:
            scope.finding("docs match code", f"mismatch in pass {scope.iteration}", "high",
                          evidence="README.md:3", file="README.md", line=3)
            scope.fail("still wrong")
        return {"pass": scope.iteration}

    executors = {p: record(p) for p in ALL if p != "adversarial"}
    executors["adversarial"] = adversarial
    config = WorkflowConfig(name="t", phases=ALL, max_iterations=max_iterations)
    return PhaseRunner(config, executors), calls


async def test_reconciliation_loop_reruns_sync_and_adversarial_until_pass():
    runner, calls = _runner([False, False, True])
    events = []
    runner.subscribe(lambda e: events.append(e.to_wire()))
    report = await runner.run()
    assert report.verdict == "PASS" and report.iterations == 3
    assert calls == [("inventory", 1), ("analysis", 1), ("sync", 1), ("consistency", 1), ("adversarial", 1),
                     ("reconciliation", 2), ("sync", 2), ("adversarial", 2),
                     ("reconciliation", 3), ("sync", 3), ("adversarial", 3)]
    types = [e["type"] for e in events]
    assert types[0] == "workflow:start" and types[-1] == "workflow:complete"
    assert types.count("finding") == 2 and types.count("phase:start") == types.count("phase:complete") == 11
    finding_events = [e for e in events if e["type"] == "finding"]
    assert [e["data"]["iteration"] for e in finding_events] == [1, 2]
    data = validate_report(json.loads(json.dumps(report.to_dict())))
    assert data["summary"]["findingsBySeverity"] == {"low": 0, "medium": 0, "high": 2}
    assert data["confidence"] == "medium"
    assert [p["phase"] for p in data["phases"]][-3:] == ["reconciliation", "sync", "adversarial"]


async def test_reconciliation_stops_at_max_iterations_with_fail():
    runner, calls = _runner([False] * 5, max_iterations=2)
    report = await runner.run()
    assert report.verdict == "FAIL" and report.iterations == 2
    assert [c for c in calls if c[0] == "adversarial"] == [("adversarial", 1), ("adversarial", 2)]
    assert report.to_dict()["summary"]["findingsTotal"] == 2


async def test_first_pass_pass_needs_no_reconciliation():
    runner, calls = _runner([True])
    report = await runner.run()
    assert report.verdict == "PASS" and report.iterations == 1 and report.confidence == "high"
    assert "reconciliation" not in [c[0] for c in calls]


async def test_without_adversarial_verdict_follows_phase_success():
    def bad(scope):
        scope.finding("x", "y", "low")
        return False

    report = await PhaseRunner(WorkflowConfig(name="t", phases=("inventory", "analysis")),
                               {"analysis": bad}).run()
    assert report.verdict == "FAIL" and report.confidence == "low"
    ok = await PhaseRunner(WorkflowConfig(name="t", phases=("inventory",)), {"inventory": lambda s: None}).run()
    assert ok.verdict == "PASS"


async def test_phase_exception_emits_workflow_error_and_raises():
    def boom(scope):
        raise KeyError("nope")

    runner = PhaseRunner(WorkflowConfig(name="t"), {"analysis": boom})
    with pytest.raises(PhaseError, match="'analysis'.*KeyError"):
        await runner.run()
    assert runner.events[-1].type == "workflow:error"
    assert runner.context.results[-1].error == "KeyError: 'nope'"


def test_bad_configuration_is_rejected_with_names():
    with pytest.raises(ValueError, match="unknown workflow phase"):
        WorkflowConfig(name="t", phases=("inventory", "deploy"))
    with pytest.raises(ValueError, match="max_iterations"):
        WorkflowConfig(name="t", max_iterations=0)
    with pytest.raises(ValueError, match="severity"):
        Finding(claim="a", contradiction="b", severity="critical")
    with pytest.raises(PhaseError, match="returned str"):
        import asyncio

        asyncio.run(PhaseRunner(WorkflowConfig(name="t"), {"inventory": lambda s: "x"}).run())


async def test_schema_rejects_malformed_reports():
    runner, _ = _runner([True])
    good = (await runner.run()).to_dict()
    validate_report(good)
    bad = json.loads(json.dumps(good))
    bad["phases"][0]["findings"] = [{"claim": "a", "contradiction": "b", "severity": "critical", "evidence": []}]
    with pytest.raises(ReportValidationError, match="phases/0/findings/0/severity"):
        validate_report(bad)
    missing = {k: v for k, v in good.items() if k != "verdict"}
    with pytest.raises(ReportValidationError, match="verdict"):
        validate_report(missing)


@pytest.mark.parametrize(("text", "value"), [
    ("3", 3), ("-7", -7), ("2.5", 2.5), ("1e3", 1000.0), ("inf", float("inf")), ("True", True), ("False", False),
    ("None", None), ("false", "false"), ("true", "true"), ("docs/", "docs/"), ("[1, 'a', 2.5]", "[1, 'a', 2.5]"),
    ("{k: [1, 2], n: null}", "{k: [1, 2], n: null}"), ("hello world", "hello world"), ("[1,", "[1,"),
])
def test_parse_value_types_like_papermill(text, value):
    """``-p`` values are typed as papermill's ``_resolve_type`` types them: True/False/None, int, float, else str."""
    import papermill.cli as pm

    assert parse_value("p", text) == value and type(parse_value("p", text)) is type(value)
    assert pm._resolve_type(text) == value and type(pm._resolve_type(text)) is type(value)


def test_nan_is_a_float_and_a_huge_integer_is_refused():
    import math

    assert math.isnan(parse_value("p", "nan"))
    with pytest.raises(ParameterError, match="parameter 'p'.*too long"):
        parse_value("p", "9" * 5000)


def test_parse_value_and_files_fail_clearly(tmp_path):
    with pytest.raises(ParameterError, match="-y is not valid YAML"):
        parse_yaml_text("[1,", "-y")
    with pytest.raises(ParameterError, match="must be a mapping"):
        parse_yaml_text("- 1", "-y")
    assert parse_yaml_text("{k: [1, 2], n: null, t: true}", "-y") == {"k": [1, 2], "n": None, "t": True}
    (tmp_path / "p.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ParameterError, match="must hold a mapping"):
        load_params_file(tmp_path / "p.yaml")
    with pytest.raises(ParameterError, match="not found"):
        load_params_file(tmp_path / "nope.yaml")
    (tmp_path / "ok.yaml").write_text("when: 2024-01-02\nitems: [1, 2]\n")
    assert load_params_file(tmp_path / "ok.yaml") == {"when": "2024-01-02", "items": [1, 2]}


def _nb(param_source="x = 1\nname = 'a'", tags=("parameters",)):
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell(param_source)
    p.metadata["tags"] = list(tags)
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), p, nbformat.v4.new_code_cell("print(x)")]
    return nb


def test_injection_follows_papermill_conventions():
    import papermill.parameterize as pm

    values = {"x": 2, "ratio": 0.25, "flag": True, "name": "q'\"", "items": [1, "a", None],
              "opts": {"k": [1.5, False]}, "nothing": None, "nan": float("nan")}
    src = "x = 1\nratio = 0.5\nflag = False\nname = 'a'\nitems = []\nopts = {}\nnothing = 0\nnan = 0.0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = inject_parameters(_nb(src), values)
    assert [c.metadata.get("tags", []) for c in ours.cells] == [[], ["parameters"], ["injected-parameters"], []]
    assert ours.metadata.papermill["parameters"]["items"] == [1, "a", None]
    assert ours.metadata.papermill["default_parameters"] == {}  # as papermill writes it: never filled
    namespace: dict = {}
    exec(ours.cells[2].source, namespace)
    assert {k: namespace[k] for k in values if k != "nan"} == {k: v for k, v in values.items() if k != "nan"}
    assert namespace["nan"] != namespace["nan"]
    # papermill puts the same cell in the same place with the same values
    theirs_nb = _nb(src)
    for cell in theirs_nb.cells:
        cell.metadata.setdefault("tags", [])
    theirs_nb.metadata["papermill"] = {}
    values.pop("nan")
    theirs = pm.parameterize_notebook(theirs_nb, values, kernel_name="python3", language="python")
    ours = inject_parameters(_nb(src), values)
    assert theirs.cells[2].metadata.tags == ours.cells[2].metadata.tags
    parse = lambda s: {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(s).body}  # noqa: E731
    assert parse(theirs.cells[2].source) == parse(ours.cells[2].source) == values
    # re-injecting replaces the old injected cell
    again = inject_parameters(ours, {"x": 5})
    assert sum("injected-parameters" in c.metadata.get("tags", []) for c in again.cells) == 1
    assert "x = 5" in again.cells[2].source


def test_injection_warns_for_undeclared_names_and_rejects_bad_names():
    with pytest.warns(UndeclaredParameterWarning, match="'zz' is not declared"):
        inject_parameters(_nb(), {"x": 1, "zz": 2})
    with pytest.warns(UndeclaredParameterWarning, match="no cell tagged 'parameters'"):
        out = inject_parameters(_nb(tags=()), {"x": 1})
    assert "injected-parameters" in out.cells[0].metadata["tags"]
    with pytest.raises(ParameterError, match="not a valid Python identifier"):
        inject_parameters(_nb(), {"1x": 1})
    with pytest.raises(ParameterError, match="cannot render set"):
        render_literal({1, 2})
    assert declared_parameters(_nb("a: int = 1\nb, c = 2, 3")) == {"a": "1", "b": "2, 3", "c": "2, 3"}
