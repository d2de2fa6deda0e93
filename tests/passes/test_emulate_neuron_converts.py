"""emulate-neuron-converts computes the neuron cast engine bit for bit, run through XLA on the CPU.

For every (source, destination) pair of BIR element types, and for the fp8/fp4
destinations under each of the four FP8 configs, the emulated module runs on every
8- and 16-bit source pattern, and for f32, s32, u32, s64 and u64 sources on a dense
sample of 2^24 patterns: every exponent with every rounding tie, the tie ±1 ulp
and the exact neighbour at every rounding position (every kept pattern up to 10
kept bits), integer ties n ± ½ up to 2^16, every saturation edge of every
destination, and random patterns for the rest. One module per source converts
it to every destination at once. `benchmarks/sweep_emulated_f32.py` runs all 2^32
f32 patterns outside the suite.
"""

from __future__ import annotations

from functools import cache

import ml_dtypes
import numpy as np
import pytest
from conftest import sampled
from hlo_text import hlo
from pass_testing import passes_text, run_passes

from hloopt.cast_engine import FP8ConversionConfig, cast
from hloopt.cast_engine import minifloat as mf
from hloopt.errors import HloError
from hloopt.ir.attribute_values import FrontendAttributes, Metadata
from hloopt.ir.element_types import numpy_dtype
from hloopt.passes.emulate_neuron_converts import EmulateNeuronConverts, bir_dtype, minifloat_rules
from hloopt.passes.registry import lookup, select
from hloopt.text.parser import parse

bridge = pytest.importorskip("hloopt.xla.bridge")

#: The HLO element types that have a BIR dtype (issue 12).
INTEGERS = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]
TYPES = [*INTEGERS, "f16", "bf16", "f32", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4", "f8e8m0fnu", "f4e2m1fn"]
MINIFLOATS = ("f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4", "f4e2m1fn")
CONFIGS = [FP8ConversionConfig(saturate, nan) for saturate in (True, False) for nan in (False, True)]
SAMPLE = 1 << 24
#: Kept bits at a rounding position up to which every kept pattern is in the sample.
ALL_KEPT = 10


def _spec(config: FP8ConversionConfig) -> str:
    return (
        f"emulate-neuron-converts{{saturate={str(config.saturate).lower()} "
        f"nan_suppress={str(config.nan_suppress).lower()}}}"
    )


# --------------------------------------------------------------------------- samples


def _rounding_patterns(width: int, rng: np.random.Generator) -> np.ndarray:
    """`width`-bit unsigned patterns at every rounding position g: kept bits above g, then a tie
    (a one, then zeros), the tie ± 1 and the exact value; every kept pattern up to ALL_KEPT bits,
    else the extremes and 16 random ones. Plus every two-bit pattern 2^L + 2^g (± 1), which puts a
    tie of any narrower type under any leading bit (the double-rounding cases of the f32 hub)."""
    found: list[np.ndarray] = []
    for g in range(width):
        kept_bits = width - 1 - g
        if kept_bits <= ALL_KEPT:
            kept = np.arange(1 << kept_bits, dtype=np.uint64)
        else:
            top = (1 << kept_bits) - 1
            special = np.array([0, 1, top, top - 1, 1 << (kept_bits - 1)], np.uint64)
            kept = np.concatenate([special, rng.integers(0, top, 16, dtype=np.uint64, endpoint=True)])
        exact = kept << np.uint64(g + 1) if kept_bits else kept  # (a shift by the full width is undefined)
        tie = exact | np.uint64(1 << g)
        found += [exact, tie, tie + np.uint64(1), tie - np.uint64(1)]
    bits = np.arange(width, dtype=np.uint64)
    pairs = (np.uint64(1) << bits[:, None]) | (np.uint64(1) << bits[None, :])
    found += [pairs.ravel(), pairs.ravel() + np.uint64(1), pairs.ravel() - np.uint64(1)]
    mask = np.uint64((1 << width) - 1)
    return np.unique(np.concatenate(found) & mask)


def _ulps_around(values: np.ndarray, ulps: int = 8) -> np.ndarray:
    """f32 bit patterns within `ulps` of each value, both signs."""
    bits = np.abs(values.astype(np.float32)).view(np.uint32).astype(np.int64)
    around = (bits[:, None] + np.arange(-ulps, ulps + 1)[None, :]).ravel()
    around = np.clip(around, 0, 0x7F800000).astype(np.uint32)
    return np.concatenate([around, around | np.uint32(0x80000000)])


def saturation_edges() -> np.ndarray:
    """The f32 values where some destination saturates, overflows or flushes."""
    edges: list[float] = []
    for target in TYPES:
        dtype = numpy_dtype(target)
        if target == "f8e8m0fnu":  # encoded as uint8
            edges += [0, 255, 256]
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            edges += [info.min, info.max, 2.0 ** (8 * dtype.itemsize)]
        else:
            finfo = ml_dtypes.finfo(dtype)
            edges += [float(finfo.max), float(finfo.tiny), float(finfo.smallest_subnormal)]
        fmt = bir_dtype(target)
        if fmt is not None and fmt.fmt is not None:
            for config in CONFIGS:
                rules = minifloat_rules(fmt.fmt, config)
                edges += [v for v in (rules.clamp, rules.overflow_from, rules.flush_below) if v is not None]
    return np.array(edges, np.float64)


@cache
def f32_sample() -> np.ndarray:
    """SAMPLE f32 bit patterns: every sign and exponent field × the rounding patterns of the
    mantissa, integer ties n ± ½ up to 2^16 (and their neighbours), saturation edges, random rest."""
    rng = np.random.default_rng(12)
    mantissas = _rounding_patterns(23, rng).astype(np.uint32)
    prefixes = np.arange(512, dtype=np.uint32) << np.uint32(23)
    structured = (prefixes[:, None] | mantissas[None, :]).ravel()
    halves = np.arange(-(1 << 16), 1 << 16, dtype=np.float32) + np.float32(0.5)
    ties = halves.view(np.uint32)
    integers = np.arange(-(1 << 16), 1 << 16, dtype=np.float32).view(np.uint32)
    fixed = np.concatenate([structured, ties, ties + np.uint32(1), ties - np.uint32(1), integers])
    fixed = np.concatenate([fixed, _ulps_around(saturation_edges())])
    assert fixed.size < SAMPLE
    rest = rng.integers(0, 1 << 32, SAMPLE - fixed.size, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([fixed, rest]).view(np.float32)


def integer_sample(source: str) -> np.ndarray:
    """SAMPLE values of a 32/64-bit integer type: everything up to 2^20 in magnitude, rounding
    patterns at every bit, 2^k ± 64 for every k, every integer type's bounds ± 64, random rest."""
    dtype = numpy_dtype(source)
    width = 8 * dtype.itemsize
    unsigned = np.dtype(f"u{dtype.itemsize}")
    rng = np.random.default_rng(width)
    mask = (1 << width) - 1
    small = np.arange(-(1 << 20), 1 << 20, dtype=np.int64).astype(np.uint64).astype(unsigned)
    integer_types = [np.iinfo(numpy_dtype(t)) for t in INTEGERS]
    edges = [1 << k for k in range(width)] + [int(v) for info in integer_types for v in (info.min, info.max)]
    near = np.array([(edge + offset) & mask for edge in edges for offset in range(-64, 65)], np.uint64)
    fixed = np.concatenate([small, _rounding_patterns(width, rng).astype(unsigned), near.astype(unsigned)])
    if dtype.kind == "i":  # both signs of every structured value
        fixed = np.concatenate([fixed, (-fixed.view(dtype)).view(unsigned)])
    assert fixed.size < SAMPLE
    rest = rng.integers(0, np.iinfo(unsigned).max, SAMPLE - fixed.size, dtype=unsigned, endpoint=True)
    return np.concatenate([fixed, rest]).view(dtype)


def all_patterns(source: str) -> np.ndarray:
    """Every bit pattern of an 8- or 16-bit type (f4e2m1fn: its 16 codes)."""
    dtype = numpy_dtype(source)
    count = 16 if source == "f4e2m1fn" else 1 << (8 * dtype.itemsize)
    return np.arange(count, dtype=np.uint64).astype(f"u{dtype.itemsize}").view(dtype)


def source_values(source: str) -> np.ndarray:
    if source == "f32":
        return f32_sample()
    if source in ("s32", "u32", "s64", "u64"):
        return integer_sample(source)
    return all_patterns(source)


# --------------------------------------------------------------------------- bit-exactness


def converts_module(source: str, targets: list[str], count: int) -> str:
    """One parameter converted to each target, all returned in a tuple."""
    lines = [f"  p = {source}[{count}] parameter(0)"]
    lines += [f"  c{i} = {target}[{count}] convert(p)" for i, target in enumerate(targets)]
    shapes = ", ".join(f"{target}[{count}]" for target in targets)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(f'c{i}' for i in range(len(targets)))})")
    return "HloModule converts\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def mismatches(source: str, values: np.ndarray, targets: list[str], config: FP8ConversionConfig) -> list[str]:
    """Run the emulation of source → each target on `values`; one line per pair that differs from the engine."""
    emulated = passes_text(converts_module(source, targets, values.size), _spec(config))
    outputs = bridge.execute(emulated, [values])
    raw = values.view(f"u{values.dtype.itemsize}")
    problems: list[str] = []
    for target, got in zip(targets, outputs):
        want = cast(values, source, target, config)
        bits = f"u{got.dtype.itemsize}"
        bad = np.flatnonzero(got.view(bits) != want.view(bits))
        if bad.size:
            examples = ", ".join(f"{raw[i]:#x}→{got.view(bits)[i]:#x} not {want.view(bits)[i]:#x}" for i in bad[:4])
            problems.append(f"{source}→{target} {config}: {bad.size} of {values.size} differ ({examples})")
    return problems


@pytest.mark.parametrize("source", sampled(TYPES, 3))
def test_every_destination_bit_exact(source: str) -> None:
    targets = [t for t in TYPES if t != source]
    assert mismatches(source, source_values(source), targets, CONFIGS[0]) == []


@pytest.mark.parametrize("config", CONFIGS[1:], ids=str)
@pytest.mark.parametrize("source", sampled(TYPES, 4))
def test_minifloat_destinations_bit_exact_under_every_config(source: str, config: FP8ConversionConfig) -> None:
    targets = [t for t in MINIFLOATS if t != source]
    assert mismatches(source, source_values(source), targets, config) == []


def test_sample_sizes() -> None:
    assert f32_sample().size == SAMPLE
    for source in ("s32", "u32", "s64", "u64"):
        assert integer_sample(source).size == SAMPLE
    exponents = np.unique(f32_sample().view(np.uint32) >> np.uint32(23))
    assert exponents.size == 512  # every exponent, both signs


def test_rules_are_read_from_the_engine() -> None:
    """The thresholds spec 002 states (decisions.md readings 4–6, 14), as the pass derives them."""
    saturating = minifloat_rules(mf.E4M3FN, FP8ConversionConfig())
    assert (saturating.clamp, saturating.overflow_from, saturating.flush_below) == (448.0, None, 2.0**-9)
    assert saturating.nan_bits == (mf.F32_NAN, mf.F32_NAN)
    unsaturated = minifloat_rules(mf.E4M3FN, FP8ConversionConfig(saturate=False))
    assert unsaturated.clamp is None
    assert unsaturated.overflow_from == float(np.nextafter(np.float32(464), np.float32(np.inf)))  # 464 ties to 448
    assert unsaturated.overflow_bits == (mf.F32_NAN, mf.F32_NAN)  # 0x7f, the sign dropped
    suppressed = minifloat_rules(mf.E4M3FN, FP8ConversionConfig(saturate=False, nan_suppress=True))
    assert suppressed.overflow_bits == suppressed.nan_bits == (0, 0x80000000)  # signed zero
    to_inf = minifloat_rules(mf.E5M2, FP8ConversionConfig(saturate=False))
    assert (to_inf.clamp, to_inf.overflow_from, to_inf.flush_below) == (None, None, 2.0**-16)  # XLA's own Inf
    fp4 = minifloat_rules(mf.E2M1FN, FP8ConversionConfig(saturate=False))
    assert (fp4.clamp, fp4.flush_below) == (6.0, None)
    assert fp4.nan_bits == (0x40C00000, 0x40C00000)  # +6.0 for either sign


def test_a_constant_operand_folds_to_the_device_values() -> None:
    """XLA folds the emulation of a constant's convert at compile time; the folder must agree too."""
    values = np.array([2.5, 3.5, -2.5, 500.0, -1e9, 0.0015, np.nan, np.inf], np.float32)
    for target in ("s32", "f8e4m3fn", "f8e5m2", "u8", "f4e2m1fn", "bf16"):
        text = hlo(f"""
            HloModule m

            ENTRY e {{
              c = f32[8] constant({{2.5, 3.5, -2.5, 500, -1e9, 0.0015, nan, inf}})
              ROOT r = {target}[8] convert(c)
            }}
            """)
        (got,) = bridge.execute(passes_text(text, "emulate-neuron-converts"), [])
        want = cast(values, "f32", target)
        bits = f"u{got.dtype.itemsize}"
        assert got.view(bits).tolist() == want.view(bits).tolist(), target


def test_float_to_int_rounds_to_nearest_even_where_xla_truncates() -> None:
    text = hlo("""
        HloModule m

        ENTRY e {
          p = f32[4] parameter(0)
          ROOT r = s32[4] convert(p)
        }
        """)
    values = np.array([2.5, 3.5, -2.5, -3.5], np.float32)
    (device,) = bridge.execute(passes_text(text, "emulate-neuron-converts"), [values])
    (xla,) = bridge.execute(text, [values])
    assert device.tolist() == [2, 4, -2, -4]
    assert xla.tolist() == [2, 3, -2, -3]


# --------------------------------------------------------------------------- the gate, warnings, options

GATE = hlo("""
    HloModule gate

    ENTRY e {
      p = f32[4] parameter(0)
      d = f64[4] parameter(1)
      k = s4[4] parameter(2)
      r = u32[4] parameter(3)
      a = f8e4m3fn[4] convert(p)
      same = f32[4] convert(p)
      wide = f64[4] convert(p)
      narrow = f32[4] convert(d)
      narrow2 = f32[4] convert(d)
      truth = pred[4] convert(p)
      nibble = s8[4] convert(k)
      fnuz = f8e4m3fnuz[4] convert(p)
      sr = bf16[4] stochastic-convert(p, r)
      ROOT t = (f8e4m3fn[4], f32[4], f64[4], f32[4], f32[4], pred[4], s8[4], f8e4m3fnuz[4], bf16[4]) tuple(a, same, wide, narrow, narrow2, truth, nibble, fnuz, sr)
    }
    """)


def test_gate_replaces_only_converts_between_two_bir_types() -> None:
    module = parse(GATE, "t")
    assert [i.name for i in EmulateNeuronConverts().matches(module)] == ["a"]
    report = run_passes(module, "emulate-neuron-converts")
    assert report.passes[-1].rewritten == 1
    kept = {i.name for i in module.entry.instructions if i.opcode in ("convert", "stochastic-convert")}
    assert {"same", "wide", "narrow", "narrow2", "truth", "nibble", "fnuz", "sr"} <= kept
    assert not EmulateNeuronConverts().matches(module)


def test_each_kept_pair_is_warned_about_once() -> None:
    report = run_passes(parse(GATE, "t"), "emulate-neuron-converts")
    warnings = report.passes[-1].warnings
    assert warnings == (
        "convert f32→f64 keeps XLA's semantics (%wide): f64 has no BIR dtype",
        "convert f64→f32 keeps XLA's semantics (2 instructions, first %narrow): f64 has no BIR dtype",
        "convert f32→pred keeps XLA's semantics (%truth): pred has no BIR dtype",
        "convert s4→s8 keeps XLA's semantics (%nibble): s4 has no BIR dtype",
        "convert f32→f8e4m3fnuz keeps XLA's semantics (%fnuz): f8e4m3fnuz has no BIR dtype",
        "stochastic-convert f32→bf16 keeps XLA's semantics (%sr): the device has no stochastic rounding (spec 003)",
    )


NESTED = hlo("""
    HloModule nested

    fused (x: f32[4]) -> s8[4] {
      x = f32[4] parameter(0)
      ROOT c = s8[4] convert(x)
    }

    add (a: f32[], b: f32[]) -> f32[] {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ca = bf16[] convert(a)
      cb = bf16[] convert(b)
      s = bf16[] add(ca, cb)
      ROOT r = f32[] convert(s)
    }

    cond (s: (s32[], f32[4])) -> pred[] {
      s = (s32[], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      n = s32[] constant(2)
      ROOT lt = pred[] compare(i, n), direction=LT
    }

    body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
      s = (s32[], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      one = s32[] constant(1)
      j = s32[] add(i, one)
      v = f32[4] get-tuple-element(s), index=1
      h = f8e5m2[4] convert(v)
      w = f32[4] convert(h)
      ROOT t = (s32[], f32[4]) tuple(j, w)
    }

    ENTRY e {
      p = f32[4] parameter(0)
      f = s8[4] fusion(p), kind=kLoop, calls=fused
      zero = f32[] constant(0)
      sum = f32[] reduce(p, zero), dimensions={0}, to_apply=add
      i0 = s32[] constant(0)
      init = (s32[], f32[4]) tuple(i0, p)
      loop = (s32[], f32[4]) while(init), condition=cond, body=body
      out = f32[4] get-tuple-element(loop), index=1
      ROOT t = (s8[4], f32[], f32[4]) tuple(f, sum, out)
    }
    """)


def test_converts_in_fusions_reducers_and_loops_are_replaced() -> None:
    module = parse(NESTED, "t")
    assert {i.parent.name for i in EmulateNeuronConverts().matches(module) if i.parent} == {"fused", "add", "body"}
    emulated = passes_text(NESTED, "emulate-neuron-converts")
    assert not EmulateNeuronConverts().matches(parse(emulated, "t"))
    values = np.array([2.5, 1e6, -3.5, 0.1], np.float32)
    fused, total, looped = bridge.execute(emulated, [values])
    assert fused.tolist() == [2, 127, -4, 0]  # XLA: 2, 127, -3, 0 (it truncates)
    once = cast(cast(values, "f32", "f8e5m2"), "f8e5m2", "f32")
    twice = cast(cast(once, "f32", "f8e5m2"), "f8e5m2", "f32")
    assert looped.view(np.uint32).tolist() == twice.view(np.uint32).tolist()
    (_, xla_total, _) = bridge.execute(NESTED, [values])
    assert total == xla_total  # finite values: the device's bf16 rounding is XLA's


def test_layouts_and_attributes_of_the_convert_are_kept() -> None:
    text = hlo("""
        HloModule m

        ENTRY e {
          p = f32[2,3]{0,1} parameter(0)
          ROOT c = f8e4m3fn[2,3]{0,1} convert(p), metadata={op_name="cast"}, frontend_attributes={k="v"}
        }
        """)
    module = parse(passes_text(text, "emulate-neuron-converts"), "t")
    root = module.entry.root
    assert root is not None and root.shape is not None
    assert root.shape.to_text() == "f8e4m3fn[2,3]{0,1}"
    assert root.attributes["metadata"] == Metadata((("op_name", '"cast"'),))
    assert root.attributes["frontend_attributes"] == FrontendAttributes((("k", '"v"'), ("neuron_cast", '"lowered"')))


def test_options_parse_from_the_spec() -> None:
    (selected,), _ = select("emulate-neuron-converts{saturate=false nan-suppress=true}")
    assert selected.create() == EmulateNeuronConverts(saturate=False, nan_suppress=True)
    assert lookup("EmulateNeuronConverts").create() == EmulateNeuronConverts(saturate=True, nan_suppress=False)
    assert not lookup("emulate-neuron-converts").in_all
    with pytest.raises(HloError, match="must be true or false"):
        select("emulate-neuron-converts{saturate=yes}")
    with pytest.raises(HloError, match="has no option 'rounding'"):
        select("emulate-neuron-converts{rounding=up}")


def test_saturate_option_changes_fp8_overflow() -> None:
    text = hlo("""
        HloModule m

        ENTRY e {
          p = f32[3] parameter(0)
          ROOT c = f8e4m3fn[3] convert(p)
        }
        """)
    values = np.array([1000.0, -1000.0, np.nan], np.float32)
    (saturated,) = bridge.execute(passes_text(text, "emulate-neuron-converts"), [values])
    (unsaturated,) = bridge.execute(passes_text(text, "emulate-neuron-converts{saturate=false}"), [values])
    (suppressed,) = bridge.execute(
        passes_text(text, "emulate-neuron-converts{saturate=false,nan_suppress=true}"), [values]
    )
    assert saturated.view(np.uint8).tolist() == [0x7E, 0xFE, 0x7F]
    assert unsaturated.view(np.uint8).tolist() == [0x7F, 0x7F, 0x7F]
    assert suppressed.view(np.uint8).tolist() == [0x00, 0x80, 0x00]
