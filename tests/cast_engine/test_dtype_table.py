"""The cast engine's dtype table (`cast_engine/dtypes.py`, `minifloat`) and `ir/element_types.py` state the same
facts about every type both know: the engine is standalone, so it keeps its own table, and this test is what
ties the two together. Exhaustive over the types both know, and over every code of each minifloat format."""

from __future__ import annotations

import numpy as np
import pytest

from hloopt.cast_engine.dtypes import ALL, DType
from hloopt.cast_engine.minifloat import decode_table
from hloopt.ir.element_types import BY_NAME, PRIMITIVE_TYPES, ROWS, ElementType, Kind, numpy_dtype

#: Element types the cast engine has no dtype for: XLA's convert of them is not the engine's to model.
ENGINE_LACKS = frozenset({"s1", "s2", "s4", "u1", "u2", "u4", "f6e3m2fn", "f6e2m3fn", "c64", "c128", "token", "opaque"})
KINDS = {"i": Kind.SIGNED, "u": Kind.UNSIGNED, "b": Kind.PRED, "f": Kind.FLOAT}


def element_type(dtype: DType) -> ElementType:
    """The element type a dtype holds: by its HLO name, else (x4 containers, float32r) that of one lane."""
    if dtype.hlo_name is not None:
        return BY_NAME[dtype.hlo_name]
    (row,) = [r for r in ROWS if r.numpy_name is not None and numpy_dtype(r.name) == dtype.lane]
    return row


def test_the_engine_names_every_element_type_it_knows_by_its_hlo_name() -> None:
    hlo_names = [d.hlo_name for d in ALL if d.hlo_name is not None]
    assert len(hlo_names) == len(set(hlo_names))
    assert set(hlo_names) == PRIMITIVE_TYPES - ENGINE_LACKS
    assert [d.name for d in ALL if d.hlo_name is None] == [
        "float4_e2m1fn_x4",
        "float8_e4m3fn_x4",
        "float8_e5m2_x4",
        "float32r",
    ]


@pytest.mark.parametrize("dtype", ALL, ids=repr)
def test_a_dtype_and_its_element_type_agree(dtype: DType) -> None:
    row = element_type(dtype)
    assert numpy_dtype(row.name) == dtype.lane
    assert KINDS[dtype.kind] is row.kind and dtype.is_int == (row.kind in (Kind.SIGNED, Kind.UNSIGNED))
    if dtype.lanes == 1:
        assert dtype.container == dtype.lane
    else:  # lanes packed in one unsigned container
        assert dtype.container.kind == "u" and dtype.container.itemsize * 8 == dtype.lanes * row.bits
    if row.kind is not Kind.FLOAT:
        info = np.iinfo(dtype.lane) if dtype.is_int else None
        assert info is None or (info.min, info.max) == (row.lowest, row.highest)


@pytest.mark.parametrize("dtype", [d for d in ALL if d.fmt is not None], ids=repr)
def test_a_minifloat_format_is_its_element_type(dtype: DType) -> None:
    """Every code the format decodes is the value ml_dtypes (the element type's numpy type) gives it."""
    fmt, row = dtype.fmt, element_type(dtype)
    assert fmt is not None
    assert fmt.name == dtype.lane.name
    assert (fmt.width, fmt.exp_bits, fmt.man_bits) == (row.bits, row.exponent_bits, row.mantissa_bits)
    assert fmt.max_value == row.highest and fmt.has_inf == row.nan_payload
    codes = np.arange(1 << fmt.width, dtype=np.uint8)
    expected = codes.view(dtype.lane).astype(np.float32)
    decoded = decode_table(fmt)[: 1 << fmt.width]
    assert np.array_equal(np.isnan(decoded), np.isnan(expected))
    finite = ~np.isnan(expected)
    assert np.array_equal(decoded[finite], expected[finite])
    assert np.array_equal(np.signbit(decoded[finite]), np.signbit(expected[finite]))
