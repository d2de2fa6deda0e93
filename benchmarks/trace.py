"""The wall time of `hloopt trace` against one `hloopt exec` of the same module, and the rounds it uses.

    python benchmarks/trace.py [--repeats 3] [MODULE ...]

For each module (the shipped bf16 examples and a loop-carrying one, a bf16 jax ``scan`` of 24 steps lowered
here, by default) the two commands alternate `--repeats` times and
the medians are compared: ``exec MODULE`` against ``trace MODULE --passes upcast-all-to-fp32`` (A and B
captured, both recomputed, in one round when the intermediates fit), then the same trace under a
``--max-bytes`` that holds a few instructions a round. Goal (issue 26): at most 5× one exec when the
intermediates fit in memory. For a module with loops, each loop's iterations run and traced are printed (the
trace unrolls the first ``--loop-iterations`` - 1 and the last: a bigger module to compile).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from looping import bf16_scan_rnn

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT = [EXAMPLES / "bf16_conv_batchnorm_train.hlo", EXAMPLES / "fp8_bf16_mlp.hlo"]


def loop_module(directory: Path) -> Path:
    """A bf16 recurrent cell run by ``jax.lax.scan`` over 24 steps (a while loop in HLO), written to `directory`."""
    path = directory / "bf16_scan_rnn.hlo"
    path.write_text(bf16_scan_rnn(24, 64))
    return path


def timed(command: list[str]) -> tuple[float, str]:
    """Seconds `command` takes and its output; exit 0 or 1 (a trace that found error) is success."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return elapsed, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--capped-bytes", type=int, default=1 << 18, help="--max-bytes of the capped trace")
    parser.add_argument("modules", nargs="*", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        for module in args.modules or [*DEFAULT, loop_module(Path(directory))]:
            measure(module, args.repeats, args.capped_bytes)


def measure(module: Path, repeats: int, capped_bytes: int) -> None:
    """One module's exec and traces, alternated `repeats` times; the medians against exec's."""
    hloopt = [sys.executable, "-m", "hloopt"]
    commands = {
        "exec": [*hloopt, "exec", str(module)],
        "trace": [*hloopt, "trace", str(module), "--passes", "upcast-all-to-fp32", "--json"],
        "trace capped": [
            *hloopt,
            "trace",
            str(module),
            "--passes",
            "upcast-all-to-fp32",
            "--json",
            "--max-bytes",
            str(capped_bytes),
        ],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    rounds: dict[str, tuple[int, int]] = {}
    loops: list[dict[str, Any]] = []
    for _ in range(repeats):
        for name, command in list(commands.items()):
            try:
                seconds, out = timed(command)
            except SystemExit as refused:  # a cap below one instruction's needs: say so, keep the rest
                print(f"{module.name}: {name} refused: {str(refused).splitlines()[-1]}")
                del commands[name], times[name]
                continue
            times[name].append(seconds)
            if name != "exec":
                report = json.loads(out)
                rounds[name] = (report["rounds"], report["executions"])
                loops = report.get("loops", [])
    exec_time = statistics.median(times["exec"])
    print(f"{module.name}: exec {exec_time:.2f} s")
    for name in [name for name in times if name != "exec"]:
        median = statistics.median(times[name])
        count, executions = rounds[name]
        print(f"  {name}: {median:.2f} s, {count} rounds, {executions} executions: {median / exec_time:.2f}x exec")
    for loop in loops:
        print(
            f"  loop %{loop['site']}: {loop['iterations_a']} iterations, {len(loop['traced'])} traced (cap {loop['cap']})"
        )


if __name__ == "__main__":
    main()
