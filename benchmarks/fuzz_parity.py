"""The differential parser fuzzer (tests/parity_fuzz.py) at length: hloopt's accept/refuse beside XLA's.

    HLOOPT_SHARED=../shared python benchmarks/fuzz_parity.py [--mutants 100000] [--seed 0] [--workers 2]
        [--show 5] [--all]

Prints the mutants tried, the count per class, mutants per second, and up to `--show` examples of each
disagreement, grouped by XLA's refusal. The test suite's run (tests/text/test_parity_fuzz.py) is the same
code on a small fixed budget; `--all` counts the documented disagreements as disagreements too.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

import parity_fuzz  # noqa: E402

from hloopt.xla.bridge import IsolatedPool  # noqa: E402


def where(mutant: str, refusal: str | None) -> str:
    """The part of `mutant` a refusal points at (``line:column:``), else its start."""
    found = re.match(r"(\d+):(\d+): ", refusal or "")
    if found is None:
        return mutant[:300]
    line, column = int(found.group(1)), int(found.group(2))
    text = [*mutant.split("\n"), ""][line - 1]
    return f"{line}:{column}: " + text[max(0, column - 80) : column + 40]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--mutants", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--show", type=int, default=5, help="examples shown per disagreement group")
    parser.add_argument("--all", action="store_true", help="count documented disagreements as found")
    args = parser.parse_args()
    shared = Path(os.environ.get("HLOOPT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    texts = parity_fuzz.seeds(shared / "hlo-corpus")
    # The workers unpickle `parity_fuzz.xla_verdicts` by name: they need tests/ on their path.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    started = time.perf_counter()
    with IsolatedPool(args.workers) as pool:
        report = parity_fuzz.run(
            texts, args.mutants, args.seed, pool, (lambda *_: False) if args.all else parity_fuzz.allowed
        )
    seconds = time.perf_counter() - started
    print(
        f"seeds: {len(texts)} corpus modules; mutants tried: {report.tried} in {seconds:.0f}s "
        f"({report.tried / seconds:.0f}/s)"
    )
    for name in sorted(report.counts, key=lambda n: (n not in parity_fuzz.CLASSES, n)):
        print(f"  {name:32} {report.counts[name]}")
    for name, found in report.found.items():
        groups: dict[str, list[tuple[str, str | None, str | None, str]]] = defaultdict(list)
        for item in found:
            groups[re.sub(r"^\d+:\d+: |\d+", "", item[2] or item[1] or "")[:90]].append(item)  # XLA's words first
        print(f"\n== {name}: {len(found)} in {len(groups)} groups")
        for key, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"-- {len(items)}× {key}")
            for kind, ours, theirs, mutant in items[: args.show]:
                print(f"   [{kind}] hloopt: {ours!r:.120} | xla: {theirs!r:.120}")
                print(f"   {where(mutant, theirs or ours)!r}")


if __name__ == "__main__":
    main()
