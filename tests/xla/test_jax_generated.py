"""Modules nobody here wrote: jax programs lowered and compiled by jax itself, round-tripped through hloopt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from hloopt.xla.roundtrip import check_many


def _mlp_step() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def loss(params: Any, x: Any) -> Any:
        for w, b in params:
            x = jax.nn.relu(x @ w + b)
        return jnp.mean(x**2)

    def step(params: Any, x: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(params, x)
        return value, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    params = [(jnp.ones((8, 8), jnp.bfloat16), jnp.zeros((8,), jnp.bfloat16)) for _ in range(3)]
    return step, (params, jnp.ones((4, 8), jnp.bfloat16))


def _conv_batchnorm() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def net(x: Any, k: Any) -> Any:
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        mean = y.mean(axis=(0, 1, 2))
        var = y.var(axis=(0, 1, 2))
        return (y - mean) / jnp.sqrt(var + 1e-5)

    return net, (jnp.ones((2, 8, 8, 3), jnp.float16), jnp.ones((3, 3, 3, 4), jnp.float16))


def _control_flow() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def program(x: Any, n: Any) -> Any:
        x = jax.lax.fori_loop(0, n, lambda i, v: v * 1.5 + i, x)
        x = jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)
        carry, ys = jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, x)
        return carry, jax.lax.top_k(ys, 3), jnp.sort(x), jnp.argmax(x)

    return program, (jnp.arange(8, dtype=jnp.float32), 5)


def _mixed_types() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def program(a: Any, b: Any, key: Any) -> Any:
        i8 = jnp.dot(a, b, preferred_element_type=jnp.int32)
        f8 = a.astype(jnp.float8_e4m3fn).astype(jnp.float32) * jax.random.normal(key, a.shape)
        c = jnp.fft.fft(f8[0])
        return i8, f8.astype(jnp.bfloat16), c, jnp.cumsum(i8, axis=1), jax.nn.softmax(f8, axis=-1)

    return program, (jnp.ones((4, 4), jnp.int8), jnp.ones((4, 4), jnp.int8), jax.random.key(0))


PROGRAMS = {
    "mlp_step_bf16": _mlp_step,
    "conv_batchnorm_f16": _conv_batchnorm,
    "control_flow": _control_flow,
    "mixed_types": _mixed_types,
}


def _texts() -> list[tuple[str, str]]:
    items = []
    for name, make in PROGRAMS.items():
        function, args = make()
        lowered = jax.jit(function).lower(*args)
        items.append((lowered.as_text(dialect="hlo"), f"{name}.lowered"))
        items.append((lowered.compile().as_text(), f"{name}.compiled"))
    return items


@pytest.fixture(scope="module")
def jax_modules() -> list[tuple[str, str]]:
    return _texts()


def test_jax_generated_modules_round_trip(jax_modules: list[tuple[str, str]]) -> None:
    compiled = [text for text, name in jax_modules if name.endswith("compiled")]
    assert any("fusion(" in t and "backend_config=" in t and "metadata=" in t for t in compiled)
    assert any("StackFrames" in t or "stack_frame_id" in t for t, _ in jax_modules)
    results = check_many(jax_modules)
    failures = [r for r in results if not r.ok]
    assert not failures, "\n".join(
        f"{r.name}: {r.hloopt_error or r.xla_input_error or r.xla_output_error or r.first_difference}" for r in failures
    )
