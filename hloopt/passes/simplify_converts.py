"""simplify-converts: converts that cannot change a value are removed.

Two rewrites, both exact for every input:

- ``convert(x)`` to the shape ``x`` already has is ``x``;
- ``convert(convert(x))`` back to ``x``'s own shape is ``x`` when the inner
  convert widens exactly, i.e. every value of ``x``'s type is a value of the
  middle type (bf16→f32→bf16, s8→s32→s8, f8e4m3fn→f16→f8e4m3fn). Converting a
  value that the middle type holds exactly back to its own type returns it
  unchanged under any rounding, so the pair is the identity.

"Every value" is derived from the formats, not listed: an integer range must fit
in the middle type's range (and, for a float, within its significand); a float
needs no more significand bits, no finer smallest subnormal, no larger finite
range, and the middle type must keep its zeros, signed zeros, infinities and NaNs
(fnuz types have no -0, e4m3fn no infinity, e8m0 no zero). Float facts come
from ml_dtypes/numpy ``finfo`` and from converting 0, -0, inf and NaN (the
element-type table does not record signed zeros or infinities). This is
``primitive_util::CastPreservesValues``, the test XLA's algebraic simplifier
uses for the same rewrite.

NaN: a NaN stays a NaN, with the input's sign and payload bits, where the two
converts may rewrite both (XLA's f32→bf16 makes a quiet NaN, f16→f8e5m2 a
positive one). HLO gives neither a meaning and XLA's simplifier makes the same
rewrite. Subnormals are kept; XLA's CPU backend flushes an f64→f32-narrowed
subnormal to zero, so bf16→f64→bf16 run there flushes them (a backend mode, not
convert's meaning; tests/passes/test_simplify_converts.py measures both).

Registration number 999: after the Neuron passes, whose boundaries leave such
pairs behind, and before fold-constant-converts, so a collapsed chain of a
constant keeps the original constant instead of being folded into a renamed copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import COMPLEX_TYPES
from hloopt.ir.module import Instruction
from hloopt.ir.shape import ArrayShape
from hloopt.passes.base import OpExpanderPass

_INTEGER = re.compile(r"^([su])(\d+)$")
_COMPLEX_PART = {"c64": "f32", "c128": "f64"}


@dataclass(frozen=True)
class _Floats:
    """What decides which values a float type holds."""

    mantissa_bits: int
    smallest: float  # smallest positive (subnormal) value: the finest step near zero
    lowest: float
    highest: float
    zero: bool
    negative_zero: bool
    infinity: bool
    nan: bool


def _integer_range(element_type: str) -> tuple[int, int] | None:
    """The range of pred and of sN/uN, from the bit width."""
    if element_type == "pred":
        return 0, 1
    match = _INTEGER.match(element_type)
    if match is None:
        return None
    bits = int(match.group(2))
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if match.group(1) == "s" else (0, (1 << bits) - 1)


@cache
def _floats(element_type: str) -> _Floats | None:
    """The float facts of a real float type; None for other types (or one numpy cannot represent)."""
    import ml_dtypes
    import numpy as np

    from hloopt.ir.literal import LiteralError, numpy_dtype

    if _integer_range(element_type) is not None or element_type in COMPLEX_TYPES:
        return None
    try:
        dtype = numpy_dtype(element_type)
        info = cast(Any, ml_dtypes.finfo(dtype))  # ml_dtypes.finfo is untyped
    except (LiteralError, TypeError, ValueError):  # token, opaque, or a type numpy has no float for
        return None
    with np.errstate(all="ignore"):
        probes = np.array([0.0, -0.0, np.inf, np.nan], np.float32).astype(dtype).astype(np.float64)
    return _Floats(
        mantissa_bits=int(info.nmant),
        smallest=float(info.smallest_subnormal),
        lowest=float(info.min),
        highest=float(info.max),
        zero=bool(probes[0] == 0),
        negative_zero=bool(probes[1] == 0 and np.signbit(probes[1])),
        infinity=bool(np.isinf(probes[2])),
        nan=bool(np.isnan(probes[3])),
    )


def preserves_values(source: str, middle: str) -> bool:
    """Every value of `source` converts to `middle` exactly (so converting back is the identity)."""
    if source == middle:
        return True
    if source in COMPLEX_TYPES or middle in COMPLEX_TYPES:
        # Part by part; a real value in a complex type cannot be converted back (XLA refuses complex→real).
        return (
            source in COMPLEX_TYPES
            and middle in COMPLEX_TYPES
            and preserves_values(_COMPLEX_PART[source], _COMPLEX_PART[middle])
        )
    integers, wide_integers = _integer_range(source), _integer_range(middle)
    floats, wide_floats = _floats(source), _floats(middle)
    if integers is not None and wide_integers is not None:
        return wide_integers[0] <= integers[0] and integers[1] <= wide_integers[1]
    if integers is not None and wide_floats is not None:
        # Every integer up to 2**(mantissa bits + 1) in magnitude is exact in a float.
        magnitude = max(-integers[0], integers[1])
        return (
            magnitude <= 2 ** (wide_floats.mantissa_bits + 1)
            and wide_floats.lowest <= integers[0]
            and integers[1] <= wide_floats.highest
            and wide_floats.zero
        )
    if floats is not None and wide_floats is not None:
        return (
            floats.mantissa_bits <= wide_floats.mantissa_bits
            and floats.smallest >= wide_floats.smallest
            and wide_floats.lowest <= floats.lowest
            and floats.highest <= wide_floats.highest
            and (not floats.zero or wide_floats.zero)
            and (not floats.negative_zero or wide_floats.negative_zero)
            and (not floats.infinity or wide_floats.infinity)
            and (not floats.nan or wide_floats.nan)
        )
    return False  # float → integer drops fractions


def exact_source(convert: Instruction, shapes: ShapeResolver) -> Instruction | None:
    """The instruction whose value `convert` reproduces exactly (same shape, layout included), or None."""
    if convert.opcode != "convert" or len(convert.operands) != 1:
        return None
    target = shapes(convert)
    operand = convert.operands[0]
    if not isinstance(target, ArrayShape) or "control-predecessors" in convert.attributes:
        return None  # control predecessors would move onto the source, which can close a cycle
    if shapes(operand) == target:
        return operand
    if operand.opcode != "convert" or len(operand.operands) != 1:
        return None
    source, middle = operand.operands[0], shapes(operand)
    if shapes(source) == target and isinstance(middle, ArrayShape):
        return source if preserves_values(target.element_type, middle.element_type) else None
    return None


@dataclass(frozen=True)
class SimplifyConverts(OpExpanderPass):
    """A convert to its operand's own type, or an exact widen-then-narrow pair, becomes its source."""

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return exact_source(instruction, shapes) is not None

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        source = exact_source(instruction, shapes)
        # Earlier rewrites only replace instructions by ones of the same shape, so the match still holds.
        assert source is not None, f"%{instruction.name} no longer matches"
        return source
