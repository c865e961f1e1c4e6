"""Health checks what the config uses (issue 25 item 13), through ``agentstack-lab system health``.

PostgreSQL memory that is down is unhealthy; an Ollama or OpenAI server that does not answer is
degraded, within the probe's short timeout; a missing ``events`` table is unhealthy; a folder with
no workspace is a one-line error that creates nothing. "Down" is a closed loopback port; "hangs" a
loopback socket that listens and never answers.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from agentstack_lab.workspace import Workspace
from tests.test_health_metrics import by_name, cli, health, new_workspace

pytestmark = pytest.mark.slow  # every test here starts a process


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reconfigure(folder: Path, config: dict) -> None:
    """The workspace (made with the defaults) now configured with ``config``."""
    (folder / "agentstack.config.json").write_text(json.dumps(config))


def test_postgres_memory_that_is_down_is_unhealthy(tmp_path):
    folder = new_workspace(tmp_path / "ws")
    port = closed_port()
    reconfigure(folder, {"memory": {"backend": "postgres",
                                    "postgres": {"dsn": f"postgresql://ada:s3cret-pw@127.0.0.1:{port}/agents"}}})
    started = time.monotonic()
    code, report = health(folder)
    assert code == 2 and report["status"] == "unhealthy", report
    memory = by_name(report)["memory"]
    assert memory["status"] == "unhealthy" and f"127.0.0.1:{port}" in memory["detail"], memory
    assert "s3cret-pw" not in json.dumps(report)
    assert time.monotonic() - started < 60
    ready = cli(folder, "system", "health", "--kind", "ready", "--json")
    assert ready.returncode == 2 and by_name(json.loads(ready.stdout))["memory"]["status"] == "unhealthy"


def test_sqlite_memory_and_events_are_checked(tmp_path):
    folder = new_workspace(tmp_path / "ws")
    code, report = health(folder)
    assert code == 0, report
    assert by_name(report)["memory"]["status"] == "healthy" and by_name(report)["events"]["status"] == "healthy"
    with Workspace.open(folder, announce=False) as ws:
        ws.db.execute("DROP TABLE events")
    code, report = health(folder)
    assert code == 2 and report["status"] == "unhealthy", report
    assert by_name(report)["events"] == {"name": "events", "status": "unhealthy",
                                         "detail": "the events table is missing"}


@pytest.mark.parametrize(("provider", "embedder"), [("ollama", "openai"), ("openai", "ollama")])
def test_remote_provider_and_embedder_that_do_not_answer_are_degraded(tmp_path, provider, embedder):
    folder = new_workspace(tmp_path / "ws")
    port = closed_port()
    url = {"ollama": f"http://127.0.0.1:{port}", "openai": f"http://127.0.0.1:{port}/v1"}
    reconfigure(folder, {"providers": {"default": provider, "ollama": {"base_url": url["ollama"]},
                                       "openai": {"base_url": url["openai"]}},
                         "memory": {"embedder": embedder}})
    code, report = health(folder)
    assert code == 1 and report["status"] == "degraded", report
    checks = by_name(report)
    for name, who in (("provider", provider), ("embedder", embedder)):
        assert checks[name]["status"] == "degraded", checks[name]
        assert f"{who} at {url[who]}" in checks[name]["detail"] and "does not answer" in checks[name]["detail"]
    assert checks["database"]["status"] == "healthy"


def test_a_remote_provider_that_hangs_is_degraded_within_the_probe_timeout(tmp_path):
    folder = new_workspace(tmp_path / "ws")
    with socket.socket() as server:  # accepts connections (the kernel's backlog) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        reconfigure(folder, {"providers": {"default": "ollama",
                                           "ollama": {"base_url": f"http://127.0.0.1:{port}", "timeout": 600}}})
        started = time.monotonic()
        code, report = health(folder)
        elapsed = time.monotonic() - started
    assert code == 1, report
    assert "Timeout" in by_name(report)["provider"]["detail"], report
    assert elapsed < 60  # the probe's own timeout, not the provider's 600 s


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_health_of_a_folder_without_a_workspace_is_an_error_and_creates_nothing(tmp_path, where):
    folder = tmp_path / "nothing"
    if where == "empty":
        folder.mkdir()
    before = files_under(tmp_path)
    for kind in ("detailed", "live"):
        out = cli(folder, "system", "health", "--kind", kind)
        assert out.returncode == 2 and out.stdout == "", out
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: no workspace at "), out.stderr
        assert str(folder.resolve()) in out.stderr
    assert files_under(tmp_path) == before
