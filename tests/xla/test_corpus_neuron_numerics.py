"""``compare(m, m, numerics="xla,neuron")`` over the XLA corpus: every module XLA runs also runs with the
device's converts (so XLA accepts every emulated module), and a module without converts gives
bit-identical results.

First each module runs under XLA alone, capped like the self-compare (`test_corpus_self_compare`):
inputs plus outputs over `MAX_BYTES` are compiled but not run, and a module still running after
`TIMEOUT` seconds counts as hung. Every module that XLA ran, or compiled and found too large,
then runs as the pair: XLA's numerics against the device's. The pair parses and emulates a copy
and compiles two modules, the emulated one larger, so it gets `PAIR_TIMEOUT`; those modules are
known to end.

A module without converts must give bit-identical results, unless XLA itself runs it
differently twice (`_nondeterministic_modules`) or it has elided constants (``{...}``), which
XLA's parser fills from a counter that moves with every parse, so two parses differ.

The subset: every module whose opcodes (INDEX.tsv) include ``convert`` or ``stochastic-convert``,
and every sixteenth of the others in file order (about 470). A module without converts is left as
it is by the pass, so what runs is hloopt's print of it, which `test_corpus_roundtrip` already
checks against XLA's own for every module; a sixteenth of them shows the emulation leaves them
alone, at a sixteenth of the cost. A quarter of that subset runs on the newest jaxlib line CI pins, another
eighth on an older one (`conftest.EXECUTION_SWEEP`). ``HLOOPT_CORPUS_FULL=1`` runs them all.
"""

from __future__ import annotations

import csv
import os
import time
from functools import partial
from pathlib import Path

import pytest
from conftest import EXECUTION_SWEEP, sweep_sample, sweep_step
from test_corpus_self_compare import TIMEOUT, _nondeterministic_modules, _outcome

from hloopt.xla.bridge import isolated_map
from hloopt.xla.running import compare

pytestmark = pytest.mark.corpus

MAX_BYTES = 16 << 20
PAIR_TIMEOUT = 60.0
CONVERTS = {"convert", "stochastic-convert"}
EVERY_OTHER = 16
RAN = ("bit-identical", "differs")
COMPILED = "compiled, too large to execute"


def _subset(corpus: Path) -> tuple[list[Path], set[str]]:
    """The modules to run (see the module docstring) and the names of those with converts."""
    with (corpus / "INDEX.tsv").open(newline="") as index:
        rows = csv.DictReader(index, delimiter="\t")
        opcodes = {Path(row["file"]).name: set(row["opcodes"].split(",")) for row in rows}
    with_converts = {name for name, used in opcodes.items() if used & CONVERTS}
    files = sorted((corpus / "xla").glob("*.hlo"))
    others = [path for path in files if path.name not in with_converts]
    step = 1 if os.environ.get("HLOOPT_CORPUS_FULL") == "1" else EVERY_OTHER
    chosen = {path.name for path in others[::step]} | with_converts
    return sweep_sample([path for path in files if path.name in chosen], *EXECUTION_SWEEP), with_converts


def test_every_module_xla_runs_also_runs_with_the_device_numerics(corpus_dir: Path) -> None:
    files, with_converts = _subset(corpus_dir)
    assert len(with_converts) > 500 and len(files) > 1000 // sweep_step(*EXECUTION_SWEEP)
    texts = {path.name: path.read_text() for path in files}
    started = time.monotonic()
    alone = isolated_map(partial(compare, max_bytes=MAX_BYTES), [(t, t) for t in texts.values()], timeout=TIMEOUT)
    xla = {name: _outcome(result) for name, result in zip(texts, alone)}
    runnable = [name for name, outcome in xla.items() if outcome in (*RAN, COMPILED)]
    pair = partial(compare, max_bytes=MAX_BYTES, labels=("xla", "neuron"), numerics=("xla", "neuron"))
    paired = isolated_map(pair, [(texts[name], texts[name]) for name in runnable], timeout=PAIR_TIMEOUT)
    elapsed = time.monotonic() - started
    device = {name: _outcome(result) for name, result in zip(runnable, paired)}
    ran = [name for name in runnable if xla[name] in RAN]
    differing = sorted(name for name in ran if device[name] == "differs")
    print(
        f"\n{len(files)} modules ({len(with_converts)} with converts) in {elapsed:.0f} s: {len(ran)} ran under XLA, "
        f"{len([name for name in ran if name in with_converts])} of them with converts; "
        f"{len(differing)} differ between XLA's and the device's numerics "
        f"({len([name for name in differing if name in with_converts])} with converts); "
        f"{len(runnable) - len(ran)} compiled under both, too large to run"
    )
    failed = {name: device[name] for name in ran if device[name] not in RAN}
    assert not failed, failed  # XLA ran it; the emulated copy must run too
    too_large = {name: device[name] for name in runnable if xla[name] == COMPILED and device[name] != COMPILED}
    assert not too_large, too_large  # XLA compiled it; the emulated copy must compile too
    nondeterministic = _nondeterministic_modules(corpus_dir)
    elided = {name for name in ran if "{...}" in texts[name]}
    explained = with_converts | nondeterministic | elided | {name for name in ran if xla[name] == "differs"}
    unexplained = [name for name in differing if name not in explained]
    assert not unexplained, unexplained  # no convert, and XLA runs it the same twice: must be bit-identical
    assert len(ran) > 500 // sweep_step(*EXECUTION_SWEEP)
