"""Before/after execution through XLA on CPU: each pass keeps the numbers it promises."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xla_helper
from hlo_text import hlo
from pass_testing import Case, golden_inputs, passes_text, run_passes

from hloopt.ir.literal import numpy_dtype
from hloopt.ir.shape import ArrayShape
from hloopt.text.parser import parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _example(name: str) -> Case:
    path = EXAMPLES / name
    return Case(path, path.stem, path.read_text())


def _id(case: Case) -> str:
    return f"{case.path.stem}: {case.rule[:50]}"


def _inputs(text: str, seed: int, int_range: tuple[int, int] | None = None) -> list[np.ndarray]:
    """Random arguments for the entry parameters (small ints so integer dots stay in range)."""
    rng = np.random.default_rng(seed)
    module = parse(text, "inputs")
    args = []
    for param in module.entry.parameters():
        shape = param.shape
        assert isinstance(shape, ArrayShape)
        dtype = numpy_dtype(shape.element_type)
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            lo, hi = int_range or (info.min, info.max)
            args.append(rng.integers(max(lo, info.min), min(hi, info.max) + 1, shape.dims).astype(dtype))
        else:
            args.append(rng.uniform(-2, 2, shape.dims).astype(np.float32).astype(dtype))
    return args


def _run(text: str, passes: str, numerics: str = "xla") -> str:
    return passes_text(text, passes, numerics)


def _flatten(results: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(r) for r in results]


def _matching_inputs(text_after: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """The same values in the parameter types of the rewritten module."""
    module = parse(text_after, "after")
    shapes = [p.shape for p in module.entry.parameters()]
    assert all(isinstance(s, ArrayShape) for s in shapes), "the differential modules take array parameters"
    return [a.astype(numpy_dtype(s.element_type)) for a, s in zip(args, shapes) if isinstance(s, ArrayShape)]


#: Cases the CPU cannot run (the golden tests check them with XLA's parser and converter), by a piece of their text.
NOT_RUNNABLE = {
    "my_kernel": "a custom-call target the CPU does not have",
    'custom_call_target="Pin"': "a custom-call target the CPU does not have (a b(…) buffer's)",
    "kind=kOutput": "a hand-written dot fusion the CPU backend does not compile",
    "f6e2m3fn": "the CPU has no F6 types",
    "-start(": "the CPU compiler rejects these async-wrapped ops, the input as much as the output",
    "bitcast_punning": "the CPU compiler rejects type-punning bitcasts before layout assignment",
    "b_bn = (bf16[4,2]{1,0}, bf16[2]{0}, bf16[2]{0}) batch-norm-training(b_x, b_scale": "mixed-type batch norm",
}


def _executable(case: Case) -> bool:
    return not any(piece in case.text for piece in NOT_RUNNABLE)


def _changing(cases: list[Case], passes: str) -> list[Case]:
    """The runnable cases `passes` rewrites (the golden files also hold cases a pass leaves alone)."""
    return [case for case in cases if _executable(case) and run_passes(parse(case.text, "t"), passes).changed]


INT_CASES = _changing(
    [_example("int8_matmul.hlo"), *golden_inputs("neuron-int-matmul-downcast")], "neuron-int-matmul-downcast"
)


@pytest.mark.parametrize("case", INT_CASES, ids=_id)
def test_integer_dots_exact_in_range(case: Case) -> None:
    text = case.text
    after = _run(text, "neuron-int-matmul-downcast")
    assert after != text
    for seed in range(3):
        args = _inputs(text, seed, int_range=(-100, 100))
        before = xla_helper.execute(text, args)
        got = xla_helper.execute(after, args)
        for b, g in zip(before, got):
            assert b.dtype == g.dtype
            np.testing.assert_array_equal(np.asarray(b, np.float64), np.asarray(g, np.float64))


def test_int_dot_big_k_warns() -> None:
    text = hlo("""
        HloModule big_k

        ENTRY main {
          a = s8[2,1025]{1,0} parameter(0)
          b = s8[1025,2]{1,0} parameter(1)
          ROOT d = s32[2,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        }
    """)
    module = parse(text, "t")
    report = run_passes(module, "neuron-int-matmul-downcast")
    (warning,) = report.passes[0].warnings
    assert "%d" in warning and "K=1025" in warning
    # And the warning is real: these values lose the low bit in F32.
    a = np.full((2, 1025), -128, np.int8)
    a[:, -1] = 1
    b = a.T.copy()
    exact = a.astype(np.int64) @ b.astype(np.int64)
    (got,) = xla_helper.execute(module.to_text(), [a, b])
    assert (got != exact).any()


def test_int_dot_result_overflow_warns_and_differs() -> None:
    """The class the warning names: an s8 result wraps in the original, saturates on the F32 route."""
    text = hlo("""
        HloModule small_result

        ENTRY main {
          a = s8[1,3]{1,0} parameter(0)
          b = s8[3,1]{1,0} parameter(1)
          ROOT d = s8[1,1]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        }
    """)
    module = parse(text, "t")
    report = run_passes(module, "neuron-int-matmul-downcast")
    (warning,) = report.passes[0].warnings
    assert "%d" in warning and "49152" in warning and "s8 cannot hold" in warning  # 3·128·128
    a = np.array([[10, 10, 10]], np.int8)
    b = np.array([[10], [10], [0]], np.int8)
    (before,) = xla_helper.execute(text, [a, b])
    (after,) = xla_helper.execute(module.to_text(), [a, b])
    assert int(before[0, 0]) == 200 - 256 and int(after[0, 0]) == 127


BN_CASES = _changing(
    [_example("bf16_conv_batchnorm_train.hlo"), *golden_inputs("batchnorm-training-upcast")],
    "batchnorm-training-upcast",
)


@pytest.mark.parametrize("case", BN_CASES, ids=_id)
def test_batchnorm_within_bf16_tolerance(case: Case) -> None:
    text = case.text
    after = _run(text, "batchnorm-training-upcast")
    args = _inputs(text, 0)
    for b, g in zip(_leaves(xla_helper.execute(text, args)), _leaves(xla_helper.execute(after, args))):
        assert b.dtype == g.dtype  # the external signature is unchanged
        b64, g64 = np.asarray(b, np.float64), np.asarray(g, np.float64)
        # bf16 has 8 significant bits: a few ulps of the largest value (F32 statistics are better, not equal).
        np.testing.assert_allclose(g64, b64, rtol=2**-5, atol=2**-5 * max(1.0, np.abs(b64).max()))


def _leaves(results: list[np.ndarray]) -> list[np.ndarray]:
    return list(results)


UPCAST_CASES = [
    _example("fp8_bf16_mlp.hlo"),
    _example("bf16_conv_batchnorm_train.hlo"),
    *(case for case in golden_inputs("upcast-all-to-fp32") if "while" in case.text or "F64" in case.rule),
]


@pytest.mark.parametrize("case", UPCAST_CASES, ids=_id)
def test_upcast_all_within_input_precision(case: Case) -> None:
    text = case.text
    after = _run(text, "upcast-all-to-fp32")
    args = _inputs(text, 1)
    before = xla_helper.execute(text, args)
    got = xla_helper.execute(after, _matching_inputs(after, args))
    for b, g in zip(before, got):
        b64, g64 = np.asarray(b, np.float64), np.asarray(g, np.float64)
        # F64 values beyond F32's range become ±inf: that is the pass's meaning, not an error.
        beyond = np.abs(b64) > np.finfo(np.float32).max
        assert (np.isinf(g64[beyond]) & (np.sign(g64[beyond]) == np.sign(b64[beyond]))).all()
        b64, g64 = b64[~beyond], g64[~beyond]
        # The narrowest float in these modules is bf16 (8 bits): results agree to bf16 precision.
        scale = max(1.0, float(np.nanmax(np.abs(b64))) if b64.size else 1.0)
        np.testing.assert_allclose(g64, b64, rtol=2**-4, atol=2**-6 * scale)


FOLD_CASES = [
    case
    for case in [*golden_inputs(), *(_example(p.name) for p in sorted(EXAMPLES.glob("*.hlo")))]
    if _executable(case)
]


@pytest.mark.parametrize("case", FOLD_CASES, ids=_id)
def test_folded_bit_identical_under_xla(case: Case) -> None:
    """all passes, then folding: bit-identical to the same passes without folding."""
    text = case.text
    passes = "all" if case.path.parent.name == "examples" else case.passes
    unfolded = _run(text, passes) if passes != "fold-constant-converts" else text
    folded = (
        _run(text, passes + ",fold-constant-converts") if passes != "fold-constant-converts" else _run(text, passes)
    )
    args = _matching_inputs(unfolded, _inputs(text, 2, int_range=(-50, 50)))
    for u, f in zip(xla_helper.execute_runnable(unfolded, args), xla_helper.execute_runnable(folded, args)):
        assert u.dtype == f.dtype
        assert np.asarray(u).tobytes() == np.asarray(f).tobytes()


def test_neuron_numerics_differ_only_where_device_does() -> None:
    """--numerics neuron folds with the device's rules (f32→fp8 saturates there, XLA gives NaN)."""
    (text,) = [case.text for case in golden_inputs("fold-constant-converts") if "folds all the way" in case.rule]
    assert "constant({0.102, nan, nan})" in _run(text, "fold-constant-converts", "xla")
    assert "constant({0.102, 448, 448})" in _run(text, "fold-constant-converts", "neuron")
