"""The magics in a real kernel (one nbclient run): errors are one clear line, --wait, %%agent, {name}, %memory,
%agent --continue."""

from __future__ import annotations

import re

import pytest

from tests.notebook_helpers import ASKING_PROVIDER, by_tag, run_cells

pytestmark = pytest.mark.slow

CELLS = {
    "setup": "%load_ext agentstack_lab\nimport pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\nyear = 2024\n"
             + ASKING_PROVIDER,
    "continue-none": "%agent --continue and what about 2023?",
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
    "continue": "r2 = %agent --wait --continue And in {year}?\n"
                "print(r2.status, r2.tree['metadata']['continues'] == r.id, r2.session_id != r.session_id)\n"
                "first = [q for q in r2.provider.requests if q.metadata['agent_id'] == r2.id][0]\n"
                "print([(m.role, m.text()[:24]) for m in first.messages])\nprint(r2.result.splitlines()[0])",
    "busy": "busy = %agent --provider @asking --no-subagents Which year was best?",
    "continue-busy": "%agent --continue and the worst?",
    "busy-stop": "busy.stop()\nawait busy.wait(raise_on_error=False)\nprint(busy.status)",
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
    "mem-bad-mode": "%memory search revenue --mode magic",
    "mem-xss": '%memory store evil "revenue <script>alert(1)</script> **bold**"\n%memory search revenue --mode fts',
    "mem-ns": '%memory store pnote "revenue in a project" -n proj --tags p1\n%memory search revenue --mode fts',
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    work = tmp_path_factory.mktemp("magics")
    nb = run_cells(CELLS, work, store_widget_state=True)
    return {tag: c.outputs for tag, c in by_tag(nb).items()}


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
def test_bad_flags_are_one_line_without_traceback(executed, tag, expected):
    (line,) = _one_line_error(executed[tag])
    assert line == f"UsageError: {expected} (%agent -h for help)"


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
    search = _text(executed["mem-search"]).splitlines()
    assert search[0].split() == ["key", "content", "tags", "score"]  # no namespace column: all in "default"
    assert len(search) == 2 and search[1].startswith("note  Quarterly «revenue» rose  finance, q3  ")  # fts only
    assert "**" not in "".join(search) and "<mark>" not in "".join(search)
    assert "long-note" in _text(executed["mem-search-question"])  # a trailing '?' is part of the query
    (line,) = _one_line_error(executed["mem-missing"])
    assert line == "%memory: no entry 'nope' in namespace 'default'"
    (line,) = _one_line_error(executed["mem-bad"])
    assert line.startswith("UsageError: %memory: error: argument {store,get,search,list,delete,reembed}: invalid choice: 'frobnicate'")
    (line,) = _one_line_error(executed["mem-quote"])
    assert line == "UsageError: %memory: error: unbalanced quotes in the line: No closing quotation (%memory -h for help)"
    listing = _text(executed["mem-delete"])
    assert "deleted 'note' from namespace 'default'" in listing
    assert "other" in listing and "long-note" in listing and " note " not in listing


def _html(outputs):
    (html,) = [o["data"]["text/html"] for o in outputs if "data" in o and "text/html" in o["data"]]
    return html


def test_memory_search_renders_highlights_and_hides_the_default_namespace(executed):
    """Issue 13 item 13: content beside the key, <mark> highlights (not raw **), no default-namespace column."""
    html = _html(executed["mem-search"])
    assert re.findall(r"<th\b[^>]*>(.*?)</th>", html) == ["key", "content", "tags", "score"]
    assert "<mark>revenue</mark>" in html and "**" not in html
    assert html.index(">note<") < html.index("Quarterly <mark>revenue</mark> rose") < html.index(">finance, q3<")
    (line,) = _one_line_error(executed["mem-bad-mode"])
    assert line.startswith("UsageError: %memory search: error: argument --mode: invalid choice: 'magic' (choose from ")
    assert "hybrid" in line and line.endswith("(%memory -h for help)")
    xss = _html(executed["mem-xss"])  # model or user text in memory is escaped; only <mark> survives
    assert "<script" not in xss and "&lt;script&gt;" in xss and "**bold**" in xss  # literal text, not a marker
    ns = _html(executed["mem-ns"])  # a row outside "default": the namespace column appears
    assert re.findall(r"<th\b[^>]*>(.*?)</th>", ns)[-1] == "namespace" and ">proj<" in ns and ">default<" in ns
    assert "pnote" in _text(executed["mem-ns"]) and "proj" in _text(executed["mem-ns"])


def test_continue_follows_up_the_previous_run(executed):
    """Issue 13 item 14: %agent --continue asks in the same conversation (thread, session, link)."""
    (line,) = _one_line_error(executed["continue-none"])
    assert line == ("UsageError: %agent --continue: no earlier %agent run in this kernel to follow up; "
                    "ask with %agent PROMPT first")
    out = _text(executed["continue"], "stdout").splitlines()
    assert out[0] == "completed True True"  # r's own session ended with it: the follow-up has its own
    assert out[1] == ("[('user', 'Describe 2024 and `df`\\n\\n'), ('assistant', '[offline scripted demo] '), "
                      "('user', 'And in 2024?')]")
    assert out[2] == ("[offline scripted demo] This is an offline demo answer to: And in 2024? "
                      "(a follow-up to: Describe 2024 and `df`)")  # the offline demo says what it follows
    (line,) = _one_line_error(executed["continue-busy"])
    assert line.startswith("UsageError: %agent --continue: run ") and " is still " in line
    assert "before asking a follow-up" in line
    assert _text(executed["busy-stop"], "stdout").strip().endswith("stopped")
