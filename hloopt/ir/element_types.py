"""The element-type table: one row per primitive type XLA's text format knows.

Every fact hloopt needs about an element type (its kind, width, float layout,
``xla_data.proto`` PrimitiveType code, numpy dtype, finite range) is a column
here, so shapes, literals, validation, the verifier and execution cannot
disagree. The numpy dtype is named, not imported: importing this table (and so
``hloopt --help``) must not import numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class Kind(Enum):
    """What the values of an element type are."""

    PRED = "pred"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"
    TOKEN = "token"
    OPAQUE = "opaque"


@dataclass(frozen=True, slots=True)
class ElementType:
    """One primitive type (``xla/xla_data.proto`` PrimitiveType, names from ``primitive_util.cc``)."""

    name: str
    kind: Kind
    #: The PrimitiveType enum value.
    code: int
    #: ``primitive_util::BitWidth``: pred is 8 (its storage), c64 is 64; 0 for token and opaque.
    bits: int = 0
    #: Floats (and a complex type's parts): exponent and explicit mantissa (fraction) bits.
    exponent_bits: int = 0
    mantissa_bits: int = 0
    #: The top storage bit is a sign: false for pred, unsigned integers and f8e8m0fnu.
    sign_bit: bool = True
    #: A NaN carries its payload in the mantissa (the IEEE-like types with infinities).
    nan_payload: bool = False
    #: The numpy (or, for ``ml_dtypes.``-prefixed names, ml_dtypes) type; None when there is none.
    numpy_name: str | None = None
    #: The smallest and largest finite value (integers: the type's range).
    lowest: float = 0
    highest: float = 0
    #: A complex type's real and imaginary part type.
    part: str | None = None

    @property
    def max_digits10(self) -> int:
        """``std::numeric_limits<T>::max_digits10``: decimal digits that always read back (floats)."""
        return math.ceil(1 + (self.mantissa_bits + 1) * math.log10(2))

    @property
    def safe_digits(self) -> int:
        """Every value below ``10 ** safe_digits`` in magnitude rounds to a finite value (floats)."""
        return int(math.log10(self.highest))


def _signed(name: str, code: int, bits: int, numpy_name: str | None) -> ElementType:
    return ElementType(
        name, Kind.SIGNED, code, bits, numpy_name=numpy_name, lowest=-(1 << (bits - 1)), highest=(1 << (bits - 1)) - 1
    )


def _unsigned(name: str, code: int, bits: int, numpy_name: str | None) -> ElementType:
    return ElementType(
        name, Kind.UNSIGNED, code, bits, sign_bit=False, numpy_name=numpy_name, lowest=0, highest=(1 << bits) - 1
    )


def _float(
    name: str,
    code: int,
    bits: int,
    exponent: int,
    mantissa: int,
    numpy_name: str,
    highest: float,
    *,
    nan_payload: bool = False,
    lowest: float | None = None,
) -> ElementType:
    return ElementType(
        name,
        Kind.FLOAT,
        code,
        bits,
        exponent,
        mantissa,
        sign_bit=lowest is None,
        nan_payload=nan_payload,
        numpy_name=numpy_name,
        lowest=-highest if lowest is None else lowest,
        highest=highest,
    )


_F32_MAX = 3.4028234663852886e38
_F64_MAX = 1.7976931348623157e308

ROWS: tuple[ElementType, ...] = (
    ElementType("pred", Kind.PRED, 1, 8, sign_bit=False, numpy_name="bool_", lowest=0, highest=1),
    _signed("s1", 30, 1, None),
    _signed("s2", 26, 2, "ml_dtypes.int2"),
    _signed("s4", 21, 4, "ml_dtypes.int4"),
    _signed("s8", 2, 8, "int8"),
    _signed("s16", 3, 16, "int16"),
    _signed("s32", 4, 32, "int32"),
    _signed("s64", 5, 64, "int64"),
    _unsigned("u1", 31, 1, None),
    _unsigned("u2", 27, 2, "ml_dtypes.uint2"),
    _unsigned("u4", 22, 4, "ml_dtypes.uint4"),
    _unsigned("u8", 6, 8, "uint8"),
    _unsigned("u16", 7, 16, "uint16"),
    _unsigned("u32", 8, 32, "uint32"),
    _unsigned("u64", 9, 64, "uint64"),
    _float("f16", 10, 16, 5, 10, "float16", 65504.0, nan_payload=True),
    _float("f32", 11, 32, 8, 23, "float32", _F32_MAX, nan_payload=True),
    _float("bf16", 16, 16, 8, 7, "ml_dtypes.bfloat16", 3.3895313892515355e38, nan_payload=True),
    _float("f64", 12, 64, 11, 52, "float64", _F64_MAX, nan_payload=True),
    _float("f8e5m2", 19, 8, 5, 2, "ml_dtypes.float8_e5m2", 57344.0, nan_payload=True),
    _float("f8e4m3", 28, 8, 4, 3, "ml_dtypes.float8_e4m3", 240.0, nan_payload=True),
    _float("f8e4m3fn", 20, 8, 4, 3, "ml_dtypes.float8_e4m3fn", 448.0),
    _float("f8e4m3b11fnuz", 23, 8, 4, 3, "ml_dtypes.float8_e4m3b11fnuz", 30.0),
    _float("f8e3m4", 29, 8, 3, 4, "ml_dtypes.float8_e3m4", 15.5, nan_payload=True),
    _float("f8e5m2fnuz", 24, 8, 5, 2, "ml_dtypes.float8_e5m2fnuz", 57344.0),
    _float("f8e4m3fnuz", 25, 8, 4, 3, "ml_dtypes.float8_e4m3fnuz", 240.0),
    _float("f8e8m0fnu", 33, 8, 8, 0, "ml_dtypes.float8_e8m0fnu", 1.7014118346046923e38, lowest=5.877471754111438e-39),
    _float("f6e3m2fn", 35, 6, 3, 2, "ml_dtypes.float6_e3m2fn", 28.0),
    _float("f6e2m3fn", 36, 6, 2, 3, "ml_dtypes.float6_e2m3fn", 7.5),
    _float("f4e2m1fn", 32, 4, 2, 1, "ml_dtypes.float4_e2m1fn", 6.0),
    ElementType(
        "c64", Kind.COMPLEX, 15, 64, 8, 23, numpy_name="complex64", lowest=-_F32_MAX, highest=_F32_MAX, part="f32"
    ),
    ElementType(
        "c128", Kind.COMPLEX, 18, 128, 11, 52, numpy_name="complex128", lowest=-_F64_MAX, highest=_F64_MAX, part="f64"
    ),
    ElementType("token", Kind.TOKEN, 17, sign_bit=False),
    ElementType("opaque", Kind.OPAQUE, 14, sign_bit=False),
)

#: Each row by its text name.
BY_NAME: dict[str, ElementType] = {row.name: row for row in ROWS}
#: Each row by its PrimitiveType code.
BY_CODE: dict[int, ElementType] = {row.code: row for row in ROWS}


def _names(*kinds: Kind) -> frozenset[str]:
    return frozenset(row.name for row in ROWS if row.kind in kinds)


#: Every primitive type name XLA's text format knows.
PRIMITIVE_TYPES: frozenset[str] = frozenset(BY_NAME)
FLOAT_TYPES: frozenset[str] = _names(Kind.FLOAT)
SIGNED_INT_TYPES: frozenset[str] = _names(Kind.SIGNED)
UNSIGNED_INT_TYPES: frozenset[str] = _names(Kind.UNSIGNED)
INT_TYPES: frozenset[str] = SIGNED_INT_TYPES | UNSIGNED_INT_TYPES
COMPLEX_TYPES: frozenset[str] = _names(Kind.COMPLEX)
#: The real part type of each complex type (``c64`` → ``f32``).
COMPLEX_PARTS: dict[str, str] = {row.name: row.part for row in ROWS if row.part is not None}
#: The complex type whose parts are a float type (``f32`` → ``c64``).
COMPLEX_OF: dict[str, str] = {part: name for name, part in COMPLEX_PARTS.items()}


class NoNumpyType(ValueError):
    """An element type numpy (and ml_dtypes) cannot hold: s1, u1, token, opaque."""


@cache
def numpy_dtype(element_type: str) -> np.dtype:
    """The numpy dtype that holds an element type (ml_dtypes for bf16, fp8, fp6, fp4, int2, int4)."""
    row = BY_NAME.get(element_type)
    if row is None or row.numpy_name is None:
        raise NoNumpyType(f"element type {element_type} has no numpy representation")
    import numpy as np

    module_name, _, attribute = row.numpy_name.rpartition(".")
    if module_name:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, attribute))
    return np.dtype(getattr(np, attribute))
