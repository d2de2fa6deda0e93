"""neuron-auto-cast: the plan's decisions, and what the rewritten module computes, run through XLA on the CPU.

The numpy model of the device: every cast is the cast engine's ``neuron`` profile (CastToNewDType);
a dot or convolution multiplies the cast operands exactly and sums in f64, then rounds to f32 (the
matrix engine accumulates in f32, so XLA may differ from it only by the order of the f32 sum); an
``all``-mode elementwise op reads the cast type, computes in f32 and rounds to the cast type once.
Elementwise sweeps run every value of the 16- and 8-bit cast types (and a dense tf32 sample).
"""

from __future__ import annotations

from functools import cache

import ml_dtypes
import numpy as np
import pytest
from conftest import sampled
from hlo_text import hlo
from pass_testing import passes_text

from hloopt.cast_engine import cast
from hloopt.ir.module import Instruction, Module
from hloopt.passes.neuron_auto_cast import Decision, NeuronAutoCast, auto_cast_plan
from hloopt.passes.registry import lookup
from hloopt.text.parser import parse

bridge = pytest.importorskip("hloopt.xla.bridge")

TYPES = ["bf16", "fp16", "tf32", "fp8_e4m3"]
#: The cast engine's dtype each auto-cast type rounds to.
ENGINE = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32r", "fp8_e4m3": "float8_e4m3"}
#: Every pattern of the stored types; tf32 has no type of its own (f32 values).
STORED = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8_e4m3": ml_dtypes.float8_e4m3}


def rounded(values: np.ndarray, auto_cast_type: str, numerics: str = "neuron") -> np.ndarray:
    """f32 `values` cast to the auto-cast type as the device casts them (or XLA's convert, whose converts the
    module keeps under numerics xla; tf32 is always the device's cast, written out), read back as f32."""
    profile = "neuron" if auto_cast_type == "tf32" else numerics
    narrow = cast(np.ascontiguousarray(values, np.float32), "float32", ENGINE[auto_cast_type], profile=profile)
    return cast(narrow, ENGINE[auto_cast_type], "float32", profile=profile).astype(np.float32)


def by_name(module: Module, plan: dict[Instruction, Decision]) -> dict[str, Decision]:
    del module
    return {i.name: d for i, d in plan.items()}


# --------------------------------------------------------------------------- the plan

PLAN_MODULE = hlo("""
    HloModule plan

    sum {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    sum16 {
      a16 = bf16[] parameter(0)
      b16 = bf16[] parameter(1)
      ROOT c16 = bf16[] add(a16, b16)
    }

    ENTRY main {
      x = f32[4,4]{1,0} parameter(0)
      q = s32[4,4]{1,0} parameter(1)
      h = bf16[4]{0} parameter(2)
      d = f32[4,4]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      pinned = f32[4,4]{1,0} dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}, frontend_attributes={auto_cast="none"}
      e = f32[4,4]{1,0} exponential(d)
      iq = s32[4,4]{1,0} add(q, q)
      z = f32[] constant(0)
      r = f32[4]{0} reduce(e, z), dimensions={1}, to_apply=sum
      hz = bf16[] constant(0)
      hr = bf16[] reduce(h, hz), dimensions={0}, to_apply=sum16
      ROOT t = (f32[4,4]{1,0}, f32[4]{0}, s32[4,4]{1,0}, f32[4,4]{1,0}, bf16[]) tuple(pinned, r, iq, e, hr)
    }
""")


def _expected(mode: str, auto_cast_type: str, accumulate: str) -> dict[str, Decision]:
    """The decisions docs/decisions.md describes, written out per op."""
    f32 = accumulate == "f32"
    cast = Decision(auto_cast_type)  # type: ignore[arg-type]  # one of TYPES
    skip = Decision(reason="not-covered")
    accumulating = Decision(accumulate_f32=True)
    decisions = {
        "pinned": Decision(reason="stamped"),
        "iq": Decision(reason="integer"),
        "hr": accumulating if f32 else Decision(per_step=True),  # native: rounded after each step
        "c16": accumulating if f32 else skip,
    }
    if mode == "none":
        return decisions | {"d": skip, "e": skip, "r": skip, "s": skip}
    if mode == "matmult":
        return decisions | {"d": cast, "e": skip, "r": skip, "s": skip}
    return decisions | {
        "x": Decision(reason="io"),
        "d": Decision(auto_cast_type, f32),  # type: ignore[arg-type]
        "e": cast,
        "r": Decision(auto_cast_type, f32, per_step=not f32),  # type: ignore[arg-type]
        "s": accumulating if f32 else cast,
    }


@pytest.mark.parametrize("accumulate", ["f32", "native"])
@pytest.mark.parametrize("auto_cast_type", TYPES)
@pytest.mark.parametrize("mode", ["none", "matmult", "all"])
def test_plan_gives_every_op_its_decision(mode: str, auto_cast_type: str, accumulate: str) -> None:
    module = parse(PLAN_MODULE, "plan.hlo")
    options = NeuronAutoCast(mode, auto_cast_type, accumulate)  # type: ignore[arg-type]  # the Literal values
    assert by_name(module, auto_cast_plan(module, options)) == _expected(mode, auto_cast_type, accumulate)


def test_registry_row_and_options() -> None:
    info = lookup("neuron-auto-cast")
    assert not info.in_all
    assert info.number < lookup("emulate-neuron-converts").number
    assert info.number > max(lookup(n).number for n in ("neuron-int-matmul-downcast", "upcast-all-to-fp32"))
    assert info.create() == NeuronAutoCast("matmult", "bf16", "f32")
    assert info.create({"mode": "all", "type": "tf32", "accumulate": "native"}) == NeuronAutoCast(
        "all", "tf32", "native"
    )


def test_a_reducer_a_stamped_reduce_calls_is_stamped_too() -> None:
    text = F32_SUM.replace("to_apply=sum", 'to_apply=sum, frontend_attributes={auto_cast="none"}')
    module = parse(text, "t.hlo")
    plan = by_name(module, auto_cast_plan(module, NeuronAutoCast("all")))
    assert plan["r"] == plan["s"] == Decision(reason="stamped")
    # the entry parameter (io) feeds only the stamped reduce: nothing is cast, not even at the boundary
    assert "bf16" not in passes_text(text, "neuron-auto-cast{mode=all}")


# --------------------------------------------------------------------------- dots and convolutions through XLA


def _run(text: str, passes: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return bridge.execute(passes_text(text, passes), inputs)


DOT = hlo("""
    HloModule dot

    ENTRY main {
      a = f32[16,64]{1,0} parameter(0)
      b = f32[64,8]{1,0} parameter(1)
      ROOT d = f32[16,8]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }
""")
CONV = hlo("""
    HloModule conv

    ENTRY main {
      img = f32[2,9,9,3]{3,2,1,0} parameter(0)
      k = f32[3,3,3,5]{3,2,1,0} parameter(1)
      ROOT c = f32[2,7,7,5]{3,2,1,0} convolution(img, k), window={size=3x3}, dim_labels=b01f_01io->b01f
    }
""")


def _dot_model(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact f64 sums and the sums of magnitudes (for the f32 summation-order bound)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64, np.abs(a64) @ np.abs(b64)


def _conv_model(img: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    windows = np.lib.stride_tricks.sliding_window_view(img.astype(np.float64), (3, 3), axis=(1, 2))
    # windows: [batch, 7, 7, feature, 3, 3]; k: [3, 3, feature, out]
    exact = np.einsum("bhwfij,ijfo->bhwo", windows, k.astype(np.float64))
    magnitude = np.einsum("bhwfij,ijfo->bhwo", np.abs(windows), np.abs(k.astype(np.float64)))
    return exact, magnitude


def _inputs(shapes: tuple[tuple[int, ...], ...], kind: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "exact":  # small integers and halves: every product and sum exact in f32
        return [(rng.integers(-8, 9, shape) / 2).astype(np.float32) for shape in shapes]
    # normal values with exponents from 2^-10 to 2^5, so each cast rounds (and none passes f8e4m3's 240)
    return [(rng.standard_normal(shape) * 2.0 ** rng.integers(-10, 6, shape)).astype(np.float32) for shape in shapes]


CASES = [(op, t, kind) for op in ("dot", "convolution") for t in TYPES for kind in ("exact", "rounding")]


@pytest.mark.parametrize(("op", "auto_cast_type", "kind"), CASES)
@pytest.mark.parametrize("numerics", ["xla", "neuron"])
def test_matmult_equals_the_model(op: str, auto_cast_type: str, kind: str, numerics: str) -> None:
    """Bit-exact where the sum is exact in f32; else within γ_K·Σ|a·b| of the exact sum, the f32 summation-order
    bound (K the contraction length). Under numerics neuron every cast is the device's (emulate-neuron-converts);
    under xla the converts are XLA's, which differ from the device's where f8e4m3 overflows (Inf, not 240)."""
    text, shapes, model, k = (
        (DOT, ((16, 64), (64, 8)), _dot_model, 64)
        if op == "dot"
        else (CONV, ((2, 9, 9, 3), (3, 3, 3, 5)), _conv_model, 27)
    )
    inputs = _inputs(shapes, kind, seed=len(auto_cast_type) + len(op))
    passes = f"neuron-auto-cast{{type={auto_cast_type}}}" + (",emulate-neuron-converts" if numerics == "neuron" else "")
    (got,) = _run(text, passes, inputs)
    exact, magnitude = model(*(rounded(x, auto_cast_type, numerics) for x in inputs))
    if kind == "exact":
        np.testing.assert_array_equal(got, exact.astype(np.float32))
    else:
        gamma = k * 2.0**-24 / (1 - k * 2.0**-24)
        assert np.all(np.abs(got.astype(np.float64) - exact) <= gamma * magnitude + 2.0**-149)
        assert not np.array_equal(got, model(*inputs)[0].astype(np.float32))  # the cast changed the result


def test_fp8_operands_saturate_at_240_under_the_device_cast() -> None:
    """f8e4m3 (trn1/trn2) tops at 240 and the device's cast saturates: a 1000 operand counts as 240."""
    a = np.full((16, 64), 1000.0, np.float32)
    b = np.zeros((64, 8), np.float32)
    b[0] = 1.0
    (got,) = _run(DOT, "neuron-auto-cast{type=fp8_e4m3},emulate-neuron-converts", [a, b])
    assert np.all(got == 240.0)


# --------------------------------------------------------------------------- all-mode elementwise through XLA

ELEMENTWISE = hlo("""
    HloModule elementwise

    ENTRY main {
      x = f32[N]{0} parameter(0)
      y = f32[N]{0} parameter(1)
      add = f32[N]{0} add(x, y)
      subtract = f32[N]{0} subtract(x, y)
      multiply = f32[N]{0} multiply(x, y)
      divide = f32[N]{0} divide(x, y)
      maximum = f32[N]{0} maximum(x, y)
      negate = f32[N]{0} negate(x)
      abs = f32[N]{0} abs(x)
      sqrt = f32[N]{0} sqrt(x)
      exponential = f32[N]{0} exponential(x)
      tanh = f32[N]{0} tanh(x)
      ROOT t = (f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}, f32[N]{0}) tuple(add, subtract, multiply, divide, maximum, negate, abs, sqrt, exponential, tanh)
    }
""")
#: The ops numpy computes as IEEE does (correctly rounded), for the lanes XLA's CPU may flush.
EXACT = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "negate": lambda x, y: -x,
    "abs": lambda x, y: np.abs(x),
    "sqrt": lambda x, y: np.sqrt(x),
}
OPS = ["add", "subtract", "multiply", "divide", "maximum", "negate", "abs", "sqrt", "exponential", "tanh"]


@cache
def _all_values(auto_cast_type: str) -> np.ndarray:
    """Every value of the stored type as f32 (NaN included); for tf32 a dense f32 sample with every rounding tie."""
    if auto_cast_type in STORED:
        dtype = np.dtype(STORED[auto_cast_type])
        bits = np.arange(1 << (8 * dtype.itemsize), dtype=np.uint16 if dtype.itemsize == 2 else np.uint8)
        return bits.view(dtype).astype(np.float32)
    rng = np.random.default_rng(7)
    top = rng.integers(0, 1 << 20, 1 << 16, dtype=np.uint32) << 12  # every kept pattern in reach
    low = np.array([0, 0x7FF, 0x800, 0x801, 0xFFF], np.uint32)  # below, at and above the tie
    return (top[:, None] | low[None, :]).ravel()[: 1 << 16].view(np.float32)


def _unrounded(values: np.ndarray, seed: int) -> np.ndarray:
    """`values` nudged off the cast type's grid, so the input cast rounds too."""
    rng = np.random.default_rng(seed)
    nudge = rng.integers(0, 1 << 12, values.size, dtype=np.uint32)
    finite = np.isfinite(values)
    bits = values.view(np.uint32).copy()
    bits[finite] ^= nudge[finite]
    return bits.view(np.float32)


def _subnormal(values: np.ndarray) -> np.ndarray:
    return (values != 0) & (np.abs(values) < np.finfo(np.float32).tiny)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Bit-equal, or NaN on both sides (a NaN's payload from XLA's internal rounding is not the device's)."""
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


def _f32_ops(n: int, xr: np.ndarray, yr: np.ndarray) -> list[np.ndarray]:
    """XLA's own f32 ops on the rounded inputs: the model's f32 arithmetic is XLA's CPU kernels, which flush
    subnormal operands and results (as for any f32 module XLA's CPU runs) and approximate exp and tanh."""
    text = ELEMENTWISE.replace("f32[N]", f"f32[{n}]")
    return bridge.execute(text, [xr, yr])


@pytest.mark.parametrize(
    ("auto_cast_type", "nudged"), sampled([(t, n) for t in TYPES for n in (False, True)], 2, unpack=True)
)
def test_all_mode_elementwise_is_bit_exact(auto_cast_type: str, nudged: bool) -> None:
    """Every value of the cast type (x) against a shuffled copy of them (y): each op reads the device-cast inputs,
    computes in f32 and rounds once to the cast type; the entry root converts back to f32."""
    x = _all_values(auto_cast_type)
    y = np.random.default_rng(1).permutation(x)
    if nudged:
        x, y = _unrounded(x, 2), _unrounded(y, 3)
    n = x.size
    text = ELEMENTWISE.replace("f32[N]", f"f32[{n}]")
    got = _run(text, f"neuron-auto-cast{{mode=all type={auto_cast_type}}},emulate-neuron-converts", [x, y])
    xr, yr = rounded(x, auto_cast_type), rounded(y, auto_cast_type)
    with np.errstate(all="ignore"):
        for op, out, f32_result in zip(OPS, got, _f32_ops(n, xr, yr)):
            same = _same(out, rounded(f32_result, auto_cast_type))
            exact = EXACT[op](xr, yr).astype(np.float32) if op in EXACT else f32_result
            # XLA's CPU flushes f32 subnormals in some kernels and not in others (DAZ/FTZ, per fusion): a lane
            # with a subnormal input or result may be flushed to zero on either side (and maximum of a flushed
            # subnormal and a NaN may give the subnormal)
            flushable = _subnormal(xr) | _subnormal(yr) | _subnormal(exact) | _subnormal(f32_result)
            allowed = _same(out, rounded(exact, auto_cast_type)) | (out == 0)
            if op == "maximum":
                allowed |= _same(out, xr) | _same(out, yr)
            same |= flushable & allowed
            assert same.all(), f"{op}: {np.count_nonzero(~same)} of {n} differ, first x={x[~same][:3]}"


# --------------------------------------------------------------------------- mixed-precision accumulation

F32_SUM = hlo("""
    HloModule f32_sum

    sum {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[1024]{0} parameter(0)
      z = f32[] constant(0)
      ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=sum
    }
""")


def per_step(values: np.ndarray, auto_cast_type: str, axis: int | None = None) -> np.ndarray:
    """The device's native accumulation: each element added in f32 to the running sum, which is rounded to the
    type after every step, in order along `axis` (all of them in row-major order when None); the start is 0."""
    rows = np.moveaxis(values, axis, 0) if axis is not None else values.reshape(-1)
    total = np.zeros(rows.shape[1:], np.float32)
    for row in rows:
        total = rounded(total + rounded(row.astype(np.float32), auto_cast_type), auto_cast_type)
    return total


def once(values: np.ndarray, auto_cast_type: str, axis: int | None = None) -> np.ndarray:
    """Mixed-precision accumulation: the exact sum of the rounded values (f64, exact for the inputs used), then
    one rounding to the type."""
    exact = rounded(values.astype(np.float32), auto_cast_type).astype(np.float64).sum(axis=axis)
    return rounded(np.asarray(exact, np.float32).reshape(-1), auto_cast_type).reshape(np.shape(exact))


def test_an_all_mode_sum_accumulates_in_f32_and_rounds_once_or_per_step() -> None:
    """Multiples of 2^-8 below 1 sum exactly in f32, so accumulated in f32 the result is the exact sum rounded to
    bf16 once; under ``native`` the reducer's add is a cast op rounding each partial sum, one element after the
    other: at 256 (bf16's step there is 2) the sum stops growing, bit for bit the per-step model."""
    values = (np.random.default_rng(5).integers(1, 256, 1024) / 256).astype(np.float32)
    (f32,) = _run(F32_SUM, "neuron-auto-cast{mode=all accumulate=f32},emulate-neuron-converts", [values])
    (native,) = _run(F32_SUM, "neuron-auto-cast{mode=all accumulate=native},emulate-neuron-converts", [values])
    assert f32 == once(values, "bf16")
    assert native == per_step(values, "bf16") == 256


LOW_SUM = hlo("""
    HloModule low_sum

    sum {
      a = T[] parameter(0)
      b = T[] parameter(1)
      ROOT s = T[] add(a, b)
    }

    ENTRY main {
      x = T[6,300]{1,0} parameter(0)
      z = T[] constant(0)
      rows = T[6]{0} reduce(x, z), dimensions={1}, to_apply=sum
      columns = T[300]{0} reduce(x, z), dimensions={0}, to_apply=sum
      whole = T[] reduce(x, z), dimensions={0,1}, to_apply=sum
      ROOT t = (T[6]{0}, T[300]{0}, T[]) tuple(rows, columns, whole)
    }
""")


@pytest.mark.parametrize("accumulate", ["f32", "native"])
@pytest.mark.parametrize(("element_type", "auto_cast_type"), [("bf16", "bf16"), ("f16", "fp16")])
def test_the_models_low_precision_reduce_accumulates_as_the_device_does(
    element_type: str, auto_cast_type: str, accumulate: str
) -> None:
    """A reduce the model wrote in bf16 or f16, over each axis and over both: with mixed-precision accumulation
    the exact sum rounded once, without it the sum rounded after every step, in order, bit for bit. The
    values (quarters up to 8) sum exactly in f32 and outgrow the low type's mantissa within a row, so the
    two settings differ (and XLA's own reduce, which rounds per step in windows of its own, matches neither)."""
    dtype = STORED[auto_cast_type]
    values = (np.random.default_rng(9).integers(1, 33, (6, 300)) / 4).astype(dtype)
    wide = values.astype(np.float32)
    model = once if accumulate == "f32" else per_step
    text = LOW_SUM.replace("T[", f"{element_type}[")
    got = _run(text, f"neuron-auto-cast{{mode=none accumulate={accumulate}}},emulate-neuron-converts", [values])
    for out, axis in zip(got, (1, 0, None)):
        want = model(wide, auto_cast_type, axis).astype(dtype)
        np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16), err_msg=f"axis {axis}")
    assert per_step(wide, auto_cast_type) != once(wide, auto_cast_type)


@pytest.mark.parametrize("accumulate", ["f32", "native"])
def test_a_low_precision_dot_rounds_once_under_either_setting(accumulate: str) -> None:
    """A bf16 dot accumulates in f32 and rounds the exact f32 sum to bf16 once (the device cast): the matrix
    engine accumulates in f32 whatever the flag, and XLA's CPU computes the model's bf16 dot so too."""
    text = hlo("""
        HloModule bf16_dot

        ENTRY main {
          a = bf16[8,256]{1,0} parameter(0)
          b = bf16[256,4]{1,0} parameter(1)
          ROOT d = bf16[8,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        }
    """)
    rng = np.random.default_rng(3)
    a = (rng.integers(-8, 9, (8, 256)) / 4).astype(ml_dtypes.bfloat16)
    b = (rng.integers(-8, 9, (256, 4)) / 4).astype(ml_dtypes.bfloat16)
    (got,) = _run(text, f"neuron-auto-cast{{mode=none accumulate={accumulate}}},emulate-neuron-converts", [a, b])
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)  # exact in f32: small sixteenths
    want = cast(exact, "float32", "bfloat16", profile="neuron")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_matmult_reads_operand_shapes_the_text_left_out() -> None:
    text = hlo("""
        HloModule inferred

        ENTRY main {
          a = f32[4,4]{1,0} parameter(0)
          t = (f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(a, a)
          g = get-tuple-element(t), index=0
          ROOT d = f32[4,4]{1,0} dot(g, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        }
    """)
    out = passes_text(text, "neuron-auto-cast")
    assert "bf16[4,4]{1,0} convert(%g)" in out and 'auto_cast="bf16"' in out


ASYNC = hlo("""
    HloModule wrapped

    %async_builder {
      %p0 = f32[10] parameter(0)
      ROOT %foo = f32[10] negate(%p0)
    }, execution_thread="parallel_thread"

    ENTRY %main (p0: f32[10]) -> f32[10] {
      %p0 = f32[10] parameter(0)
      %e = f32[10] exponential(%p0)
      %start = ((f32[10]), f32[10], s32[]) async-start(%e), async_execution_thread="parallel_thread", calls=%async_builder
      %done = f32[10] async-done(%start), async_execution_thread="parallel_thread", calls=%async_builder
      ROOT %r = f32[10] add(%done, %done)
    }
""")


def test_all_mode_keeps_an_async_computation_and_its_ops_types() -> None:
    """An async op's computation is `not-covered` under ``all``: its callers' shapes and the sugar would have to
    change with it; the ops around it are cast, with converts at the async op's edges."""
    module = parse(ASYNC)
    plan = by_name(module, auto_cast_plan(module, NeuronAutoCast(mode="all")))
    assert plan["foo"] == Decision(reason="not-covered") and plan["e"].cast == plan["r"].cast == "bf16"
    out = passes_text(ASYNC, "neuron-auto-cast{mode=all}")
    assert "((f32[10]{0}), f32[10]{0}, s32[]) async-start(" in out and "f32[10]{0} negate(%p0)" in out
    assert passes_text(out, "neuron-auto-cast{mode=all}") == out


def test_a_tuple_of_scalar_constants_is_retyped_as_scalars() -> None:
    """The cast engine gives a scalar back as one element; the retyped literal stays a pair of scalars (it read
    back as ``( {1}, {10} )``, which XLA refuses), under auto-cast's ``all`` and under upcast-all-to-fp32 alike."""
    f32 = hlo("""
        HloModule t

        ENTRY main {
          c = (f32[], f32[]) constant((1, 10))
          a = f32[] get-tuple-element(c), index=0
          b = f32[] get-tuple-element(c), index=1
          ROOT s = f32[] add(a, b)
        }
    """)
    assert "(bf16[], bf16[]) constant(( 1, 10 ))" in passes_text(f32, "neuron-auto-cast{mode=all}")
    assert "(f32[], f32[]) constant(( 1, 10 ))" in passes_text(f32.replace("f32", "bf16"), "upcast-all-to-fp32")


def test_all_mode_keeps_only_the_ops_holding_or_reading_a_buffer() -> None:
    """A ``b(…)`` buffer cannot be converted: the Pin holding one and the Unpin reading it keep their types
    (named: ``buffer``), the ops around them are cast, with converts at their edges (the golden file's case)."""
    text = hlo("""
        HloModule pinned

        ENTRY main {
          p0 = f32[32] parameter(0)
          e = f32[32] exponential(p0)
          a = b(f32[32]) custom-call(e), custom_call_target="Pin", output_to_operand_aliasing={{}: (0, {})}
          ROOT c = f32[32] custom-call(a), custom_call_target="Unpin", output_to_operand_aliasing={{}: (0, {})}
        }
    """)
    module = parse(text)
    plan = by_name(module, auto_cast_plan(module, NeuronAutoCast(mode="all")))
    assert plan["a"] == plan["c"] == Decision(reason="buffer") and plan["e"] == Decision("bf16")
    printed = passes_text(text, "neuron-auto-cast{mode=all}")
    out = {i.name: i for i in parse(printed).instructions()}
    (read,) = out["a"].operands  # the Pin reads the cast exponential converted back to f32
    assert read.opcode == "convert" and read.shape is not None and read.shape.to_text(False) == "f32[32]"
    assert read.operands[0].shape is not None and read.operands[0].shape.to_text(False) == "bf16[32]"
    (line,) = [line for line in printed.splitlines() if " exponential(" in line]
    assert 'auto_cast="bf16"' in line and " = b(f32[32]{0}) custom-call(" in printed


UNSHAPED = hlo("""
    HloModule unshaped

    max {
      p0 = f32[] parameter(0)
      p1 = f32[] parameter(1)
      ROOT max = f32[] maximum(p0, p1)
    }

    ENTRY test {
      p = f32[16,32] parameter(0)
      e = f32[16,32] exponential(p)
      constant = f32[] constant(-inf)
      rw = reduce-window(e, constant), window={size=1x1 pad=1_2x3_4}, to_apply=max
      ROOT n = f32[19,39] negate(rw)
    }
""")


def test_all_mode_keeps_only_the_ops_whose_shape_it_cannot_infer() -> None:
    """The padded reduce-window's shape is left out and hloopt cannot infer it: it, its reducer and its user keep
    their types (named: ``unknown-shape``); the exponential feeding it is cast, and XLA computes exactly that:
    the padding stays -inf and every other element is the bf16 exponential of the bf16 input, negated in f32."""
    module = parse(UNSHAPED)
    plan = by_name(module, auto_cast_plan(module, NeuronAutoCast(mode="all")))
    assert plan["rw"] == plan["n"] == plan["max"] == Decision(reason="unknown-shape")
    assert plan["e"] == Decision("bf16")
    values = np.random.default_rng(4).standard_normal((16, 32)).astype(np.float32)
    (got,) = _run(UNSHAPED, "neuron-auto-cast{mode=all},emulate-neuron-converts", [values])
    (written,) = bridge.execute(UNSHAPED, [values])
    e = rounded(np.exp(rounded(values, "bf16")), "bf16")
    np.testing.assert_allclose(got[1:17, 3:35], -e, rtol=2**-20)  # XLA's exp may differ from numpy's in a last bit
    assert np.array_equal(np.isinf(got), np.isinf(written)) and not np.array_equal(got, written)


def test_native_leaves_a_reduce_inside_a_fusion_as_written() -> None:
    """A fusion's computation holds no loop, so a reduce inside one keeps XLA's accumulation (not-covered)."""
    text = hlo("""
        HloModule fused

        sum {
          a = bf16[] parameter(0)
          b = bf16[] parameter(1)
          ROOT s = bf16[] add(a, b)
        }

        fused_reduce {
          p = bf16[4,8]{1,0} parameter(0)
          z = bf16[] constant(0)
          ROOT r = bf16[4]{0} reduce(p, z), dimensions={1}, to_apply=sum
        }

        ENTRY main {
          x = bf16[4,8]{1,0} parameter(0)
          ROOT f = bf16[4]{0} fusion(x), kind=kLoop, calls=fused_reduce
        }
    """)
    module = parse(text)
    plan = by_name(module, auto_cast_plan(module, NeuronAutoCast(mode="none", accumulate="native")))
    assert plan["r"] == Decision(reason="not-covered")
    assert passes_text(text, "neuron-auto-cast{mode=none accumulate=native}") == parse(text).to_text()


def test_all_mode_keeps_the_output_type_of_an_unshaped_while_root() -> None:
    """A ``while`` root whose shape the text leaves out (inferable only from its body's root, in module order):
    its body computes in bf16, its result is converted back to the f32 the module returns, and XLA runs it."""
    text = hlo("""
        HloModule unshaped_loop

        body {
          p = (s32[], f32[8]) parameter(0)
          i = get-tuple-element(p), index=0
          one = s32[] constant(1)
          n = add(i, one)
          x = get-tuple-element(p), index=1
          y = multiply(x, x)
          ROOT t = tuple(n, y)
        }

        cond {
          c = (s32[], f32[8]) parameter(0)
          ci = get-tuple-element(c), index=0
          k = s32[] constant(2)
          ROOT lt = pred[] compare(ci, k), direction=LT
        }

        ENTRY main {
          x0 = f32[8] parameter(0)
          zero = s32[] constant(0)
          init = tuple(zero, x0)
          ROOT w = while(init), condition=cond, body=body
        }
    """)
    out = parse(passes_text(text, "neuron-auto-cast{mode=all}"))
    root = out.entry.root
    assert root is not None and root.shape is not None and root.shape.to_text(False) == "(s32[], f32[8])"
    values = np.linspace(0.5, 1.5, 8, dtype=np.float32)
    _, got = _run(text, "neuron-auto-cast{mode=all},emulate-neuron-converts", [values])
    want = values
    for _ in range(2):  # each step reads bf16, squares in f32 and rounds to bf16
        want = rounded(rounded(want, "bf16") * rounded(want, "bf16"), "bf16")
    np.testing.assert_array_equal(got, want)
