"""Must-show (issue 30, part 2): the dry run's probe list, each through a real kernel, 0 escapes.

One kernel (jupyter_client) serves every probe. Each probe runs model-like code with
``engine.sandbox.dry_run`` on the kernel's own namespace, then the test checks from outside that
nothing escaped: the listener saw no connection, no file appeared outside the scratch folder, the
planted secret is not in the output, the kernel is alive with the same pid and answers requests,
the fork bomb and the memory hog were stopped, and the real namespace is unchanged. Last, the dry
run's namespace summary equals the one the live executor records when the same code runs for real.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import textwrap

import pytest
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.slow

SECRET = "planted-secret-7f3a9c"
SETUP = """
import json as _json
from agentstack_lab.engine.sandbox import dry_run as _dry_run, DryRunLimits as _Limits
def _dry(code, **limits):
    r = _dry_run(get_ipython().user_ns, code, shell=get_ipython(), limits=_Limits(**limits) if limits else None)
    print("DRY" + _json.dumps(r.to_dict()))
import os as _os, pandas as pd
df = pd.DataFrame({'x': [1, 2, 3]})
victim = [1, 2, 3]
keep = 'kept'
"""


class Kernel:
    def __init__(self, km, kc):
        self.km, self.kc = km, kc

    def run(self, code: str, timeout: float = 120) -> str:
        """Execute ``code``; its stdout (the reply must be ok)."""
        msg_id = self.kc.execute(code)
        out: list[str] = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = self.kc.get_shell_msg(timeout=timeout)
        assert reply["content"]["status"] == "ok", "".join(out)
        return "".join(out)

    def dry(self, code: str, **limits) -> dict:
        text = self.run(f"_dry({code!r}, **{limits!r})")
        line = next(ln for ln in text.splitlines() if ln.startswith("DRY"))
        return json.loads(line[3:])

    def pid(self) -> int:
        return int(self.run("print(_os.getpid())").strip())


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("sandbox")
    for name in ("work", "outside", "secret", "home", "tmp", "runtime"):
        (root / name).mkdir()
    (root / "secret" / "token.txt").write_text(SECRET)
    (root / "work" / ".env").write_text(f"TOKEN={SECRET}\n")
    (root / "work" / "data.csv").write_text("x\n1\n2\n")
    return root


@pytest.fixture(scope="module")
def kernel(place):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(place / "home"))
        mp.setenv("TMPDIR", str(place / "tmp"))
        mp.setenv("JUPYTER_RUNTIME_DIR", str(place / "runtime"))
        km, kc = start_new_kernel(kernel_name="python3", cwd=str(place / "work"))
    k = Kernel(km, kc)
    try:
        k.run(SETUP)
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def active(kernel):
    """The protections the kernel's dry runs get here, by name."""
    return kernel.dry("pass")["protections"]


def _need(active: dict, *names: str) -> None:
    missing = [n for n in names if not active[n].startswith("active")]
    if missing:
        pytest.skip("protection unavailable here: " + "; ".join(f"{n}: {active[n]}" for n in missing))


def test_protections_are_named(active):
    assert set(active) >= {"descriptors", "network", "landlock", "seccomp", "rlimits", "timeout"}
    assert all(v.startswith(("active", "unavailable")) for v in active.values()), active


def test_loopback_connection_is_refused(kernel):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        code = textwrap.dedent(f"""
            import socket, _socket
            for make in (lambda: socket.create_connection(('127.0.0.1', {port}), timeout=2),
                         lambda: _socket.socket().connect(('127.0.0.1', {port}))):
                try:
                    make()
                    print('CONNECTED')
                except OSError as exc:
                    print('refused', exc)
            """)
        res = kernel.dry(code)
        assert "CONNECTED" not in res["stdout"] and res["stdout"].count("refused") == 2, res
        assert res["refused"], res
        with pytest.raises(BlockingIOError):  # the child has exited: a connection would be waiting here
            listener.accept()
    finally:
        listener.close()


def test_writes_outside_the_scratch_folder_are_refused(kernel, place, active):
    _need(active, "landlock")
    targets = [place / "outside" / "pwned.txt", place / "work" / "pwned.txt", place / "home" / ".bashrc"]
    code = "import os\n" + "".join(
        f"try:\n    open({str(t)!r}, 'w').write('x')\nexcept OSError as e:\n    print('refused', e)\n" for t in targets)
    code += "import tempfile\nwith tempfile.NamedTemporaryFile('w', delete=False) as f:\n    f.write('ok')\nprint('scratch', f.name)\n"
    res = kernel.dry(code)
    assert res["stdout"].count("refused") == len(targets), res
    assert not any(t.exists() for t in targets)
    assert "scratch " in res["stdout"] and res["error"] is None, res  # the scratch folder is writable
    assert {r["target"].strip("'") for r in res["refused"]} >= {str(t) for t in targets}
    written = {o["path"] for o in res["opened"] if o["access"] == "write"}
    assert written >= {str(t) for t in targets} and res["stdout"].split("scratch ")[1].strip() in written


def test_a_planted_secret_cannot_be_read(kernel, place, active):
    _need(active, "landlock")
    code = (f"for p in ({str(place / 'secret' / 'token.txt')!r}, '.env'):\n"
            "    try:\n        print(open(p).read())\n    except OSError as e:\n        print('refused', e)\n"
            "print(open('data.csv').read().split())\n")
    res = kernel.dry(code)
    assert SECRET not in json.dumps(res), res
    assert res["stdout"].count("refused") == 2, res
    assert "['x', '1', '2']" in res["stdout"], res  # the kernel's own visible files stay readable


def test_the_kernel_cannot_be_signalled_or_killed(kernel):
    before = kernel.pid()
    code = textwrap.dedent("""
        import os, signal
        for send in (lambda: os.kill(os.getppid(), signal.SIGKILL), lambda: os.kill(0, signal.SIGTERM),
                     lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL), lambda: os.kill(-1, signal.SIGKILL),
                     lambda: signal.pthread_kill(os.getppid(), signal.SIGKILL)):
            try:
                send()
                print('SENT')
            except (OSError, ValueError) as e:
                print('refused', e)
        """)
    res = kernel.dry(code)
    assert "SENT" not in res["stdout"], res
    assert kernel.km.is_alive() and kernel.pid() == before


def test_the_kernel_sockets_are_out_of_reach(kernel):
    code = textwrap.dedent("""
        import os
        written = 0
        for fd in range(3, 4096):
            try:
                os.write(fd, b'\\x00garbage' * 64)
                written += 1
            except OSError:
                pass
        k = get_ipython().kernel
        for send in (lambda: k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'FORGED'}),
                     lambda: k.shell_stream.socket.send_multipart([b'FORGED'])):
            try:
                send()
            except Exception as e:
                print('failed', type(e).__name__)
        print('fds written', written)
        """)
    res = kernel.dry(code)
    # the only descriptor left is the result pipe, so a forged report is possible and at most one write lands there
    assert res["ended"] != "finished" or "fds written" in res["stdout"], res
    with contextlib.suppress(queue.Empty):
        while True:  # nothing forged reached the kernel's output channel
            msg = kernel.kc.get_iopub_msg(timeout=0.5)
            assert "FORGED" not in json.dumps(msg["content"])
    assert kernel.run("print(6 * 7)").strip() == "42"


def test_a_fork_bomb_is_stopped(kernel, active):
    before = kernel.pid()
    res = kernel.dry("import os\nwhile True:\n    os.fork()\n")
    assert res["error"] is not None and res["ended"] in ("finished", "timeout") or res["ended"].startswith("killed")
    if active["seccomp"].startswith("active"):
        assert res["error"].startswith("PermissionError") and res["refused"][0]["call"] == "os.fork", res
    res = kernel.dry("import subprocess\nsubprocess.run(['true'])\n")
    assert res["error"] is not None and res["refused"], res
    assert kernel.pid() == before and kernel.run("print(len(victim))").strip() == "3"


def test_a_memory_hog_and_a_cpu_spin_are_stopped(kernel):
    before = kernel.pid()
    res = kernel.dry("chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 2**20))\n", memory_mb=256)
    assert res["error"] is not None and ("MemoryError" in res["error"] or res["ended"] != "finished"), res
    res = kernel.dry("while True:\n    pass\n", timeout_s=30.0, cpu_s=1)
    assert res["ended"] == "killed by SIGXCPU" and "CPU limit" in res["error"], res
    res = kernel.dry("import time\ntime.sleep(60)\n", timeout_s=1.0)
    assert res["ended"] == "timeout", res
    assert kernel.pid() == before and kernel.run("print(keep)").strip() == "kept"


def test_the_real_namespace_is_never_touched(kernel):
    code = ("victim.append(4)\nvictim2 = 1\ndel keep\nglobals()['planted'] = 9\ndf['y'] = df.x * 2\n"
            "import builtins\nbuiltins.len = lambda x: -1\n")
    res = kernel.dry(code)
    assert res["error"] is None, res
    actions = {c["name"]: c["action"] for c in res["changes"]}
    assert actions == {"victim": "changed", "victim2": "created", "keep": "deleted", "planted": "created",
                       "df": "changed", "builtins": "created"}, res["changes"]
    after = kernel.run("print(victim, 'victim2' in globals(), keep, 'planted' in globals(), list(df.columns), "
                       "len([1, 2]))")
    assert after.strip() == "[1, 2, 3] False kept False ['x'] 2"


def test_dry_run_summary_equals_the_promoted_run(kernel):
    code = "df['z'] = df.x + 1\ntotal = int(df.z.sum())\nlabels = [str(v) for v in df.x]\ndel victim\n"
    dry = kernel.dry(code)
    assert dry["error"] is None and dry["refused"] == [], dry
    real = kernel.run(textwrap.dedent(f"""
        from agentstack_lab.engine.executors import LiveKernelExecutor
        _res = await LiveKernelExecutor().run({code!r})
        print("REAL" + _json.dumps(_res.changes))
        """))
    changes = json.loads(next(ln for ln in real.splitlines() if ln.startswith("REAL"))[4:])
    assert dry["changes"] == changes
    assert {c["name"] for c in changes} == {"df", "total", "labels", "victim"}
