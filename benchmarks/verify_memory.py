"""The memory of `hloopt run DIR --check --verify-numerics` against the size of the dump set.

    python benchmarks/verify_memory.py [--files 40] [--megabytes 1] [--jobs 2]

Makes two dump sets of modules that the round trip changes (non-canonical
spacing), each module `--megabytes` of text (an op_name in its metadata, so
XLA's compile and run stay trivial): `--files` modules, then four times as
many. It runs the command on each as a subprocess and prints the peak resident
memory of the command's own process, the one that tallies the results (its batch
workers and their XLA processes each hold one file at a time), and the ratio
between the two sets. Goal (issue 14): the command's memory does not grow with
the number of modules, so the ratio stays near 1 while the dump set grows 4×.
(Before stop 21 the command held every changed module's texts until the end:
84 MB against 228 MB, 2.71×, with the defaults and --files 20.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

#: Runs the CLI and, as it exits, prints its own peak RSS (KiB), its children left out.
_MEASURED = """
import atexit, resource, sys
from hloopt.cli.main import main
atexit.register(lambda: print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))
sys.argv[0] = "hloopt"
main()
"""


def module(index: int, megabytes: float) -> str:
    """A module the round trip changes (its spacing is not XLA's), `megabytes` long."""
    pad = "x" * int(megabytes * 1_000_000)
    return (
        f"HloModule m{index}\n\nENTRY e {{\n  p  =  f32[4] parameter(0)\n"
        f'  ROOT r  =  f32[4] add(p, p), metadata={{op_name="{pad}"}}\n}}\n'
    )


def run(files: int, megabytes: float, jobs: int, root: Path) -> tuple[int, float]:
    """(the command's own peak KiB, MB of module text) over `files` modules."""
    directory = root / f"set-{files}"
    directory.mkdir()
    for index in range(files):
        (directory / f"m{index:04d}.hlo").write_text(module(index, megabytes))
    report = root / f"report-{files}.json"
    command = [sys.executable, "-c", _MEASURED, "run", str(directory), "--check", "--verify-numerics"]
    command += ["--jobs", str(jobs), "--report", str(report)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    peaks = [line.split() for line in result.stderr.splitlines() if line.startswith("PEAK ")]
    summary = json.loads(report.read_text())["summary"] if report.exists() else None
    if result.returncode != 1 or not peaks or summary is None or summary["changed"] != files:
        raise SystemExit(f"hloopt run did not compare every module ({result.returncode}):\n{result.stderr[-2000:]}")
    compared = json.loads(report.read_text())["modules"]
    if not all(m["numerics"] and m["numerics"]["ok"] for m in compared):
        raise SystemExit("a comparison failed: " + json.dumps(compared[0]["numerics"])[:2000])
    text = sum(p.stat().st_size for p in directory.iterdir()) / 1e6
    return int(peaks[0][1]), text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        rows = [run(count, args.megabytes, args.jobs, Path(scratch)) for count in (args.files, 4 * args.files)]
    for count, (own, text) in zip((args.files, 4 * args.files), rows):
        print(f"{count:5d} changed modules, {text:7.1f} MB of text: hloopt run's own peak {own / 1024:7.1f} MB")
    ratio = rows[1][0] / rows[0][0]
    print(f"own peak, 4× the modules against 1×: {ratio:.2f}× (goal: flat, about 1×; the text grew 4×)")


if __name__ == "__main__":
    main()
