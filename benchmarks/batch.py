"""A whole dump set: `hloopt run DIR -o OUT --jobs 2` beside XLA's parse+print of the same files, in the same run.

    python benchmarks/batch.py [--corpus ../shared/hlo-corpus/xla] [--jobs 2] [--passes none] [--limit N]

XLA parses and prints every file in this one process (reading included), one
after another, and its time per file is kept. The few modules on which XLA
itself spends more than `--heavy` seconds (the host-offload modules whose
`constant({...})` it fills with hundreds of MB of made-up values) are reported
apart, each on its own line; the rest are compared as one directory:
`hloopt run` as a subprocess, its start-up included, against XLA's sum.
Goal (issue 14): ≤ 3× on the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def xla_times(files: list[Path]) -> dict[Path, float]:
    """XLA's seconds to read, parse and print each file, one process, in order."""
    import jaxlib._hlo as xla

    times: dict[Path, float] = {}
    for path in files:
        start = time.perf_counter()
        xla.hlo_module_from_text(path.read_text()).to_string()
        times[path] = time.perf_counter() - start
    return times


def linked(files: list[Path], root: Path, into: Path) -> Path:
    """A directory of symlinks to `files`, at their paths relative to `root` (hloopt sees the same tree)."""
    for path in files:
        link = into / path.relative_to(root)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)
    return into


def hloopt_run(directory: Path, out: Path, jobs: int, passes: str) -> tuple[float, dict[str, object]]:
    """Wall seconds of the whole `hloopt run` command, and its report's summary."""
    report = out.parent / f"{out.name}.json"
    command = [sys.executable, "-m", "hloopt", "run", str(directory), "-o", str(out), "--jobs", str(jobs)]
    command += ["--report", str(report)] + (["--passes", passes] if passes != "none" else [])
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode not in (0, 1) or not report.exists():
        raise SystemExit(f"hloopt run failed ({result.returncode}):\n{result.stderr[-2000:]}")
    summary: dict[str, object] = json.loads(report.read_text())["summary"]
    return seconds, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(os.environ.get("HLOOPT_SHARED", REPO.parent / "shared")) / "hlo-corpus" / "xla"
    parser.add_argument("--corpus", type=Path, default=default)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--passes", default="none", help="a --passes value, or none for the round trip")
    parser.add_argument("--heavy", type=float, default=1.0, help="seconds of XLA time that set a module apart")
    parser.add_argument("--limit", type=int, default=0, help="only the first N files (0: all)")
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    if not corpus.is_dir():
        raise SystemExit(f"no corpus at {corpus} (set HLOOPT_SHARED or --corpus)")
    files = sorted(corpus.rglob("*.hlo"))[: args.limit or None]
    times = xla_times(files)
    heavy = [path for path in files if times[path] > args.heavy]
    rest = [path for path in files if times[path] <= args.heavy]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours_rest, summary = hloopt_run(linked(rest, corpus, work / "rest"), work / "out-rest", args.jobs, args.passes)
        ours_heavy = {
            path: hloopt_run(linked([path], corpus, work / f"heavy{i}"), work / f"out-heavy{i}", 1, args.passes)[0]
            for i, path in enumerate(heavy)
        }
    xla_rest = sum(times[path] for path in rest)
    label = "round trip" if args.passes == "none" else f"--passes {args.passes}"
    print(f"== {len(files)} modules of {corpus} ({label})")
    print(f"   {len(heavy)} modules on which XLA spends more than {args.heavy:g} s, each on its own:")
    for path in heavy:
        print(f"     {path.name:60s} XLA {times[path]:6.2f}s  hloopt run {ours_heavy[path]:6.2f}s")
    print(f"   the other {len(rest)} modules:")
    print(f"     XLA parse+print, one process, sequential:          {xla_rest:7.2f}s")
    print(f"     hloopt run DIR -o OUT --jobs {args.jobs} (whole command):     {ours_rest:7.2f}s")
    print(f"     ratio {ours_rest / xla_rest:.2f}x (goal ≤ 3x); report summary {summary}")


if __name__ == "__main__":
    main()
