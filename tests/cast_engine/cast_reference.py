"""An independent reference for the neuron profile, written from the issue's readings.

It shares no code with hloopt.cast_engine and uses different methods on purpose:
decodes come from ml_dtypes / explicit float64 formulas, float encodes search the
sorted grid of representable values (the engine uses bit tricks and lookup
tables), integer encodes use float64 masks, and int->float32 uses exact Python
integers. Everything works on raw bit patterns (uint arrays).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import numpy.typing as npt

F32_NAN = 0x7FC00000

# name -> (numpy lane dtype, bit width of a lane, lanes per container, container uint)
LANE: dict[str, tuple[npt.DTypeLike, int]] = {
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, 8),
    "float8_e5m2": (ml_dtypes.float8_e5m2, 8),
    "float8_e4m3": (ml_dtypes.float8_e4m3, 8),
    "float8_e3m4": (ml_dtypes.float8_e3m4, 8),
    "float4_e2m1fn": (ml_dtypes.float4_e2m1fn, 4),
}
X4 = {"float8_e4m3fn_x4": "float8_e4m3fn", "float8_e5m2_x4": "float8_e5m2", "float4_e2m1fn_x4": "float4_e2m1fn"}
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
BITS_DTYPE = {
    **{n: np.dtype(n) for n in INTS},
    "float16": np.dtype(np.uint16),
    "bfloat16": np.dtype(np.uint16),
    "float32": np.dtype(np.uint32),
    "float32r": np.dtype(np.uint32),
    "float8_e8m0fnu": np.dtype(np.uint8),
    **{n: np.dtype(np.uint8) for n in LANE},
    "float8_e4m3fn_x4": np.dtype(np.uint32),
    "float8_e5m2_x4": np.dtype(np.uint32),
    "float4_e2m1fn_x4": np.dtype(np.uint16),
}
# Readings 4-6 and 14, copied from the issue text.
CANONICAL_NAN = {
    "float8_e4m3fn": 0x7F,
    "float8_e5m2": 0x7E,
    "float8_e4m3": 0x7C,
    "float8_e3m4": 0x78,
    "float4_e2m1fn": 0x7,
}
FLUSH_BELOW = {"float8_e4m3fn": -9, "float8_e4m3": -9, "float8_e5m2": -16, "float8_e3m4": -6}
#: The fp8/fp4 encodings (and their x4 packings) whose encoders read the FP8ConversionConfig.
FP8_LANES = frozenset(
    {
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3",
        "float8_e3m4",
        "float4_e2m1fn",
        "float8_e4m3fn_x4",
        "float8_e5m2_x4",
        "float4_e2m1fn_x4",
    }
)
HAS_INF = {"float8_e5m2", "float8_e4m3", "float8_e3m4"}


def f32(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


# ------------------------------------------------------------------ decode


def int_to_f32_bits(value: int) -> int:
    """Exact round-to-nearest-even of a Python int to float32 (reading 11)."""
    mag = abs(value)
    shift = max(mag.bit_length() - 24, 0)
    if shift:
        q, r = divmod(mag, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        mag = q << shift
    return int(np.float32(float(-mag if value < 0 else mag)).view(np.uint32))


def decode(name: str, raw: np.ndarray) -> np.ndarray:
    """float32 bit patterns of the lanes of `raw` (container bit patterns)."""
    raw = np.asarray(raw)
    if name in X4:
        lane = X4[name]
        if lane == "float4_e2m1fn":
            b = raw.astype("<u2").view(np.uint8)
            nib = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1)
            return decode(lane, nib)
        return decode(lane, raw.astype("<u4").view(np.uint8))
    if name in ("int8", "uint8", "int16", "uint16"):
        return raw.view(name).astype(np.float32).view(np.uint32)
    if name in ("int32", "uint32", "int64", "uint64"):
        return np.array([int_to_f32_bits(int(v)) for v in raw.view(name).reshape(-1)], np.uint32)
    if name in ("float32", "float32r"):
        return raw.astype(np.uint32)
    if name == "bfloat16":
        return raw.astype(np.uint32) << 16
    if name == "float8_e8m0fnu":
        return raw.astype(np.float32).view(np.uint32)
    if name == "float16":
        h = raw.astype(np.uint32)
        sign = (h >> 15) << 31
        exp, man = (h >> 10) & 0x1F, h & 0x3FF
        value = np.where(exp == 0, man * 2.0**-24, np.ldexp(1024.0 + man, exp.astype(np.int64) - 25))
        bits = np.abs(value).astype(np.float32).view(np.uint32)
        bits = np.where(exp == 31, 0x7F800000 | (man << 13), bits)
        return (bits | sign).astype(np.uint32)
    lane_dtype, width = LANE[name]
    codes = raw.astype(np.uint8) & ((1 << width) - 1)
    value = codes.view(lane_dtype).astype(np.float32)
    bits = value.view(np.uint32).copy()
    nan = np.isnan(value)
    bits[nan] = F32_NAN | (((codes[nan] >> (width - 1)) & 1).astype(np.uint32) << 31)
    return bits


# ------------------------------------------------------------------ encode


def _grid(lane_dtype: npt.DTypeLike, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite non-negative values of a float format and their codes."""
    n = 1 << (width - 1)
    codes = np.arange(n, dtype=UINT_OF_SIZE[max(width // 8, 1)])
    with np.errstate(invalid="ignore"):
        values = (
            codes.view(lane_dtype).astype(np.float64)
            if width >= 8
            else codes.astype(np.uint8).view(lane_dtype).astype(np.float64)
        )
    keep = np.isfinite(values)
    order = np.argsort(values[keep], kind="stable")
    return values[keep][order], codes[keep][order].astype(np.int64)


def round_to_grid(x: np.ndarray, values: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest grid code of |x| (ties to the even code) and an overflow mask.

    A virtual point one spacing above the largest value stands for "overflow":
    a magnitude that rounds to it (or beyond) overflows. 2|x| is compared with
    lo + hi, which are exact in float64, so ties are decided exactly.
    """
    mag = np.abs(x.astype(np.float64))
    ext_v = np.append(values, 2 * values[-1] - values[-2])
    ext_c = np.append(codes, codes[-1] + 1)
    i = np.clip(np.searchsorted(ext_v, mag, side="left"), 1, len(ext_v) - 1)
    lo, hi = ext_v[i - 1], ext_v[i]
    exact = mag == lo
    up = (2 * mag > lo + hi) | ((2 * mag == lo + hi) & (ext_c[i] % 2 == 0))
    up |= mag == hi
    code = np.where(up & ~exact, ext_c[i], ext_c[i - 1])
    overflow = (code > codes[-1]) | (mag > ext_v[-1]) | np.isinf(mag)
    return code, overflow


def _minifloat(name: str, bits: np.ndarray, saturate: bool, nan_suppress: bool) -> np.ndarray:
    lane_dtype, width = LANE[name]
    x = f32(bits)
    values, codes = _grid(lane_dtype, width)
    code, overflow = round_to_grid(np.where(np.isnan(x), 0, x), values, codes)
    sign = (np.signbit(x).astype(np.int64)) << (width - 1)
    out = sign | code
    if name in FLUSH_BELOW:
        small = (np.abs(x) < 2.0 ** FLUSH_BELOW[name]) & (x != 0)
        out[small] = sign[small]
    max_code = codes[-1]
    if name == "float4_e2m1fn" or saturate:
        ov = sign | max_code
    elif name in HAS_INF:
        ov = sign | (max_code + 1)
    elif nan_suppress:
        ov = sign
    else:
        ov = np.full_like(sign, CANONICAL_NAN[name])
    out = np.where(overflow, ov, out)
    nan = np.isnan(x)
    out = np.where(nan, sign if nan_suppress else CANONICAL_NAN[name], out)
    return out.astype(np.uint8)


def _ieee(lane_dtype: npt.DTypeLike, bits: np.ndarray, nan_pos: int, nan_neg: int) -> np.ndarray:
    """fp16 / bf16: RNE on the grid, overflow to Inf (the next code after max)."""
    x = f32(bits)
    values, codes = _grid(lane_dtype, 16)
    code, overflow = round_to_grid(np.where(np.isnan(x), 0, x), values, codes)
    code = np.where(overflow, codes[-1] + 1, code)
    out = (np.signbit(x).astype(np.int64) << 15) | code
    out = np.where(np.isnan(x), np.where(np.signbit(x), nan_neg, nan_pos), out)
    return out.astype(np.uint16)


def _integer(name: str, bits: np.ndarray) -> np.ndarray:
    """Readings 9 and 10 with Python's exact round() / math.trunc, one value at a time."""
    info = np.iinfo(name)
    to_int = math.trunc if name in ("int64", "uint64") else round
    unique, inverse = np.unique(bits, return_inverse=True)
    out = []
    for v in f32(unique).astype(np.float64).tolist():
        if math.isnan(v):
            out.append(info.min if math.copysign(1.0, v) < 0 else info.max)
        elif math.isinf(v):
            out.append(info.min if v < 0 else info.max)
        else:
            out.append(min(max(to_int(v), info.min), info.max))
    return np.array(out, dtype=name)[inverse.reshape(-1)].view(UINT_OF_SIZE[info.bits // 8])


def integer_vectorised(name: str, bits: np.ndarray) -> np.ndarray:
    """The same rules as _integer in float64 masks, for sweeps too large for Python loops."""
    info = np.iinfo(name)
    x = f32(bits).astype(np.float64)
    r = np.trunc(x) if name in ("int64", "uint64") else np.rint(x)
    top = 2.0 ** (info.bits - (info.min < 0))  # first value above MAX
    out = np.where((r >= top) | np.isnan(r), 0, np.maximum(r, info.min)).astype(name)
    out[r >= top] = info.max
    nan = np.isnan(x)
    out[nan] = np.where(np.signbit(x[nan]), info.min, info.max)
    return out.view(UINT_OF_SIZE[info.bits // 8])


def _f32r(bits: np.ndarray) -> np.ndarray:
    x = f32(bits).astype(np.float64)
    mag = np.abs(x)
    finite = np.isfinite(mag) & (mag > 0)
    e = np.frexp(np.where(finite, mag, 1.0))[1] - 1
    q = np.ldexp(1.0, np.maximum(e, -126) - 11)
    r = np.where(finite, np.rint(mag / q) * q, mag)
    out = np.copysign(r, x).astype(np.float32).view(np.uint32)
    return np.where(np.isnan(x), F32_NAN, out).astype(np.uint32)


def encode(name: str, bits: np.ndarray, saturate: bool = True, nan_suppress: bool = False) -> np.ndarray:
    """Destination container bit patterns for float32 hub bit patterns."""
    with np.errstate(invalid="ignore", over="ignore"):  # sNaN widening, Inf arithmetic
        return _encode(name, np.asarray(bits, np.uint32), saturate, nan_suppress)


def _encode(name: str, bits: np.ndarray, saturate: bool, nan_suppress: bool) -> np.ndarray:
    if name in X4:
        lanes = _minifloat(X4[name], bits, saturate, nan_suppress)
        if X4[name] == "float4_e2m1fn":
            pairs = lanes.reshape(-1, 2)
            return (pairs[:, 0] | (pairs[:, 1] << 4)).astype(np.uint8).view("<u2")
        return lanes.view("<u4")
    if name in LANE:
        return _minifloat(name, bits, saturate, nan_suppress)
    if name in INTS:
        return _integer(name, bits)
    if name == "float8_e8m0fnu":
        return _integer("uint8", bits)
    if name == "float16":
        return _ieee(np.float16, bits, 0x7E00, 0xFE00)
    if name == "bfloat16":
        return _ieee(ml_dtypes.bfloat16, bits, 0x7FC0, 0x7FC0)
    if name == "float32r":
        return _f32r(bits)
    if name == "float32":
        return bits
    raise KeyError(name)


def float32_sample(seed: int = 0) -> np.ndarray:
    """Dense stratified float32 bit patterns.

    Every sign x exponent with mantissas that sit exactly on, just below and
    just above a rounding tie for every possible number of dropped bits (this
    covers every destination's normal and subnormal rounding positions), plus
    specials, f32 subnormals and the edges of every integer range.
    """
    rng = np.random.default_rng(seed)
    sign_exp = np.arange(512, dtype=np.uint32) << 23
    parts: list[np.ndarray] = [sign_exp, sign_exp | 0x7FFFFF, sign_exp | 1]
    for k in range(1, 24):
        for lsb in (0, 1):
            top = (rng.integers(0, 1 << 23, 512, dtype=np.uint32) >> k << 1 | lsb) << (k - 1) & 0x7FFFFF
            tie = (top & ~np.uint32((1 << k) - 1)) | (1 << (k - 1))
            parts += [sign_exp | tie, sign_exp | (tie - 1), sign_exp | ((tie + 1) & 0x7FFFFF)]
    parts.append(rng.integers(0, 1 << 32, 40000, dtype=np.uint32))
    specials = [
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0xFFC00000,
        0x7F800001,
        0xFF800001,
        0x7FFFFFFF,
        0xFFFFFFFF,
        0x7FA00000,
        0x00000000,
        0x80000000,
        0x00000001,
        0x807FFFFF,
        0x7F7FFFFF,
    ]
    edges = []
    for name in (*INTS, "float8_e8m0fnu"):
        info = np.iinfo("uint8" if name == "float8_e8m0fnu" else name)
        for v in (info.min, info.max):
            for d in (-1.5, -1, -0.5, 0, 0.5, 1, 1.5):
                edges.append(np.float32(float(v) + d))
    edge_bits = np.array(edges, np.float32).view(np.uint32)
    edge_bits = np.concatenate([edge_bits, edge_bits + 1, edge_bits - 1])
    parts += [np.array(specials, np.uint32), edge_bits]
    return np.unique(np.concatenate(parts).astype(np.uint32))
