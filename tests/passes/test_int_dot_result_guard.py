"""NeuronIntMatmulDowncast's exactness warning for the dot's result type (issues 11 and 12).

The original integer dot wraps where its result type cannot hold K·max|a|·max|b|, while the F32
route clamps in the convert back; the pass names the dot and the bound then, and says nothing
where the bound fits.
"""

from __future__ import annotations

import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.passes.pipeline import run_pipeline


def _warnings(operand: str, result: str, k: int) -> tuple[str, ...]:
    module = parse(
        hlo(
            f"""
            HloModule m
            ENTRY e {{
              a = {operand}[2,{k}] parameter(0)
              b = {operand}[{k},3] parameter(1)
              ROOT d = {result}[2,3] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
            }}
            """
        )
    )
    (report,) = run_pipeline(module, "neuron-int-matmul-downcast", check_changed="both").passes
    return report.warnings


@pytest.mark.parametrize(
    "operand, result, k",
    [("s8", "s8", 16), ("u8", "u8", 4), ("s8", "s16", 4), ("s16", "s16", 2), ("u8", "s16", 1)],
)
def test_a_result_type_that_cannot_hold_the_bound_is_named(operand: str, result: str, k: int) -> None:
    named = [w for w in _warnings(operand, result, k) if f"{result} cannot hold" in w]
    assert len(named) == 1 and named[0].startswith("%d: ")


@pytest.mark.parametrize(
    "operand, result, k", [("s8", "s32", 16), ("u8", "u32", 64), ("s8", "s16", 1), ("u8", "u16", 1)]
)
def test_silent_where_the_bound_fits(operand: str, result: str, k: int) -> None:
    assert _warnings(operand, result, k) == ()
