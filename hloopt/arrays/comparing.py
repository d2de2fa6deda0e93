"""How output B of a run differs from output A, the reference: errors, ULPs and NaNs, per output and per pass.

Like XLA's ``run_hlo_module --reference_platform``, B passes where ``|b - a| <= atol + rtol * |a|``
or both are NaN. ULPs are counted in the lower-precision type of the two, so a rewrite that widens
an output is measured in the steps of the type it came from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from hloopt.arrays import ExecutionError, rendering
from hloopt.ir.element_types import BY_NAME, PRIMITIVE_TYPES, numpy_dtype


def value_kind(dtype: np.dtype) -> str:
    """bool, int, float or complex, ml_dtypes' narrow types included."""
    import ml_dtypes

    if dtype == np.bool_:
        return "bool"
    if dtype.kind == "c":
        return "complex"
    try:
        ml_dtypes.finfo(dtype)
        return "float"
    except ValueError:
        ml_dtypes.iinfo(dtype)
        return "int"


def _wide(array: np.ndarray) -> np.ndarray:
    """float64 (complex128) values: every type XLA has widens into them exactly, bar >2^53 ints."""
    return array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal value and sign (so -0 ≠ +0), or both NaN."""
    wa, wb = _wide(a), _wide(b)
    return ((wa == wb) & (np.signbit(np.real(wa)) == np.signbit(np.real(wb)))) | (np.isnan(wa) & np.isnan(wb))


@dataclass(frozen=True)
class OutputComparison:
    """How output `index` of B differs from the reference A."""

    index: int
    shape: tuple[int, ...]
    type_a: str
    type_b: str
    bit_identical: bool
    max_abs_err: float
    max_rel_err: float
    #: In `ulp_type`, the lower-precision type of the two; None when the kinds differ.
    max_ulp: int | None
    ulp_type: str | None
    over_tolerance: int
    nan_mismatches: int
    worst_index: tuple[int, ...] | None
    worst_a: str | None
    worst_b: str | None

    @property
    def within_tolerance(self) -> bool:
        return self.over_tolerance == 0

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Drift:
    """One comparison summed up over all outputs: the largest errors, and the output that is worst.

    The worst output is the one with NaN mismatches, else the largest relative error, else the
    largest absolute error; None when every output is the same. `max_ulp` is the largest over the
    outputs, in the lower-precision type of the output that has it.
    """

    max_abs_err: float
    max_rel_err: float
    max_ulp: int | None
    ulp_type: str | None
    nan_mismatches: int
    worst_output: int | None

    @classmethod
    def of(cls, outputs: Sequence[OutputComparison]) -> Drift:
        ulps = [output for output in outputs if output.max_ulp is not None]
        widest = max(ulps, key=lambda output: output.max_ulp or 0, default=None)
        moved = [output for output in outputs if not output.bit_identical]
        worst = max(moved, key=lambda o: (o.nan_mismatches, o.max_rel_err, o.max_abs_err), default=None)
        if worst is not None and (worst.nan_mismatches, worst.max_rel_err, worst.max_abs_err) == (0, 0.0, 0.0):
            worst = None  # only signed zeros moved
        return cls(
            max_abs_err=max((output.max_abs_err for output in outputs), default=0.0),
            max_rel_err=max((output.max_rel_err for output in outputs), default=0.0),
            max_ulp=None if widest is None else widest.max_ulp,
            ulp_type=None if widest is None else widest.ulp_type,
            nan_mismatches=sum(output.nan_mismatches for output in outputs),
            worst_output=None if worst is None else worst.index,
        )


@dataclass(frozen=True)
class PassRow:
    """What one pass that changed the module did to the numbers: against the input, and against
    the module as the pass found it."""

    name: str
    against_input: Drift
    against_previous: Drift


@dataclass(frozen=True)
class CompareReport:
    """Per-output comparison; `seed` is None when the inputs were given.

    `warnings` are the emulation's (``neuron`` numerics), each once; `per_pass` has a row per
    pass that changed the module when `compare_passes` made the report, else None.
    """

    outputs: tuple[OutputComparison, ...]
    rtol: float
    atol: float
    seed: int | None
    warnings: tuple[str, ...] = ()
    per_pass: tuple[PassRow, ...] | None = None

    @property
    def ok(self) -> bool:
        return all(output.within_tolerance for output in self.outputs)

    @property
    def bit_identical(self) -> bool:
        return all(output.bit_identical for output in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: non-finite floats become the strings "inf", "-inf", "nan"."""
        return rendering.report_dict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def render(self) -> str:
        """A table for people: one row per output, then the verdict (`rendering.table`)."""
        return rendering.table(self)

    def render_per_pass(self) -> str:
        """The per-pass table: which pass moved the numbers, and by how much."""
        return rendering.per_pass_table(self)


@cache
def xla_type_name(dtype: np.dtype) -> str:
    """The XLA element type held by a numpy dtype (the inverse of `numpy_dtype`)."""
    for name in sorted(PRIMITIVE_TYPES):
        if BY_NAME[name].numpy_name is not None and numpy_dtype(name) == dtype:
            return name
    return dtype.name


def _precision(dtype: np.dtype) -> tuple[int, int]:
    """What `lower` ranks by: mantissa bits then exponent range (floats), bits (ints)."""
    import ml_dtypes

    if value_kind(dtype) == "float":
        info = ml_dtypes.finfo(dtype)
        return int(info.nmant), int(info.maxexp)
    if value_kind(dtype) == "int":
        return int(ml_dtypes.iinfo(dtype).bits), 0
    return 1, 0


def _ordered(array: np.ndarray) -> np.ndarray:
    """Float bit patterns mapped to integers whose difference counts ULPs (+0 and -0 meet)."""
    import ml_dtypes

    info = ml_dtypes.finfo(array.dtype)
    bits = array.view(f"u{array.dtype.itemsize}")
    if float(info.min) > 0:  # unsigned format: no sign bit
        return bits.astype(np.int64)
    sign = np.array(1 << (int(info.bits) - 1), bits.dtype)  # in the bits' own type: 2**63 is no int64
    magnitude = (bits & (sign - 1)).astype(np.int64)
    return np.where(bits & sign, -magnitude, magnitude)


def _apart(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|x - y| of two `_ordered` arrays as uint64: of opposite signs, 64-bit ones can be 2**64 - 2 apart."""
    same = (x >= 0) == (y >= 0)
    return np.where(same, np.abs(x - y).astype(np.uint64), np.abs(x).astype(np.uint64) + np.abs(y).astype(np.uint64))


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> tuple[int | None, str | None]:
    """Max ULP distance between a and b, in the lower-precision type of the two."""
    kind = value_kind(a.dtype)
    if kind != value_kind(b.dtype):
        return None, None
    low = min(a.dtype, b.dtype, key=_precision)
    a, b = a.astype(low), b.astype(low)
    parts = [(np.real(a), np.real(b)), (np.imag(a), np.imag(b))] if kind == "complex" else [(a, b)]
    worst = 0
    for x, y in parts:
        if value_kind(x.dtype) == "float":
            comparable = ~(np.isnan(x) | np.isnan(y))
            distance = _apart(_ordered(x[comparable]), _ordered(y[comparable]))
        else:
            differ = x != y
            distance = [abs(int(p) - int(q)) for p, q in zip(x[differ].tolist(), y[differ].tolist())]
        worst = max([worst, *map(int, distance)])
    return worst, xla_type_name(low)


def compare_outputs(
    index: int, a: np.ndarray, b: np.ndarray, types: tuple[str, str], rtol: float, atol: float
) -> OutputComparison:
    """Compare one output pair; B passes where ``|b - a| <= atol + rtol * |a|`` or both are NaN."""
    if a.shape != b.shape:
        raise ExecutionError(f"output {index}: shapes differ, {list(a.shape)} vs {list(b.shape)}")
    bit_identical = a.dtype == b.dtype and a.tobytes() == b.tobytes()
    wa, wb = _wide(a), _wide(b)
    nan_a, nan_b = np.isnan(wa), np.isnan(wb)
    nan_mismatch = nan_a ^ nan_b
    equal = (wa == wb) | (nan_a & nan_b)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        error = np.where(equal | nan_mismatch, 0.0, np.abs(wb - wa))
        magnitude = np.abs(wa)
        relative = np.where(error == 0, 0.0, error / np.where(nan_mismatch, 1.0, magnitude))
        over = nan_mismatch | ((error > 0) & ~(error <= atol + rtol * magnitude))
    worst: tuple[int, ...] | None = None
    if nan_mismatch.any():
        worst = tuple(int(i) for i in np.argwhere(nan_mismatch)[0])
    elif error.size and error.max() > 0:
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(error)), error.shape))
    if "token" in types:
        max_ulp, ulp_type = None, None
    elif bit_identical:
        max_ulp, ulp_type = 0, xla_type_name(a.dtype)
    else:
        max_ulp, ulp_type = _ulp_distance(a, b)
    return OutputComparison(
        index=index,
        shape=tuple(a.shape),
        type_a=types[0],
        type_b=types[1],
        bit_identical=bit_identical,
        max_abs_err=float(error.max()) if error.size else 0.0,
        max_rel_err=float(relative.max()) if relative.size else 0.0,
        max_ulp=max_ulp,
        ulp_type=ulp_type,
        over_tolerance=int(np.count_nonzero(over)),
        nan_mismatches=int(np.count_nonzero(nan_mismatch)),
        worst_index=worst,
        worst_a=None if worst is None else str(a[worst]),
        worst_b=None if worst is None else str(b[worst]),
    )
