"""`arrays.distribution`: an output's error binned by powers of two of ULPs, and its capped scatter sample."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hloopt.arrays.comparing import compare_outputs, ulp_distances
from hloopt.arrays.distribution import SCATTER_CAP, ULP_BINS, _bins, distribution, ulp_bin_label


def test_every_distance_up_to_2_to_the_16_lands_in_its_bit_length_bin() -> None:
    distances = np.arange(1 << 16, dtype=np.int64)
    counts = _bins(distances)
    expected = [1] + [1 << (k - 1) for k in range(1, 17)]  # bin k holds [2^(k-1), 2^k)
    assert list(counts) == expected


@pytest.mark.parametrize("k", range(1, 64))
def test_the_edges_of_each_power_of_two_bin(k: int) -> None:
    """2^(k-1) and 2^k - 1 are in bin k, 2^k in bin k+1, past float64's 53 exact bits too."""
    low, high = np.uint64(1) << np.uint64(k - 1), (np.uint64(1) << np.uint64(k)) - np.uint64(1)
    counts = _bins(np.array([low, high], dtype=np.uint64))
    assert counts == (0,) * k + (2,)
    if k < 63:
        assert _bins(np.array([high + np.uint64(1)], np.uint64)) == (0,) * (k + 1) + (1,)


def test_python_ints_beyond_int64_go_to_the_last_bin() -> None:
    counts = _bins(np.array([0, 1 << 64, (1 << 64) + 5], dtype=object))
    assert len(counts) == ULP_BINS and counts[0] == 1 and counts[-1] == 2


def test_bin_labels() -> None:
    assert [ulp_bin_label(i) for i in range(5)] == ["0", "1", "2-3", "4-7", "8-15"]
    assert ulp_bin_label(ULP_BINS - 1) == ">=2^64"


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int8, np.int64, np.complex64]
)
def test_the_largest_distance_is_compare_outputs_max_ulp(dtype: type) -> None:
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(200) * 4).astype(dtype)
    b = (a.astype(np.float64 if np.dtype(dtype).kind != "c" else np.complex128) * 1.01 + 1).astype(dtype)
    measured = ulp_distances(a, b)
    assert measured is not None
    assert int(measured[0].max()) == compare_outputs(0, a, b, ("x", "x"), 0, 0).max_ulp


def test_counts_cover_every_element_but_nan_mismatches() -> None:
    a = np.array([1.0, 2.0, np.nan, np.nan, 4.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, 3.0, np.nextafter(np.float32(4), np.float32(5))], np.float32)
    spread = distribution(0, a, b)
    nan_mismatches = compare_outputs(0, a, b, ("f32", "f32"), 0, 0).nan_mismatches
    assert nan_mismatches == 2
    assert spread.ulp_counts == (2, 1)  # 1.0 and both-NaN are 0 ULPs; 4.0 is one
    assert sum(spread.ulp_counts) + nan_mismatches == a.size
    assert (spread.sample_a, spread.sample_b) == ((1.0, 4.0), (1.0, float(b[4])))  # finite pairs only


def test_a_large_output_keeps_at_most_the_cap_and_its_worst_element() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1000, 1001)).astype(np.float32)
    b = a.copy()
    b[517, 3] += 1.0  # the worst element, off the stride
    comparison = compare_outputs(0, a, b, ("f32", "f32"), 0, 0)
    spread = distribution(0, a, b, comparison.worst_index)
    assert spread.sampled and len(spread.sample_a) <= SCATTER_CAP
    assert float(a[517, 3]) in spread.sample_a and float(b[517, 3]) in spread.sample_b
    assert sum(spread.ulp_counts) == a.size and spread.ulp_counts[0] == a.size - 1


def test_a_small_output_is_drawn_whole() -> None:
    a = np.arange(10, dtype=np.float32)
    spread = distribution(3, a, a + 1)
    assert spread.stride == 1 and not spread.sampled and spread.sample_a == tuple(float(x) for x in a)
    assert spread.index == 3 and spread.ulp_type == "f32"


def test_kinds_that_differ_have_no_histogram() -> None:
    spread = distribution(0, np.array([1, 2], np.int32), np.array([1.0, 2.5], np.float32))
    assert spread.ulp_counts == () and spread.ulp_type is None and spread.sample_b == (1.0, 2.5)


def test_f64_distances_do_not_overflow() -> None:
    """A 64-bit float's steps are counted apart from its sign, so the widest distance fits (it raised before)."""
    big = np.finfo(np.float64).max
    assert compare_outputs(0, np.array([1.0]), np.array([1.5]), ("f64", "f64"), 0, 0).max_ulp == 1 << 51
    widest = compare_outputs(0, np.array([-big]), np.array([big]), ("f64", "f64"), 0, 0).max_ulp
    assert widest == 2 * 0x7FEFFFFFFFFFFFFF
