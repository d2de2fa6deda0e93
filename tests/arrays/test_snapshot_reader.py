"""The HloSnapshot reader without jax: LiteralProtos built here, field by field, for every element type
of the table; tuples, layouts, packed and unpacked repeated fields, and what a broken file says.

The same reader against the literals jaxlib itself writes: tests/xla/test_snapshots.py."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from hloopt.arrays.snapshots import FIELDS, SnapshotError, decode_literal, read_snapshot
from hloopt.ir.element_types import BY_NAME, ROWS, Kind, numpy_dtype
from hloopt.support.formats import Format, detect


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative numbers as 64-bit two's complement, as protobuf writes int32/int64
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes | int, wire: int = 2) -> bytes:
    if wire == 0:
        assert isinstance(payload, int)
        return varint(number << 3) + varint(payload)
    assert isinstance(payload, bytes)
    if wire == 2:
        return varint(number << 3 | 2) + varint(len(payload)) + payload
    return varint(number << 3 | wire) + payload  # fixed32 (5) / fixed64 (1): the value's own bytes


def shape(element_type: str, dims: list[int], minor_to_major: list[int] | None = None, bits: int = 0) -> bytes:
    layout = b""
    if minor_to_major is not None or bits:
        layout = field(1, b"".join(map(varint, minor_to_major or [])))
        layout += field(7, bits, wire=0) if bits else b""
    body = field(2, BY_NAME[element_type].code, wire=0) + field(3, b"".join(map(varint, dims)))
    return body + (field(5, layout) if layout else b"")


def literal(array: np.ndarray, element_type: str, *, packed: bool = True) -> bytes:
    """A LiteralProto of `array` in the default layout, as XLA's `WriteToProto` writes it."""
    number, storage = FIELDS[element_type]
    flat = array.reshape(-1)
    head = field(1, shape(element_type, list(array.shape)))
    if storage == "bytes":
        return head + field(number, flat.view(np.uint8).tobytes() if flat.dtype.itemsize == 1 else flat.tobytes())
    if storage == "varint":
        values = [int(v) for v in flat.astype(np.int64 if flat.dtype.kind in "ib" else np.uint64)]
        if packed:
            return head + field(number, b"".join(map(varint, values)))
        return head + b"".join(field(number, v, wire=0) for v in values)
    parts = flat.view(np.float32 if flat.dtype in (np.float32, np.complex64) else np.float64)
    raw = parts.astype(parts.dtype.newbyteorder("<")).tobytes()
    if packed:
        return head + field(number, raw)
    size = parts.dtype.itemsize  # one fixed32 (wire 5) or fixed64 (wire 1) field per value, its bytes as they are
    return head + b"".join(
        field(number, raw[i : i + size], wire=5 if size == 4 else 1) for i in range(0, len(raw), size)
    )


def tuple_literal(*elements: bytes) -> bytes:
    return field(1, field(2, 13, wire=0)) + b"".join(field(10, element) for element in elements)


def bit_patterns(element_type: str, count: int = 256) -> np.ndarray:
    """Every bit pattern of a type of at most 8 bits, else `count` random ones (NaNs, infinities and all)."""
    row = BY_NAME[element_type]
    dtype = numpy_dtype(element_type)
    if row.kind is Kind.PRED:
        return np.array([False, True, True, False])
    if row.bits <= 8:
        raw = np.arange(1 << row.bits, dtype=np.uint8)
        if row.kind is Kind.SIGNED and row.bits < 8:
            return (raw.astype(np.int16) - np.where(raw >= 1 << (row.bits - 1), 1 << row.bits, 0)).astype(dtype)
        return raw.view(dtype)
    rng = np.random.default_rng(row.code)
    return rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8).view(dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


NUMPY_TYPES = [row.name for row in ROWS if row.name in FIELDS and row.numpy_name is not None]


def test_the_field_table_covers_every_element_type_with_values() -> None:
    with_values = {row.name for row in ROWS if row.kind not in (Kind.TOKEN, Kind.OPAQUE)}
    assert set(FIELDS) == with_values
    assert len({number for number, _ in FIELDS.values()}) == len(FIELDS)


@pytest.mark.parametrize("element_type", NUMPY_TYPES)
@pytest.mark.parametrize("packed", [True, False])
def test_every_element_type_decodes_bit_for_bit(element_type: str, packed: bool) -> None:
    values = bit_patterns(element_type)
    array = values.reshape(2, -1) if values.size % 2 == 0 else values
    [leaf] = decode_literal(literal(array, element_type, packed=packed), "test")
    assert leaf.element_type == element_type
    assert same_bits(leaf.array, array)


@pytest.mark.parametrize("element_type", ["s2", "s4", "u2", "u4"])
def test_a_sub_byte_value_is_read_from_its_low_bits_whatever_the_bits_above(element_type: str) -> None:
    values = bit_patterns(element_type)
    low = values.view(np.uint8) & ((1 << BY_NAME[element_type].bits) - 1)
    for stored in (low, low | 0xF0, values.view(np.uint8)):
        data = field(1, shape(element_type, [values.size])) + field(FIELDS[element_type][0], stored.tobytes())
        assert same_bits(decode_literal(data, "test")[0].array, values)


@pytest.mark.parametrize("element_type", ["s4", "u4", "s2", "u2", "f4e2m1fn"])
def test_packed_sub_byte_values_are_read_low_bits_first(element_type: str) -> None:
    bits = BY_NAME[element_type].bits
    values = bit_patterns(element_type)[:7] if bits == 2 else bit_patterns(element_type)[:15]
    codes = values.view(np.uint8) & ((1 << bits) - 1)
    per_byte = 8 // bits
    padded = np.concatenate([codes, np.zeros(-len(codes) % per_byte, np.uint8)]).reshape(-1, per_byte)
    packed = np.bitwise_or.reduce(padded << (np.arange(per_byte) * bits).astype(np.uint8), axis=1).astype(np.uint8)
    data = field(1, shape(element_type, [values.size], [0], bits)) + field(FIELDS[element_type][0], packed.tobytes())
    assert same_bits(decode_literal(data, "test")[0].array, values)


def test_extreme_integers_and_negative_varints() -> None:
    for dtype, name in ((np.int32, "s32"), (np.int64, "s64"), (np.uint32, "u32"), (np.uint64, "u64")):
        info = np.iinfo(dtype)
        array = np.array([info.min, info.max, 0, 1, -1 if info.min else 2], dtype)
        assert same_bits(decode_literal(literal(array, name), "test")[0].array, array)


@pytest.mark.parametrize("minor_to_major", [[0, 1, 2], [1, 0, 2], [2, 0, 1], [0, 2, 1]])
def test_a_layout_other_than_the_default_is_read_in_its_order(minor_to_major: list[int]) -> None:
    logical = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    stored = logical.transpose(minor_to_major[::-1]).reshape(-1)  # major dimension first in memory
    data = field(1, shape("f32", [2, 3, 4], minor_to_major)) + field(8, stored.tobytes())
    assert same_bits(decode_literal(data, "test")[0].array, logical)


def test_nested_tuples_are_flattened_in_order() -> None:
    a = np.array([1.5, -2], ml_dtypes.bfloat16)
    b = np.array([[True, False]])
    c = np.array(7, np.int64)
    nested = tuple_literal(literal(a, "bf16"), tuple_literal(literal(b, "pred"), literal(c, "s64")), tuple_literal())
    leaves = decode_literal(nested, "test")
    assert [leaf.element_type for leaf in leaves] == ["bf16", "pred", "s64"]
    assert all(same_bits(leaf.array, x) for leaf, x in zip(leaves, (a, b, c)))


def snapshot(arguments: list[bytes], result: bytes | None) -> bytes:
    module = field(1, b"m") + field(2, b"e") + field(3, b"c") + field(4, b"s")  # fields a module always has
    body = field(1, field(1, module)) + b"".join(field(2, argument) for argument in arguments)
    return body + (field(3, result) if result is not None else b"") + field(4, b"Host")


def test_a_snapshot_gives_module_arguments_result_and_platform() -> None:
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int8)
    data = snapshot([literal(x, "f32"), tuple_literal(literal(y, "s8"))], tuple_literal(literal(x, "f32")))
    read = read_snapshot(data, "s.pb")
    assert read.module.startswith(field(1, b"m"))
    assert [leaf.element_type for leaf in read.arguments] == ["f32", "s8"]
    assert same_bits(read.inputs[0], x) and same_bits(read.inputs[1], y)
    assert read.result is not None and same_bits(read.result[0].array, x)
    assert read.platform == "Host"
    assert read_snapshot(snapshot([], None), "s.pb").result is None


def test_a_snapshot_is_recognised_by_its_name_or_its_fields() -> None:
    data = snapshot([], None)
    assert detect("module_0001.jit_f.snapshot.-12345.pb", b"") is Format.SNAPSHOT
    assert detect("renamed.pb", data) is Format.SNAPSHOT
    assert detect("renamed", data) is Format.SNAPSHOT


def test_every_truncation_of_a_snapshot_is_an_error_or_a_shorter_snapshot() -> None:
    x = np.arange(12, dtype=np.float32)
    data = snapshot([literal(x, "f32"), literal(x.astype(np.int32), "s32")], tuple_literal(literal(x, "f32")))
    boundaries = {0}
    position = 0
    while position < len(data):  # the ends of top-level fields: a cut there leaves a whole, shorter message
        length = data[position + 1]
        position += 2 + length
        boundaries.add(position)
    for end in range(len(data)):
        cut = data[:end]
        if end in boundaries:
            if end == 0:
                with pytest.raises(SnapshotError, match="without its module"):
                    read_snapshot(cut, "s.snapshot.1.pb")
            continue
        with pytest.raises(SnapshotError, match=r"^s\.snapshot\.1\.pb: .*(truncated|malformed)"):
            read_snapshot(cut, "s.snapshot.1.pb")


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (field(1, shape("f32", [3])) + field(8, b"\0" * 8), "2 values for f32[3], which has 3"),
        (field(1, shape("s1", [2])) + field(30, b"\0\1"), "s1 has no numpy representation"),
        (field(1, shape("token", [])), "element type 17, which has no values"),
        (field(8, b"\0" * 4), "a literal without a shape"),
        (field(1, shape("f32", [1]) + field(6, b"\1")) + field(8, b"\0" * 4), "dynamic shape"),
        (field(1, shape("f32", [1]) + field(5, field(6, b""))) + field(8, b"\0" * 4), "tiled layout"),
        (field(1, shape("s32", [1])) + field(4, b"\x80"), "truncated"),
        (field(1, shape("f32", [1])) + field(8, b"\0" * 3), "not a whole number"),
    ],
    ids=["count", "s1", "token", "no-shape", "dynamic", "tiled", "cut-varint", "cut-float"],
)
def test_a_literal_that_cannot_be_read_says_why(data: bytes, said: str) -> None:
    with pytest.raises(SnapshotError, match=rf"^argument 0: .*{re.escape(said)}"):
        decode_literal(data, "argument 0")
