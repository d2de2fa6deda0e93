"""`arrays.tracing`: tolerances, the verdict, the path back from an output, NaN helpers."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hloopt.arrays.tracing import (
    Traced,
    first_nonfinite,
    measure,
    over,
    path_back,
    tolerance,
    value_at,
    verdict,
)

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_tolerance_is_one_step_of_a_narrow_type_and_none_of_a_wide_one() -> None:
    assert (tolerance("bf16"), tolerance("f8e4m3fn"), tolerance("f32"), tolerance("f64"), tolerance("s32")) == (
        1,
        1,
        0,
        0,
        0,
    )
    near = np.array([18.0], BF16)
    step = np.array([18.125], BF16)  # 0.125 near 18 in bf16 is one ULP
    assert not over(measure(near, step))
    assert over(measure(near, np.array([18.25], BF16)))
    assert over(
        measure(
            np.array([1.0], np.float32), np.nextafter(np.array([1.0], np.float32), np.float32(2)).astype(np.float32)
        )
    )


def test_verdict_classes() -> None:
    reference = np.linspace(-3, 3, 64)
    a = reference.astype(BF16)
    assert verdict(a, reference.astype(np.float32), reference) == "better"
    assert verdict(a, a, reference) == "precision"
    assert verdict(a, (reference * 1.5).astype(BF16), reference) == "suspect"
    nan = reference.astype(BF16)
    nan[3] = np.nan
    assert verdict(a, nan, reference) == "suspect"
    assert verdict(np.array([1], np.int32), np.array([1], np.int32), np.array([1], np.float64)) is None


def _traced(name: str, propagated: float, local: float) -> Traced:
    a = np.array([1.0], np.float32)
    return Traced(
        name,
        name,
        name,
        "",
        measure(a, (a + propagated).astype(np.float32)),
        measure(a, (a + local).astype(np.float32)),
    )


def test_path_back_follows_the_largest_propagated_error_to_where_it_entered() -> None:
    by_a = {
        "out": _traced("out", 0.5, 0),
        "left": _traced("left", 0.25, 0),
        "right": _traced("right", 0.5, 0),
        "made": _traced("made", 0.5, 0.5),
        "clean": _traced("clean", 0, 0),
    }
    inputs = {"out": ["left", "right"], "right": ["made", "clean"], "made": ["clean"]}
    assert path_back("out", by_a, inputs) == ("out", "right", "made")


def test_first_nonfinite_and_value_at() -> None:
    values = np.array([[1, 2], [np.inf, np.nan]], np.float32)
    assert first_nonfinite(values) == (1, 0)
    assert first_nonfinite(np.array([1, 2], np.float32)) is None and first_nonfinite(np.array([1], np.int32)) is None
    assert value_at(values, (0, 1)) == "2.0"
    assert value_at(np.array([1, 3], np.float32), (1, 0)) == "float32[2] in [1, 3]"


def test_ulps_of_64_bit_floats_count_across_zero() -> None:
    """f64 and c128 bit patterns take the whole 64 bits: -2 and 2 are 2**63 ULPs apart, not an overflow."""
    one_up = measure(np.array([1.0, 3.0]), np.array([np.nextafter(1.0, 2.0), 3.0]))
    assert (one_up.max_ulp, one_up.ulp_type) == (1, "f64")
    assert measure(np.array([-2.0]), np.array([2.0])).max_ulp == 2**63
    assert measure(np.array([1 + 1j]), np.array([1 - 1j])).max_ulp == 2 * 0x3FF0000000000000
    assert measure(np.array([0.0]), np.array([-0.0])).max_ulp == 0
