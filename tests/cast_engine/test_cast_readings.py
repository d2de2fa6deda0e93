"""One focused test per decided reading (issue 3, readings 1-16), with the issue's values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hloopt.cast_engine import CastError, FP8ConversionConfig, cast

SAT = FP8ConversionConfig(saturate=True, nan_suppress=False)
NOSAT = FP8ConversionConfig(saturate=False, nan_suppress=False)
NOSAT_NAN = FP8ConversionConfig(saturate=False, nan_suppress=True)
SAT_NAN = FP8ConversionConfig(saturate=True, nan_suppress=True)
NAN, NEG_NAN = np.float32(np.nan), -np.float32(np.nan)


def f32(*values: float | np.floating[Any]) -> np.ndarray:
    return np.array(values, np.float32)


def bits_in(pattern: list[int], dtype: str) -> np.ndarray:
    return np.array(pattern, dtype)


def codes(values: np.ndarray, dst: str, config: FP8ConversionConfig | None = None) -> list[int]:
    out = cast(values, "float32", dst, config)
    return [int(v) for v in out.view(f"u{out.dtype.itemsize}")]


def test_r01_fp16_subnormals_decode_to_mantissa_times_2_pow_minus_24() -> None:
    out = cast(bits_in([0x0001, 0x03FF, 0x8001, 0x0200], "uint16"), "float16", "float32")
    assert out.tolist() == [2.0**-24, 1023 * 2.0**-24, -(2.0**-24), 512 * 2.0**-24]


def test_r02_fp16_encode_is_ieee_rne_inf_on_overflow_and_fixed_nan() -> None:
    values = f32(1 + 2**-11, 1 + 3 * 2**-11, 65519, 65520, -1e6, NAN, NEG_NAN)
    want = [0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00]
    assert codes(values, "float16") == want
    assert codes(values, "float16", NOSAT_NAN) == want  # the FP8 config does not apply


def test_r03_fp8_guard_bit_is_one_below_the_kept_mantissa() -> None:
    # e4m3fn keeps 3 mantissa bits: guard is 1 << 19. 1.125 has only bit 20 set and is exact.
    values = f32(1.125, 1 + 2**-4, 1 + 2**-4 + 2**-20, 1 + 3 * 2**-4)
    assert codes(values, "float8_e4m3fn") == [0x39, 0x38, 0x39, 0x3A]


@pytest.mark.parametrize(
    ("dst", "max_value", "max_code", "inf_code", "first_overflow", "last_kept"),
    [
        ("float8_e4m3fn", 448, 0x7E, None, 464.0001, 464),
        ("float8_e5m2", 57344, 0x7B, 0x7C, 61440, 61439),
        ("float8_e4m3", 240, 0x77, 0x78, 248, 247.99),
        ("float8_e3m4", 15.5, 0x6F, 0x70, 15.75, 15.74),
    ],
)
def test_r04_overflow_is_judged_after_rounding(
    dst: str, max_value: float, max_code: int, inf_code: int | None, first_overflow: float, last_kept: float
) -> None:
    values = f32(last_kept, first_overflow, -first_overflow, np.inf, -np.inf)
    assert codes(values, dst, SAT) == [max_code, max_code, 0x80 | max_code, max_code, 0x80 | max_code]
    assert cast(f32(max_value), "float32", dst).astype(np.float32).tolist() == [max_value]
    if inf_code is not None:
        assert codes(values, dst, NOSAT) == [max_code, inf_code, 0x80 | inf_code, inf_code, 0x80 | inf_code]
    else:  # e4m3fn has no Inf: NaN 0x7f without sign, or signed zero with the NaN byte set
        assert codes(values, dst, NOSAT) == [max_code, 0x7F, 0x7F, 0x7F, 0x7F]
        assert codes(values, dst, NOSAT_NAN) == [max_code, 0x00, 0x80, 0x00, 0x80]


@pytest.mark.parametrize(
    ("dst", "nan"), [("float8_e4m3fn", 0x7F), ("float8_e5m2", 0x7E), ("float8_e4m3", 0x7C), ("float8_e3m4", 0x78)]
)
def test_r05_nan_is_tested_before_overflow(dst: str, nan: int) -> None:
    values = f32(NAN, NEG_NAN)
    values = np.concatenate([values, np.array([0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)])
    assert codes(values, dst, SAT) == [nan] * 4  # canonical, unsigned, never max-finite
    assert codes(values, dst, NOSAT) == [nan] * 4
    assert codes(values, dst, SAT_NAN) == [0x00, 0x80, 0x00, 0x80]


@pytest.mark.parametrize(
    ("dst", "emin_sub"), [("float8_e4m3fn", -9), ("float8_e4m3", -9), ("float8_e5m2", -16), ("float8_e3m4", -6)]
)
def test_r06_underflow_flushes_below_the_smallest_subnormal_exponent(dst: str, emin_sub: int) -> None:
    tiny = 2.0**emin_sub
    # 1.9 * 2^(emin-1) would round up to the smallest subnormal under IEEE; the device gives zero.
    values = f32(tiny, 1.9 * tiny / 2, -1.9 * tiny / 2, 1.5 * tiny, np.nextafter(np.float32(tiny), 0))
    assert codes(values, dst) == [0x01, 0x00, 0x80, 0x02, 0x00]


def test_r07_float32r_rounds_off_12_bits_not_tf32() -> None:
    values = np.array([0x3F800800, 0x3F801800, 0x3F801000, 0x3F8017FF, 0x7F7FFFFF], np.uint32).view(np.float32)
    values = np.concatenate([values, f32(NAN, NEG_NAN)])
    # 0x3f801000 keeps bit 12, which TF32 (10 mantissa bits) would have rounded away.
    assert codes(values, "float32r") == [
        0x3F800000,
        0x3F802000,
        0x3F801000,
        0x3F801000,
        0x7F800000,
        0x7FC00000,
        0x7FC00000,
    ]


def test_r08_bfloat16_rne_nan_unsigned_overflow_inf() -> None:
    values = f32(1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, -3.4e38, NAN, NEG_NAN)
    assert codes(values, "bfloat16") == [0x3F80, 0x3F82, 0x7F80, 0xFF80, 0x7FC0, 0x7FC0]


def test_r09_narrow_integers_round_then_saturate_nan_by_sign() -> None:
    values = f32(2.5, 3.5, -2.5, 127.5, -128.5, -129, np.inf, -np.inf, NAN, NEG_NAN)
    assert cast(values, "float32", "int8").tolist() == [2, 4, -2, 127, -128, -128, 127, -128, 127, -128]
    assert cast(values, "float32", "uint8").tolist() == [2, 4, 0, 128, 0, 0, 255, 0, 255, 0]
    big = f32(2.0**31, 2.0**31 - 128, 2.0**32, NAN, NEG_NAN)
    assert cast(big, "float32", "int32").tolist() == [2**31 - 1, 2**31 - 128, 2**31 - 1, 2**31 - 1, -(2**31)]
    assert cast(big, "float32", "uint32").tolist() == [2**31, 2**31 - 128, 2**32 - 1, 2**32 - 1, 0]


def test_r10_64bit_integers_truncate_then_saturate() -> None:
    values = f32(2.5, 2.9, -2.7, 1e19, -1e19, 2.0**63, NAN, NEG_NAN)
    assert cast(values, "float32", "int64").tolist() == [2, 2, -2, 2**63 - 1, -(2**63), 2**63 - 1, 2**63 - 1, -(2**63)]
    assert cast(values, "float32", "uint64").tolist() == [2, 2, 0, int(np.float32(1e19)), 0, 2**63, 2**64 - 1, 0]


def test_r11_integer_sources_pass_through_the_float32_hub() -> None:
    assert cast(np.array([16777217, 2**31 - 1], np.int32), "int32", "int64").tolist() == [16777216, 2**31]
    assert cast(np.array([2**63 + 2**39 + 1], np.uint64), "uint64", "float32").tolist() == [2.0**63 + 2.0**40]


def test_r12_e8m0_is_a_plain_byte() -> None:
    assert cast(np.array([0x7F, 0xFF, 0], np.uint8), "float8_e8m0fnu", "float32").tolist() == [127.0, 255.0, 0.0]
    assert codes(f32(127.5, 126.5, 300, -3, NAN, NEG_NAN), "float8_e8m0fnu") == [128, 126, 255, 0, 255, 0]


def test_r13_fp8_nan_decodes_without_payload_fp16_bf16_keep_it() -> None:
    def dec(raw: list[int], src: str, container: str) -> list[int]:
        return cast(np.array(raw, container), src, "float32").view(np.uint32).tolist()

    assert dec([0xFF, 0x7F], "float8_e4m3fn", "uint8") == [0xFFC00000, 0x7FC00000]
    assert dec([0x7D, 0xFF], "float8_e5m2", "uint8") == [0x7FC00000, 0xFFC00000]
    assert dec([0x7C01, 0xFE01], "float16", "uint16") == [0x7F802000, 0xFFC02000]
    assert dec([0x7F81, 0xFFC1], "bfloat16", "uint16") == [0x7F810000, 0xFFC10000]


def test_r14_fp4_rounds_onto_its_grid_and_clamps() -> None:
    grid = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert codes(f32(*grid), "float4_e2m1fn") == list(range(8))
    values = f32(0.25, 0.26, 0.75, 2.5, 5, 7, 1e9, np.inf, -np.inf, -0.0)
    assert codes(values, "float4_e2m1fn") == [0, 1, 2, 4, 6, 7, 7, 7, 0xF, 0x8]
    assert codes(f32(NAN, NEG_NAN), "float4_e2m1fn") == [0x7, 0x7]
    assert codes(f32(NAN, NEG_NAN), "float4_e2m1fn", SAT_NAN) == [0x0, 0x8]
    assert codes(f32(1e9), "float4_e2m1fn", NOSAT) == [0x7]


def test_r15_x4_lanes_are_little_endian() -> None:
    fp8 = cast(f32(1, 2, 3, 4), "float32", "float8_e4m3fn_x4")
    assert fp8.dtype == np.uint32 and fp8.tolist() == [0x48444038]
    fp4 = cast(f32(0.5, 1, 1.5, 2), "float32", "float4_e2m1fn_x4")
    assert fp4.dtype == np.uint16 and fp4.tolist() == [0x4321]
    assert cast(bytes([0x21, 0x43]), "float4_e2m1fn_x4", "float32") == f32(0.5, 1, 1.5, 2).tobytes()
    with pytest.raises(CastError, match="whole"):
        cast(f32(1, 2, 3), "float32", "float8_e5m2_x4")
    with pytest.raises(CastError, match="multiple"):
        cast(b"\x00" * 6, "float8_e5m2_x4", "float32")


def test_r16_unknown_dtypes_fail_after_the_identity_check() -> None:
    data = b"\x01\x02"
    assert cast(data, "no-such-type", "no-such-type") is data
    assert cast(data, 99, 99) is data
    for src, dst in [("no-such-type", "float32"), ("float32", 20), (-1, "float32"), (True, "float32")]:
        with pytest.raises(CastError, match="unknown dtype"):
            cast(data + data, src, dst)
