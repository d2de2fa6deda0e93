"""XLA's HloSnapshot files (``--xla_dump_hlo_snapshots``): a module with the arguments it really ran on
and the result it really gave, read without protobuf or jax.

No dependency ships the schema (jaxlib has no ``*_pb2``, and protobuf is not installed), so the few
messages needed are decoded from the wire format with the field numbers below, transcribed from
openxla's ``xla/service/hlo.proto`` (HloSnapshot, HloProto) and ``xla/xla_data.proto`` (LiteralProto,
ShapeProto, LayoutProto) as of tensorflow/tensorflow 036ce7719b8e (``third_party/xla``), which has the
fp6 fields. The module stays bytes (an HloModuleProto): jaxlib reads it, in a worker
(`hloopt.xla.formats`). The values become numpy (ml_dtypes) arrays, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hloopt.errors import HloError
from hloopt.ir.element_types import BY_CODE, ElementType, Kind, NoNumpyType, numpy_dtype
from hloopt.support.formats import WireField, first_field, wire_fields

# HloSnapshot: hlo = 1 (HloProto, whose hlo_module = 1), arguments = 2, result = 3, execution_platform = 4.
_HLO, _ARGUMENTS, _RESULT, _PLATFORM = 1, 2, 3, 4
# LiteralProto: shape = 1, tuple_literals = 10, dynamic_sizes = 34.
_SHAPE, _TUPLE_LITERALS, _DYNAMIC_SIZES = 1, 10, 34
# ShapeProto: element_type = 2, dimensions = 3, tuple_shapes = 4, layout = 5, is_dynamic_dimension = 6.
_ELEMENT_TYPE, _DIMENSIONS, _LAYOUT, _IS_DYNAMIC = 2, 3, 5, 6
# LayoutProto: minor_to_major = 1, tiles = 6, element_size_in_bits = 7.
_MINOR_TO_MAJOR, _TILES, _ELEMENT_BITS = 1, 6, 7
#: PrimitiveType TUPLE.
_TUPLE = 13

#: The LiteralProto field of each element type, and how its values are stored there: ``bytes`` (the
#: values' little-endian bytes, one byte per sub-byte element), ``varint`` (a repeated integer), or
#: ``fixed`` (a repeated float or double; complex as interleaved real and imaginary parts).
FIELDS: dict[str, tuple[int, str]] = {
    "pred": (2, "varint"),
    "s1": (30, "bytes"),
    "s2": (26, "bytes"),
    "s4": (21, "bytes"),
    "s8": (15, "bytes"),
    "u1": (31, "bytes"),
    "u2": (27, "bytes"),
    "u4": (22, "bytes"),
    "u8": (3, "bytes"),
    "s32": (4, "varint"),
    "s64": (5, "varint"),
    "u32": (6, "varint"),
    "u64": (7, "varint"),
    "f32": (8, "fixed"),
    "f64": (9, "fixed"),
    "c64": (12, "fixed"),
    "c128": (18, "fixed"),
    "f16": (11, "bytes"),
    "bf16": (13, "bytes"),
    "u16": (16, "bytes"),
    "s16": (17, "bytes"),
    "f4e2m1fn": (32, "bytes"),
    "f8e3m4": (29, "bytes"),
    "f8e4m3b11fnuz": (23, "bytes"),
    "f8e4m3fn": (20, "bytes"),
    "f8e4m3fnuz": (25, "bytes"),
    "f8e4m3": (28, "bytes"),
    "f8e5m2fnuz": (24, "bytes"),
    "f8e5m2": (19, "bytes"),
    "f8e8m0fnu": (33, "bytes"),
    "f6e3m2fn": (35, "bytes"),
    "f6e2m3fn": (36, "bytes"),
}


class SnapshotError(HloError):
    """A snapshot that cannot be read: truncated, malformed, or holding what hloopt cannot run."""


@dataclass(frozen=True)
class Leaf:
    """One array of a literal (a tuple's leaves in order): its element type and its values."""

    element_type: str
    array: np.ndarray


@dataclass(frozen=True)
class Snapshot:
    """What an HloSnapshot holds: the module (a serialized HloModuleProto), the arguments (tuple
    arguments flattened, as `exec --inputs` takes them), the result's leaves (None when none was
    recorded) and the platform that ran it (``Host`` for XLA's CPU)."""

    module: bytes
    arguments: tuple[Leaf, ...]
    result: tuple[Leaf, ...] | None
    platform: str

    @property
    def inputs(self) -> list[np.ndarray]:
        """The arguments as the arrays a run takes."""
        return [leaf.array for leaf in self.arguments]


def read_snapshot(data: bytes, name: str) -> Snapshot:
    """The snapshot `data`, read from the file `name` (every error names it)."""
    fields = _fields(data, name, "HloSnapshot")
    hlo = [field for field in fields if field.number == _HLO and field.wire == 2]
    module = first_field(data[hlo[0].start : hlo[0].end], 1) if hlo else None
    if module is None:
        raise SnapshotError(f"{name}: an HloSnapshot without its module (hlo.hlo_module)")
    arguments: list[Leaf] = []
    result: tuple[Leaf, ...] | None = None
    platform = ""
    for field in fields:
        payload = data[field.start : field.end]
        if field.number == _ARGUMENTS and field.wire == 2:
            arguments += decode_literal(payload, f"{name}: argument {len(arguments)}")
        elif field.number == _RESULT and field.wire == 2:
            result = tuple(decode_literal(payload, f"{name}: the result"))
        elif field.number == _PLATFORM and field.wire == 2:
            platform = payload.decode("utf-8", errors="replace")
    return Snapshot(module, tuple(arguments), result, platform)


def decode_literal(data: bytes, where: str) -> list[Leaf]:
    """The leaves of a serialized LiteralProto, a tuple's in order (nested tuples flattened)."""
    fields = _fields(data, where, "LiteralProto")
    shapes = [data[f.start : f.end] for f in fields if f.number == _SHAPE and f.wire == 2]
    if not shapes:
        raise SnapshotError(f"{where}: a literal without a shape")
    element_type, dims, minor_to_major, element_bits = _shape(shapes[-1], where)
    if element_type == _TUPLE:
        leaves: list[Leaf] = []
        for field in fields:
            if field.number == _TUPLE_LITERALS and field.wire == 2:
                leaves += decode_literal(data[field.start : field.end], where)
        return leaves
    if any(f.number == _DYNAMIC_SIZES for f in fields):
        raise SnapshotError(f"{where}: a literal of a dynamic shape, which hloopt does not run")
    row = BY_CODE.get(element_type)
    if row is None or row.name not in FIELDS:
        raise SnapshotError(f"{where}: a literal of element type {element_type}, which has no values")
    try:
        dtype = numpy_dtype(row.name)
    except NoNumpyType as err:
        raise SnapshotError(f"{where}: {err}") from None
    number, storage = FIELDS[row.name]
    count = int(np.prod(dims, dtype=np.int64))
    pieces = [f for f in fields if f.number == number]
    if storage == "bytes":
        flat = _bytes_values(data, pieces, row, count, element_bits == row.bits, where)
    elif storage == "varint":
        flat = _varint_values(data, pieces, dtype, where)
    else:
        flat = _fixed_values(data, pieces, dtype, row.kind is Kind.COMPLEX, where)
    if flat.size != count:
        shape = f"{row.name}[{','.join(map(str, dims))}]"
        raise SnapshotError(f"{where}: {flat.size} values for {shape}, which has {count} (is the file truncated?)")
    return [Leaf(row.name, _logical(flat, dims, minor_to_major))]


def _fields(data: bytes, where: str, message: str) -> list[WireField]:
    fields = wire_fields(data)
    if fields is None:
        raise SnapshotError(f"{where}: a truncated or malformed {message} (a field runs past the end of its bytes)")
    return fields


def _shape(data: bytes, where: str) -> tuple[int, list[int], list[int] | None, int]:
    """A ShapeProto's element type, dimensions, layout (minor to major; None: none given) and element size."""
    fields = _fields(data, where, "ShapeProto")
    element_type = 0
    dims: list[int] = []
    minor_to_major: list[int] | None = None
    element_bits = 0
    for field in fields:
        if field.number == _ELEMENT_TYPE and field.wire == 0:
            element_type = _integers(data, field, where)[0]
        elif field.number == _DIMENSIONS:
            dims += _integers(data, field, where)
        elif field.number == _IS_DYNAMIC and any(_integers(data, field, where)):
            raise SnapshotError(f"{where}: a literal of a dynamic shape, which hloopt does not run")
        elif field.number == _LAYOUT and field.wire == 2:
            minor_to_major, element_bits = _layout(data[field.start : field.end], where)
    return element_type, dims, minor_to_major, element_bits


def _layout(data: bytes, where: str) -> tuple[list[int], int]:
    minor_to_major: list[int] = []
    element_bits = 0
    for field in _fields(data, where, "LayoutProto"):
        if field.number == _MINOR_TO_MAJOR:
            minor_to_major += _integers(data, field, where)
        elif field.number == _TILES:
            raise SnapshotError(f"{where}: a literal in a tiled layout, which hloopt does not read")
        elif field.number == _ELEMENT_BITS and field.wire == 0:
            element_bits = _integers(data, field, where)[0]
    return minor_to_major, element_bits


def _integers(data: bytes, field: WireField, where: str) -> list[int]:
    """A repeated (packed or not) or single integer field's values, as unsigned 64-bit numbers."""
    if field.wire not in (0, 2):
        raise SnapshotError(f"{where}: field {field.number} is not an integer field")
    return [int(v) for v in _varints(data[field.start : field.end], where)]


def _varints(data: bytes, where: str) -> np.ndarray:
    """Consecutive varints decoded at once: each value's 7-bit groups or-ed into place (uint64)."""
    raw = np.frombuffer(data, np.uint8)
    if raw.size == 0:
        return np.zeros(0, np.uint64)
    ends = np.flatnonzero(raw < 0x80)
    if ends.size == 0 or ends[-1] != raw.size - 1:
        raise SnapshotError(f"{where}: a truncated integer list")
    starts = np.concatenate(([0], ends[:-1] + 1))
    position = np.arange(raw.size) - np.repeat(starts, ends - starts + 1)
    if position.max() > 9:
        raise SnapshotError(f"{where}: an integer longer than 64 bits")
    groups = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(groups, starts)


def _varint_values(data: bytes, pieces: list[WireField], dtype: np.dtype, where: str) -> np.ndarray:
    """A repeated varint field (packed, or one value per field) as `dtype`: negative int32/int64 are
    written as 64-bit two's complement, so the bits are cut to the type's width."""
    chunks = [_varints(data[p.start : p.end], where) for p in pieces]
    values = np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)
    if dtype == np.bool_:
        return values != 0
    return values.astype(np.uint64).view(np.int64).astype(dtype) if dtype.kind == "i" else values.astype(dtype)


def _fixed_values(data: bytes, pieces: list[WireField], dtype: np.dtype, complex_: bool, where: str) -> np.ndarray:
    """A repeated float/double field (packed, or one value per field), complex parts interleaved."""
    part = np.dtype(f"<f{dtype.itemsize // 2}") if complex_ else np.dtype(f"<f{dtype.itemsize}")
    raw = b"".join(data[p.start : p.end] for p in pieces)
    if len(raw) % part.itemsize or (complex_ and len(raw) % (2 * part.itemsize)):
        raise SnapshotError(f"{where}: {len(raw)} bytes of {dtype.name} values, not a whole number of them")
    return np.frombuffer(raw, part).view(dtype.newbyteorder("<")).astype(dtype)


def _bytes_values(
    data: bytes, pieces: list[WireField], row: ElementType, count: int, packed: bool, where: str
) -> np.ndarray:
    """A bytes field's values: little-endian, one byte per sub-byte element, or packed (low bits first)
    when the layout gives a sub-byte element size and the bytes are that many."""
    dtype = numpy_dtype(row.name)
    raw = np.frombuffer(b"".join(data[p.start : p.end] for p in pieces), np.uint8)
    if row.bits < 8:
        if packed and raw.size != count and raw.size == -(-count * row.bits // 8):
            shifts = (np.arange(8 // row.bits) * row.bits).astype(np.uint8)
            raw = (raw[:, None] >> shifts).reshape(-1)[:count]
        low = raw & np.uint8((1 << row.bits) - 1)  # the value's bits; a signed one may come sign-extended
        if row.kind is Kind.SIGNED:
            signed = low.astype(np.int8)
            return np.where(signed >= 1 << (row.bits - 1), signed - (1 << row.bits), signed).astype(dtype)
        return low.view(dtype)
    if raw.size % dtype.itemsize:
        raise SnapshotError(f"{where}: {raw.size} bytes of {row.name} values, not a whole number of them")
    if dtype.itemsize == 1:
        return raw.view(dtype)
    return raw.view(f"<u{dtype.itemsize}").astype(f"=u{dtype.itemsize}").view(dtype)


def _logical(flat: np.ndarray, dims: list[int], minor_to_major: list[int] | None) -> np.ndarray:
    """Values in the layout's order (`minor_to_major`; none or the default: row-major) as the logical array."""
    if not minor_to_major or minor_to_major == list(range(len(dims)))[::-1]:
        return flat.reshape(dims)
    major_first = minor_to_major[::-1]
    physical = flat.reshape([dims[d] for d in major_first])
    return np.ascontiguousarray(physical.transpose(np.argsort(major_first)))
