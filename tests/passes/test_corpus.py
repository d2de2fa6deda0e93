"""The passes over the whole shared corpus: no crash, idempotent, gates cleared, XLA accepts.

Whole on the newest jaxlib line CI pins; a quarter on an older line (`PASSES_SWEEP`): the passes are
hloopt's own code, the same on every line, and only the last step asks XLA.

One module-scoped sweep runs every configuration on every file in-process and
keeps the outputs; XLA then judges the outputs in the bridge's crash-isolating
workers (some inputs crash jaxlib). Needs ../shared (skips without it unless
HLOOPT_REQUIRE_SHARED=1).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import xla_helper
from conftest import sweep_sample, sweep_step
from pass_testing import run_passes, still_matching

from hloopt.analysis.verifier import verify
from hloopt.errors import HloError
from hloopt.passes.registry import select
from hloopt.text.parser import parse
from hloopt.xla.bridge import XlaCrash, isolated_map

pytestmark = pytest.mark.corpus
CONFIGS = (
    "batchnorm-training-upcast",
    "upcast-all-to-fp32",
    "neuron-int-matmul-downcast",
    "fold-constant-converts",
    "all,fold-constant-converts",
    "emulate-neuron-converts",
    "neuron-auto-cast",  # matmult, bf16
    "neuron-auto-cast{mode=all}",
)
HERE = Path(__file__).resolve().parent
#: Every how-many-th module the sweep takes on the newest jaxlib line and on an older one (`sweep_sample`).
PASSES_SWEEP = (1, 4)


@dataclass
class Sweep:
    out_dir: Path
    crashes: list[str] = field(default_factory=list)
    not_idempotent: list[str] = field(default_factory=list)
    gate_left: list[str] = field(default_factory=list)
    unchanged_differs: list[str] = field(default_factory=list)
    refused: Counter = field(default_factory=Counter)
    changed: Counter = field(default_factory=Counter)
    #: (config, input path, output path) of every changed module whose input XLA accepts.
    outputs: list[tuple[str, Path, Path]] = field(default_factory=list)


def _xla_accepted_inputs(corpus: Path) -> set[str]:
    """Files the corpus index says XLA parses and converts to StableHLO."""
    accepted = set()
    lines = (corpus / "INDEX.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t")))
        if row.get("parses_with_xla") == "yes" and row.get("converts_to_stablehlo") == "yes":
            accepted.add(row["file"])
    return accepted


@pytest.fixture(scope="module")
def sweep(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    result = Sweep(tmp_path_factory.mktemp("corpus-out"))
    accepted = _xla_accepted_inputs(corpus_dir)
    # headerless/ too: the only modules with acosh, asin and sinh.
    modules = sorted((corpus_dir / "xla").glob("*.hlo")) + sorted((corpus_dir / "headerless").glob("*.hlo"))
    for path in sweep_sample(modules, *PASSES_SWEEP):
        text = path.read_text()
        try:
            parsed = parse(text, str(path))
        except HloError:
            continue
        plain = parsed.to_text()
        try:  # the verifier on an untouched module: a clear refusal at most, never a crash
            verify(parsed)
        except HloError as err:
            result.crashes += [] if str(err) else [f"verify {path.name}: empty error"]
        except Exception as err:
            result.crashes.append(f"verify {path.name}: {err!r}")
        for config in CONFIGS:
            where = f"{config} {path.name}"
            module = parse(text, str(path))
            try:
                report = run_passes(module, config)
            except HloError as err:  # a clear refusal is allowed, a crash is not
                result.refused[config] += 1
                result.crashes += [] if str(err) else [where + ": empty error"]
                continue
            except Exception as err:
                result.crashes.append(f"{where}: {err!r}")
                continue
            out = module.to_text()
            if not report.changed:
                if out != plain:
                    result.unchanged_differs.append(where)
                continue
            result.changed[config] += 1
            again = parse(out, str(path))
            run_passes(again, config, check=False)
            if again.to_text() != out:
                result.not_idempotent.append(where)
            left = [
                i.name for info in select(config)[1] for i in still_matching(info.create("xla"), parse(out, str(path)))
            ]
            if left:
                result.gate_left.append(f"{where}: {left[:3]}")
            if path.relative_to(corpus_dir).as_posix() in accepted:
                target = result.out_dir / config.replace(",", "+") / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(out)
                result.outputs.append((config, path, target))
    return result


def test_no_crash(sweep: Sweep) -> None:
    assert not sweep.crashes, sweep.crashes[:10]
    assert sum(sweep.changed.values()) > 1000 // sweep_step(*PASSES_SWEEP), sweep.changed


def test_idempotent(sweep: Sweep) -> None:
    assert not sweep.not_idempotent, sweep.not_idempotent[:10]


def test_no_gate_left(sweep: Sweep) -> None:
    assert not sweep.gate_left, sweep.gate_left[:10]


def test_untouched_modules_are_the_plain_round_trip(sweep: Sweep) -> None:
    assert not sweep.unchanged_differs, sweep.unchanged_differs[:10]


def test_xla_accepts_outputs(sweep: Sweep, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every changed output of an input XLA accepts is accepted too (parse + StableHLO conversion)."""
    # The workers unpickle xla_helper.to_stablehlo by name, so they need this folder on their path.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    texts = [(out.read_text(),) for _, _, out in sweep.outputs]
    results = isolated_map(xla_helper.to_stablehlo, texts, workers=2)
    by_output = {str(out): result for (_, _, out), result in zip(sweep.outputs, results)}
    accepted = Counter(config for config, _, out in sweep.outputs if not isinstance(by_output[str(out)], HloError))
    print(
        f"\ncorpus: changed {dict(sweep.changed)}; XLA-accepted outputs {dict(accepted)}; refused {dict(sweep.refused)}"
    )
    crashed = [path for path, result in by_output.items() if isinstance(result, XlaCrash)]
    rejected = [
        f"{path}: {result}"
        for path, result in by_output.items()
        if isinstance(result, HloError) and not isinstance(result, XlaCrash)
    ]
    assert not rejected, rejected[:10]
    assert len(crashed) <= 5, crashed[:10]
