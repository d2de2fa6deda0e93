"""Every bit pattern of every 8- and 16-bit source into every destination, and a
dense stratified float32 sample, against the independent cast_reference."""

from __future__ import annotations

import cast_reference as ref
import numpy as np
import pytest

from hloopt.cast_engine import FP8ConversionConfig, cast, names, resolve

NEURON = names("neuron")
CONFIGS = [
    FP8ConversionConfig(),
    *(FP8ConversionConfig(s, n) for s, n in [(True, True), (False, False), (False, True)]),
]
FP8_LANES = ref.FP8_LANES


def all_patterns(name: str) -> np.ndarray:
    """Every container bit pattern (fp8 x4: every byte in every lane position)."""
    if name in ("float8_e4m3fn_x4", "float8_e5m2_x4"):
        b = np.arange(256, dtype=np.uint8).reshape(-1, 4)
        return np.concatenate([np.roll(b, k, axis=1) for k in range(4)]).reshape(-1).view("<u4")
    size = ref.BITS_DTYPE[name].itemsize
    return np.arange(1 << (8 * size), dtype=ref.UINT_OF_SIZE[size])


def as_input(name: str, bits: np.ndarray) -> np.ndarray:
    return bits.view(resolve(name, "neuron").container)


def check(src: str, dst: str, raw_bits: np.ndarray, hub_bits: np.ndarray, config: FP8ConversionConfig) -> None:
    got = cast(as_input(src, raw_bits), src, dst, config).view(ref.BITS_DTYPE[dst])
    want = ref.encode(dst, hub_bits, config.saturate, config.nan_suppress).view(ref.BITS_DTYPE[dst])
    bad = np.flatnonzero(got != want)
    if bad.size:
        lanes = resolve(dst, "neuron").lanes
        i = bad[0]
        hub = hub_bits[i * lanes : (i + 1) * lanes]
        pytest.fail(
            f"{src}->{dst} {config}: {bad.size} mismatches; first at {i}: hub {[hex(h) for h in hub]} "
            f"({ref.f32(hub)}) want {int(want[i]):#x} got {int(got[i]):#x}"
        )


def configs_for(dst: str) -> list[FP8ConversionConfig]:
    return CONFIGS if dst in FP8_LANES else CONFIGS[:1]


SMALL = [n for n in NEURON if ref.BITS_DTYPE[n].itemsize <= 2] + ["float8_e4m3fn_x4", "float8_e5m2_x4"]


@pytest.mark.parametrize("src", SMALL)
def test_every_pattern_into_every_destination(src: str) -> None:
    raw = all_patterns(src)
    hub = ref.decode(src, raw)
    for dst in NEURON:
        if dst != src:
            for config in configs_for(dst):
                check(src, dst, raw, hub, config)


@pytest.mark.parametrize("src", ["float32", "float32r"])
def test_float32_stratified_sample(src: str) -> None:
    bits = ref.float32_sample()
    for dst in NEURON:
        if dst != src:
            for config in configs_for(dst):
                check(src, dst, bits, bits, config)


def int_sample(name: str) -> np.ndarray:
    info = np.iinfo(name)
    rng = np.random.default_rng(1)
    pivots = [0, 1 << 24, 1 << 25, 1 << 31, 1 << 32, 1 << 53, 1 << 62, 1 << 63, info.max]
    vals = {v + d for p in pivots for s in (1, -1) for v in [s * p] for d in range(-4, 5)}
    vals |= {int(v) for v in rng.integers(info.min, info.max, 3000, dtype=name, endpoint=True)}
    vals |= {(2 * k + 1) << s for s in range(0, info.bits - 24) for k in (0x800000, 0x800001, 0xFFFFFF)}
    kept = [v for v in vals if info.min <= v <= info.max]
    return np.array(sorted(kept), dtype=name).view(ref.UINT_OF_SIZE[info.bits // 8])


@pytest.mark.parametrize("src", ["int32", "uint32", "int64", "uint64"])
def test_wide_integer_sources(src: str) -> None:
    raw = int_sample(src)
    hub = ref.decode(src, raw)
    for dst in NEURON:
        if dst != src:
            check(src, dst, raw[: len(raw) // 4 * 4], hub[: len(raw) // 4 * 4], CONFIGS[0])


def test_many_chunks_match_the_reference() -> None:
    """An array spanning several chunks (and a ragged last chunk) is handled seamlessly."""
    bits = np.random.default_rng(2).integers(0, 1 << 32, 3 * (1 << 17) + 12, dtype=np.uint32)
    for dst in ("float8_e4m3fn_x4", "bfloat16", "int8", "float4_e2m1fn_x4"):
        check("float32", dst, bits, bits, CONFIGS[0])
    raw = np.random.default_rng(3).integers(0, 1 << 16, 5 * (1 << 16) + 4, dtype=np.uint16)
    check("float4_e2m1fn_x4", "float16", raw, ref.decode("float4_e2m1fn_x4", raw), CONFIGS[0])
