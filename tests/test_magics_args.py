"""Parsing of %agent / %memory lines and kernel-variable context (no kernel needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agentstack_lab.notebook.args import AgentArgs, MagicUsageError, parse_agent_line, parse_memory_line
from agentstack_lab.notebook.context import UnknownVariableError, build_prompt, describe, interpolate
from agentstack_lab.notebook.magics import await_transformer


def test_prompt_is_kept_verbatim_after_options():
    args = parse_agent_line("--type analyst -p scripted --max-depth 1 --no-subagents --auto-approve --wait "
                            "--session s1 --executor subprocess --answer clarification=2024 "
                            "what's the trend in {year} for @df? use --flags literally")
    assert args == AgentArgs(prompt="what's the trend in {year} for @df? use --flags literally", type="analyst",
                             provider="scripted", max_depth=1, subagents=False, auto_approve=True, wait=True,
                             session="s1", executor="subprocess", answers={"clarification": "2024"})


def test_equals_form_quotes_and_double_dash():
    args = parse_agent_line('--model="claude x" --max-agents=3 -- --not-an-option is the prompt')
    assert (args.model, args.max_agents, args.prompt) == ("claude x", 3, "--not-an-option is the prompt")


def test_cell_body_is_the_prompt():
    args = parse_agent_line("--wait", "Summarise\n  this data\n")
    assert args.prompt == "Summarise\n  this data" and args.wait


@pytest.mark.parametrize("line, cell, reason", [
    ("--bogus hi", None, "unrecognized arguments: --bogus"),
    ("--max-depth two hi", None, "--max-depth: expected an integer between 0 and 2**63-1, got 'two'"),
    ("--max-depth -1 hi", None, "--max-depth"),
    ("--executor docker hi", None, "invalid choice: 'docker'"),
    ("--answer approval=yes hi", None, "KIND=TEXT"),
    ("--wait", None, "a PROMPT is required"),
    ("--wait extra", "body", "unexpected text after the options"),
])
def test_bad_lines_raise_usage(line, cell, reason):
    with pytest.raises(MagicUsageError) as info:
        parse_agent_line(line, cell)
    text = str(info.value)
    assert "\n" not in text and text.startswith("%agent: error: ") and reason in text  # one line, no usage block
    assert text.endswith("(%agent -h for help)")
    assert not info.value.help


def test_help_is_flagged():
    with pytest.raises(MagicUsageError) as info:
        parse_agent_line("-h")
    assert info.value.help and "--auto-approve" in str(info.value)


def test_memory_lines():
    a = parse_memory_line('store churn "customers leave after 3 months" --tags a,b -n proj')
    assert (a.command, a.key, a.text, a.tags, a.namespace) == ("store", "churn", "customers leave after 3 months",
                                                              ("a", "b"), "proj")
    assert parse_memory_line("store k", "body text\n").text == "body text"
    s = parse_memory_line("search churn rate --mode fts --limit 3")
    assert (s.query, s.mode, s.limit) == ("churn rate", "fts", 3)
    assert parse_memory_line("list --limit 5 --offset 5").offset == 5
    for bad, reason in [("", "usage"), ("frobnicate", "invalid choice"), ("store k", "store needs TEXT"),
                        ("search x --mode magic", "invalid choice"), ("get", "required: key"),
                        ('store k "unclosed', "No closing quotation"), ("get k", "only `%%memory store")]:
        with pytest.raises(MagicUsageError, match=reason):
            parse_memory_line(bad, "cell" if bad == "get k" else None)


@pytest.mark.parametrize("line, expected", [
    ("search x --mode magic", "%memory search: error: argument --mode: invalid choice: 'magic' (choose from "),
    ("search x --limit many", "%memory search: error: argument --limit: expected an integer"),
    ("get", "%memory get: error: the following arguments are required: key"),
    ("frobnicate", "%memory: error: argument {store,get,search,list,delete,reembed}: invalid choice: 'frobnicate'"),
    ("list --bogus", "%memory: error: unrecognized arguments: --bogus"),
    ('store k "unclosed', "%memory: error: unbalanced quotes in the line: No closing quotation"),
])
def test_memory_errors_are_one_line_naming_what_was_wrong(line, expected):
    with pytest.raises(MagicUsageError) as info:
        parse_memory_line(line)
    text = str(info.value)
    assert "\n" not in text and "usage:" not in text and text.startswith(expected), text
    assert text.endswith("(%memory -h for help)") and not info.value.help


def test_memory_subcommand_help():
    with pytest.raises(MagicUsageError) as info:
        parse_memory_line("search -h")
    assert info.value.help and "--mode" in str(info.value) and "--threshold" in str(info.value)


def test_continue_flag():
    args = parse_agent_line("--continue --max-depth 1 and what about {year}?")
    assert args.follow_up and args.max_depth == 1 and args.prompt == "and what about {year}?"
    assert not parse_agent_line("what should I continue with?").follow_up


def test_given_options_are_what_the_line_set():
    """Only flags the line gives reach the run (the config fills the rest); --continue overrides with them."""
    assert parse_agent_line("q").given_options() == {}
    args = parse_agent_line("--max-depth 2 --auto-approve --timeout 5 --coordinate --replay c.json q")
    assert args.given_options() == {"max_depth": 2, "auto_approve": True, "timeout_s": 5.0, "coordinate": True,
                                    "replay": "c.json"}


def test_interpolation_and_descriptions():
    df = pd.DataFrame({"region": ["N", "S", "E"], "sales": [10, 20, 30]})

    def growth(rate: float, years: int = 1) -> float:
        """Compound growth factor.

        Long details that should not be included.
        """
        return (1 + rate) ** years

    ns = {"df": df, "arr": np.zeros((4, 2), dtype="float32"), "growth": growth, "year": 2024, "big": "x" * 5000,
          "d": {"a": list(range(100))}}
    assert interpolate("in {year} {{literal}} {{\"json\": 1}}", ns) == 'in 2024 {literal} {"json": 1}'
    assert len(interpolate("{big}", ns)) < 2100
    prompt = build_prompt("How do @df and @arr relate in {year}? see @growth, email a@b.com, @d", ns)
    assert prompt.startswith("How do `df` and `arr` relate in 2024? see `growth`, email a@b.com, `d`")
    assert "`df`: pandas.DataFrame, shape (3, 2)" in prompt and "region: object" in prompt.replace("str", "object")
    assert "sales: int64" in prompt and "  region  sales" in prompt
    assert "`arr`: numpy.ndarray, shape (4, 2), dtype float32" in prompt
    assert "function `growth(rate: float, years: int = 1) -> float`" in prompt
    assert "Compound growth factor." in prompt and "Long details" not in prompt
    assert "`d`: dict, length 1 = {'a': [0, 1, 2," in prompt and len(describe("d", ns["d"])) < 700


@pytest.mark.parametrize("prompt, name", [("look at @nope", "@nope"), ("value {missing}", "{missing}")])
def test_unknown_names_are_clear(prompt, name):
    with pytest.raises(UnknownVariableError, match=f"unknown variable {name}: .* is not defined in the kernel"):
        build_prompt(prompt, {"df": 1})


def test_await_transformer_rewrites_only_top_level_wait_calls():
    line = "get_ipython().run_line_magic('agent', '--wait --auto-approve hi @df')\n"
    out = await_transformer([line])[0]
    assert out.startswith("await __import__('agentstack_lab.notebook.magics'") and out.endswith(
        ".agent_awaitable(get_ipython(), '--wait --auto-approve hi @df')\n")
    assigned = await_transformer(["run = get_ipython().run_line_magic('agent', '--wait x')"])[0]
    assert assigned.startswith("run = await __import__(")
    cell = "get_ipython().run_cell_magic('agent', '--wait', 'long\\nprompt\\n')\n"
    assert "agent_awaitable(get_ipython(), '--wait', 'long\\nprompt\\n')" in await_transformer([cell])[0]
    untouched = [
        "get_ipython().run_line_magic('agent', 'no wait here --wait')\n",  # --wait inside the prompt
        "    get_ipython().run_line_magic('agent', '--wait x')\n",  # indented: not top level
        "get_ipython().run_line_magic('memory', 'list --wait')\n",
        "x = 1\n",
    ]
    assert await_transformer(untouched) == untouched


def test_fields_are_python_expressions_as_in_ipython():
    """Issue 27 item 18: attributes, indexing, calls, conversions and specs; literal braces only when doubled."""
    from agentstack_lab.notebook.cellerrors import ErrorLog
    from agentstack_lab.notebook.context import PromptError, Traceback

    err = ErrorLog({3: Traceback("Traceback line\n" + "frame\n" * 600 + "ZeroDivisionError: division by zero")})
    ns = {"d": {"k": [1, 2, 3]}, "s": "hello", "rate": 0.125, "Err": err, "Out": {2: 42}, "In": ["", "x = 1\n"]}
    assert interpolate("{d['k'][1:]} {s.upper()} {len(s)} {rate:.1%} {s!r} {s!r:>9} {Out[2]} {In[1]}", ns) == \
        "[2, 3] HELLO 5 12.5% 'hello'   'hello' 42 x = 1\n"
    assert interpolate("{ {'a': 1}['a'] } {{x}} }", ns) == "1 {x} }"  # nested braces; a lone } is itself
    tail = interpolate("{Err[3]}", ns)
    assert tail.endswith("ZeroDivisionError: division by zero") and tail.startswith("[")  # a traceback keeps its end
    assert interpolate("{Err[-1]}", ns) == tail and len(tail) < 2100
    assert interpolate("{d}", {"d": "x" * 5000}).endswith("… [3000 more characters]")  # other values keep the start
    for prompt, message in [("{Err[4]}", "cell 4 raised no error (cells with errors: 3)"),
                            ("{'a': 1}", "(write {{ and }} for literal braces)"),
                            ("{s.nope()}", "AttributeError: 'str' object has no attribute 'nope'"),
                            ("{rate:q}", "ValueError: Unknown format code 'q'")]:
        with pytest.raises(PromptError) as info:
            interpolate(prompt, ns)
        assert message in str(info.value) and "\n" not in str(info.value)
    assert not isinstance(PromptError("x"), UnknownVariableError)
