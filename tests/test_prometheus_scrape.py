"""``/agentstack/api/metrics`` as Prometheus reads it: the Content-Type, ``promtool check metrics``, and a
running Prometheus scraping it.

A real Jupyter server (pytest-jupyter, on a loopback port) with the server extension, and Debian's
``promtool`` and ``prometheus`` (installed by ``make test``; each half skips, saying so, where they are
missing). The scrape test starts ``/usr/bin/prometheus`` on loopback with a 1 s scrape interval and the
server's token as its bearer token, makes runs with the CLI (other processes), and reads the run count
back through Prometheus' own HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from pytest_jupyter.jupyter_core import *  # noqa: F403
from pytest_jupyter.jupyter_server import *  # noqa: F403
from pytest_jupyter.pytest_tornasync import *  # noqa: F403

from tests.browser_helpers import free_port

pytestmark = pytest.mark.slow
PROMETHEUS = Path("/usr/bin/prometheus")
CLI = [sys.executable, "-m", "agentstack_lab.cli"]


@pytest.fixture
def jp_base_url():
    return "/"  # pytest-jupyter's default "/a%40b/" would be re-escaped in Prometheus' metrics_path


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


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as res:
        return json.load(res)


def _run_cli(root: Path, prompt: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTSTACK_CONFIG"}
    res = subprocess.run([*CLI, "--workspace", str(root), "agent", "run", prompt, "--no-subagents",
                          "--auto-approve"], capture_output=True, text=True, env=env, timeout=120, cwd=root)
    assert res.returncode == 0, res.stderr


@pytest.mark.skipif(not PROMETHEUS.exists(), reason="/usr/bin/prometheus missing (make test installs Debian's "
                    "prometheus with apt-get as root)")
def test_a_running_prometheus_scrapes_the_runs_we_made(jp_fetch, jp_serverapp, jp_http_port, jp_root_dir,
                                                        jp_asyncio_loop, tmp_path):
    token = jp_serverapp.identity_provider.token
    port = free_port()
    api = f"http://127.0.0.1:{port}/api/v1"
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{
            "job_name": "agentstack", "metrics_path": "/agentstack/api/metrics",
            "authorization": {"type": "Bearer", "credentials": token},
            "static_configs": [{"targets": [f"127.0.0.1:{jp_http_port}"]}]}]}))
    log_path = tmp_path / "prometheus.log"
    log = log_path.open("w")
    prom = subprocess.Popen([str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)

    async def until(what: str, probe, timeout: float = 90):
        """Poll ``probe`` (blocking, so off the loop the Jupyter server runs on) until it returns a truthy value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = await asyncio.to_thread(probe)
            except OSError:
                got = None
            if got:
                return got
            if prom.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Prometheus never showed {what}:\n" + log_path.read_text()[-3000:])
            await asyncio.sleep(0.2)

    def target():
        active = _get_json(f"{api}/targets")["data"]["activeTargets"]
        return active[0] if active and active[0]["health"] == "up" else None

    def completed_runs() -> float | None:
        q = urllib.parse.quote('agentstack_runs{job="agentstack",status="completed"}')
        result = _get_json(f"{api}/query?query={q}")["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def reads(n: int):
        return lambda: completed_runs() == n

    async def body():
        up = await until("the target up", target)
        assert up["scrapeUrl"] == f"http://127.0.0.1:{jp_http_port}/agentstack/api/metrics"
        assert up["lastError"] == ""
        await asyncio.to_thread(_run_cli, jp_root_dir, "summarise 1, 2, 3")
        await until("1 completed run", reads(1))
        await asyncio.to_thread(_run_cli, jp_root_dir, "summarise 4, 5, 6")
        await until("2 completed runs", reads(2))  # a later scrape, not the first one again
        series = _get_json(f"{api}/series?match[]=" + urllib.parse.quote('{job="agentstack"}'))["data"]
        names = {s["__name__"] for s in series}
        assert {"agentstack_ws_clients", "agentstack_events_seq", "up"} <= names, names

    try:
        jp_asyncio_loop.run_until_complete(body())
    finally:
        prom.terminate()
        try:
            prom.wait(15)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait(5)
        log.close()
