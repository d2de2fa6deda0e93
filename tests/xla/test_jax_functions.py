"""`hloopt.jax`: jax functions as modules, and run after the passes like `jax.jit`.

Each model runs through `jax.jit` and through `hloopt.jax.jit(fn, passes="all")`; the two agree
within what the passes may move: upcast-all computes bf16 work in f32 (so the results differ by
the bf16 roundings it saves), and the int8 matmul goes through f32 exactly.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hloopt.jax as hj
from hloopt.errors import HloError
from hloopt.ir.shape import leaf_shapes

KEY = jax.random.PRNGKey(0)


def _normal(shape: tuple[int, ...], dtype: Any = jnp.bfloat16, seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.fold_in(KEY, seed), shape, jnp.float32).astype(dtype)


def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))
    mask = jnp.tril(jnp.ones(scores.shape[-2:], bool))
    scores = jnp.where(mask, scores, jnp.asarray(-1e4, scores.dtype))
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def conv_step(params: dict[str, jax.Array], images: jax.Array, labels: jax.Array) -> tuple[jax.Array, Any]:
    def loss(p: dict[str, jax.Array]) -> jax.Array:
        x = jax.lax.conv_general_dilated(images, p["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x).mean(axis=(1, 2)) @ p["d"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x.astype(jnp.float32)) * labels, axis=-1))

    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g.astype(p.dtype), params, grads)


def cumulative(xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    def step(carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        carry = jnp.tanh(carry * 0.5 + x)
        return carry, carry * 2

    return jax.lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def int8_matmul(x: jax.Array, w: jax.Array, scale: jax.Array) -> jax.Array:
    acc = jax.lax.dot(x, w, preferred_element_type=jnp.int32)
    return acc.astype(jnp.float32) * scale


CASES: dict[str, tuple[Any, tuple[Any, ...], float]] = {
    "attention": (attention, tuple(_normal((1, 2, 8, 16), seed=s) for s in range(3)), 2**-6),
    "conv net step": (
        conv_step,
        (
            {"w": _normal((3, 3, 3, 8), seed=1) * 0.3, "d": _normal((8, 4), seed=2)},
            _normal((2, 8, 8, 3), seed=3),
            jax.nn.one_hot(jnp.array([1, 3]), 4),
        ),
        2**-5,
    ),
    "scan": (cumulative, (_normal((6, 4), seed=4),), 2**-6),
    "int8 matmul": (
        int8_matmul,
        (
            jax.random.randint(KEY, (4, 32), -128, 128, jnp.int8),
            jax.random.randint(jax.random.fold_in(KEY, 9), (32, 8), -128, 128, jnp.int8),
            jnp.float32(0.01),
        ),
        0.0,
    ),
}


def _leaves(tree: Any) -> list[np.ndarray]:
    return [np.asarray(leaf, np.float64) for leaf in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("name", list(CASES))
def test_jit_after_the_passes_agrees_with_jax_jit(name: str) -> None:
    fn, args, tolerance = CASES[name]
    expected = jax.jit(fn)(*args)
    got = hj.jit(fn, passes="all")(*args)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for want, have, raw in zip(_leaves(expected), _leaves(got), jax.tree_util.tree_leaves(got)):
        assert isinstance(raw, jax.Array)
        scale = max(float(np.max(np.abs(want))), 1.0)
        assert np.max(np.abs(want - have)) <= tolerance * scale, name


def test_the_passes_are_what_runs() -> None:
    fn, args, _ = CASES["attention"]
    before = hj.module(fn, *args)
    after = hj.jit(fn, passes="all").module(*args)
    types = {
        leaf.element_type
        for c in after.computations
        for i in c.instructions
        if i.shape
        for leaf in leaf_shapes(i.shape)
    }
    assert "bf16" in before.to_text() and "bf16" not in types


def test_one_compile_per_signature() -> None:
    jitted = hj.jit(lambda x: x * 2, passes="all")
    jitted(jnp.ones(3, jnp.bfloat16))
    jitted(jnp.ones(3, jnp.bfloat16) * 5)
    jitted(jnp.ones(4, jnp.bfloat16))
    assert len(jitted._compiled) == 2


def test_optimised_module_has_fusions() -> None:
    fn, args, _ = CASES["attention"]
    optimised = hj.module(fn, *args, optimised=True)
    assert any(i.opcode == "fusion" for i in optimised.entry.instructions)
    assert "{...}" not in optimised.to_text()


def test_unknown_numerics_is_an_error() -> None:
    with pytest.raises(HloError, match="numerics must be"):
        hj.jit(lambda x: x, numerics="tpu")  # type: ignore[arg-type]
