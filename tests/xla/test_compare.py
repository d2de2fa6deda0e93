"""The compare report: what it catches, what it ignores, how it measures, how it serialises."""

from __future__ import annotations

import json
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hloopt.arrays import ExecutionError
from hloopt.arrays.comparing import CompareReport, compare_outputs
from hloopt.xla.running import compare

SCALED = """HloModule scaled
ENTRY main {
  x = {T}[4] parameter(0)
  k = {T}[4] constant({1, 2, 3, 4})
  ROOT {NAME} = {T}[4] multiply(x, k)
}
"""

LOG = """HloModule log
ENTRY main {
  x = f32[6] parameter(0)
  ROOT y = f32[6] log(x)
}
"""


def scaled(element_type: str = "f32", name: str = "product", constant: str = "{1, 2, 3, 4}") -> str:
    return SCALED.replace("{T}", element_type).replace("{NAME}", name).replace("{1, 2, 3, 4}", constant)


def test_same_module_is_bit_identical() -> None:
    report = compare(scaled(), scaled())
    assert report.ok and report.bit_identical and report.seed == 0
    (output,) = report.outputs
    assert (output.max_abs_err, output.max_ulp, output.over_tolerance, output.worst_index) == (0.0, 0, 0, None)


def test_renamed_instruction_is_silent() -> None:
    report = compare(scaled(name="product"), scaled(name="renamed.7"))
    assert report.ok and report.bit_identical


@pytest.mark.slow
def test_changed_constant_is_caught() -> None:
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    report = compare(scaled(), scaled(constant="{1, 2, 3.001, 4}"), inputs=[x])
    (output,) = report.outputs
    assert not report.ok and not output.bit_identical and report.seed is None
    assert output.over_tolerance == 1 and output.worst_index == (2,)
    assert (output.worst_a, output.worst_b) == ("1.5", "1.5005")
    assert output.max_abs_err == pytest.approx(0.0005, rel=1e-3)
    assert output.max_rel_err == pytest.approx(0.001 / 3, rel=1e-3)
    assert output.max_ulp == 4194 and output.ulp_type == "f32"  # 0.0005 / 2**-23 at 1.5
    assert compare(scaled(), scaled(constant="{1, 2, 3.001, 4}"), inputs=[x], rtol=1e-3).ok


def test_upcast_parameter_gets_exact_inputs_and_ulps_in_the_lower_type() -> None:
    report = compare(scaled("bf16"), scaled("f32"), seed=5)
    (output,) = report.outputs
    assert (output.type_a, output.type_b, output.ulp_type) == ("bf16", "f32", "bf16")
    assert not output.bit_identical
    assert output.max_ulp is not None and output.max_ulp <= 1  # f32 product rounded once to bf16
    assert report.ok is False or output.max_rel_err < 2**-8


def test_random_inputs_are_rounded_through_the_narrower_type() -> None:
    """f32 A and bf16 B: A's random f32 inputs are made bf16-representable so B gets them exactly."""
    report = compare(scaled("f32"), scaled("bf16"), seed=1)
    (output,) = report.outputs
    assert output.ulp_type == "bf16" and output.max_ulp is not None and output.max_ulp <= 1


def test_given_inputs_that_do_not_fit_a_narrower_parameter_are_refused() -> None:
    x = np.array([1 + 2**-20, 1, 1, 1], np.float32)
    with pytest.raises(ExecutionError, match="input 0: 1 of 4 values change when converted from float32 to bf16"):
        compare(scaled("f32"), scaled("bf16"), inputs=[x])


def test_nans_with_the_same_bits_are_identical() -> None:
    x = np.array([-1.0, 0.0, 1.0, np.e, np.nan, np.inf], np.float32)
    report = compare(LOG, LOG, inputs=[x])
    assert report.ok and report.bit_identical


def test_nan_against_a_number_is_over_tolerance_and_first_in_worst() -> None:
    a = np.array([[np.nan, 1.0], [2.0, 3.0]], np.float32)
    b = np.array([[np.nan, 1.0], [np.nan, 3.5]], np.float32)
    output = compare_outputs(0, a, b, ("f32", "f32"), 1e-5, 1e-8)
    assert output.nan_mismatches == 1 and output.over_tolerance == 2
    assert (
        output.worst_index == (1, 0) and output.max_abs_err == 0.5 and output.max_ulp == 2**21
    )  # 0.5 / 2**-22 in [2, 4)


def test_ulp_distance_counts_representable_steps() -> None:
    def ulps(
        a: list[float] | list[np.floating[Any]], b: list[float] | list[np.floating[Any]], dtype: type
    ) -> int | None:
        return compare_outputs(0, np.array(a, dtype), np.array(b, dtype), ("x", "x"), 0, 0).max_ulp

    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    assert ulps([1.0], [np.nextafter(np.float32(1), np.float32(2))], np.float32) == 1
    assert ulps([-0.0], [0.0], np.float32) == 0
    assert ulps([-tiny], [tiny], np.float32) == 2
    assert ulps([np.finfo(np.float32).max], [np.inf], np.float32) == 1
    assert ulps([1.0], [2.0], ml_dtypes.bfloat16) == 128
    assert ulps([0.5], [1.0], ml_dtypes.float8_e4m3fn) == 8
    assert ulps([1.0], [4.0], ml_dtypes.float8_e8m0fnu) == 2
    assert ulps([3], [-5], np.int8) == 8
    assert ulps([2**62], [-(2**62)], np.int64) == 2**63


def test_signed_zero_is_not_bit_identical_but_within_tolerance() -> None:
    output = compare_outputs(0, np.array([0.0], np.float32), np.array([-0.0], np.float32), ("f32", "f32"), 0, 0)
    assert not output.bit_identical and output.within_tolerance and output.max_ulp == 0


def test_different_shapes_are_an_error() -> None:
    with pytest.raises(ExecutionError, match="shapes differ"):
        compare_outputs(0, np.zeros(2, np.float32), np.zeros(3, np.float32), ("f32", "f32"), 0, 0)
    with pytest.raises(ExecutionError, match="input 0: A takes f32\\[4\\], B takes f32\\[5\\]"):
        compare(scaled(), scaled().replace("[4]", "[5]").replace("{1, 2, 3, 4}", "{1, 2, 3, 4, 5}"))


def test_json_is_strict_and_complete() -> None:
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([1.0, np.inf], np.float32)
    report = CompareReport((compare_outputs(0, a, b, ("f32", "f32"), 1e-5, 1e-8),), 1e-5, 1e-8, 3)
    data = json.loads(report.to_json(), parse_constant=pytest.fail)  # no Infinity/NaN literals
    assert data["ok"] is False and data["seed"] == 3
    (output,) = data["outputs"]
    assert output["max_abs_err"] == "inf" and output["max_rel_err"] == "inf"
    assert output["worst_index"] == [1] and output["elements"] == 2 and output["within_tolerance"] is False
    assert set(output) >= {"shape", "type_a", "type_b", "bit_identical", "max_ulp", "ulp_type", "over_tolerance"}


def test_render_is_a_table_with_a_verdict() -> None:
    text = compare(scaled(), scaled(constant="{1, 2, 3, 5}"), seed=2).render()
    header, row, verdict = text.splitlines()
    assert header.split()[:4] == ["output", "shape", "type", "bit-identical"]
    assert row.split()[:4] == ["0", "[4]", "f32", "no"] and "[3]:" in row
    assert verdict == "1 of 1 outputs over tolerance (rtol=1e-05, atol=1e-08, seed=2)"
