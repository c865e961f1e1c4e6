"""``/agentstack/api/metrics`` as Prometheus reads it: the Content-Type and ``promtool check metrics``.

A real Jupyter server (pytest-jupyter) with the server extension and Debian's ``promtool``
(installed by ``make test``; the promtool half skips, saying so, where it is missing).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from pytest_jupyter.jupyter_core import *  # noqa: F403
from pytest_jupyter.jupyter_server import *  # noqa: F403
from pytest_jupyter.pytest_tornasync import *  # noqa: F403

pytestmark = pytest.mark.slow


@pytest.fixture
def jp_server_config(jp_root_dir):
    return {"ServerApp": {"jpserver_extensions": {"agentstack_lab.server": True}},
            "AgentstackExtension": {"workspace": str(jp_root_dir), "poll_interval": 0.02}}


def test_metrics_content_type_is_prometheus_text_or_openmetrics(jp_fetch, jp_asyncio_loop):
    async def body():
        plain = await jp_fetch("agentstack", "api", "metrics")
        assert plain.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert b"# TYPE agentstack_ws_clients gauge" in plain.body
        om = await jp_fetch("agentstack", "api", "metrics",
                            headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
        assert om.body.rstrip().endswith(b"# EOF")  # OpenMetrics' terminator
        return plain.body

    text = jp_asyncio_loop.run_until_complete(body())
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing (make test installs Debian's prometheus)")
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
