"""`hloopt.jax.jit(fn, neuron_cc_flags=...)`, and ``hloopt dtypes`` on jax programs nobody here wrote the HLO of."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import hloopt.jax as hj
from hloopt.driver.dtypes import MATRIX, auto_cast_decisions, dtype_table
from hloopt.errors import HloError
from hloopt.passes.neuron_cc_flags import parse_neuron_cc_flags
from hloopt.text.parser import parse

RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 64)).astype(np.float32)
W = RNG.standard_normal((64, 16)).astype(np.float32)


def matmul(x: Any, w: Any) -> Any:
    return x @ w


def model(x: np.ndarray, w: np.ndarray, dtype: Any) -> np.ndarray:
    """Operands rounded to `dtype` (nearest even, as the device's cast), summed in f64, rounded once to f32."""
    wide = [a.astype(dtype).astype(np.float64) for a in (x, w)]
    return (wide[0] @ wide[1]).astype(np.float32)


@pytest.mark.parametrize(("cast_type", "dtype"), [("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)])
def test_jit_auto_casts_the_matmul_as_the_device(cast_type: str, dtype: Any) -> None:
    flags = f"--auto-cast matmult --auto-cast-type {cast_type}"
    got = np.asarray(hj.jit(matmul, passes=None, neuron_cc_flags=flags)(X, W))
    expected = model(X, W, dtype)
    bound = 64 * np.finfo(np.float32).eps * (np.abs(X).astype(np.float64) @ np.abs(W))  # f32 summation order
    assert np.all(np.abs(got.astype(np.float64) - expected) <= bound)
    assert not np.array_equal(got, np.asarray(jax.jit(matmul)(X, W)))  # the operands did move


def test_the_release_alone_and_the_flags_over_it() -> None:
    exact = np.asarray(jax.jit(matmul)(X, W))
    assert np.array_equal(np.asarray(hj.jit(matmul, neuron_compiler="2.27")(X, W)), exact)  # 2.27: no auto-cast
    old = np.asarray(hj.jit(matmul, neuron_compiler="2.26")(X, W))
    assert not np.array_equal(old, exact)
    assert np.array_equal(
        np.asarray(hj.jit(matmul, neuron_compiler="2.26", neuron_cc_flags="--auto-cast none")(X, W)), exact
    )


def test_env_is_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast=matmult")
    exact = np.asarray(jax.jit(matmul)(X, W))
    assert np.array_equal(np.asarray(hj.jit(matmul)(X, W)), exact)  # not read unasked
    assert not np.array_equal(np.asarray(hj.jit(matmul, neuron_cc_flags="env")(X, W)), exact)


def test_unmodelled_flags_warn_once_and_bad_values_raise() -> None:
    with pytest.warns(UserWarning, match="not modelled, ignored: -O2, --target"):
        hj.jit(matmul, neuron_cc_flags="-O2 --target trn1 -O2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hj.jit(matmul, neuron_cc_flags="--auto-cast none")
    with pytest.raises(HloError, match="--auto-cast must be one of none, matmult, all, not 'fast'"):
        hj.jit(matmul, neuron_cc_flags="--auto-cast=fast")


# -- jax programs: every dot and convolution in the dtype table ------------------------------------


def attention(q: Any, k: Any, v: Any) -> Any:
    with jax.named_scope("attention"):
        scores = jax.nn.softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=-1)
        return scores @ v


def conv_step(params: Any, x: Any) -> Any:
    def loss(p: Any) -> Any:
        with jax.named_scope("conv"):
            y = jax.lax.conv_general_dilated(x, p, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        with jax.named_scope("head"):
            return jnp.mean(jax.nn.relu(y) ** 2)

    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, jax.grad(loss)(params))


def mlp(x: Any, w1: Any, w2: Any) -> Any:
    with jax.named_scope("layer_0"):
        h = jax.nn.gelu(x @ w1)
    with jax.named_scope("layer_1"):
        return h @ w2


def scan(xs: Any, w: Any) -> Any:
    def body(carry: Any, x: Any) -> Any:
        carry = jnp.tanh(carry @ w + x)
        return carry, carry.sum()

    return jax.lax.scan(body, jnp.zeros(xs.shape[1:]), xs)


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "attention": (attention, (np.ones((4, 8), np.float32),) * 3),
    "conv_step": (conv_step, (np.ones((3, 3, 2, 4), np.float32), np.ones((1, 6, 6, 2), np.float32))),
    "mlp": (mlp, (np.ones((4, 8), np.float32), np.ones((8, 16), np.float32), np.ones((16, 2), np.float32))),
    "scan": (scan, (np.ones((5, 4), np.float32), np.ones((4, 4), np.float32))),
}


@pytest.fixture(scope="module")
def lowered() -> dict[str, str]:
    """Each program's module as `hloopt.jax.module` gives it: with its op_name metadata."""
    return {name: hj.module(fn, *args).to_text() for name, (fn, args) in PROGRAMS.items()}


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("mode", ["none", "matmult", "all"])
def test_every_dot_and_convolution_of_a_jax_program_is_listed(lowered: dict[str, str], name: str, mode: str) -> None:
    pipeline = parse_neuron_cc_flags(f"--auto-cast {mode}").with_passes("all")
    table = dtype_table(parse(lowered[name], name), pipeline, name, plan=auto_cast_decisions)
    listed, total = table.coverage
    assert listed == total > 0
    scopes = [scope for scope, _ in table.scopes]
    assert any(scope.startswith(f"jit({name})") for scope in scopes), scopes
    for _, rows in table.scopes:
        for row in rows:
            if row.kind in MATRIX and mode != "none" and row.before == "f32,f32 -> f32":
                assert row.after == "bf16,bf16 -> f32" and row.auto_cast is not None, row
            if row.kind in MATRIX and mode == "none":
                assert row.after == row.before and row.skipped == "not-covered", row
