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

from hloopt.ir.numbers import NumberScan, scan_numbers
from hloopt.ir.shape import (
    COMPLEX_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    ArrayShape,
    Shape,
    TupleShape,
    fold_tree,
    literal_parts,
)

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

    __slots__ = ("_text", "_value", "_plain", "_elided", "shape")

    def __init__(self, shape: Shape, text: str | None = None, value: LiteralValue | None = None) -> None:
        if text is None and value is None:
            raise ValueError("a literal needs text or a value")
        self.shape = shape
        self._text = text
        self._value = value
        self._plain: str | None = None
        self._elided: bool | None = None

    @classmethod
    def from_value(cls, shape: Shape, value: LiteralValue) -> Literal:
        return cls(shape, value=value)

    @property
    def is_elided(self) -> bool:
        """True for ``{...}``: XLA's placeholder for a large constant whose data was not printed."""
        if self._elided is None:
            self._elided = self._text is not None and "..." in self._text
        return self._elided

    @property
    def plain_text(self) -> str:
        """The text with its ``/*index=K*/`` comments blanked out (offsets unchanged)."""
        if self._plain is None:
            self._plain = strip_comments(self.text)
        return self._plain

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
        """Raise LiteralError if the text does not fit the shape: element count, value range (no decode)."""
        if self._text is not None and not self.is_elided:
            _check_count(self.plain_text, self.shape)


# ---------------------------------------------------------------------------
# decoding


def strip_comments(text: str) -> str:
    """Literal text with its ``/*index=K*/`` annotations blanked out (offsets unchanged)."""
    return _COMMENT.sub(lambda m: " " * len(m.group()), text) if "/*" in text else text


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
    """Element counts and values against the shape, tuple parts in order (a stack: tuples nest freely).

    `text` has no comments and no elided ``{...}`` part.
    """
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
    body = text
    if isinstance(shape, TupleShape):
        if not body.lstrip().startswith("("):
            raise LiteralError(f"expects a tuple literal for shape {shape.to_text()}")
        parts = _split_tuple(body)
        if len(parts) != len(shape.elements):
            raise LiteralError(
                f"tuple literal has {len(parts)} elements, shape {shape.to_text()} has {len(shape.elements)}"
            )
        return list(zip(parts, shape.elements))
    if shape.element_type == "token":
        return []
    scan = scan_numbers(body) if len(body) >= _SCAN_FROM and "(" not in body else None
    if shape.element_type in COMPLEX_TYPES:
        found = len(_COMPLEX_ELEMENT.findall(body))
    elif "(" in body:
        found = len(_ELEMENT.findall(body))
    elif scan is not None:
        found = scan.count
    else:  # splitting on separators counts them at C speed
        found = len(body.translate(SEPARATORS).split())
    expected = shape.element_count
    # XLA accepts a bare scalar for an array constant (it pads with zeros).
    if found != expected and not (found == 1 and "{" not in body):
        raise LiteralError(
            f"literal has {found} elements but shape {shape.to_text()} has {expected}"
        )
    _check_values(body, shape, scan)
    return []


# ---------------------------------------------------------------------------
# values: what XLA's literal parser refuses beyond the element count

_FINITE_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}
_PAYLOAD_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e4m3": 3, "f8e3m4": 4}
#: Below 10**digits a value is finite in the type whatever its rounding: no conversion needed.
_SAFE_DIGITS = {"f16": 4, "bf16": 38, "f32": 38, "f64": 308}
#: Literal texts at least this long are scanned with numpy (`scan_numbers`); shorter ones are read by Python.
_SCAN_FROM = 4096
_TOKEN = re.compile(r"-?nan\(0x[0-9a-fA-F]+\)|[^\s,{}()]+")
#: A whole token `inf`, `-inf`, `nan` or `-nan` (not `infinity`, not `nan(0x1)`).
_WRITTEN_NON_FINITE = re.compile(r"(?<![^\s,{}])-?(?:inf|nan)(?![^\s,{}])")


def _check_values(body: str, shape: ArrayShape, scan: NumberScan | None) -> None:
    """Raise LiteralError for a value XLA refuses: not a number, or out of its type's range."""
    element_type = shape.element_type
    if element_type in INT_TYPES:
        _check_integers(body, element_type, scan)
    elif element_type in FLOAT_TYPES or element_type in COMPLEX_TYPES:
        _check_floats(body, shape, scan)


def _integer_range(element_type: str) -> tuple[int, int]:
    bits = int(element_type[1:])
    if element_type[0] == "s":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    # XLA reads a negative u64 literal as the int64 bit pattern.
    return (-(1 << 63) if element_type == "u64" else 0), (1 << bits) - 1


def _check_integers(body: str, element_type: str, scan: NumberScan | None) -> None:
    low, high = _integer_range(element_type)
    if (
        scan is not None and not scan.fractional and not scan.non_finite
        and scan.integer_digits < len(str(high)) and (low < 0 or not scan.negative)
    ):
        return  # every value has fewer digits than the largest one allowed
    fast = _c_numbers(body, np.int64) if element_type != "u64" and len(body) >= _SCAN_FROM else None
    if fast is not None:
        values = [int(fast.min()), int(fast.max())] if fast.size else []
    else:
        try:
            values = [int(t) for t in _TOKEN.findall(body) if t not in ("true", "false")]
        except ValueError as err:
            raise LiteralError(f"expects integer literal values: {err}") from None
    for value in (min(values), max(values)) if values else ():
        if not low <= value <= high:
            raise LiteralError(
                f"value {value} is out of range for literal's primitive type {element_type.upper()} namely [{low}, {high}]."
            )


def _check_floats(body: str, shape: ArrayShape, scan: NumberScan | None) -> None:
    element_type = shape.element_type
    part_type = {"c64": "f32", "c128": "f64"}.get(element_type, element_type)
    safe_digits = _SAFE_DIGITS.get(part_type)
    if scan is not None and safe_digits is not None and scan.integer_digits + scan.exponent <= safe_digits:
        return  # every finite value is below 10**safe_digits (inf and nan are allowed)
    numbers = _c_numbers(body, np.float64) if len(body) >= _SCAN_FROM else _python_floats(body)
    if numbers is not None:
        finite = np.isfinite(numbers)
        if not finite.all():
            # Keep the finite values when every inf and nan is written as such (an attention mask's
            # -inf, say); otherwise an overflow or an odd spelling: the careful path says which.
            written = len(_WRITTEN_NON_FINITE.findall(body)) == numbers.size - int(finite.sum())
            numbers = numbers[finite] if written else None
    if numbers is not None:
        if safe_digits is not None and (not numbers.size or float(np.abs(numbers).max()) < 10.0**safe_digits):
            return
        tokens: list[str] = []
    else:
        tokens = _TOKEN.findall(body)
    for token in tokens:
        if "(" in token:
            payload = int(token.split("(0x")[1].rstrip(")"), 16)
            mantissa = _PAYLOAD_BITS.get(part_type)
            shape_text = shape.to_text(False)
            if mantissa is None:
                raise LiteralError(
                    f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape_text}, "
                    f"but {part_type} does not support NaN payloads"
                )
            if payload == 0 or payload >= 1 << mantissa:
                raise LiteralError(
                    f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape_text}, "
                    "but the NaN payload is out of range"
                )
    if tokens:
        try:
            numbers = np.array([t for t in tokens if "(" not in t and t not in ("nan", "-nan", "inf", "-inf")], dtype=np.float64)
        except ValueError as err:
            raise LiteralError(f"expects number literal values: {err}") from None
    assert numbers is not None
    if numbers.size and not np.isfinite(numbers).all():
        raise LiteralError("Constant is out of range for double (+/-1.79769e+308) and so is unparsable.")
    limit = _FINITE_MAX.get(part_type)
    if limit is None and part_type != "f64":
        import ml_dtypes

        limit = float(ml_dtypes.finfo(numpy_dtype(part_type)).max)
    if limit is not None and numbers.size:
        # XLA rejects values that round past the largest finite value of the type.
        with np.errstate(over="ignore"):
            rounded = numbers.astype(numpy_dtype(part_type)).astype(np.float64)
        if part_type in ("f16", "bf16", "f32"):
            bad = np.flatnonzero(~np.isfinite(rounded) & np.isfinite(numbers))
        else:
            bad = np.flatnonzero(np.abs(numbers) > limit * 1.0625)
        if bad.size:
            raise LiteralError(
                f"value {numbers[bad[0]]:g} is out of range for literal's primitive type {element_type.upper()} "
                f"namely [{-limit:g}, {limit:g}]."
            )


def _python_floats(body: str) -> np.ndarray | None:
    """The numbers of a short literal read by Python's float(), or None if one is not a number."""
    try:
        return np.array([float(t) for t in body.translate(SEPARATORS).split()], dtype=np.float64)
    except ValueError:
        return None


def _c_numbers(body: str, dtype: type) -> np.ndarray | None:
    """All numbers of a long literal parsed in C, or None when it needs the careful path."""
    if "(" in body:
        return None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return np.fromstring(body.translate(SEPARATORS), dtype=dtype, sep=" ")  # type: ignore[call-overload]
        except (ValueError, DeprecationWarning):
            return None


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
