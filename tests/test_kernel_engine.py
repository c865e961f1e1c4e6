"""A real kernel through nbclient: the agent reads a DataFrame from an earlier cell and creates a
variable the next cell uses (live kernel executor, scripted provider, auto-approve)."""

from __future__ import annotations

import pytest

from tests.notebook_helpers import run_cells

pytestmark = pytest.mark.slow


def test_agent_in_a_real_kernel_reads_df_and_creates_a_variable(tmp_path):
    cells = [
        "import pandas as pd\ndf = pd.DataFrame({'sales': [10, 20, 30, 40]})",
        "from agentstack_lab.engine import AgentRun, RunOptions\n"
        "from agentstack_lab.workspace import Workspace\n"
        f"ws = Workspace.open({str(tmp_path)!r}, announce=False)\n"
        "run = AgentRun('how are sales trending in df?', workspace=ws, provider='scripted',\n"
        "               options=RunOptions(auto_approve=True), executor='live')\n"
        "result = await run\n"
        "print(run.status, len(run.tree['children']), 'offline' in result)",
        "print(type(df_summary).__name__, df_summary.loc['mean', 'sales'])",
        # display() from agent code is captured (not shown in the cell); an in-place change is recorded
        "from agentstack_lab.engine.executors import LiveKernelExecutor\n"
        "res = await LiveKernelExecutor().run(\"from IPython.display import display, HTML\\n\"\n"
        "                                     \"display(HTML('<i>agent</i>'))\\ndf['double'] = df['sales'] * 2\")\n"
        "print([b['text/html'] for b in res.display], res.changed_names, list(df.columns))",
    ]
    nb = run_cells(cells, tmp_path, allow_errors=False)

    def text(i):
        return "".join(o.get("text", "") for o in nb.cells[i].outputs if o.get("output_type") == "stream")

    assert text(1) == "completed 3 True\n"  # the agent's own prints were captured, not leaked into the cell
    assert text(2) == "DataFrame 25.0\n"
    assert text(3) == "['<i>agent</i>'] ['df', 'display', 'HTML'] ['sales', 'double']\n"  # imports are new names
    assert [o["output_type"] for o in nb.cells[3].outputs] == ["stream"]  # no display_data leaked into the cell
