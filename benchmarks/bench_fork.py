"""Cost of a dry run's fork in a real kernel holding 1 GB of data, beside its peers in the same run.

A kernel (jupyter_client) first measures with an empty namespace, then after allocating a touched
numpy array of ``--gb`` GB. Per state, N samples of:

* fork → running child: from ``os.fork()`` in the kernel to the child's first statement (both read
  the system-wide monotonic clock; the child writes its time to a pipe and exits);
* dry run end to end: ``engine.sandbox.dry_run`` of ``y = 1`` (fork, every protection, the code,
  the report, the wait);
* peer, direct: the same code run directly (``exec`` in a namespace);
* peer, spawn: a ``multiprocessing`` spawn context's process, start → running child.

The array is measured twice: as numpy allocates it (``madvise`` for transparent huge pages, so the
fork copies few page-table entries) and in 4 KB pages (numpy's huge-page advice off), the worst case.

    .venv/bin/python benchmarks/bench_fork.py [--n 30] [--gb 1.0]
"""

from __future__ import annotations

import argparse
import json
import statistics

from jupyter_client.manager import start_new_kernel

MEASURE = r'''
import json as _j, os as _o, time as _t, multiprocessing as _mp
from agentstack_lab.engine.sandbox import dry_run as _dry, protections as _prot

def _fork_ms():
    r, w = _o.pipe()
    t0 = _t.monotonic()
    pid = _o.fork()
    if pid == 0:
        _o.write(w, repr(_t.monotonic()).encode())
        _o._exit(0)
    _o.close(w)
    started = float(_o.read(r, 64))
    _o.close(r)
    _o.waitpid(pid, 0)
    return (started - t0) * 1000

def _dry_ms():
    t0 = _t.monotonic()
    res = _dry(get_ipython().user_ns, "y = 1")
    assert res.error is None, res.error
    return (_t.monotonic() - t0) * 1000

def _direct_ms():
    t0 = _t.monotonic()
    exec("y = 1", {})
    return (_t.monotonic() - t0) * 1000

def _spawn_ms():
    ctx = _mp.get_context("spawn")
    q = ctx.Queue()
    t0 = _t.monotonic()
    p = ctx.Process(target=q.put, args=("running",))  # a picklable target: the child's first act is put()
    p.start()
    q.get()
    started = _t.monotonic()
    p.join()
    return (started - t0) * 1000

def _measure(n):
    out = {}
    for name, fn in (("fork", _fork_ms), ("dry", _dry_ms), ("direct", _direct_ms), ("spawn", _spawn_ms)):
        fn()  # warm-up
        out[name] = [fn() for _ in range(n if name != "spawn" else max(5, n // 3))]
    return out
'''


def _run(kc, code: str, timeout: float = 600) -> str:
    msg_id = kc.execute(code)
    out: list[str] = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--gb", type=float, default=1.0)
    args = parser.parse_args()
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        _run(kc, MEASURE)
        empty = json.loads(_run(kc, f"print(_j.dumps(_measure({args.n})))"))
        rss = _run(kc, f"import numpy as _np\n_big = _np.ones(int({args.gb} * 2**30 // 8))\n"
                       "print(int(open('/proc/self/statm').read().split()[1]) * _o.sysconf('SC_PAGE_SIZE') // 2**20)")
        loaded = json.loads(_run(kc, f"print(_j.dumps(_measure({args.n})))"))
        # the same array in 4 KB pages (numpy asks for transparent huge pages by default): the worst case
        _run(kc, f"del _big\n_np._core.multiarray._set_madvise_hugepage(False)\n"
                 f"_big = _np.ones(int({args.gb} * 2**30 // 8))")
        small = json.loads(_run(kc, f"print(_j.dumps(_measure({args.n})))"))
        prot = json.loads(_run(kc, "print(_j.dumps(_prot()))"))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    labels = {"fork": "fork → running child", "dry": "dry run end to end (`y = 1`)",
              "direct": "peer: the code run directly", "spawn": "peer: multiprocessing spawn → running child"}
    print(f"kernel resident memory with the array: {rss.strip()} MB; samples: {args.n} (spawn: {max(5, args.n // 3)})\n")
    gb = f"{args.gb:g} GB"
    print(f"| measure | empty kernel p50 / p95 ms | {gb} (numpy default, huge pages) p50 / p95 ms | "
          f"{gb} in 4 KB pages p50 / p95 ms | ratio to spawn (p50, {gb} 4 KB pages) |")
    print("|---|---:|---:|---:|---:|")
    spawn = statistics.median(small["spawn"])
    for key, label in labels.items():
        cells = " | ".join(f"{statistics.median(v[key]):.2f} / {_pct(v[key], 0.95):.2f}" for v in (empty, loaded, small))
        print(f"| {label} | {cells} | {statistics.median(small[key]) / spawn:.3f}x |")
    print("\nprotections: " + "; ".join(f"{k}: {v.split(':')[0]}" for k, v in prot.items()))


if __name__ == "__main__":
    main()
