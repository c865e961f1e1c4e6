"""The event log never loses events silently (issue 26, item 1).

A disk that fills for a moment mid-run loses nothing (the failed batch is kept and retried); one that
stays full fails the run, saying why, exit non-zero; text that UTF-8 cannot hold (a lone surrogate
from JSON, bytes that were not UTF-8 on the command line) is refused in one line before anything
starts, or stored escaped — never dropped. The disk-full trials use a real, small tmpfs (as root).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentstack_lab.config import Config
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.log import read_events, rebuild_tree
from agentstack_lab.errors import UsageError
from agentstack_lab.providers.base import TextDeltaEvent
from agentstack_lab.providers.testing import TestModel
from agentstack_lab.workspace import Workspace

SCRIPT = Path(sys.executable).with_name("agentstack-lab")
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agentstack_lab.cli"]


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "16m"):
    """A real tmpfs of ``size`` mounted at ``folder`` (root only), unmounted after."""
    folder.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until the disk says it is full; returns the file."""
    filler = folder / "filler"
    chunk = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        # the last few bytes too: even a one-page WAL append must fail
        for size in (4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * size)
    return filler


async def words(n: int):
    """``n`` text deltas, a few milliseconds apart (a run that writes many events over time)."""
    for i in range(n):
        yield TextDeltaEvent(text=f"word{i} ")
        if i % 20 == 0:
            await asyncio.sleep(0.01)


def chatty_brain(on_main):
    """A model that writes many text deltas (many events) and calls ``on_main`` once in its main step."""
    async def main(req):
        await on_main()
        return words(400)
    return TestModel(main=main)


@pytest.mark.slow
async def test_a_disk_full_for_a_moment_mid_run_loses_no_event(tmp_path, caplog):
    with small_disk(tmp_path / "disk") as disk:
        with Workspace.open(disk / "ws", announce=False) as ws:
            filler: list[Path] = []

            async def on_main():
                filler.append(await asyncio.to_thread(fill, disk))
                loop = asyncio.get_running_loop()
                loop.call_later(1.5, filler[0].unlink)      # the disk frees up 1.5 s later

            caplog.set_level(logging.WARNING, logger="agentstack_lab.engine.log")
            run = AgentRun("count the words", workspace=ws, provider=chatty_brain(on_main))
            live = []
            run.subscribe(live.append)
            await run
            assert run.status == "completed", run.error
            stored = [ev for _, ev in read_events(ws.db, run.id)]
            assert "could not write" in caplog.text and "the disk is full" in caplog.text   # the fault happened
            assert "written again" in caplog.text
            assert len(stored) == len(live) > 100
            assert [type(e).__name__ for e in stored] == [type(e).__name__ for e in live]   # in order
            assert rebuild_tree(ws.db, run.id)["status"] == "completed"


@pytest.mark.slow
async def test_a_disk_that_stays_full_fails_the_run_and_says_why(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        cfg = Config.from_dict({"engine": {"event_log_retry_s": 1.0}})
        with Workspace.open(disk / "ws", config=cfg, announce=False) as ws:
            async def on_main():
                await asyncio.to_thread(fill, disk)

            run = AgentRun("count the words", workspace=ws, provider=chatty_brain(on_main))
            with pytest.raises(Exception) as caught:
                await run
            assert run.status == "failed"
            line = str(caught.value)
            assert "\n" not in line and "event log" in line and "the disk is full" in line, line
            assert "events are not stored" in line
            (disk / "filler").unlink()


@pytest.mark.slow
def test_a_run_whose_disk_stays_full_exits_non_zero_with_one_line(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        ws = disk / "ws"
        ws.mkdir()
        (ws / "agentstack.toml").write_text("[engine]\nevent_log_retry_s = 1.0\n")
        init = subprocess.run([*CLI, "-w", str(ws), "agent", "run", "warm up", "--no-subagents"],
                              capture_output=True, text=True, timeout=120)
        assert init.returncode == 0, init.stderr
        filler = fill(disk)
        try:
            done = subprocess.run([*CLI, "-w", str(ws), "agent", "run", "now with a full disk", "--no-subagents"],
                                  capture_output=True, text=True, timeout=120)
        finally:
            filler.unlink()
        assert done.returncode != 0, done.stdout
        said = [line for line in done.stderr.splitlines() if "disk is full" in line]
        assert said, done.stderr
        assert "Traceback" not in done.stderr and "a bug" not in done.stderr


def test_a_prompt_with_a_lone_surrogate_is_refused_in_one_line(ws):
    with pytest.raises(UsageError, match=r"^the prompt contains a lone surrogate \(U\+D800 at character 3\)"):
        AgentRun("abc\ud800", workspace=ws, provider=chatty_brain(lambda: asyncio.sleep(0)))
    assert ws.db.query("SELECT count(*) FROM agents")[0][0] == 0


def test_a_prompt_over_the_limit_is_refused_in_one_line(tmp_path):
    cfg = Config.from_dict({"agents": {"max_prompt_chars": 1000}})
    with Workspace.open(tmp_path / "ws", config=cfg, announce=False) as ws:
        with pytest.raises(UsageError, match=r"^the prompt is 1,001 characters, over the limit of 1,000 "
                                             r"\(config agents.max_prompt_chars\)$"):
            AgentRun("x" * 1001, workspace=ws, provider=chatty_brain(lambda: asyncio.sleep(0)))


@pytest.mark.slow
def test_a_non_utf8_command_line_prompt_is_one_line_and_exit_2(workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([os.fsencode(c) for c in CLI] + [b"-w", os.fsencode(workdir), b"agent", b"run",
                                                          b"caf\xe9 sales?", b"--no-subagents"],
                          capture_output=True, timeout=120)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, (done.stdout, err)
    assert "is not UTF-8 text (byte 0xe9 at character 3); convert it first" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


async def test_a_long_prompt_is_logged_once_not_with_every_status(ws):
    prompt = "p" * 50_000
    run = AgentRun(prompt, workspace=ws, provider=chatty_brain(lambda: asyncio.sleep(0)))
    await run
    states = [ev for _, ev in read_events(ws.db, run.id) if ev.type == "agent-state"]
    assert len(states) >= 3
    assert sum("prompt" in ev.state for ev in states) == 1
    assert rebuild_tree(ws.db, run.id)["prompt"] == prompt
