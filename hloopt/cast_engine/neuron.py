"""The `neuron` profile: bir::CastToNewDType's two stages, vectorised.

Stage A decodes the source into a float32 hub, stage B encodes the hub into
the destination. Every kernel works on one chunk and writes into preallocated
buffers; 8- and 16-bit decodes and all fp8/fp4 encodes are table lookups whose
tables are built once from the readable rules in `minifloat`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from . import minifloat as mf
from . import packing
from .config import FP8ConversionConfig
from .dtypes import DType
from .scratch import Scratch

Decoder = Callable[[np.ndarray, np.ndarray, Scratch], None]
Encoder = Callable[[np.ndarray, np.ndarray, Scratch], None]
Kernel = Callable[[np.ndarray, np.ndarray, Scratch], None]

F16_NAN = 0x7E00
BF16_NAN = 0x7FC0

# ---------------------------------------------------------------- stage A


@cache
def f16_table() -> np.ndarray:
    """float32 bits of every half (reading 1: subnormal = mantissa x 2^-24).

    The open-coded decoder rebiases normals and Inf/NaN by integer adds, which
    keeps the NaN payload and never quiets a signalling NaN; a table lets one
    lookup reproduce that exactly.
    """
    h = np.arange(1 << 16, dtype=np.uint32)
    m = (h << 13) & 0x0FFFE000
    exp_field = m & 0x0F800000
    subnormal = (np.float32(2.0**-24) * (h & 0x3FF).astype(np.float32)).view(np.uint32)
    f = np.where(exp_field == 0x0F800000, m + 0x70000000, np.where(exp_field != 0, m + 0x38000000, subnormal))
    table = ((h << 16) & mf.SIGN32) | f
    table.flags.writeable = False
    return table


def _decode_by_cast(src: np.ndarray, hub: np.ndarray, scratch: Scratch) -> None:
    """Integers (cvtsi2ss: round-to-nearest-even, reading 11) and bfloat16.

    numpy's integer-to-float32 casts round to nearest-even for every width and
    ml_dtypes widens bfloat16 by a shift that keeps NaN payloads (reading 13);
    both are verified bit for bit by the tests.
    """
    np.copyto(hub, src, casting="unsafe")


def _decode_f16(src: np.ndarray, hub: np.ndarray, scratch: Scratch) -> None:
    np.take(f16_table(), src.view(np.uint16), out=hub.view(np.uint32))


def _byte_decoder(table: np.ndarray) -> Decoder:
    """8-bit sources and fp8 x4 lanes: one 256-entry lookup."""

    def decode(src: np.ndarray, hub: np.ndarray, scratch: Scratch) -> None:
        np.take(table, src.view(np.uint8), out=hub)

    return decode


def _fp4x4_decoder(table: np.ndarray) -> Decoder:
    pairs = packing.nibble_pair_table(table[:16])

    def decode(src: np.ndarray, hub: np.ndarray, scratch: Scratch) -> None:
        packing.unpack_nibbles(pairs, src, hub)

    return decode


@cache
def e8m0_table() -> np.ndarray:
    """Reading 12: the device reads an e8m0 byte as its plain unsigned value."""
    table = np.arange(256, dtype=np.float32)
    table.flags.writeable = False
    return table


def decoder(src: DType) -> Decoder:
    """Stage A for one source dtype (float32 and float32r need none)."""
    if src.name == "float16":
        return _decode_f16
    if src.name == "float8_e8m0fnu":
        return _byte_decoder(e8m0_table())
    if src.name == "float4_e2m1fn_x4":
        return _fp4x4_decoder(mf.decode_table(mf.E2M1FN))
    if src.fmt is not None:
        return _byte_decoder(mf.decode_table(src.fmt))
    return _decode_by_cast


# ---------------------------------------------------------------- stage B


_NATIVE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _fix_nans(values: np.ndarray, out: np.ndarray, positive: int, negative: int, scratch: Scratch) -> None:
    """Overwrite the lanes whose value is NaN with a sign-dependent constant.

    NaNs are rare, so for native floats the common path is one max-reduction:
    np.maximum propagates NaN, so the maximum is NaN exactly when a NaN exists.
    """
    if values.dtype in _NATIVE_FLOATS and values.size and not np.isnan(np.maximum.reduce(values)):
        return
    nan = np.isnan(values, out=scratch.get("nan", np.bool_, values.size))
    if nan.any():
        kind = out.dtype.type  # numpy 2.5 will not take Python ints past int64 in np.where
        out[nan] = np.where(np.signbit(values[nan]), kind(negative), kind(positive))


def saturating_int_encoder(
    dtype: np.dtype,
    rounder: np.ufunc,
    work: type = np.float32,
    nan_positive: int | None = None,
    nan_negative: int | None = None,
) -> Encoder:
    """Round (or truncate), then saturate to `dtype`; NaN gives a per-sign constant.

    Readings 9 and 10 use the defaults: float32 work, NaN -> MAX with the sign
    bit clear and MIN (0 if unsigned) with it set; the xla profile passes
    float64 work and NaN -> 0. Clipping happens in the work type to the largest
    value not above MAX; a rounded value above that bound becomes MAX afterwards.
    """
    info = np.iinfo(dtype)
    low = work(info.min)  # 0 or -2^k: exact in any float type
    high = work(info.max)
    if int(high) > info.max:
        high = np.nextafter(high, work(0))
    needs_max_fix = int(high) != info.max
    positive = info.max if nan_positive is None else nan_positive
    negative = info.min if nan_negative is None else nan_negative

    def encode(src: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
        out = dst.view(dtype)
        values = scratch.get("round", work, src.size)
        if src.dtype != values.dtype:
            np.copyto(values, src, casting="unsafe")
            src_values = values
        else:
            src_values = src
        rounder(src_values, out=values)
        above = np.greater(values, high, out=scratch.get("above", np.bool_, src.size)) if needs_max_fix else None
        np.clip(values, low, high, out=values)
        np.copyto(out, values, casting="unsafe")
        if above is not None and above.any():
            out[above] = info.max
        _fix_nans(src, out, positive, negative, scratch)

    return encode


def _encode_f16(hub: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """Reading 2: IEEE RNE (numpy's own float32->float16), Inf on overflow."""
    np.copyto(dst, hub, casting="unsafe")
    bits = dst.view(np.uint16)
    _fix_nans(hub, bits, F16_NAN, F16_NAN | 0x8000, scratch)


def _encode_bf16(hub: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """Reading 8: ml_dtypes rounds to nearest-even with Inf on overflow; NaN unsigned."""
    np.copyto(dst, hub, casting="unsafe")
    _fix_nans(hub, dst.view(np.uint16), BF16_NAN, BF16_NAN, scratch)


def _encode_f32r(hub: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """Reading 7: RNE dropping the low 12 mantissa bits (carry may reach Inf)."""
    bits = hub.view(np.uint32)
    out = dst.view(np.uint32)
    odd = scratch.get("odd", np.uint32, hub.size)
    np.right_shift(bits, 12, out=odd)
    np.bitwise_and(odd, 1, out=odd)
    np.add(odd, 0x7FF, out=odd)
    np.add(odd, bits, out=odd)
    np.bitwise_and(odd, 0xFFFFF000, out=out)
    _fix_nans(hub, out, mf.F32_NAN, mf.F32_NAN, scratch)


def _encode_f32(hub: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """float32r -> float32: the bits pass through."""
    np.copyto(dst, hub)


def minifloat_codes(table: np.ndarray, shift: int, hub: np.ndarray, codes: np.ndarray, scratch: Scratch) -> None:
    """Encode through an `encode_table`: index = (bits >> shift) << 1 | sticky."""
    bits = hub.view(np.uint32)
    index = scratch.get("index", np.uint32, hub.size)
    sticky = scratch.get("sticky", np.uint32, hub.size)
    np.right_shift(bits, shift, out=index)
    np.left_shift(index, 1, out=index)
    np.bitwise_and(bits, (1 << shift) - 1, out=sticky)
    np.minimum(sticky, 1, out=sticky)
    np.bitwise_or(index, sticky, out=index)
    np.take(table, index, out=codes, mode="clip")


def _minifloat_encoder(dst: DType, config: FP8ConversionConfig) -> Encoder:
    fmt = dst.fmt
    assert fmt is not None
    table = mf.encode_table(fmt, config)
    shift = mf.index_shift(fmt)
    if dst.name == "float4_e2m1fn_x4":

        def encode_packed(hub: np.ndarray, dst_chunk: np.ndarray, scratch: Scratch) -> None:
            codes = scratch.get("codes", np.uint8, hub.size)
            minifloat_codes(table, shift, hub, codes, scratch)
            packing.pack_nibbles(codes, dst_chunk, scratch)

        return encode_packed

    def encode(hub: np.ndarray, dst_chunk: np.ndarray, scratch: Scratch) -> None:
        minifloat_codes(table, shift, hub, dst_chunk.view(np.uint8), scratch)

    return encode


_INT_ENCODERS: dict[str, Encoder] = {
    name: saturating_int_encoder(np.dtype(name), np.rint)
    for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32")
} | {
    "int64": saturating_int_encoder(np.dtype(np.int64), np.trunc),
    "uint64": saturating_int_encoder(np.dtype(np.uint64), np.trunc),
    "float8_e8m0fnu": saturating_int_encoder(np.dtype(np.uint8), np.rint),  # reading 12
}
_FLOAT_ENCODERS: dict[str, Encoder] = {
    "float16": _encode_f16,
    "bfloat16": _encode_bf16,
    "float32r": _encode_f32r,
    "float32": _encode_f32,
}


def encoder(dst: DType, config: FP8ConversionConfig) -> Encoder:
    """Stage B for one destination dtype."""
    if dst.name in _INT_ENCODERS:
        return _INT_ENCODERS[dst.name]
    if dst.name in _FLOAT_ENCODERS:
        return _FLOAT_ENCODERS[dst.name]
    return _minifloat_encoder(dst, config)


def kernel(src: DType, dst: DType, config: FP8ConversionConfig) -> Kernel:
    """Both stages for one chunk; the hub is skipped where it is the src or dst."""
    encode = encoder(dst, config)
    if src.name in ("float32", "float32r"):  # stage A is a pass-through alias

        def encode_only(src_chunk: np.ndarray, dst_chunk: np.ndarray, scratch: Scratch) -> None:
            encode(src_chunk.view(np.float32), dst_chunk, scratch)

        return encode_only
    decode = decoder(src)
    if dst.name == "float32":
        return decode

    def two_stage(src_chunk: np.ndarray, dst_chunk: np.ndarray, scratch: Scratch) -> None:
        hub = scratch.get("hub", np.float32, dst_chunk.size * dst.lanes)
        decode(src_chunk, hub, scratch)
        encode(hub, dst_chunk, scratch)

    return two_stage
