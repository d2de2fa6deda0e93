"""Golden tests: tests/golden/<pass>/<case>.hlo → <case>.expected.hlo, one pass at a time.

Regenerate with HLOOPT_REGEN_GOLDEN=1 (then review the diff by eye). Both the
input and the expected output must be accepted by XLA.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import xla_helper

from hloopt.text.parser import parse
from hloopt.passes.pipeline import run_pipeline
from hloopt.passes.registry import lookup

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(p for p in GOLDEN.glob("*/*.hlo") if not p.name.endswith(".expected.hlo"))


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_golden(case: Path) -> None:
    module = parse(case.read_text(), str(case))
    report = run_pipeline(module, case.parent.name)
    assert report.changed, "a golden case should exercise its pass"
    output = module.to_text()
    expected = case.with_suffix(".expected.hlo")
    if os.environ.get("HLOOPT_REGEN_GOLDEN") == "1":
        expected.write_text(output)
    assert expected.exists(), f"no {expected.name}; run with HLOOPT_REGEN_GOLDEN=1 and review it"
    assert output == expected.read_text()


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_golden_accepted_by_xla(case: Path) -> None:
    xla_helper.to_stablehlo(case.read_text())
    expected = case.with_suffix(".expected.hlo")
    xla_helper.to_stablehlo(expected.read_text())
    assert xla_helper.canonical(expected.read_text()) == expected.read_text()


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_golden_idempotent_and_gate_clear(case: Path) -> None:
    text = case.with_suffix(".expected.hlo").read_text()
    module = parse(text, str(case))
    assert not lookup(case.parent.name).make("xla").matches(module)
    assert not run_pipeline(module, case.parent.name).changed
    assert module.to_text() == text
