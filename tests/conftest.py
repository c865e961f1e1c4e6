"""Shared test set-up: every test gets an isolated home and working directory, no API keys,
and no network beyond loopback (pydantic-ai's ALLOW_MODEL_REQUESTS, done at the socket)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

SECRET_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OLLAMA_HOST", "AGENTSTACK_CONFIG",
               "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


def _is_loopback(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"network access outside loopback is blocked in tests: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"network access outside loopback is blocked in tests: {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def _isolate(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in SECRET_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(work)
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    yield


@pytest.fixture
def workdir(tmp_path):
    """The isolated working directory each test runs in."""
    return tmp_path / "work"


@pytest.fixture
def ws(tmp_path):
    """A fresh workspace (its own database) in a temporary folder, closed after the test."""
    from agentstack_lab.workspace import Workspace

    with Workspace.open(tmp_path / "ws", announce=False) as w:
        yield w
