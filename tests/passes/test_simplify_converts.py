"""simplify-converts is exact: every bit pattern of each small type, through every middle type, under XLA.

For a source type S and a middle type M, XLA's ``convert(convert(x, M), S)`` is
run on every value of S (all 2**bits patterns). `preserves_values(S, M)` must
say "exact" exactly when that round trip returns every input (a NaN as a NaN of
the same sign), and the pass must then remove the pair without changing a result.
"""

from __future__ import annotations

import numpy as np
import pytest
import xla_helper
from conftest import sampled
from hlo_text import hlo
from pass_testing import passes_text

from hloopt.ir.literal import numpy_dtype
from hloopt.passes.simplify_converts import preserves_values

#: Types whose every value fits in an exhaustive sweep and that the CPU can run (no s2/u2/f6: XLA's CPU lacks them).
SOURCES = [
    "pred",
    "s4",
    "u4",
    "s8",
    "u8",
    "s16",
    "u16",
    "f4e2m1fn",
    "f8e5m2",
    "f8e4m3fn",
    "f8e4m3b11fnuz",
    "f8e5m2fnuz",
    "f8e4m3fnuz",
    "f8e4m3",
    "f8e3m4",
    "f8e8m0fnu",
    "f16",
    "bf16",
]
MIDDLES = [*SOURCES, "s32", "u32", "s64", "u64", "f32", "f64"]


#: Width of the types stored in a byte but using fewer bits.
_SUB_BYTE = {"s4": 4, "u4": 4, "f4e2m1fn": 4}


def _all_values(element_type: str) -> np.ndarray:
    """Every bit pattern of the type, as an array of it."""
    if element_type == "pred":
        return np.array([False, True])
    dtype = numpy_dtype(element_type)
    bits = _SUB_BYTE.get(element_type, dtype.itemsize * 8)
    if element_type in ("s4", "u4"):
        return np.arange(-8, 8).astype(dtype) if element_type == "s4" else np.arange(16).astype(dtype)
    return np.arange(1 << bits).astype(np.uint8 if dtype.itemsize == 1 else np.uint16).view(dtype)


def _same(a: np.ndarray, b: np.ndarray, flushed: bool = False) -> np.ndarray:
    """Equal values (floats: equal bits), or both NaN: XLA's converts keep neither a NaN's payload nor its
    sign (f16 → f8e5m2 makes -NaN +NaN). With `flushed`, `a` may also be a subnormal flushed to zero
    where `b` is not (the CPU flushes f64 → f32 narrowing results; HLO's convert does not)."""
    if a.dtype.kind == "b" or a.dtype.name.startswith(("int", "uint")):
        return a.astype(np.int64) == b.astype(np.int64)
    bits = np.uint8 if a.dtype.itemsize == 1 else np.uint16
    with np.errstate(invalid="ignore"):
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    same = (a.view(bits) == b.view(bits)) | (np.isnan(wide_a) & np.isnan(wide_b))
    if flushed:
        same |= (wide_a == 0) & (np.abs(wide_b) < np.finfo(np.float32).tiny)
    return same


def _wraps_back(source: str, middle: str) -> bool:
    """Integers into one at least as wide: XLA's convert wraps modulo 2**bits there and back, so the pair
    is the identity even where the middle type does not hold the values (u8 → s8: 255 → -1 → 255);
    the pass, like XLA's CastPreservesValues, only trusts a middle type that holds every value."""
    return source[0] in "su" and middle[0] in "su" and int(middle[1:]) >= int(source[1:])


def _module(name: str, parameters: list[str], results: list[str]) -> str:
    """``ROOT tuple(convert(p_i))`` from parameters of the types `parameters` to the types `results`."""
    lines = [f"p{i} = {t} parameter({i})" for i, t in enumerate(parameters)]
    lines += [f"c{i} = {t} convert(p{i if len(parameters) > 1 else 0})" for i, t in enumerate(results)]
    lines.append(f"ROOT out = ({', '.join(results)}) tuple({', '.join(f'c{i}' for i in range(len(results)))})")
    body = "\n".join("  " + line for line in lines)
    return hlo(f"HloModule {name}\n\nENTRY main {{\n{body}\n}}\n")


def _chains(source: str, count: int) -> str:
    """The module the pass sees: x → each middle type → back, all in one tuple."""
    lines = [f"x = {source}[{count}] parameter(0)"]
    for index, middle in enumerate(MIDDLES):
        lines += [f"w{index} = {middle}[{count}] convert(x)", f"n{index} = {source}[{count}] convert(w{index})"]
    outputs = ", ".join(f"{source}[{count}]" for _ in MIDDLES)
    lines.append(f"ROOT out = ({outputs}) tuple({', '.join(f'n{i}' for i in range(len(MIDDLES)))})")
    body = "\n".join("  " + line for line in lines)
    return hlo(f"HloModule chains_{source}\n\nENTRY main {{\n{body}\n}}\n")


def _round_trips(source: str, values: np.ndarray) -> list[np.ndarray]:
    """Each convert pair run as two separate programs, so XLA's compiler cannot fold the pair away."""
    count = len(values)
    middles = [f"{m}[{count}]" for m in MIDDLES]
    widened = xla_helper.execute(_module("widen", [f"{source}[{count}]"], middles), [values])
    return xla_helper.execute(_module("narrow", middles, [f"{source}[{count}]"] * len(MIDDLES)), widened)


@pytest.mark.parametrize("source", sampled(SOURCES, 4))
def test_exact_exactly_when_xla_round_trips_every_value(source: str) -> None:
    values = _all_values(source)
    for middle, result in zip(MIDDLES, _round_trips(source, values)):
        exact = bool(_same(result, values, flushed=middle == "f64").all())
        expected = preserves_values(source, middle) or _wraps_back(source, middle)
        assert expected == exact, f"{source} through {middle}: XLA says exact={exact}"
    text = _chains(source, len(values))
    before = xla_helper.execute(text, [values])
    after_text = passes_text(text, "simplify-converts")
    removed = sum(preserves_values(source, m) for m in MIDDLES)
    assert after_text.count(" convert(") == 2 * (len(MIDDLES) - removed)
    after = xla_helper.execute(after_text, [values])
    for middle, old, new in zip(MIDDLES, before, after):
        same = _same(old, new, flushed=middle == "f64")
        assert same.all(), f"{source} through {middle}: the simplified module computes something else"


@pytest.mark.parametrize(
    ("source", "middle", "exact"),
    [
        ("bf16", "f32", True),
        ("f16", "f32", True),
        ("f16", "bf16", False),
        ("s8", "s32", True),
        ("s32", "f32", False),
        ("u8", "s8", False),
        ("f8e4m3fn", "f16", True),
        ("c64", "c128", True),
        ("c128", "c64", False),
        ("f32", "s32", False),
        ("pred", "f8e8m0fnu", False),
        ("u1", "pred", True),
    ],
)
def test_preserves_values(source: str, middle: str, exact: bool) -> None:
    assert preserves_values(source, middle) is exact
