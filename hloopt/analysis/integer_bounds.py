"""How large an integer dot's sums can get, from its operand types alone.

Both the int-matmul pass and the numerics checks ask the same question — can
this dot's exact result leave its result type, or leave the range where F32
sums are exact? — so the bound is computed here once, from the element types'
ranges and the contracted size K.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.ir import element_types
from hloopt.ir.attribute_values import dot_dimension_numbers
from hloopt.ir.element_types import INT_TYPES
from hloopt.ir.module import Instruction
from hloopt.ir.shape import ArrayShape


@dataclass(frozen=True, slots=True)
class DotBound:
    """The range of an integer dot's exact (unwrapped) sums."""

    #: The contracted size: the product of the lhs contracting dimensions.
    k: int
    #: The smallest and largest exact sum K products of operand values can reach.
    lowest: int
    highest: int

    @property
    def magnitude(self) -> int:
        """K·max|a|·max|b|: the largest |sum| (the bound warnings quote)."""
        return max(-self.lowest, self.highest)

    def fits(self, element_type: str) -> bool:
        """Every exact sum is a value of `element_type` (so nothing wraps or saturates)."""
        row = element_types.BY_NAME[element_type]
        return row.lowest <= self.lowest and self.highest <= row.highest


def dot_bound(dot: Instruction, shapes: ShapeResolver) -> DotBound | None:
    """The sums' range of a dot whose two operands are integer arrays; None otherwise."""
    lhs, rhs = (shapes(o) for o in dot.operands[:2])
    if not (isinstance(lhs, ArrayShape) and isinstance(rhs, ArrayShape)):
        return None
    if lhs.element_type not in INT_TYPES or rhs.element_type not in INT_TYPES:
        return None
    k = 1
    for d in dot_dimension_numbers(dot.attributes).lhs_contracting:
        k *= lhs.dims[d] if d < lhs.rank else 1
    a, b = element_types.BY_NAME[lhs.element_type], element_types.BY_NAME[rhs.element_type]
    products = [int(x) * int(y) for x in (a.lowest, a.highest) for y in (b.lowest, b.highest)]
    return DotBound(k, k * min(products), k * max(products))
