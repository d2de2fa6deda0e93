"""The integer dot bound: K·max|a|·max|b| and the exact range of the sums."""

from __future__ import annotations

import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.analysis.integer_bounds import DotBound, dot_bound
from hloopt.analysis.shape_inference import ShapeResolver


def _bound(lhs: str, rhs: str, k: int) -> DotBound | None:
    module = parse(
        hlo(f"""
        HloModule m

        ENTRY e {{
          a = {lhs}[2,{k}] parameter(0)
          b = {rhs}[{k},3] parameter(1)
          ROOT d = s32[2,3] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
        }}
    """)
    )
    root = module.entry.root
    assert root is not None
    return dot_bound(root, ShapeResolver(module))


@pytest.mark.parametrize(
    ("lhs", "rhs", "k", "lowest", "highest"),
    [
        ("s8", "s8", 3, 3 * -128 * 127, 3 * 128 * 128),
        ("u8", "s8", 5, 5 * 255 * -128, 5 * 255 * 127),
        ("u8", "u8", 1, 0, 255 * 255),
    ],
)
def test_range(lhs: str, rhs: str, k: int, lowest: int, highest: int) -> None:
    bound = _bound(lhs, rhs, k)
    assert bound is not None
    assert (bound.k, bound.lowest, bound.highest) == (k, lowest, highest)
    assert bound.magnitude == max(-lowest, highest)


def test_fits() -> None:
    bound = _bound("s8", "s8", 3)
    assert bound is not None
    assert bound.fits("s32") and not bound.fits("s8") and not bound.fits("u32")  # negative sums


def test_float_operand_has_no_bound() -> None:
    assert _bound("f32", "s8", 3) is None
