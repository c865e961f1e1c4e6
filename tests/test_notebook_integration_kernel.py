"""Issue 27 items 17 and 18 in a real kernel (one nbclient run): ``agentstack_lab.workspace()`` is the
workspace ``%agent`` uses, and ``{Err[n]}`` / ``{Out[n]}`` / ``{In[n]}`` / ``{expr}`` fill a prompt
with what the kernel's cells did (execution counts and tracebacks as a kernel numbers and shows them)."""

from __future__ import annotations

import pytest

from tests.notebook_helpers import by_tag, run_cells

pytestmark = pytest.mark.slow

WAIT = "%agent --wait --auto-approve --no-subagents --max-depth 0 "
CELLS = {
    "setup": "%load_ext agentstack_lab\nimport agentstack_lab\nimport pandas as pd\n"
             "df = pd.DataFrame({'region': ['N', 'S'], 'sales': [10, 32]})",
    "register": "ws = agentstack_lab.workspace()\n"
                "ws.agent_types.register({'type': 'poet', 'system_prompt': 'You answer in verse.'})",
    "typed": "poem = " + WAIT + "--type poet a haiku about tides\n"
             "print(poem.status, poem.agent_type, poem.workspace is ws is agentstack_lab.workspace())",
    "value": "df.sales.sum()",
    "fails": "def ratio(a, b):\n    return a / b\nratio(int(df.sales.sum()), 0)",
    "ask": "r = " + WAIT + "Explain {Err[5]} given {Out[4]} from {In[4]} for {df.region.tolist()}\n"
           "print(r.prompt)",
    "latest": "r2 = " + WAIT + "And {Err[-1]}?\nprint(r2.prompt == 'And ' + Err[5] + '?')",
    "unknown": WAIT + "what about {nothing}?",
    "no-error": WAIT + "what about {Err[4]}?",
    "after": "print(len(Err), sorted(Err))\nprint(Err[8])",
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    work = tmp_path_factory.mktemp("nbint")
    return by_tag(run_cells(CELLS, work))


def _stdout(cell):
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == "stdout")


def _errors(cell):
    return [o for o in cell.outputs if o["output_type"] == "error"]


def test_code_and_percent_agent_share_the_kernels_workspace(executed):
    assert not _errors(executed["setup"]) and not _errors(executed["register"])
    assert _stdout(executed["typed"]).splitlines()[-1] == "completed poet True"


def test_err_out_and_in_fill_the_prompt(executed):
    assert [executed[t].execution_count for t in ("value", "fails", "ask")] == [4, 5, 6]
    (shown,) = _errors(executed["fails"])
    assert shown["ename"] == "ZeroDivisionError"
    prompt = _stdout(executed["ask"])
    assert prompt.startswith("Explain ") and prompt.rstrip().endswith(
        " given 42 from df.sales.sum() for ['N', 'S']")
    err = prompt[len("Explain "):prompt.index(" given 42")]
    assert "ZeroDivisionError" in err and "division by zero" in err and "return a / b" in err
    assert "ratio(int(df.sales.sum()), 0)" in err and "Cell In[5]" in err and "\x1b[" not in err  # as shown, no colours
    assert _stdout(executed["latest"]).strip() == "True"


def _shown(cell):
    """What the user sees of a failed cell: stderr (IPython prints a UsageError there) and error outputs."""
    text = "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == "stderr")
    return [line for line in (text + "".join("\n".join(e["traceback"]) for e in _errors(cell))).splitlines()
            if line.strip()]


def test_a_name_the_kernel_lacks_is_one_line(executed):
    assert _shown(executed["unknown"]) == ["UsageError: unknown variable {nothing}: 'nothing' is not defined in the kernel"]
    (missing,) = _shown(executed["no-error"])
    assert missing.startswith("UsageError: {Err[4]} in the prompt failed: cell 4 raised no error (cells with errors: 5")
    # the failed %agent cells are errors too: Err keeps them, as the user saw them (one line)
    assert _stdout(executed["after"]).splitlines() == [
        "3 [5, 8, 9]", "UsageError: unknown variable {nothing}: 'nothing' is not defined in the kernel"]
