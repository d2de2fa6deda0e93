"""Known results of small modules on XLA's CPU backend, inputs made and converted, errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.arrays import ExecutionError
from hloopt.errors import HloParseError
from hloopt.ir.element_types import BY_NAME, ROWS, Kind
from hloopt.ir.shape import ArrayShape
from hloopt.passes.cpu_runnable import NotCpuRunnable
from hloopt.xla.bridge import IsolatedPool, XlaError, canonical, compile_cpu, jaxlib_version
from hloopt.xla.running import byte_size, convert_exact, execute, random_inputs, run

INT_DOT = """HloModule int_dot
ENTRY main {
  a = s32[2,3]{1,0} parameter(0)
  b = s32[3,2]{1,0} parameter(1)
  ROOT d = s32[2,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

BATCH_NORM = """HloModule bn
ENTRY main {
  x = {T}[2,2,2,3] parameter(0)
  scale = {T}[3] parameter(1)
  offset = {T}[3] parameter(2)
  ROOT bn = ({T}[2,2,2,3], {T}[3], {T}[3]) batch-norm-training(x, scale, offset), epsilon=0.001, feature_index=3
}
"""

FP8_CONVERTS = """HloModule fp8
ENTRY main {
  x = f32[8] parameter(0)
  a = f8e4m3fn[8] convert(x)
  b = f8e5m2[8] convert(x)
  ROOT t = (f8e4m3fn[8], f8e5m2[8], f32[8]) tuple(a, b, f32[8] convert(a))
}
"""

NESTED_TUPLES = """HloModule tuples
ENTRY main {
  p = (f32[2], (s32[], pred[3])) parameter(0)
  q = f64[2] parameter(1)
  a = f32[2] get-tuple-element(p), index=0
  inner = (s32[], pred[3]) get-tuple-element(p), index=1
  s = s32[] get-tuple-element(inner), index=0
  r = pred[3] get-tuple-element(inner), index=1
  ROOT t = ((f64[2], pred[3]), s32[], f32[2]) tuple((f64[2], pred[3]) tuple(q, r), s, a)
}
"""

WHILE_SUM = """HloModule while_sum
cond {
  state = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  state = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  acc = s32[] get-tuple-element(state), index=1
  one = s32[] constant(1)
  ROOT next = (s32[], s32[]) tuple(s32[] add(i, one), s32[] add(acc, i))
}
ENTRY main {
  start = s32[] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(start, zero)
  ROOT loop = (s32[], s32[]) while(init), condition=cond, body=body
}
"""

GPU_ONLY = """HloModule gpu_only
ENTRY main {
  p = f32[2,2] parameter(0)
  ROOT gemm = f32[2,2] custom-call(p, p), custom_call_target="__cublas$gemm"
}
"""


def _batch_norm_reference(x: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> list[np.ndarray]:
    mean = x.mean(axis=(0, 1, 2))
    var = x.var(axis=(0, 1, 2))
    return [(x - mean) / np.sqrt(var + 0.001) * scale + offset, mean, var]


def test_integer_dot_is_exact() -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(6, dtype=np.int32).reshape(3, 2) - 3
    (out,) = execute(INT_DOT, [a, b])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, a @ b)


def test_module_objects_run_like_their_text() -> None:
    a = np.ones((2, 3), np.int32)
    b = np.full((3, 2), 2, np.int32)
    np.testing.assert_array_equal(execute(parse(INT_DOT, "dot.hlo"), [a, b])[0], execute(INT_DOT, [a, b])[0])


def test_batch_norm_training_f32() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    scale = np.array([1.0, 2.0, 0.5], np.float32)
    offset = np.array([0.0, -1.0, 3.0], np.float32)
    outputs = execute(BATCH_NORM.replace("{T}", "f32"), [x, scale, offset])
    assert [o.shape for o in outputs] == [(2, 2, 2, 3), (3,), (3,)]
    for got, want in zip(outputs, _batch_norm_reference(x.astype(np.float64), scale, offset)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batch_norm_training_bf16() -> None:
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 2, 2, 3)).astype(bf16)
    scale = np.array([1.0, 2.0, 0.5], bf16)
    offset = np.array([0.0, -1.0, 3.0], bf16)
    outputs = execute(BATCH_NORM.replace("{T}", "bf16"), [x, scale, offset])
    wants = _batch_norm_reference(x.astype(np.float64), scale.astype(np.float64), offset.astype(np.float64))
    for got, want in zip(outputs, wants):
        assert got.dtype == bf16
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2)


def test_fp8_converts_round_like_ml_dtypes() -> None:
    x = np.array([0.1, 1.0, -3.3, 448, 500, 1e-3, np.nan, -0.0], np.float32)
    e4m3, e5m2, back = execute(FP8_CONVERTS, [x])
    for got in (e4m3, e5m2):
        np.testing.assert_array_equal(got.view(np.uint8), x.astype(got.dtype).view(np.uint8))
    assert e4m3.dtype == ml_dtypes.float8_e4m3fn and e5m2.dtype == ml_dtypes.float8_e5m2
    np.testing.assert_array_equal(back.view(np.uint32), e4m3.astype(np.float32).view(np.uint32))


def test_tuple_parameters_and_results_are_flattened_in_order() -> None:
    f32 = np.array([1.5, -2.0], np.float32)
    s32 = np.array(7, np.int32)
    pred = np.array([True, False, True])
    f64 = np.array([1 + 2**-40, -3.0], np.float64)  # would not survive a trip through f32
    result = run(NESTED_TUPLES, [f32, s32, pred, f64])
    assert [leaf.element_type for leaf in result.parameters] == ["f32", "s32", "pred", "f64"]
    assert [leaf.element_type for leaf in result.results] == ["f64", "pred", "s32", "f32"]
    for got, want in zip(result.outputs, [f64, pred, s32, f32]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_while_loop() -> None:
    counter, total = execute(WHILE_SUM, [np.array(0, np.int32)])
    assert (int(counter), int(total)) == (10, 45)
    counter, total = execute(WHILE_SUM, [np.array(5, np.int32)])
    assert (int(counter), int(total)) == (10, 35)


def test_token_results_come_back_as_empty_bool_arrays_like_jax() -> None:
    text = hlo("""
        HloModule t
        ENTRY main {
          p = f32[] parameter(0)
          ROOT t = (f32[], token[]) tuple(p, token[] after-all())
        }
    """)
    value, token = execute(text, [np.array(2.0, np.float32)])
    assert float(value) == 2.0 and token.shape == (0,) and token.dtype == np.bool_


def test_random_inputs_are_deterministic_and_typed() -> None:
    leaves = [
        ArrayShape(t, (64,), (False,)) for t in ("f32", "bf16", "f8e4m3fn", "f8e8m0fnu", "s4", "u8", "pred", "c64")
    ]
    first, again, other = random_inputs(leaves, 3), random_inputs(leaves, 3), random_inputs(leaves, 4)
    for leaf, a, b, c in zip(leaves, first, again, other):
        assert a.dtype == convert_exact(a, leaf, "x").dtype and a.shape == (64,)
        assert a.tobytes() == b.tobytes(), leaf
        assert a.tobytes() != c.tobytes(), leaf
    f32, bf16, fp8, e8m0, s4, u8, pred, c64 = first
    assert 0.5 < np.std(f32) < 1.5 and 0.5 < np.std(bf16.astype(np.float32)) < 1.5
    assert np.count_nonzero(fp8.astype(np.float32)) > 48 and not np.isnan(fp8.astype(np.float32)).any()
    assert not np.isnan(e8m0.astype(np.float32)).any()
    assert int(s4.astype(np.int8).min()) >= -8 and int(s4.astype(np.int8).max()) <= 7 and u8.max() <= 8
    assert pred.any() and not pred.all()
    assert np.iscomplexobj(c64) and np.abs(np.imag(c64)).max() > 0


def test_one_leaf_does_not_shift_the_others() -> None:
    """Inputs stay comparable after a pass changes one parameter's type."""
    a = random_inputs([ArrayShape("f32", (4,)), ArrayShape("s32", (4,))], 0)
    b = random_inputs([ArrayShape("bf16", (4,)), ArrayShape("s32", (4,))], 0)
    np.testing.assert_array_equal(a[1], b[1])


def test_convert_exact_accepts_exact_values_and_refuses_rounding() -> None:
    bf16_leaf = ArrayShape("bf16", (3,))
    exact = convert_exact(np.array([1.5, -0.0, np.inf], np.float32), bf16_leaf, "input 0")
    assert exact.dtype == ml_dtypes.bfloat16 and np.signbit(exact.astype(np.float32)[1])
    with pytest.raises(ExecutionError, match="1 of 3 values change"):
        convert_exact(np.array([1.5, 1 + 2**-12, 2.0], np.float32), bf16_leaf, "input 0")
    with pytest.raises(ExecutionError, match="needs shape"):
        convert_exact(np.zeros(2, np.float32), bf16_leaf, "input 0")
    raw = np.array([1.0, 2.0, 3.0], ml_dtypes.bfloat16).view("V2")  # how np.load returns bf16
    np.testing.assert_array_equal(convert_exact(raw, bf16_leaf, "input 0").astype(np.float32), [1, 2, 3])


def test_invalid_module_fails_at_parse_with_its_location() -> None:
    with pytest.raises(HloParseError) as caught:
        execute(
            hlo("""
                HloModule broken
                ENTRY main {
                  ROOT p = f32[2] parameter(0
                }
            """),
            [],
        )
    assert str(caught.value).startswith("module:4:1: expected `)`")


def test_shape_error_is_refused_before_xla_at_its_instruction() -> None:
    text = hlo("""
        HloModule bad
        ENTRY main {
          p = f32[2] parameter(0)
          ROOT a = f32[3] add(p, p)
        }
    """)
    assert "f32[3]" in canonical(text)  # XLA's parser does not check shapes; its verifier would, in MLIR's words
    with pytest.raises(HloParseError) as caught:
        execute(text, [np.zeros(2, np.float32)])
    assert (caught.value.location.line, caught.value.location.column) == (4, 3)
    assert caught.value.message.startswith("%a in %main: operand 0 (%p) is f32[2], but add takes operands")


def test_gpu_only_custom_call_is_named_before_compiling() -> None:
    with pytest.raises(
        NotCpuRunnable, match=r"module: %gemm \(custom-call\) in %main calls __cublas\$gemm, which only"
    ):
        execute(GPU_ONLY, [np.zeros((2, 2), np.float32)])


@pytest.mark.parametrize("api", ["API_VERSION_ORIGINAL", "API_VERSION_TYPED_FFI"])
def test_unknown_custom_call_fails_at_compile_naming_its_instruction(api: str) -> None:
    """XLA names only the target (untyped and typed FFI say it differently); the error names the instruction."""
    text = GPU_ONLY.replace('"__cublas$gemm"', f'"my_kernel", api_version={api}')
    with pytest.raises(XlaError) as caught:
        execute(text, [np.zeros((2, 2), np.float32)])
    assert caught.value.stage == "compile" and caught.value.instruction == "gemm"
    assert caught.value.message == (
        "%gemm calls custom-call target my_kernel, which the installed jaxlib "
        f"{'.'.join(map(str, jaxlib_version()))} does not implement on the CPU"
    )
    located = caught.value.at(text, "gemm.hlo")
    assert str(located).startswith("gemm.hlo:4:3: XLA compile failed: %gemm calls custom-call target my_kernel")


def test_wrong_inputs_are_named() -> None:
    with pytest.raises(ExecutionError, match="takes 2 inputs"):
        execute(INT_DOT, [np.zeros((2, 3), np.int32)])
    with pytest.raises(ExecutionError, match=r"input 1: 1 of 6 values change .* int64 to s32"):
        execute(INT_DOT, [np.zeros((2, 3), np.int32), np.array([[1, 2], [3, 4], [5, 2**40]])])


def test_memory_budget_is_checked_before_allocating() -> None:
    text = hlo("""
        HloModule huge
        ENTRY main {
          p = f32[100000,100000] parameter(0)
          ROOT n = f32[100000,100000] negate(p)
        }
    """)
    with pytest.raises(ExecutionError, match=r"need 74\.5 GiB, over the limit of 1 GiB"):
        execute(text)
    with pytest.raises(ExecutionError, match=r"need 74\.5 GiB, over the limit of 10 bytes"):
        execute(text, max_bytes=10)


@pytest.mark.parametrize(
    ("count", "said"),
    [
        *[(0, "0 bytes"), (1, "1 byte"), (10, "10 bytes"), (1023, "1023 bytes"), (1024, "1 KiB"), (1536, "1.5 KiB")],
        *[(5 * 2**20 + 2**19, "5.5 MiB"), (2**30, "1 GiB"), (3 * 2**40, "3 TiB"), (2**50, "1 PiB")],
    ],
)
def test_sizes_are_said_in_a_unit_that_shows_them(count: int, said: str) -> None:
    assert byte_size(count) == said


def test_dynamic_results_are_refused_not_padded_with_garbage() -> None:
    text = hlo("""
        HloModule dyn
        ENTRY main {
          p0 = f32[10,20] parameter(0)
          p1 = s32[] parameter(1)
          ROOT sds = f32[10,<=20] set-dimension-size(p0, p1), dimensions={1}
        }
    """)
    with pytest.raises(ExecutionError, match=r"output 0 is f32\[10,<=20\], a dynamic shape"):
        execute(text)


MUST_ALIAS = hlo("""
    HloModule must_alias, input_output_alias={ {}: (1, {}, must-alias) }
    ENTRY main {
      x = f32[16] parameter(0)
      out = f32[16] parameter(1)
      ROOT r = f32[16] add(x, x)
    }
    """)


@pytest.mark.parametrize("offset", [0, 4], ids=["64-byte aligned", "unaligned"])
def test_a_must_alias_parameter_runs_whatever_the_input_alignment(offset: int) -> None:
    """jaxlib 0.12 puts an aligned array on the CPU without a copy, which XLA cannot take over for a must-alias
    parameter ("must-alias at compile time but not donated at runtime"): the bridge gives XLA its own copy."""
    raw = np.zeros(16 * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    x = raw[start : start + 16 * 4].view(np.float32)
    x[:] = np.arange(16)
    (result,) = execute(MUST_ALIAS, [x, x])
    np.testing.assert_array_equal(result, 2 * np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(x, np.arange(16))  # the caller's array is not the output


def test_a_module_runs_on_inputs_already_on_the_device() -> None:
    """`on_device` copies the inputs once; each call runs and waits, again and again, unless XLA took an input."""
    plain = MUST_ALIAS.replace(", input_output_alias={ {}: (1, {}, must-alias) }", "")
    run = compile_cpu(plain).on_device([np.ones(16, np.float32), np.zeros(16, np.float32)])
    run()
    run()
    with pytest.raises(XlaError, match="takes 2 inputs, got 1"):
        compile_cpu(plain).on_device([np.ones(16, np.float32)])
    donating = compile_cpu(MUST_ALIAS).on_device([np.ones(16, np.float32), np.zeros(16, np.float32)])
    donating()
    with pytest.raises(XlaError, match="deleted or donated"):
        donating()


#: Element types that jaxlib 0.10's Python enum has no name for, or that came late to XLA, yet every jaxlib
#: from 0.10 runs: they must execute whatever the installed jaxlib's PrimitiveType lacks.
MUST_RUN = {"s2", "u2", "s4", "u4", "f4e2m1fn", "f8e3m4", "f8e4m3", "f8e8m0fnu"}


def test_every_element_type_xla_runs_executes() -> None:
    """A parameter copied to the result, for every array element type of the table: the bits come back as they
    went in, or XLA itself refuses the type (never hloopt's reading of XLA's shapes)."""
    names = [row.name for row in ROWS if row.kind not in (Kind.TOKEN, Kind.OPAQUE)]
    texts = [
        f"HloModule m\nENTRY e {{\n  p = {name}[7] parameter(0)\n  ROOT c = {name}[7] copy(p)\n}}\n" for name in names
    ]
    ran: set[str] = set()
    with IsolatedPool(1) as pool:
        for name, text in zip(names, texts):
            try:
                execution = run(text, seed=3, pool=pool)
            except XlaError as err:
                assert BY_NAME[name].numpy_name is None or err.stage in ("convert", "compile"), (name, err)
                assert "PrimitiveType." not in err.message and "not a valid PrimitiveType" not in err.message, err
                continue
            (given,), (got,) = execution.inputs, execution.outputs
            assert got.dtype == given.dtype and got.tobytes() == given.tobytes(), name
            ran.add(name)
    assert ran >= MUST_RUN
    assert {name for name in names if BY_NAME[name].numpy_name is not None} - ran <= {"f6e3m2fn", "f6e2m3fn"}
