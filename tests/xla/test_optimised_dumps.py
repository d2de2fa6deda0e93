"""XLA's own optimised modules, made at test time from small jax programs, run again on the CPU after cpu-runnable.

Each program is jitted and compiled by the jax installed; its optimised module (what
``compiled.runtime_executable().hlo_modules()[0]`` prints with every constant in full) is
full of fusions, dot fusions with a backend_config the CPU emitter needs, and bitcasts. As
it is, XLA either refuses it (or crashes on it: it runs in worker processes) or runs it and
gets jax's results; after `cpu_runnable` it must run and give exactly jax's results, bit for
bit, on the same inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib._hlo as hlo
import numpy as np
import pytest

from hloopt.errors import HloError
from hloopt.passes.cpu_runnable import cpu_runnable
from hloopt.text.parser import parse
from hloopt.xla.bridge import isolated_map
from hloopt.xla.running import execute

Program = tuple[Callable[..., Any], tuple[np.ndarray, ...]]
_RNG = np.random.default_rng(13)


def _normal(*dims: int) -> np.ndarray:
    return _RNG.standard_normal(dims).astype(np.float32)


def _elementwise() -> Program:
    def f(x: Any, y: Any) -> Any:
        return jnp.where(x > y, jnp.exp(x) * jnp.sin(y), jnp.log1p(jnp.abs(y))) ** 2, (x * 3).astype(jnp.int32)

    return f, (_normal(4, 8), _normal(4, 8))


def _reductions() -> Program:
    def f(x: Any) -> Any:
        return x.sum(axis=(0, 2)), x.max(axis=1), jnp.argmax(x, axis=-1), jnp.cumsum(x, axis=1), jnp.var(x, axis=0)

    return f, (_normal(3, 4, 5),)


def _mlp() -> Program:
    def f(x: Any, w1: Any, w2: Any) -> Any:
        return jax.nn.gelu(x @ w1) @ w2

    return f, (_normal(4, 32), _normal(32, 64), _normal(64, 8))


def _conv_step() -> Program:
    def loss(w: Any, x: Any) -> Any:
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        y = jax.lax.reduce_window(jax.nn.relu(y), -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return jnp.mean(y**2)

    def f(x: Any, w: Any) -> Any:
        value, grad = jax.value_and_grad(loss)(w, x)
        return value, w - 0.1 * grad

    return f, (_normal(2, 3, 8, 8), _normal(4, 3, 3, 3))


def _transposes() -> Program:
    def f(x: Any) -> Any:
        return jnp.transpose(x, (2, 0, 1, 3)).reshape(4, -1) @ jnp.ones((30, 3)), jnp.swapaxes(x, 1, 3).reshape(2, -1)

    return f, (_normal(2, 3, 4, 5),)


def _attention() -> Program:
    def f(q: Any, k: Any, v: Any) -> Any:
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v)

    return f, (_normal(2, 8, 4, 16), _normal(2, 8, 4, 16), _normal(2, 8, 4, 16))


def _scan() -> Program:
    def f(xs: Any, w: Any) -> Any:
        return jax.lax.scan(lambda c, x: (jnp.tanh(c @ w + x), c.sum()), jnp.zeros(xs.shape[1:]), xs)

    return f, (_normal(5, 3, 4), _normal(4, 4))


def _while() -> Program:
    def f(x: Any) -> Any:
        return jax.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 0.9 + jnp.roll(c[1], 1)), (0, x))[1]

    return f, (_normal(7),)


def _gather_scatter() -> Program:
    def f(x: Any, index: Any, update: Any) -> Any:
        return x.at[index].add(update), x[index[::-1]], jnp.take_along_axis(x, jnp.argsort(x, 0), 0)

    return f, (_normal(10, 4), np.array([1, 3, 3, 7], np.int32), _normal(4, 4))


def _int8_matmul() -> Program:
    def f(a: Any, b: Any, scale: Any) -> Any:
        return (jnp.dot(a, b, preferred_element_type=jnp.int32).astype(jnp.float32) * scale).T

    a = _RNG.integers(-100, 100, (8, 16)).astype(np.int8)
    return f, (a, _RNG.integers(-100, 100, (16, 4)).astype(np.int8), np.array(0.01, np.float32))


def _sort() -> Program:
    def f(x: Any) -> Any:
        return jnp.sort(x, axis=0), jnp.argsort(x, axis=-1), jax.lax.top_k(x, 3)

    return f, (_normal(6, 5),)


def _bf16_matmul() -> Program:
    def f(x: Any, w: Any) -> Any:
        return (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16).T).astype(jnp.float32).T

    return f, (_normal(8, 16), _normal(4, 16))


def _slices_and_fft() -> Program:
    def f(x: Any, i: Any) -> Any:
        y = jax.lax.dynamic_slice(x, (i, 0), (3, 4))
        return jax.lax.dynamic_update_slice(x, y * 2, (i + 1, 0)), jnp.fft.rfft(x, axis=0).real

    return f, (_normal(8, 4), np.array(2, np.int32))


def _layer_norm() -> Program:
    def f(x: Any, gain: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * gain

    return f, (_normal(6, 32), _normal(32))


PROGRAMS: dict[str, Callable[[], Program]] = {
    "elementwise": _elementwise,
    "reductions": _reductions,
    "mlp": _mlp,
    "conv_step": _conv_step,
    "transposes": _transposes,
    "attention": _attention,
    "scan": _scan,
    "while": _while,
    "gather_scatter": _gather_scatter,
    "int8_matmul": _int8_matmul,
    "sort": _sort,
    "bf16_matmul": _bf16_matmul,
    "slices_and_fft": _slices_and_fft,
    "layer_norm": _layer_norm,
}


def optimised_text(compiled: Any) -> str:
    """The optimised module with every constant in full (``compiled.as_text()`` elides the large ones)."""
    options = hlo.HloPrintOptions()
    options.print_large_constants = True
    return compiled.runtime_executable().hlo_modules()[0].to_string(options)


def _same(outputs: object, expected: list[np.ndarray]) -> bool:
    if not isinstance(outputs, list) or len(outputs) != len(expected):
        return False
    return all(
        got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
        for got, want in zip(outputs, expected)
    )


@pytest.mark.slow
def test_optimised_modules_run_on_the_cpu_and_give_jax_s_results() -> None:
    cases: list[tuple[str, str, str, list[np.ndarray], list[np.ndarray]]] = []
    for name, make in PROGRAMS.items():
        function, args = make()
        text = optimised_text(jax.jit(function).lower(*args).compile())
        module, warnings = cpu_runnable(parse(text, name))
        assert warnings == (), warnings
        runnable = module.to_text()
        expected = [np.asarray(leaf) for leaf in jax.tree.leaves(jax.jit(function)(*args))]
        cases.append((name, text, runnable, list(args), expected))
    assert sum("fusion(" in text for _, text, _, _, _ in cases) >= len(cases) // 2
    runs = [(text, inputs) for _, original, runnable, inputs, _ in cases for text in (original, runnable)]
    results = isolated_map(execute, runs, timeout=120)
    summary, wrong = [], []
    for index, (name, _, _, _, expected) in enumerate(cases):
        before, after = results[2 * index], results[2 * index + 1]
        summary.append(f"{name}: {type(before).__name__ if isinstance(before, HloError) else 'ran'}")
        if not (isinstance(before, HloError) or _same(before, expected)):
            wrong.append(f"{name}: XLA ran the optimised module as it is and got other results than jax")
        if not _same(after, expected):
            wrong.append(f"{name}: after cpu-runnable: {after if isinstance(after, HloError) else 'other results'}")
    print("\nas XLA optimised them: " + ", ".join(summary))
    assert not wrong, "\n".join(wrong)


def test_a_module_printed_without_its_large_constants_is_run_with_a_warning_that_names_them() -> None:
    table = _normal(64)

    def f(x: Any) -> Any:
        return x * jnp.asarray(table) + 1

    compiled = jax.jit(f).lower(_normal(64)).compile()
    short = compiled.as_text()
    assert short is not None
    elided, warnings = cpu_runnable(parse(short, "as_text"))
    (warning,) = warnings
    assert re.match(r"%\S+ \(constant\) in %\S+ was printed without its value", warning), warning
    runnable, warnings = cpu_runnable(parse(optimised_text(compiled), "in full"))
    assert warnings == ()
    x = _normal(64)
    made_up, outputs = isolated_map(execute, [(elided.to_text(), [x]), (runnable.to_text(), [x])])
    expected = [np.asarray(jax.jit(f)(x))]
    assert _same(outputs, expected) and not _same(made_up, expected)
