"""The element-type table against XLA's PrimitiveType enum and numpy/ml_dtypes: codes, widths, float layout, limits."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hloopt.ir import element_types
from hloopt.ir.element_types import BY_NAME, ROWS, ElementType, Kind, NoNumpyType, numpy_dtype

#: Types every jaxlib's parser reads (0.10 to 0.12: no type was added) that its Python PrimitiveType enum
#: did not list (hlo-text-grammar.md §7.1), with the first jaxlib whose enum does; None: none yet.
_JAXLIB_ENUM_SINCE: dict[str, tuple[int, int] | None] = {
    "s1": None,
    "u1": None,
    "s2": None,
    "u2": None,
    "f6e3m2fn": (0, 11),
    "f6e2m3fn": (0, 11),
}
_FLOAT_ROWS = [row for row in ROWS if row.kind is Kind.FLOAT]
_INT_ROWS = [row for row in ROWS if row.kind in (Kind.SIGNED, Kind.UNSIGNED, Kind.PRED) and row.numpy_name]


def test_codes_match_xla_primitive_type() -> None:
    xla_client = pytest.importorskip("jax._src.lib").xla_client
    from hloopt.xla.bridge import jaxlib_version

    enum = {
        ("opaque" if name == "OPAQUE_TYPE" else name.lower()): int(value.value)
        for name, value in xla_client.PrimitiveType.__members__.items()
        if name not in ("PRIMITIVE_TYPE_INVALID", "TUPLE")
    }
    assert {row.name: row.code for row in ROWS if row.name in enum} == enum
    unlisted = {name for name, since in _JAXLIB_ENUM_SINCE.items() if since is None or since > jaxlib_version()}
    assert set(BY_NAME) - set(enum) == unlisted
    assert len(element_types.BY_CODE) == len(ROWS)  # codes are unique


@pytest.mark.parametrize("row", [row for row in ROWS if row.numpy_name], ids=lambda row: row.name)
def test_bits_match_numpy(row: ElementType) -> None:
    dtype = numpy_dtype(row.name)
    if row.bits >= 8:
        assert dtype.itemsize * 8 == row.bits
    else:  # int2, uint4, f4e2m1fn…: one byte of storage each
        info = ml_dtypes.finfo(dtype) if row.kind is Kind.FLOAT else ml_dtypes.iinfo(dtype)
        assert (dtype.itemsize, info.bits) == (1, row.bits)


@pytest.mark.parametrize("row", _FLOAT_ROWS, ids=lambda row: row.name)
def test_float_layout_and_limits_match_finfo(row: ElementType) -> None:
    info = ml_dtypes.finfo(numpy_dtype(row.name))
    assert (int(info.bits), int(info.nexp), int(info.nmant)) == (row.bits, row.exponent_bits, row.mantissa_bits)
    assert (float(info.min), float(info.max)) == (row.lowest, row.highest)
    assert row.sign_bit == (float(info.min) < 0)
    with np.errstate(invalid="ignore", over="ignore"):
        has_inf = bool(np.isinf(np.array(np.inf).astype(numpy_dtype(row.name))))
    # The types with infinities are IEEE-like: their NaNs carry a payload (RoundTripNanPayload).
    assert row.nan_payload == has_inf
    assert 10**row.safe_digits <= row.highest < 10 ** (row.safe_digits + 1)


@pytest.mark.parametrize("row", _INT_ROWS, ids=lambda row: row.name)
def test_integer_limits_match_iinfo(row: ElementType) -> None:
    if row.kind is Kind.PRED:
        assert (row.lowest, row.highest) == (0, 1)
        return
    info = ml_dtypes.iinfo(numpy_dtype(row.name))
    assert (int(info.min), int(info.max)) == (row.lowest, row.highest)
    assert row.sign_bit == (row.kind is Kind.SIGNED)


@pytest.mark.parametrize("name", ["c64", "c128"])
def test_complex_parts(name: str) -> None:
    row = BY_NAME[name]
    part = BY_NAME[element_types.COMPLEX_PARTS[name]]
    assert numpy_dtype(name) == np.result_type(numpy_dtype(part.name), np.complex64)
    assert (row.bits, row.exponent_bits, row.mantissa_bits) == (2 * part.bits, part.exponent_bits, part.mantissa_bits)
    assert (row.lowest, row.highest) == (part.lowest, part.highest)
    assert element_types.COMPLEX_OF[part.name] == name


def test_max_digits10_is_the_printers_precision() -> None:
    """hlo-text-grammar.md §5: ``%.*g`` with the type's ``max_digits10``."""
    expected = {
        "f16": 5,
        "bf16": 4,
        "f32": 9,
        "f64": 17,
        "f8e4m3": 3,
        "f8e4m3fn": 3,
        "f8e4m3fnuz": 3,
        "f8e4m3b11fnuz": 3,
        "f8e3m4": 3,
        "f8e5m2": 2,
        "f8e5m2fnuz": 2,
        "f8e8m0fnu": 2,
        "f6e3m2fn": 2,
        "f6e2m3fn": 3,
        "f4e2m1fn": 2,
    }
    assert {row.name: row.max_digits10 for row in _FLOAT_ROWS} == expected


def test_kind_sets() -> None:
    assert element_types.INT_TYPES == element_types.SIGNED_INT_TYPES | element_types.UNSIGNED_INT_TYPES
    assert sorted(element_types.SIGNED_INT_TYPES) == ["s1", "s16", "s2", "s32", "s4", "s64", "s8"]
    assert sorted(element_types.COMPLEX_TYPES) == ["c128", "c64"]
    assert len(element_types.FLOAT_TYPES) == 15
    assert {"token", "opaque", "pred"} <= element_types.PRIMITIVE_TYPES


@pytest.mark.parametrize("name", ["s1", "u1", "token", "opaque", "f7"])
def test_no_numpy_type(name: str) -> None:
    with pytest.raises(NoNumpyType, match=f"element type {name} has no numpy representation"):
        numpy_dtype(name)
