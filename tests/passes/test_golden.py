"""Golden tests: golden/<pass>.hlo → golden/<pass>.expected.hlo, one `// -----` case per rule.

Each case starts with a ``// RULE: …`` line naming the rule it shows; the expected
file holds the outputs under the same labels. Regenerate with HLOOPT_REGEN_GOLDEN=1
(then review the diff by eye). Every input and every output must be accepted by XLA.
"""

from __future__ import annotations

import os

import pytest
import xla_helper
from pass_testing import GOLDEN, Case, golden_inputs, read_cases, run_passes, still_matching, write_cases

from hloopt.text.parser import parse

PASSES = sorted(p.stem for p in GOLDEN.glob("*.hlo") if ".expected" not in p.name)
CASES = golden_inputs()


def _output(case: Case) -> tuple[str, bool]:
    module = parse(case.text, str(case.path))
    report = run_passes(module, case.passes)
    return module.to_text(), report.changed


@pytest.mark.parametrize("pass_name", PASSES)
def test_golden(pass_name: str) -> None:
    cases = golden_inputs(pass_name)
    outputs = [_output(case) for case in cases]
    assert any(changed for _, changed in outputs), "a golden file should exercise its pass"
    expected_path = GOLDEN / f"{pass_name}.expected.hlo"
    if os.environ.get("HLOOPT_REGEN_GOLDEN") == "1":
        write_cases(expected_path, [(case.rule, text) for case, (text, _) in zip(cases, outputs)])
    assert expected_path.exists(), f"no {expected_path.name}; run with HLOOPT_REGEN_GOLDEN=1 and review it"
    expected = read_cases(expected_path)
    assert [c.rule for c in expected] == [c.rule for c in cases], "the expected file's cases do not match the input's"
    for case, (text, _), want in zip(cases, outputs, expected):
        assert text == want.text, f"{pass_name}: RULE {case.rule}"


def _id(case: Case) -> str:
    return f"{case.path.stem}: {case.rule[:60]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_golden_accepted_by_xla(case: Case) -> None:
    xla_helper.to_stablehlo(case.text)
    (expected,) = [c for c in read_cases(GOLDEN / f"{case.path.stem}.expected.hlo") if c.rule == case.rule]
    xla_helper.to_stablehlo(expected.text)
    assert xla_helper.canonical(expected.text) == expected.text


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_golden_idempotent_and_gate_clear(case: Case) -> None:
    (expected,) = [c for c in read_cases(GOLDEN / f"{case.path.stem}.expected.hlo") if c.rule == case.rule]
    module = parse(expected.text, str(case.path))
    for hlo_pass in case.pass_objects():
        assert not still_matching(hlo_pass, module)
    assert not run_passes(module, case.passes).changed
    assert module.to_text() == expected.text
