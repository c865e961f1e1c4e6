"""The extension in an in-process IPython shell (no kernel): loading is light, scripts run headless."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from agentstack_lab.notebook.magics import AgentRunFailed, await_transformer, magic_call_transformer
from tests.notebook_helpers import ASKING_PROVIDER


@pytest.mark.slow
def test_load_ext_imports_nothing_heavy():
    probe = ("import sys, json\nfrom IPython.core.interactiveshell import InteractiveShell\n"
             "sh = InteractiveShell.instance()\nsh.run_line_magic('load_ext', 'agentstack_lab')\n"
             "heavy = ('pandas', 'anthropic', 'openai', 'nbclient', 'ipywidgets', 'numpy', 'agentstack_lab.engine')\n"
             "print(json.dumps({'heavy': [m for m in heavy if m in sys.modules],\n"
             "                  'magics': sorted(k for k in sh.magics_manager.magics['line'] if k in ('agent', 'memory'))}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"heavy": [], "magics": ["agent", "memory"]}


def test_without_a_loop_the_run_completes_headless(shell, capsys):
    shell.user_ns["sales"] = [3, 5, 8]
    run = shell.run_line_magic("agent", "--auto-approve --no-subagents --max-depth 0 what about @sales?")
    assert run.status == "completed" and run.result.startswith("[offline scripted demo]")
    assert "running to completion, headless" in capsys.readouterr().err
    frame = run.events_frame(full=True)
    assert list(frame.columns[:3]) == ["seq", "type", "agentId"] and frame["seq"].is_monotonic_increasing
    assert frame["type"].iloc[-1] in ("agent-completed", "agent-state")
    compact = run.events_frame()  # a first look: four columns, deltas merged, no ids
    assert list(compact.columns) == ["time", "agent", "event", "text"] and len(compact) < len(frame)
    assert compact["time"].iloc[0] == 0 and compact["time"].is_monotonic_increasing
    assert compact["agent"].iloc[0] == "researcher" and run.id not in compact.to_string()
    assert "completed" in compact["text"].tolist() or "agent-completed" in compact["event"].tolist()


def test_failed_headless_run_raises_one_line(shell):
    shell.run_cell(ASKING_PROVIDER)
    with pytest.raises(AgentRunFailed) as info:  # it asks a clarification: nobody can answer
        shell.run_line_magic("agent", "--wait --provider @asking --no-subagents which year?")
    assert info.value._render_traceback_()[0].startswith("AgentRunFailed: HeadlessQueryError: ")
    assert info.value.run.status == "failed"


def test_usage_errors_and_unload(shell):
    with pytest.raises(UsageError, match="unknown agent type 'nope'"):
        shell.run_line_magic("agent", "--type nope hi")
    assert magic_call_transformer in shell.input_transformers_cleanup
    assert await_transformer in shell.input_transformers_post
    shell.run_line_magic("unload_ext", "agentstack_lab")
    assert magic_call_transformer not in shell.input_transformers_cleanup
    assert await_transformer not in shell.input_transformers_post
    shell.run_line_magic("load_ext", "agentstack_lab")


def test_help_syntax_does_not_swallow_questions(shell):
    code = shell.transform_cell("%agent how are sales trending in df?")
    assert code == "get_ipython().run_line_magic('agent', 'how are sales trending in df?')\n"


def test_session_by_name_is_started_once_and_reused(shell, capsys):
    first = shell.run_line_magic("agent", "--session analysis --auto-approve --no-subagents --max-depth 0 hi")
    assert "started session 'analysis'" in capsys.readouterr().out
    second = shell.run_line_magic("agent", "--session analysis --auto-approve --no-subagents --max-depth 0 again")
    assert "started session" not in capsys.readouterr().out
    assert first.session_id == second.session_id
    third = shell.run_line_magic("agent", f"--session {first.session_id} --auto-approve --no-subagents --max-depth 0 x")
    assert third.session_id == first.session_id


def test_executor_option_and_continue_without_a_loop(shell, capsys):
    """``--executor subprocess`` is honoured (it isolates agent code); ``--continue`` works headless too."""
    first = shell.run_line_magic("agent", "--auto-approve --no-subagents --executor subprocess how big is the sun?")
    assert first.status == "completed" and first.executor.name == "subprocess"
    live = shell.run_line_magic("agent", "--auto-approve --no-subagents what is the moon?")
    assert live.executor.name == "live"
    follow = shell.run_line_magic("agent", "--continue --no-subagents and the earth?")
    assert follow.status == "completed" and follow.tree["metadata"]["continues"] == live.id
    assert "(a follow-up to: what is the moon?)" in follow.result
    # live's own session ended with it (memory notes included); the follow-up ran in, and ended, its own
    assert follow._core.owns_session and follow.session_id != live.session_id


def test_a_run_records_the_cell_that_started_it(shell):
    """JupyterLab and Notebook 7 put the cell's id in the execute request; the run's root keeps it (the
    Agents panel's link opens the notebook at that cell), a follow-up keeps its own cell's."""
    shell.parent_header = {"header": {"msg_id": "m1"}, "metadata": {"cellId": "cell-first"}}
    first = shell.run_line_magic("agent", "--auto-approve --no-subagents what is the moon?")
    assert first.tree["metadata"]["cellId"] == "cell-first"
    shell.parent_header = {"header": {"msg_id": "m2"}, "metadata": {"cellId": "cell-second"}}
    follow = shell.run_line_magic("agent", "--continue --no-subagents and the earth?")
    assert follow.tree["metadata"]["cellId"] == "cell-second"
    shell.parent_header = {}
    plain = shell.run_line_magic("agent", "--auto-approve --no-subagents and the sun?")
    assert "cellId" not in plain.tree["metadata"]
