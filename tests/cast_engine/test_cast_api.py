"""The cast() surface: identity, forms in and out, layout checks, errors (the CLI is in tests/cli/test_cast_cli.py)."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from hloopt.cast_engine import ORDINALS, CastError, FP8ConversionConfig, cast


def test_identity_returns_the_very_object() -> None:
    a = np.arange(4, dtype=np.float32)[::2]  # even a non-contiguous array
    assert cast(a, "float32", "float32") is a
    assert cast(a, 16, "float32") is a  # same dtype by ordinal and name
    raw = bytearray(b"\x00\x01\x02")
    assert cast(raw, "int8", "int8") is raw


def test_ordinals_match_the_issue_table() -> None:
    assert ORDINALS == {
        "uint8": 0,
        "int8": 1,
        "float4_e2m1fn_x4": 2,
        "float8_e3m4": 3,
        "float8_e4m3": 4,
        "float8_e4m3fn": 5,
        "float8_e8m0fnu": 6,
        "float8_e5m2": 7,
        "float8_e4m3fn_x4": 8,
        "float8_e5m2_x4": 9,
        "uint16": 10,
        "int16": 11,
        "bfloat16": 12,
        "float16": 13,
        "uint32": 14,
        "int32": 15,
        "float32": 16,
        "float32r": 17,
        "uint64": 18,
        "int64": 19,
    }
    x = np.linspace(-500, 500, 64, dtype=np.float32)
    for name, ordinal in ORDINALS.items():
        if name != "float32":
            assert np.array_equal(cast(x, 16, ordinal).view(np.uint8), cast(x, "float32", name).view(np.uint8))


def test_forms_shapes_and_dtypes() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = cast(x, "float32", "bfloat16")
    assert out.shape == (2, 3, 4) and out.dtype == ml_dtypes.bfloat16
    packed = cast(x, "float32", "float8_e5m2_x4")
    assert packed.shape == (2, 3, 1) and packed.dtype == np.uint32
    assert cast(packed, "float8_e5m2_x4", "float32").shape == (2, 3, 4)
    raw = cast(x.tobytes(), "float32", "int16")
    assert isinstance(raw, bytes) and raw == cast(x, "float32", "int16").tobytes()
    assert cast(memoryview(x.tobytes()), "float32", "int16") == raw
    # An unsigned array of the same width is taken as raw bit patterns.
    assert np.array_equal(cast(x.view(np.uint32), "float32", "int16"), cast(x, "float32", "int16"))
    assert cast(np.array(3.0, np.float32), "float32", "int8").shape == ()


@pytest.mark.parametrize(
    ("data", "src", "dst", "message"),
    [
        (np.zeros(4, np.float32)[::2], "float32", "int8", "C-contiguous"),
        (np.zeros(4, np.int32), "float32", "int8", "does not hold"),
        (np.zeros(4, ">f4"), "float32", "int8", "byte order"),
        (b"\x00" * 5, "float32", "int8", "multiple"),
        (np.zeros((2, 3), np.float32), "float32", "float4_e2m1fn_x4", "whole"),
        (np.zeros((), np.float32), "float32", "float8_e4m3fn_x4", "0-d"),
        ([1.0, 2.0], "float32", "int8", "numpy array or bytes"),
        (np.zeros(4, np.float32), "float32", "float32r", None),
    ],
)
def test_bad_input_raises_cast_error(data: object, src: str, dst: str, message: str | None) -> None:
    if message is None:  # float32r is neuron-only
        with pytest.raises(CastError, match="xla"):
            cast(data, src, dst, profile="xla")  # pyright: ignore[reportCallIssue, reportArgumentType]  # wrong on purpose
        return
    with pytest.raises(CastError, match=message):
        cast(data, src, dst)  # pyright: ignore[reportCallIssue, reportArgumentType]  # wrong on purpose


def test_config_and_profile_errors() -> None:
    x = np.zeros(4, np.float32)
    assert issubclass(CastError, ValueError)
    with pytest.raises(CastError, match="profile"):
        cast(x, "float32", "int8", profile="tpu")
    with pytest.raises(CastError, match="neuron profile"):
        cast(x, "float32", "int8", FP8ConversionConfig(), profile="xla")
    with pytest.raises(CastError, match="FP8ConversionConfig"):
        cast(x, "float32", "int8", 1)  # type: ignore[arg-type]
    with pytest.raises(CastError, match="not available"):
        cast(x, "float32", "float64")  # f64 is xla-only


def test_config_word_and_default() -> None:
    assert FP8ConversionConfig() == FP8ConversionConfig.from_word(0x0001)
    assert FP8ConversionConfig.from_word(0x0100) == FP8ConversionConfig(False, True)
    assert FP8ConversionConfig(False, True).word == 0x0100


def test_no_rounding_mode_stochastic_or_ftz_knobs() -> None:
    assert list(inspect.signature(cast).parameters) == ["data", "src", "dst", "fp8_config", "profile"]
    assert {f for f in FP8ConversionConfig.__dataclass_fields__} == {"saturate", "nan_suppress"}
