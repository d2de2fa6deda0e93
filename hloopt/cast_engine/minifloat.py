"""Small float formats (fp8 / fp4): their bit layout and the device's exact rules.

Everything here works on whole tables, never on user data: the decode table
(256 entries) and the encode table (indexed by the top bits of a float32) are
built once per format and config from the readable rules below, and the fast
kernels then only look values up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from .config import FP8ConversionConfig

F32_NAN = 0x7FC00000
SIGN32 = 0x80000000


@dataclass(frozen=True)
class MiniFloat:
    """One small float format as the neuron encoders see it.

    `flush_exponent` is the unbiased float32 exponent below which the device
    returns signed zero without rounding (decided reading 6); None means plain
    round-to-nearest-even all the way down (fp4, reading 14).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    has_inf: bool
    nan_code: int | None  # canonical unsigned NaN byte; None: the format has no NaN
    max_code: int  # largest finite positive code
    flush_exponent: int | None

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal."""
        return 1 - self.bias

    @property
    def inf_code(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.man_bits

    @property
    def max_value(self) -> float:
        return float(decode_table(self)[self.max_code])

    def classify(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(is_nan, is_inf) masks for unsigned magnitude codes."""
        mag = codes & ((1 << (self.width - 1)) - 1)
        if self.nan_code is None:
            none = np.zeros(codes.shape, bool)
            return none, none
        if not self.has_inf:  # "fn": only the all-ones pattern is NaN
            return mag == self.nan_code, np.zeros(codes.shape, bool)
        top = mag >= self.inf_code
        return top & (mag != self.inf_code), mag == self.inf_code


E4M3FN = MiniFloat("float8_e4m3fn", 4, 3, 7, False, 0x7F, 0x7E, -9)
E5M2 = MiniFloat("float8_e5m2", 5, 2, 15, True, 0x7E, 0x7B, -16)
E4M3 = MiniFloat("float8_e4m3", 4, 3, 7, True, 0x7C, 0x77, -9)
E3M4 = MiniFloat("float8_e3m4", 3, 4, 3, True, 0x78, 0x6F, -6)
E2M1FN = MiniFloat("float4_e2m1fn", 2, 1, 1, False, None, 0x7, None)


@cache
def decode_table(fmt: MiniFloat) -> np.ndarray:
    """float32 value of every code (the byte's low `width` bits), read-only.

    Codes are masked to the format width, so an fp4 byte's high nibble is
    ignored. NaN decodes to sign | 0x7fc00000 with no payload (reading 13).
    """
    raw = np.arange(256, dtype=np.uint32)
    codes = raw & ((1 << fmt.width) - 1)
    sign = (codes >> (fmt.width - 1)) & 1
    exp = (codes >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    man = codes & ((1 << fmt.man_bits) - 1)
    # Subnormals (exp == 0) have no hidden bit and the exponent of exp == 1.
    significand = np.where(exp == 0, man, man | (1 << fmt.man_bits)).astype(np.float64)
    scale = np.maximum(exp.astype(np.int64), 1) - fmt.bias - fmt.man_bits
    value = np.ldexp(significand, scale)
    is_nan, is_inf = fmt.classify(codes)
    value[is_inf] = np.inf
    value = np.where(sign == 1, -value, value).astype(np.float32)
    bits = value.view(np.uint32)
    bits[is_nan] = F32_NAN | (sign[is_nan] << 31).astype(np.uint32)
    bits.flags.writeable = False
    return bits.view(np.float32)


def encode_rule(fmt: MiniFloat, x: np.ndarray, config: FP8ConversionConfig) -> np.ndarray:
    """Encode float32 values to codes with the device rules, written for clarity.

    Order of the tests follows the binary: NaN first (reading 5), then the early
    underflow flush (reading 6), then round-to-nearest-even on the grid
    (reading 3), and overflow is judged on the rounded magnitude (reading 4).
    Used only to fill the encode table; arithmetic is float64, exact here.
    """
    x = np.asarray(x, np.float32)
    sign = np.signbit(x).astype(np.uint8) << (fmt.width - 1)
    mag = np.abs(x.astype(np.float64))
    finite = np.isfinite(mag)
    exponent = np.frexp(np.where(finite, mag, 1.0))[1] - 1  # mag in [2^e, 2^(e+1))
    quantum = np.ldexp(1.0, np.maximum(exponent, fmt.emin) - fmt.man_bits)
    rounded = np.where(finite, np.rint(mag / quantum) * quantum, np.inf)
    overflow = rounded > fmt.max_value
    table = decode_table(fmt)[: 1 << (fmt.width - 1)].astype(np.float64)
    finite_codes = np.arange(fmt.max_code + 1)
    # The grid is sorted, so the position of an exact grid value is its code.
    code = finite_codes[np.searchsorted(table[: fmt.max_code + 1], np.minimum(rounded, fmt.max_value))]
    out = sign | code.astype(np.uint8)
    if fmt.flush_exponent is not None:
        flushed = (mag != 0) & (exponent < fmt.flush_exponent)
        out[flushed] = sign[flushed]
    out[overflow] = _overflow_codes(fmt, sign[overflow], config)
    nan = np.isnan(x)
    out[nan] = _nan_codes(fmt, sign[nan], config)
    return out


def _overflow_codes(fmt: MiniFloat, sign: np.ndarray, config: FP8ConversionConfig) -> np.ndarray:
    """Reading 4 (fp8) and 14 (fp4, which always clamps to ±6)."""
    if config.saturate or fmt.nan_code is None:
        return sign | fmt.max_code
    if fmt.has_inf:
        return sign | fmt.inf_code
    if config.nan_suppress:  # e4m3fn, saturate off, NaN byte set: signed zero
        return sign
    return np.full_like(sign, fmt.nan_code)  # e4m3fn 0x7f, sign dropped


def _nan_codes(fmt: MiniFloat, sign: np.ndarray, config: FP8ConversionConfig) -> np.ndarray:
    """Reading 5 (fp8) and 14 (fp4: 0x7, the code of +6, when not suppressed)."""
    if config.nan_suppress:
        return sign
    return np.full_like(sign, fmt.max_code if fmt.nan_code is None else fmt.nan_code)


def index_shift(fmt: MiniFloat) -> int:
    """float32 bits below the guard bit: sign, exponent, man_bits + 1 stay in the index."""
    return 22 - fmt.man_bits


@cache
def encode_table(fmt: MiniFloat, config: FP8ConversionConfig) -> np.ndarray:
    """Codes indexed by (float32 bits >> index_shift) << 1 | sticky, read-only.

    Round-to-nearest-even needs only the sign, the exponent, the kept mantissa
    bits, the guard bit and whether anything below the guard is set (sticky);
    that holds for subnormal results too, whose guard sits higher. So one
    representative float32 per index decides the code of every float32 that
    maps to it, and the encoder becomes a few integer ops and one lookup.
    """
    shift = index_shift(fmt)
    index = np.arange(1 << (33 - shift), dtype=np.uint32)
    representative = ((index >> 1) << shift) | (index & 1)
    with np.errstate(all="ignore"):  # NaN and Inf representatives are expected
        table = encode_rule(fmt, representative.view(np.float32), config)
    table.flags.writeable = False
    return table
