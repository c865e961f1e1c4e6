"""The magics in a real kernel (one nbclient run): errors are one clear line, --wait, %%agent, {name}, %memory."""

from __future__ import annotations

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from tests.notebook_helpers import ASKING_PROVIDER

pytestmark = pytest.mark.slow

CELLS = {
    "setup": "%load_ext agentstack_lab\nimport pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\nyear = 2024\n"
             + ASKING_PROVIDER,
    "bad-flag": "%agent --bogus hi",
    "bad-value": "%agent --max-depth deep hi",
    "bad-type": "%agent --type wizard hi",
    "bad-provider": "%agent --provider nope hi",
    "bad-name": "%agent --wait summarise @missing",
    "bad-interp": "%agent what happened in {nothing}?",
    "missing-key": "%agent --wait --provider anthropic hi",
    "help": "%agent -h",
    "nested-wait": "for i in range(1):\n    %agent --wait hi",
    "fail-closed": "%agent --wait --provider @asking --no-subagents What was the best year?",
    "fail-closed-approval": "%agent --wait --provider @asking --no-subagents --answer clarification=2023 Best year?",
    "cell-magic": "%%agent --wait --auto-approve --provider @asking --no-subagents --answer clarification=2023\n"
                  "What was\nthe best year in {year}?",
    "cell-result": "print(_.status, _.result.split('.')[0], answer_year)\nprint(_.prompt)",
    "interp": "r = %agent --wait --auto-approve --no-subagents --max-depth 0 Describe {year} and @df\n"
              "print(r.status)\nprint(r.prompt)",
    "frame": "print(r.events_frame(full=True).columns[:3].tolist(), len(r.events_frame(full=True)) == len(r.events),"
             " r.events_frame().columns.tolist())",
    "mem-store": '%memory store note "Quarterly revenue rose" --tags finance,q3\n'
                 "%memory store other Unrelated text about weather",
    "mem-cell": "%%memory store long-note\nLine one about churn.\nLine two about retention?",
    "mem-get": "%memory get long-note",
    "mem-search": "%memory search revenue --mode fts --limit 3",
    "mem-search-question": "%memory search what about churn?",
    "mem-missing": "%memory get nope",
    "mem-bad": "%memory frobnicate",
    "mem-quote": '%memory search "unbalanced',
    "mem-delete": "%memory delete note\n%memory list",
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    work = tmp_path_factory.mktemp("magics")
    nb = new_notebook(cells=[new_code_cell(src, metadata={"tags": [tag]}) for tag, src in CELLS.items()])
    NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True, store_widget_state=True,
                   resources={"metadata": {"path": str(work)}}).execute()
    return {c.metadata["tags"][0]: c.outputs for c in nb.cells}


def _text(outputs, name=None):
    parts = []
    for o in outputs:
        if o["output_type"] == "stream" and (name is None or o["name"] == name):
            parts.append(o["text"])
        elif o["output_type"] == "error" and name in (None, "error"):
            parts.append("\n".join(o["traceback"]))
        elif "data" in o and name is None:
            parts.append(o["data"].get("text/plain", ""))
    return "".join(parts)


def _one_line_error(outputs):
    """The error a user sees: exactly one line, no traceback frames."""
    errors = [o for o in outputs if o["output_type"] == "error"]
    shown = _text(outputs, "stderr") + "".join("\n".join(e["traceback"]) for e in errors)
    lines = [ln for ln in shown.splitlines() if ln.strip() and not ln.startswith("agentstack-lab: using database")]
    assert "Traceback" not in shown and "File " not in shown, shown
    return lines


def test_setup_ran(executed):
    assert not [o for o in executed["setup"] if o["output_type"] == "error"]


@pytest.mark.parametrize("tag, expected", [
    ("bad-flag", "%agent: error: unrecognized arguments: --bogus"),
    ("bad-value", "%agent: error: argument --max-depth: expected an integer between 0 and 2**63-1, got 'deep'"),
])
def test_bad_flags_print_usage_without_traceback(executed, tag, expected):
    lines = _one_line_error(executed[tag])
    assert lines[0].startswith("UsageError: usage: %agent [options] PROMPT")
    assert lines[-1] == expected


def test_unknown_type_provider_and_names_are_one_line(executed):
    (line,) = _one_line_error(executed["bad-type"])
    assert line.startswith("UsageError: unknown agent type 'wizard'; valid types: ") and "researcher" in line
    (line,) = _one_line_error(executed["bad-provider"])
    assert line.startswith("UsageError: unknown provider 'nope'; valid providers: ") and "anthropic" in line
    assert "scripted" in line
    (line,) = _one_line_error(executed["bad-name"])
    assert line == "UsageError: unknown variable @missing: 'missing' is not defined in the kernel"
    (line,) = _one_line_error(executed["bad-interp"])
    assert line == "UsageError: unknown variable {nothing}: 'nothing' is not defined in the kernel"
    (line,) = _one_line_error(executed["missing-key"])
    assert line.startswith("UsageError: provider 'anthropic': ") and "ANTHROPIC_API_KEY" in line
    (line,) = _one_line_error(executed["nested-wait"])
    assert line.startswith("UsageError: %agent --wait must be a top-level statement")


def test_help_is_printed_not_raised(executed):
    text = _text(executed["help"], "stdout")
    assert text.startswith("usage: %agent [options] PROMPT") and "--auto-approve" in text and "--executor" in text


@pytest.mark.parametrize(("tag", "kind"), [("fail-closed", "clarification"), ("fail-closed-approval", "approval")])
def test_headless_query_fails_closed_with_one_line(executed, tag, kind):
    """README: without answers or --auto-approve, ``--wait`` fails closed "with one line" (no tree after it)."""
    outputs = executed[tag]
    (line,) = _one_line_error(outputs)
    assert line.startswith("AgentRunFailed: HeadlessQueryError: ") and f"{'an' if kind == 'approval' else 'a'} {kind} query" in line
    shown = [o for o in outputs if o["output_type"] in ("display_data", "execute_result")]
    assert not [o for o in shown if any(str(v).strip() for v in o["data"].values())], shown  # the live tree is blanked
    assert not [ln for ln in _text(outputs, "stdout").splitlines() if not ln.startswith("agentstack-lab: using database")]


def test_cell_magic_with_answers_up_front(executed):
    out = _text(executed["cell-result"], "stdout").splitlines()
    assert out[0] == "completed The year is **2024** 2024"
    assert out[1] == "What was"  # the cell body is the prompt, {year} interpolated
    assert out[2] == "the best year in 2024?"


def test_interpolation_and_variable_description(executed):
    out = _text(executed["interp"], "stdout")
    assert out.startswith("completed\nDescribe 2024 and `df`\n\nKernel variables")
    assert "`df`: pandas.DataFrame, shape (3, 1)" in out
    assert _text(executed["frame"], "stdout").strip() == "['seq', 'type', 'agentId'] True ['time', 'agent', 'event', 'text']"


def test_memory_magics(executed):
    assert _text(executed["mem-store"], "stdout").splitlines() == [
        "stored 'note' in namespace 'default'", "stored 'other' in namespace 'default'"]
    assert _text(executed["mem-cell"], "stdout").strip() == "stored 'long-note' in namespace 'default'"
    got = _text(executed["mem-get"])
    assert "long-note" in got and "Line one about churn." in got
    search = _text(executed["mem-search"])
    assert "0  note" in search and "\n1 " not in search and "weather" not in search  # fts: the keyword match only
    assert "Quarterly **revenue** rose" in search and "<mark>" not in search  # snippet: plain text, match marked
    assert "long-note" in _text(executed["mem-search-question"])  # a trailing '?' is part of the query
    (line,) = _one_line_error(executed["mem-missing"])
    assert line == "%memory: no entry 'nope' in namespace 'default'"
    lines = _one_line_error(executed["mem-bad"])
    assert lines[0].startswith("UsageError: usage: %memory") and "invalid choice: 'frobnicate'" in lines[-1]
    lines = _one_line_error(executed["mem-quote"])
    assert lines[-1] == "%memory: error: No closing quotation"
    listing = _text(executed["mem-delete"])
    assert "deleted 'note' from namespace 'default'" in listing
    assert "other" in listing and "long-note" in listing and " note " not in listing
