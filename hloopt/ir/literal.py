"""Constant literals: kept as their source text, decoded to numpy only on demand.

A 1M-element constant is one string until a pass asks for its values; then it
is decoded in a handful of vectorised numpy calls. New literals (from folding
or upcasting) are formatted the way XLA's printer formats them.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from functools import cache
from typing import Any, Union

import numpy as np

from hloopt.ir.shape import ArrayShape, COMPLEX_TYPES, FLOAT_TYPES, Shape, TupleShape, fold_tree, literal_parts

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_ELEMENT = re.compile(r"-?nan\(0x[0-9a-fA-F]+\)|[^\s,{}()]+")
_COMPLEX_ELEMENT = re.compile(r"\(\s*([^\s,()]+)\s*,\s*([^\s,()]+)\s*\)")
#: Turns literal separators into spaces, so that ``str.split`` yields the elements.
SEPARATORS = str.maketrans({",": " ", "{": " ", "}": " "})
_NAN_PAYLOAD = re.compile(r"(-?)nan\(0x([0-9a-fA-F]+)\)")

LiteralValue = Union[np.ndarray, tuple["LiteralValue", ...]]


class LiteralError(ValueError):
    """A literal that does not fit its shape; `offset` is relative to the literal text."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


@cache
def numpy_dtype(element_type: str) -> np.dtype:
    """The numpy dtype that holds an XLA element type (ml_dtypes for the narrow floats)."""
    import ml_dtypes

    names = {
        "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
        "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
        "f16": np.float16, "f32": np.float32, "f64": np.float64,
        "c64": np.complex64, "c128": np.complex128,
        "bf16": ml_dtypes.bfloat16, "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2,
        "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4,
        "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3": ml_dtypes.float8_e4m3,
        "f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz,
        "f8e3m4": ml_dtypes.float8_e3m4, "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
        "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "f8e8m0fnu": ml_dtypes.float8_e8m0fnu,
        "f6e3m2fn": ml_dtypes.float6_e3m2fn, "f6e2m3fn": ml_dtypes.float6_e2m3fn,
        "f4e2m1fn": ml_dtypes.float4_e2m1fn,
    }
    if element_type not in names:
        raise LiteralError(f"element type {element_type} has no numpy representation")
    return np.dtype(names[element_type])


class Literal:
    """The value of a `constant`: source text plus, once decoded, a numpy array."""

    __slots__ = ("_text", "_value", "shape")

    def __init__(self, shape: Shape, text: str | None = None, value: LiteralValue | None = None) -> None:
        if text is None and value is None:
            raise ValueError("a literal needs text or a value")
        self.shape = shape
        self._text = text
        self._value = value

    @classmethod
    def from_value(cls, shape: Shape, value: LiteralValue) -> Literal:
        return cls(shape, value=value)

    @property
    def is_elided(self) -> bool:
        """True for ``{...}``: XLA's placeholder for a large constant whose data was not printed."""
        return self._text is not None and "..." in self._text

    @property
    def text(self) -> str:
        if self._text is None:
            assert self._value is not None
            self._text = format_literal(self._value, self.shape)
        return self._text

    @property
    def value(self) -> LiteralValue:
        if self._value is None:
            assert self._text is not None
            self._value = decode_literal(self._text, self.shape)
        return self._value

    def check(self) -> None:
        """Raise LiteralError if the text's element count does not fit the shape (cheap, no decode)."""
        if self._text is not None:
            _check_count(self._text, self.shape)


# ---------------------------------------------------------------------------
# decoding


def strip_comments(text: str) -> str:
    """Literal text without its ``/*iK=V*/`` annotations."""
    return _COMMENT.sub(" ", text) if "/*" in text else text


def _split_tuple(text: str) -> list[tuple[str, int]]:
    """Split ``( a, {b, c}, (d) )`` into its top-level parts with their offsets."""
    start = text.index("(") + 1
    end = text.rindex(")")
    parts: list[tuple[str, int]] = []
    depth = 0
    begin = start
    for i in range(start, end):
        ch = text[i]
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append((text[begin:i], begin))
            begin = i + 1
    if text[begin:end].strip():
        parts.append((text[begin:end], begin))
    return parts


def _check_count(text: str, shape: Shape) -> None:
    """Element counts against the shape, tuple parts in order (a stack, not recursion: tuples nest freely)."""
    stack: list[tuple[str, Shape, int]] = [(text, shape, 0)]
    while stack:
        current, current_shape, base = stack.pop()
        try:
            parts = _check_level(current, current_shape)
        except LiteralError as err:
            raise LiteralError(str(err), base + err.offset) from None
        stack.extend((part, element, base + offset) for (part, offset), element in reversed(parts))


def _check_level(text: str, shape: Shape) -> list[tuple[tuple[str, int], Shape]]:
    """Check one level; a tuple returns its parts (text, offset) with their shapes, checked next."""
    body = strip_comments(text)
    if isinstance(shape, TupleShape):
        stripped = body.strip()
        if stripped.startswith("{") and "..." in stripped:
            return []
        if not stripped.startswith("("):
            raise LiteralError(f"expects a tuple literal for shape {shape.to_text()}")
        parts = _split_tuple(body)
        if len(parts) != len(shape.elements):
            raise LiteralError(
                f"tuple literal has {len(parts)} elements, shape {shape.to_text()} has {len(shape.elements)}"
            )
        return list(zip(parts, shape.elements))
    if shape.element_type == "token":
        return []
    if "..." in body:
        return []
    if shape.element_type in COMPLEX_TYPES:
        found = len(_COMPLEX_ELEMENT.findall(body))
    elif "(" in body:
        found = len(_ELEMENT.findall(body))
    else:  # plain numbers: splitting on separators counts them at C speed
        found = len(body.translate(SEPARATORS).split())
    expected = shape.element_count
    # XLA accepts a bare scalar for an array constant (it pads with zeros).
    if found != expected and not (found == 1 and "{" not in body):
        raise LiteralError(
            f"literal has {found} elements but shape {shape.to_text()} has {expected}"
        )
    return []


def _decode_floats(tokens: list[str], element_type: str) -> np.ndarray:
    dtype = numpy_dtype(element_type)
    payload_tokens = [i for i, t in enumerate(tokens) if "(" in t]
    if not payload_tokens:
        return np.array(tokens, dtype=np.float64).astype(dtype)
    values = np.array([t.split("(")[0] for t in tokens], dtype=np.float64).astype(dtype)
    bits_dtype = np.dtype(f"u{dtype.itemsize}")
    mantissa_bits = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e4m3": 3, "f8e3m4": 4}
    bits = values.view(bits_dtype)
    mask = (1 << mantissa_bits.get(element_type, 0)) - 1
    for i in payload_tokens:
        match = _NAN_PAYLOAD.fullmatch(tokens[i])
        if match is None:
            raise LiteralError(f"bad NaN literal {tokens[i]!r}")
        payload = int(match.group(2), 16)
        bits[i] = (int(bits[i]) & ~mask) | (payload & mask)
    return values


def _decode_array(text: str, shape: ArrayShape) -> np.ndarray:
    body = strip_comments(text)
    element_type = shape.element_type
    dtype = numpy_dtype(element_type)
    if "..." in body:
        # XLA fills elided constants with data of its own choosing; zeros are ours.
        return np.zeros(shape.dims, dtype=dtype)
    if element_type in COMPLEX_TYPES:
        pairs = _COMPLEX_ELEMENT.findall(body)
        flat = np.array([float(r) + 1j * float(i) for r, i in pairs], dtype=dtype)
    else:
        tokens = _ELEMENT.findall(body)
        if element_type == "pred":
            flat = np.array([t in ("true", "1") for t in tokens], dtype=np.bool_)
        elif element_type in FLOAT_TYPES:
            flat = _decode_floats(tokens, element_type)
        else:
            if element_type == "u64":
                flat = np.array([int(t) % (1 << 64) for t in tokens], dtype=np.uint64)
            else:
                flat = np.array(tokens, dtype=np.int64).astype(dtype)
    if flat.size == 1 and shape.element_count != 1:
        padded = np.zeros(shape.element_count, dtype=dtype)
        padded[:1] = flat
        flat = padded
    if flat.size != shape.element_count:
        raise LiteralError(f"literal has {flat.size} elements but shape has {shape.element_count}")
    return flat.reshape(shape.dims)


def decode_literal(text: str, shape: Shape) -> LiteralValue:
    """Decode literal text to a numpy array (a tuple of them for tuple shapes, at any depth)."""

    def parts(item: tuple[str, Shape]) -> Iterator[tuple[str, Shape]] | None:
        part_text, part_shape = item
        if not isinstance(part_shape, TupleShape):
            return None
        split = _split_tuple(strip_comments(part_text))
        return ((part, element) for (part, _), element in zip(split, part_shape.elements))

    return fold_tree((text, shape), parts, lambda item: _decode_array(*item),  # type: ignore[arg-type]
                     lambda _, values: tuple(values))


# ---------------------------------------------------------------------------
# formatting (xla/literal.cc and RoundTripFpToString in xla/util.cc)

_MAX_DIGITS10 = {
    "f16": 5, "bf16": 4, "f8e4m3": 3, "f8e4m3fn": 3, "f8e4m3fnuz": 3, "f8e4m3b11fnuz": 3,
    "f8e3m4": 3, "f8e5m2": 2, "f8e5m2fnuz": 2, "f8e8m0fnu": 2, "f6e3m2fn": 2,
    "f6e2m3fn": 3, "f4e2m1fn": 2,
}
_PAYLOAD_TYPES = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e4m3": 3, "f8e3m4": 4}


def format_float(value: Any, element_type: str) -> str:
    """One float as XLA prints it: shortest ``%g`` that reads back, NaN payloads kept."""
    as_double = float(value)
    if math.isnan(as_double):
        dtype = numpy_dtype(element_type)
        bits = int(np.array(value, dtype=dtype).view(f"u{dtype.itemsize}"))
        # The sign bit is the storage's top bit (fnuz NaN is 0x80: "-nan"); e8m0 has none.
        negative = element_type != "f8e8m0fnu" and bits >> (8 * dtype.itemsize - 1) & 1
        sign = "-" if negative else ""
        mantissa = _PAYLOAD_TYPES.get(element_type)
        if mantissa is not None:
            payload = bits & ((1 << mantissa) - 1)
            if payload != 1 << (mantissa - 1):
                return f"{sign}nan(0x{payload:x})"
        return f"{sign}nan"
    if math.isinf(as_double):
        return "-inf" if as_double < 0 else "inf"
    if as_double == 0 and math.copysign(1.0, as_double) < 0:
        # XLA prints "-0", which its parser reads as the integer 0: "-0.0" keeps the sign.
        return "-0.0"
    if element_type == "f32":
        text = "%.6g" % as_double
        return text if np.float32(float(text)) == np.float32(as_double) else "%.9g" % as_double
    if element_type == "f64":
        text = "%.15g" % as_double
        return text if float(text) == as_double else "%.17g" % as_double
    return "%.*g" % (_MAX_DIGITS10[element_type], as_double)


def _format_element(value: Any, element_type: str, scalar: bool) -> str:
    if element_type == "pred":
        if scalar:
            return "true" if value else "false"
        return "1" if value else "0"
    if element_type in COMPLEX_TYPES:
        part = "f32" if element_type == "c64" else "f64"
        return f"({format_float(value.real, part)}, {format_float(value.imag, part)})"
    if element_type in FLOAT_TYPES:
        return format_float(value, element_type)
    return str(int(value))


def _format_array(array: np.ndarray, element_type: str) -> str:
    if array.ndim == 0:
        return _format_element(array[()], element_type, scalar=True)
    flat = [_format_element(v, element_type, scalar=False) for v in array.reshape(-1)]
    if array.ndim == 1:
        return "{" + ", ".join(flat) + "}"
    dims = array.shape
    rank = len(dims)
    row = dims[-1]
    rows = [
        ("{ " + ", ".join(flat[i : i + row]) + " }") if row > 1 else ("{" + ", ".join(flat[i : i + row]) + "}")
        for i in range(0, len(flat), row)
    ] if row else ["{}"] * (len(flat) // max(row, 1))
    # Group rows into higher dimensions, innermost first.
    for level in range(rank - 2, -1, -1):
        size = dims[level]
        grouped = []
        for start in range(0, len(rows), max(size, 1)):
            chunk = rows[start : start + size]
            index = start // max(size, 1)
            prefix = ""
            if rank > 3 and 0 < level < rank - 1:
                prefix = f"/*i{level - 1}={index % dims[level - 1]}*/ "
            grouped.append("{ " + prefix + ", ".join(chunk) + " }")
        rows = grouped
    return rows[0] if rows else "{}"


def format_literal(value: LiteralValue, shape: Shape) -> str:
    """Literal text in XLA's one-line print style (tuples at any depth)."""

    def leaf(item: tuple[LiteralValue, ArrayShape]) -> str:
        array, array_shape = item
        return _format_array(np.asarray(array, dtype=numpy_dtype(array_shape.element_type)), array_shape.element_type)

    return fold_tree((value, shape), literal_parts, leaf,  # type: ignore[arg-type]
                     lambda _, parts: "( " + ", ".join(parts) + " )")
