"""A small bf16 jax MLP (no flax), run by `jax.jit` and by `hloopt.jax.jit` after the Neuron passes.

    python examples/jax_mlp.py

prints the largest difference per output: what the Neuron compiler's dtype passes
(upcast-all-to-fp32 and the others) change in what this model computes.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

import hloopt.jax


def mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return jax.nn.softmax(x @ w + b, axis=-1)


def main() -> None:
    key = jax.random.PRNGKey(0)
    sizes = [64, 128, 128, 10]
    params = []
    for i, (m, n) in enumerate(itertools.pairwise(sizes)):
        k = jax.random.fold_in(key, i)
        params.append(
            (jax.random.normal(k, (m, n), jnp.bfloat16) / jnp.sqrt(m).astype(jnp.bfloat16), jnp.zeros(n, jnp.bfloat16))
        )
    x = jax.random.normal(jax.random.fold_in(key, 99), (32, 64), jnp.bfloat16)

    expected = np.asarray(jax.jit(mlp)(params, x), np.float32)
    rewritten = np.asarray(hloopt.jax.jit(mlp, passes="all")(params, x), np.float32)
    difference = np.abs(expected - rewritten)
    print(
        f"jax.jit vs after the Neuron passes: max |diff| {difference.max():.3g}, "
        f"mean |diff| {difference.mean():.3g}, {np.count_nonzero(difference)} of {difference.size} outputs differ"
    )


if __name__ == "__main__":
    main()
