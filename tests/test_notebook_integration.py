"""Issue 27 items 17 and 18 in an in-process IPython shell: one workspace that code and ``%agent``
share, and prompt interpolation as IPython users expect (``{expr}``, ``In``/``Out``/``Err``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

import agentstack_lab
from agentstack_lab.notebook.magics import _magics

LINE = "--wait --auto-approve --no-subagents --max-depth 0 "


def cell(sh, source):
    """Run a cell as a notebook does (history stored, so it has an execution count, In and Out)."""
    result = sh.run_cell(source, store_history=True)
    return result


def test_code_and_magics_share_one_workspace(shell, capsys):
    made = cell(shell, "import agentstack_lab\nws = agentstack_lab.workspace()\n"
                       "ws.agent_types.register({'type': 'poet', 'system_prompt': 'You answer in verse.'})\n"
                       "from agentstack_lab.providers.scripted import ScriptedProvider\n"
                       "ws.providers.register('mine', lambda config=None, **kw: ScriptedProvider())")
    assert made.success, made.error_in_exec
    ws = shell.user_ns["ws"]
    assert agentstack_lab.workspace() is ws and _magics(shell).workspace is ws  # one object, whoever asks
    run = shell.run_line_magic("agent", LINE + "--type poet --provider mine a haiku about tides")
    assert run.status == "completed" and run.agent_type == "poet" and run.workspace is ws
    assert run.provider.name == "scripted"
    shell.run_line_magic("unload_ext", "agentstack_lab")  # closes it; the next use opens the folder's again
    shell.run_line_magic("load_ext", "agentstack_lab")
    fresh = agentstack_lab.workspace()
    assert fresh is not ws and fresh.db_path == ws.db_path and not fresh.agent_types.has("poet")
    assert capsys.readouterr().out.count("agentstack-lab: using database") <= 1  # announced once per process


@pytest.mark.slow
def test_outside_ipython_workspace_opens_the_folders_own(tmp_path):
    probe = ("import sys, json, os\nimport agentstack_lab\nheavy = ('pandas', 'IPython', 'agentstack_lab.engine', "
             "'agentstack_lab.workspace')\nbefore = [m for m in heavy if m in sys.modules]\n"
             "a, b = agentstack_lab.workspace(), agentstack_lab.workspace()\n"
             "from agentstack_lab.workspace import Workspace\n"
             "print(json.dumps({'before': before, 'same': a is b, 'type': isinstance(a, Workspace),"
             " 'root': str(a.root), 'cwd': os.getcwd(), 'ipython': 'IPython' in sys.modules,"
             " 'module': agentstack_lab.workspace.Workspace is Workspace}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    got = json.loads(out.stdout)
    assert got["before"] == [] and not got["ipython"]  # `import agentstack_lab` stays light
    assert got["type"] and not got["same"] and got["root"] == got["cwd"] and got["module"]
    assert not out.stderr  # nothing opened the database, so nothing announced


def test_prompt_expressions_in_out_and_err(shell, capsys):
    cell(shell, "import pandas as pd\ndf = pd.DataFrame({'region': ['N', 'S'], 'sales': [10, 32]})\n"
                "def top(frame):\n    return frame.sales.max()")
    out_count = shell.execution_count
    cell(shell, "6 * 7")
    fail_count = shell.execution_count
    cell(shell, "top(undefined_frame)")
    assert shell.user_ns["Out"][out_count] == 42
    err = shell.user_ns["Err"][fail_count]
    assert "NameError" in err and "undefined_frame" in err and "\x1b[" not in err
    assert shell.user_ns["Err"][-1] == err and "Err" not in shell.run_line_magic("who_ls", "")
    run = shell.run_line_magic("agent", LINE + "Rows {df.shape[0]}, best {top(df)} in {df.region[1]!r}; "
                                       f"{{Out[{out_count}]:>5}}; ran {{In[{out_count}]}}; "
                                       f"failed with {{Err[{fail_count}]}}; literal {{{{x}}}}")
    first, _, rest = run.prompt.partition("; failed with ")
    assert first == f"Rows 2, best 32 in 'S';    42; ran {shell.user_ns['In'][out_count]}"
    assert rest.startswith(err) and rest.endswith("; literal {x}")
    capsys.readouterr()


@pytest.mark.parametrize("prompt, message", [
    ("what about {nothing}?", "unknown variable {nothing}: 'nothing' is not defined in the kernel"),
    ("{df.nope}", "{df.nope} in the prompt failed: AttributeError: 'dict' object has no attribute 'nope'"),
    ("see {Err[99]}", "{Err[99]} in the prompt failed: cell 99 raised no error (cells with errors: "),
    ('json {"a": true}', 'in the prompt failed: '),
    ("a {b c} d", "{b c} in the prompt is not a Python expression: write {{ and }} for literal braces"),
    ("open { brace", "unmatched '{' at character 6 of the prompt: write {{ for a literal brace"),
])
def test_a_field_that_cannot_be_filled_is_one_line_and_nothing_runs(shell, prompt, message):
    shell.user_ns["df"] = {"a": 1}
    magics = _magics(shell)
    before = magics.last_run
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("agent", LINE + prompt)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert magics.last_run is before  # no run was made


@pytest.mark.slow
def test_subprocess_executor_says_it_cannot_see_attached_variables(shell, capsys):
    shell.user_ns.update(df=[1, 2, 3], rate=0.2)
    run = shell.run_line_magic("agent", LINE + "--executor subprocess how is @df growing at @rate? {len(df)} rows")
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("%agent:")]
    assert err[-1] == ("%agent: the subprocess executor cannot see df, rate: the agent gets their description only "
                       "(--executor live runs its code in this kernel)")
    assert "3 rows" in run.prompt and "your python tool runs in a separate process" in run.prompt
    live = shell.run_line_magic("agent", LINE + "how is @df growing?")
    assert "from the user's Python session" in live.prompt
    assert not [line for line in capsys.readouterr().err.splitlines() if "cannot see" in line]
