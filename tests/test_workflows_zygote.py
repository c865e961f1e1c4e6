"""Kernel and zygote start-up failures: a clear error and no process left behind."""

import asyncio
import os
import sys

import pytest

from agentstack_lab.workflows.zygote import Zygote, ZygoteError

pytestmark = pytest.mark.slow  # every test here starts a process


@pytest.mark.parametrize("answer", ["not json at all", '{"ready": false, "error": "preloading started threads"}'])
def test_failed_start_raises_zygote_error_and_stops_the_process(tmp_path, answer):
    pid_file = tmp_path / "pid"
    script = (f"import os, sys; open({str(pid_file)!r}, 'w').write(str(os.getpid()));"
              f" print({answer!r}, flush=True); sys.stdin.read()")
    zygote = Zygote([sys.executable, "-c", script])   # "-m agentstack_lab.workflows.zygote" lands in sys.argv
    with pytest.raises(ZygoteError):
        zygote.start(timeout=30)
    assert not zygote.alive
    with pytest.raises(ProcessLookupError):   # stopped and reaped, not a zombie
        os.kill(int(pid_file.read_text()), 0)


def test_kernel_whose_start_fails_after_launch_is_stopped(monkeypatch):
    from jupyter_client.manager import AsyncKernelManager

    from agentstack_lab.workflows.pool import start_kernel

    pids = []

    async def failing_post_start(self, **kw):
        pids.append(self.provisioner.pid)
        raise RuntimeError("post-start failed")

    monkeypatch.setattr(AsyncKernelManager, "_async_post_start_kernel", failing_post_start)
    with pytest.raises(RuntimeError, match="post-start failed"):
        asyncio.run(start_kernel("python3"))
    assert len(pids) == 1
    with pytest.raises(ProcessLookupError):   # the launched kernel was killed and reaped, not orphaned
        os.kill(pids[0], 0)
