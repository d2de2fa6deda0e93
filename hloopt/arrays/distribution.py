"""How the error of one output is spread, in a size that does not grow with the output: the ULP distances
binned by powers of two, and at most `SCATTER_CAP` (A, B) pairs for a plot of B against A.

Computed where the outputs are (the XLA worker), from the arrays `compare_outputs` measured, so that an HTML
report of a 1e7-element output holds a few kilobytes of it rather than the output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hloopt.arrays.comparing import ulp_distances, widened

#: The most (A, B) pairs kept for the scatter plot of an output, evenly strided over it, its worst element added.
SCATTER_CAP = 5000
#: Bins of the ULP histogram: 0, 1, then [2^(k-1), 2^k) for k up to 64, and one for 2^64 and beyond.
ULP_BINS = 66


def ulp_bin_label(index: int) -> str:
    """The ULP counts bin `index` holds: ``0``, ``1``, ``2-3``, ``4-7``, … (`ULP_BINS`)."""
    if index <= 1:
        return str(index)
    if index == ULP_BINS - 1:
        return ">=2^64"
    low, high = 1 << (index - 1), (1 << index) - 1
    return f"{low}-{high}"


@dataclass(frozen=True)
class ErrorDistribution:
    """Output `index`: how many of its elements are each number of ULPs from A (`ulp_counts` per bin of
    `ulp_bin_label`, trailing empty bins dropped, the elements NaN on one side only left out: they are
    `OutputComparison.nan_mismatches`; empty when A's and B's kinds differ), and up to `SCATTER_CAP` of its (A, B) value pairs, finite ones only (real parts of complex values)."""

    index: int
    elements: int
    ulp_type: str | None
    ulp_counts: tuple[int, ...]
    sample_a: tuple[float, ...]
    sample_b: tuple[float, ...]
    #: Every how-many-th element the sample takes (1: all of them).
    stride: int

    @property
    def sampled(self) -> bool:
        return self.stride > 1


def _bins(distances: np.ndarray) -> tuple[int, ...]:
    """Counts per `ULP_BINS` bin: bin k >= 1 holds [2^(k-1), 2^k), so a distance d is in bin bit_length(d)."""
    if distances.dtype == object:
        lengths = np.fromiter((int(d).bit_length() for d in distances.ravel()), np.int64, distances.size)
    else:
        rest = distances.astype(np.uint64).ravel()
        lengths = np.zeros(rest.shape, np.int64)
        for shift in (32, 16, 8, 4, 2, 1):  # the bit length, exactly, by halving
            big = rest >= np.uint64(1 << shift)
            lengths[big] += shift
            rest[big] >>= np.uint64(shift)
        lengths += rest > 0
    counts = np.bincount(np.minimum(lengths, ULP_BINS - 1), minlength=ULP_BINS)
    used = int(np.flatnonzero(counts).max()) + 1 if counts.any() else 0
    return tuple(int(c) for c in counts[:used])


def distribution(
    index: int, a: np.ndarray, b: np.ndarray, worst: tuple[int, ...] | None = None, cap: int = SCATTER_CAP
) -> ErrorDistribution:
    """Output `index`'s distribution of error (B against the reference A, the same shape), its scatter sample
    strided to at most `cap` pairs, with element `worst` (`OutputComparison.worst_index`) always among them."""
    wide_a, wide_b = widened(a), widened(b)
    measured = ulp_distances(a, b)
    counts: tuple[int, ...] = ()
    if measured is not None:  # a NaN on one side only is not a number of ULPs
        counts = _bins(measured[0][~(np.isnan(wide_a) ^ np.isnan(wide_b))])
    wa, wb = np.real(wide_a).ravel(), np.real(wide_b).ravel()
    stride = max(1, -(-wa.size // cap))
    taken = np.arange(0, wa.size, stride)
    if worst is not None and wa.size:
        flat = int(np.ravel_multi_index(worst, a.shape))
        if flat % stride:
            taken = np.append(taken[: cap - 1], flat)
    xs, ys = wa[taken], wb[taken]
    finite = np.isfinite(xs) & np.isfinite(ys)
    return ErrorDistribution(
        index=index,
        elements=int(a.size),
        ulp_type=None if measured is None else measured[1],
        ulp_counts=counts,
        sample_a=tuple(float(x) for x in xs[finite]),
        sample_b=tuple(float(y) for y in ys[finite]),
        stride=stride,
    )
