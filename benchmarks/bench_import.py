"""Import cost of ``%load_ext agentstack_lab`` against ``import IPython``, measured in the same run.

Each sample is a fresh interpreter (``python -X importtime`` is not used: it slows imports down).
Prints medians over N runs and the modules that must not be imported by loading the extension.

    .venv/bin/python benchmarks/bench_import.py [N]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

HEAVY = ("pandas", "anthropic", "openai", "nbclient", "ipywidgets", "markdown_it", "nh3", "sqlean", "numpy")

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import IPython
from IPython.core.interactiveshell import InteractiveShell
t1 = time.perf_counter()
shell = InteractiveShell.instance()
t2 = time.perf_counter()
shell.run_line_magic("load_ext", "agentstack_lab")
t3 = time.perf_counter()
assert "agent" in shell.magics_manager.magics["line"], "magic not registered"
print(json.dumps({"ipython": t1 - t0, "shell": t2 - t1, "load_ext": t3 - t2,
                  "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
"""


def sample() -> dict:
    out = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n" + PROBE], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(n: int = 15) -> None:
    sample()  # warm the OS file cache
    runs = [sample() for _ in range(n)]
    med = {k: statistics.median(r[k] for r in runs) * 1000 for k in ("ipython", "shell", "load_ext")}
    heavy = sorted({m for r in runs for m in r["heavy"]})
    print(f"%load_ext agentstack_lab import cost, median of {n} fresh interpreters (Python {sys.version.split()[0]})")
    print(f"{'step':<34}{'ms':>10}{'× import IPython':>20}")
    print("-" * 64)
    for label, key in (("import IPython (peer)", "ipython"), ("InteractiveShell.instance()", "shell"),
                       ("%load_ext agentstack_lab", "load_ext")):
        print(f"{label:<34}{med[key]:>10.1f}{med[key] / med['ipython']:>20.2f}")
    print("-" * 64)
    print(f"on top of IPython: {med['load_ext']:.1f} ms (goal ≤ 150 ms: {'met' if med['load_ext'] <= 150 else 'MISSED'})")
    print(f"heavy modules imported by load_ext: {', '.join(heavy) if heavy else 'none'} (checked: {', '.join(HEAVY)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
