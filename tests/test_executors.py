"""The python tool's executors: live namespace (no IPython here) and an isolated subprocess."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from agentstack_lab.engine.executors import (
    ExecContext,
    LiveKernelExecutor,
    SubprocessExecutor,
    make_executor,
)
from tests.waits import apoll


async def test_live_executor_sees_and_creates_names_and_captures_output():
    ns = {"df": [3, 1, 2]}
    ex = LiveKernelExecutor(namespace=ns)
    res = await ex.run("import sys\nprint('n =', len(df))\nprint('warn', file=sys.stderr)\ntotal = sum(df)\ntotal * 2")
    assert res.ok and res.stdout == "n = 3\n" and res.stderr == "warn\n"
    assert res.result == "12" and ns["total"] == 6
    assert set(res.changed_names) == {"sys", "total"}
    res2 = await ex.run("df = sorted(df)\nx = 1")
    assert set(res2.changed_names) == {"df", "x"} and ns["df"] == [1, 2, 3] and res2.result is None
    assert "fork" not in ns and "wait" not in ns  # injected only while agent code runs


async def test_live_executor_reports_exceptions_with_user_traceback():
    ex = LiveKernelExecutor(namespace={})
    res = await ex.run("a = 1\n\ndef f():\n    return missing\nf()")
    assert res.error == "NameError: name 'missing' is not defined"
    assert "line 4, in f" in res.traceback and "return missing" in res.traceback
    assert "executors.py" not in res.traceback
    syntax = await ex.run("def (")
    assert syntax.error.startswith("SyntaxError")


async def test_live_executor_rich_result_and_does_not_block_the_loop():
    class Rich:
        def _repr_html_(self):
            return "<b>rich</b>"

    ns = {"Rich": Rich}
    ex = LiveKernelExecutor(namespace=ns)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.create_task(ticker())
    res = await ex.run("import time\ntime.sleep(0.3)\nRich()")
    t.cancel()
    assert res.result_data == {"text/html": "<b>rich</b>"} and "Rich object" in res.result
    assert ticks >= 10  # the loop kept running while the code slept in its worker thread


async def test_live_executor_print_from_other_threads_is_not_captured(capsys):
    ex = LiveKernelExecutor(namespace={})
    res = await ex.run("print('inside')")
    print("outside")
    assert res.stdout == "inside\n" and "outside" in capsys.readouterr().out
    assert sys.stdout.__class__.__name__ != "_StreamRouter"


async def test_live_executor_fork_wait_use_the_context_and_stop_interrupts():
    calls = []
    ctx = ExecContext(fork=lambda p, type=None: calls.append((p, type)) or "h1",
                      wait=lambda h, timeout=None: f"result of {h}")
    ns = {"fork": "user's own fork"}
    ex = LiveKernelExecutor(namespace=ns)
    res = await ex.run("h = fork('sub q', type='coder')\nwait(h)", context=ctx)
    assert res.result == "'result of h1'" and calls == [("sub q", "coder")]
    assert ns["fork"] == "user's own fork" and "wait" not in ns
    task = asyncio.create_task(ex.run("import time\nlooping = True\nwhile True:\n    time.sleep(0.01)"))
    await apoll(lambda: ns.get("looping"), "the code to be running")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    res = await ex.run("fork('x')")  # no context outside an agent
    assert "can only be called from code an agent runs" in res.error or "not available" in res.error


@pytest.mark.slow
async def test_subprocess_captures_output_result_and_changed_names():
    ex = SubprocessExecutor(timeout=20)
    res = await ex.run("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\ny = 21\ny * 2")
    assert (res.stdout, res.stderr, res.result, res.error) == ("hello\n", "oops\n", "42", None)
    assert res.changed_names == ["sys", "y"]
    err = await ex.run("raise ValueError('bad')")
    assert err.error == "ValueError: bad" and "line 1" in err.traceback
    nofork = await ex.run("fork('x')")
    assert "not available in the subprocess executor" in nofork.error


@pytest.mark.slow
async def test_subprocess_runaway_loop_is_killed_at_timeout_with_output_kept():
    ex = SubprocessExecutor(timeout=1.0)
    t = time.perf_counter()
    res = await ex.run("print('started', flush=True)\nwhile True:\n    pass")
    assert time.perf_counter() - t < 5
    assert res.error == "TimeoutError: code ran longer than 1.0 s and was killed"
    assert res.stdout == "started\n"


@pytest.mark.slow
async def test_subprocess_memory_hog_hits_the_limit():
    ex = SubprocessExecutor(timeout=20, memory_mb=200)
    res = await ex.run("print('before', flush=True)\nblob = bytearray(1024 * 1024 * 1024)\nprint('after')")
    assert res.error == "MemoryError: the code hit the 200 MB memory limit"
    assert res.stdout == "before\n"


@pytest.mark.slow
async def test_subprocess_hides_secret_env(monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "sk-secret")
    res = await SubprocessExecutor(timeout=20).run("import os\nsorted(k for k in os.environ if 'KEY' in k)")
    assert res.result == "[]"


def test_bad_executor_settings_are_clear():
    with pytest.raises(ValueError, match="unknown executor 'docker'"):
        make_executor("docker")
    with pytest.raises(ValueError, match="timeout must be > 0"):
        SubprocessExecutor(timeout=0)


async def test_live_executor_records_in_place_changes_of_mentioned_names():
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    ns = {"df": pd.DataFrame({"a": [1, 2, 3]}), "arr": np.zeros(4), "lst": [1], "d": {"k": 1},
          "s": {1}, "untouched": [0], "other": pd.DataFrame({"b": [1]})}
    ex = LiveKernelExecutor(namespace=ns)
    res = await ex.run("df['x'] = 1\narr[0] = 5\nlst.append(2)\nd['k'] = 2\ns.add(2)\nlen(untouched), other.shape")
    assert set(res.changed_names) == {"df", "arr", "lst", "d", "s"}  # reading `untouched`/`other` is no change
    edit = await ex.run("df.loc[0, 'a'] = 99")  # a value edit, same shape and columns
    assert edit.changed_names == ["df"]
    same = await ex.run("df.loc[0, 'a'] = 99\nlst[0] = lst[0]")  # same values again: nothing changed
    assert same.changed_names == []


def test_fingerprint_is_bounded_and_falls_back_for_large_or_odd_values():
    from agentstack_lab.engine import capture as executors

    np = pytest.importorskip("numpy")
    big = np.zeros(executors.FINGERPRINT_MAX_BYTES // 8 + 1)
    assert executors.fingerprint(big) == ("numpy", big.shape, "float64")  # no hashing of huge arrays
    assert executors.fingerprint(object()) is None and executors.fingerprint(3) is None
    assert executors.fingerprint([1, 2]) != executors.fingerprint([1, 2, 3])
    long = list(range(executors.FINGERPRINT_MAX_ITEMS + 1))
    before = executors.fingerprint(long)
    long.append(1)
    assert before == ("list", len(long) - 1) != executors.fingerprint(long)  # past the cap: length only


async def test_live_executor_captures_display_calls_in_an_ipython_shell():
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    try:
        sh.user_ns["df"] = pytest.importorskip("pandas").DataFrame({"a": [1, 2]})
        ex = LiveKernelExecutor(shell=sh)
        publish = sh.display_pub.publish
        png = b"\x89PNG\r\n\x1a\n" + b"0" * 16
        res = await ex.run("from IPython.display import display, HTML, Image, clear_output\n"
                           "print('before')\ndisplay(HTML('<b>hi</b>'))\nclear_output()\n"
                           "display(df)\ndisplay(Image(data=PNG_BYTES, format='png'))\n'done'".replace("PNG_BYTES", repr(png)))
        assert res.ok and res.stdout == "before\n" and res.result == "'done'"
        assert [sorted(b) for b in res.display] == [["text/html", "text/plain"], ["text/html", "text/plain"],
                                                    ["image/png", "text/plain"]]
        assert res.display[0]["text/html"] == "<b>hi</b>" and "<table" in res.display[1]["text/html"]
        assert "[image/png]" in res.to_text() and "display:" in res.to_text()
        assert sh.display_pub.publish == publish and "publish" not in sh.display_pub.__dict__  # restored
    finally:
        InteractiveShell.clear_instance()
