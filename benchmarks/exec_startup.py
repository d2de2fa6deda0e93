"""The wall time of `hloopt exec` on a tiny module against the same work in plain jax.

    python benchmarks/exec_startup.py [--repeats 7]

Both sides start a fresh interpreter, so start-up is what is measured: plain jax is
``python -c`` that imports jax, jits a 4×4 f32 dot and runs it; hloopt is ``hloopt exec`` on
that dot's HLO text (parse, passes, crash-isolating worker, compile, run, summary). The two
alternate `--repeats` times, so a load that comes and goes hits both alike, and the medians are
compared. Goal (issue 23): at most 1.2× (it was about 1.8× while the worker imported jax only
after the parent had read the module, in series).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULE = """HloModule dot, entry_computation_layout={(f32[4,4]{1,0}, f32[4,4]{1,0})->f32[4,4]{1,0}}

ENTRY main {
  a = f32[4,4]{1,0} parameter(0)
  b = f32[4,4]{1,0} parameter(1)
  ROOT d = f32[4,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

#: The same work in plain jax: import, jit the dot, run it on the host and read the result back.
PLAIN_JAX = """
import jax, jax.numpy as jnp, numpy as np
a = np.ones((4, 4), np.float32)
print(np.asarray(jax.jit(jnp.dot)(a, a)).sum())
"""


def timed(command: list[str]) -> float:
    """Seconds `command` takes; it must succeed."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "dot.hlo"
        path.write_text(MODULE)
        commands = {
            "plain jax": [sys.executable, "-c", PLAIN_JAX],
            "hloopt exec": [sys.executable, "-m", "hloopt", "exec", str(path)],
        }
        for command in commands.values():  # warm the page cache and the bytecode caches
            timed(command)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, command in commands.items():
                times[name].append(timed(command))
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    for name, samples in times.items():
        spread = f"{min(samples):.2f}–{max(samples):.2f}"
        print(f"{name:12s} median {medians[name]:.2f} s  (range {spread} s over {len(samples)} runs)")
    ratio = medians["hloopt exec"] / medians["plain jax"]
    print(f"hloopt exec / plain jax: {ratio:.2f}× (goal: at most 1.2×)")


if __name__ == "__main__":
    main()
