"""``compare(m, m)`` over every XLA corpus module: bit-identical whenever XLA can run it on the CPU.

A module that contains a collective (all-gather, all-reduce…) may differ from
itself: on one CPU device XLA leaves the other participants' part of the output
unwritten, so it holds whatever memory held. Such differences are counted,
not failed; any other difference fails.

Modules run in forked worker processes, two at a time (XLA crashes on some of
them). Per-module work is capped: inputs plus outputs over `MAX_BYTES` are
compiled but not executed, and a module still running after `TIMEOUT` seconds
(the corpus has infinite while loops) counts as not runnable.
"""
from __future__ import annotations

import collections
import csv
import re
import time
from functools import partial
from pathlib import Path

from hloopt.execution import CompareReport, ExecutionError, compare
from hloopt.xla_bridge import XlaCrash, XlaError, isolated_map

MAX_BYTES = 16 << 20
TIMEOUT = 10.0
_COLLECTIVE = re.compile(r"^(all-gather|all-reduce|all-to-all|ragged-all-to-all|reduce-scatter|collective-)")


def _collective_modules(corpus: Path) -> set[str]:
    """Modules whose opcodes (INDEX.tsv, fused computations included) have a collective."""
    with (corpus / "INDEX.tsv").open(newline="") as index:
        rows = csv.DictReader(index, delimiter="\t")
        return {
            Path(row["file"]).name
            for row in rows
            if any(_COLLECTIVE.match(opcode) for opcode in row["opcodes"].split(","))
        }


def _outcome(result: object) -> str:
    if isinstance(result, CompareReport):
        return "bit-identical" if result.bit_identical else "differs"
    if isinstance(result, XlaCrash):
        return f"crashed or hung at {result.stage}"
    if isinstance(result, XlaError):
        return f"rejected at {result.stage}"
    if isinstance(result, ExecutionError) and "over the limit" in str(result):
        return "compiled, too large to execute"
    return f"other: {result}"


def test_every_runnable_corpus_module_is_bit_identical_to_itself(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "xla").glob("*.hlo"))
    assert len(files) > 8000
    texts = [path.read_text() for path in files]
    started = time.monotonic()
    results = isolated_map(partial(compare, max_bytes=MAX_BYTES), [(text, text) for text in texts], timeout=TIMEOUT)
    elapsed = time.monotonic() - started
    collectives = _collective_modules(corpus_dir)
    outcomes = {path.name: _outcome(result) for path, result in zip(files, results)}
    outcomes.update(
        {name: "differs: collective on one device" for name, outcome in outcomes.items()
         if outcome == "differs" and name in collectives}
    )
    counts = collections.Counter(outcomes.values())
    print(f"\n{len(files)} modules in {elapsed:.0f} s: " + ", ".join(f"{n} {what}" for what, n in counts.most_common()))
    differing = sorted(name for name, outcome in outcomes.items() if outcome == "differs")
    assert not differing, differing
    unexplained = {name: outcome for name, outcome in outcomes.items() if outcome.startswith("other")}
    assert not unexplained, unexplained
    assert counts["bit-identical"] > 4000
