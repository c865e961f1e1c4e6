"""The server extension prices runs for the Agents panel: ``GET runs`` and ``GET runs/<id>`` carry the cost in USD.

A real Jupyter server (pytest-jupyter) on a workspace whose ``agentstack.config.json`` prices the scripted
model; the run comes from a CLI process. The figures are checked against the package's own pricing of the
workspace database, so what is pinned is that the server uses the workspace's table and sums per run.
"""

from __future__ import annotations

import asyncio
import json

import pytest

# pytest-jupyter's fixtures, imported here only (as in tests/test_server.py)
from pytest_jupyter.jupyter_core import *  # noqa: E402, F403
from pytest_jupyter.jupyter_server import *  # noqa: E402, F403
from pytest_jupyter.pytest_tornasync import *  # noqa: E402, F403

from agentstack_lab.providers.prices import PriceTable
from tests.test_server import _cli, _get

pytestmark = pytest.mark.slow  # a CLI process runs the agent
PRICES = {"scripted": {"*": {"input": 3, "output": 15}}}


@pytest.fixture
def jp_server_config(jp_root_dir):
    (jp_root_dir / "agentstack.config.json").write_text(json.dumps({"prices": PRICES}))
    return {"ServerApp": {"jpserver_extensions": {"agentstack_lab.server": True}},
            "AgentstackExtension": {"workspace": str(jp_root_dir), "poll_interval": 0.02}}


def test_runs_and_a_runs_tree_carry_the_cost_priced_by_the_workspace(jp_fetch, jp_root_dir, jp_asyncio_loop):
    async def body():
        await asyncio.to_thread(_cli, jp_root_dir, "agent", "run", "what is a monad?")
        (run,) = (await _get(jp_fetch, "runs"))["runs"]
        tree = (await _get(jp_fetch, f"runs/{run['id']}"))["tree"]
        table = PriceTable(PRICES)

        def check(node: dict) -> float:
            own = table.cost(node["ownUsage"], "scripted", None)
            total = own.usd + sum(check(k) for k in node["children"])
            assert node["cost"]["usd"] == pytest.approx(total) and node["cost"]["text"].startswith("~$")
            return total

        assert len(tree["children"]) > 0
        assert run["cost"]["usd"] == pytest.approx(check(tree)) and run["cost"]["text"] == tree["cost"]["text"]
    jp_asyncio_loop.run_until_complete(body())
