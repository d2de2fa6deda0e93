"""`hloopt.jax.jit` as a drop-in for `jax.jit`, checked against jax.jit itself.

With no passes the rewritten module is jax's own, so every result must be bit-identical to
`jax.jit(f)`'s, with the same dtype, weak type and tree. The argument kinds are those jax's own jit
tests use (`tests/api_test.py`: Python scalars, NumPy scalars and arrays of every dtype, jax Arrays,
static and keyword arguments, pytrees, many arguments, bad inputs). Under grad, vmap and an outer
jit the numbers must still be the rewritten modules': equal bit for bit to hloopt.jax.jit of the
transformed function.
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import sampled

import hloopt.jax as hj
from hloopt.errors import HloError


def _bits(leaf: Any) -> np.ndarray:
    """A leaf's value as comparable bits: key data for a typed key."""
    if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(leaf))
    return np.ascontiguousarray(leaf).reshape(-1).view(np.uint8)


def assert_same(got: Any, want: Any) -> None:
    """The same tree, and per leaf a jax Array of the same aval (dtype, shape, weak type) and bits."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for have, expected in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert isinstance(have, jax.Array)
        assert jax.typeof(have) == jax.typeof(expected), (jax.typeof(have), jax.typeof(expected))
        np.testing.assert_array_equal(_bits(have), _bits(expected))


def both(fn: Callable[..., Any], *args: Any, passes: str | None = None, **kwargs: Any) -> None:
    """`fn` through hloopt.jax.jit (no passes) and jax.jit give the same results."""
    assert_same(hj.jit(fn, passes=passes)(*args, **kwargs), jax.jit(fn)(*args, **kwargs))


# --- argument kinds --------------------------------------------------------------------------------

NUMPY_TYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    ml_dtypes.bfloat16,
]
PYTHON_SCALARS = [True, False, 0, 7, -(2**31), 2**31 - 1, 0.1, -2.5, float("inf"), float("nan"), 1 + 2j, 1e300]
#: Functions that keep, promote (weak against strong) and reduce their argument.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "identity": lambda x: x,
    "times two": lambda x: x * 2,
    "plus a Python float": lambda x: x + 1.5,
    "sum and pair": lambda x: (jnp.sum(x), {"same": x, "none": None}),
}


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # jax.jit warns so for 1e300
@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("value", PYTHON_SCALARS, ids=repr)
def test_python_scalars(function: str, value: Any) -> None:
    both(FUNCTIONS[function], value)


@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("kind", ["numpy scalar", "0-d array", "array", "jax array", "weak jax array"])
@pytest.mark.parametrize("dtype", sampled(NUMPY_TYPES, 2), ids=lambda t: np.dtype(t).name)  # all in CI
def test_numpy_and_jax_arrays(function: str, kind: str, dtype: Any) -> None:
    """Every dtype in every container: float64/int64/uint64/complex128 become 32-bit as in jax.jit."""
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.array([0, 1, -1, 3.75, 2**40, -(2**40), np.inf, np.nan]).astype(dtype)
    argument: Any = {
        "numpy scalar": values[3],
        "0-d array": np.asarray(values[3]),
        "array": values.reshape(2, 4),
        "jax array": jnp.asarray(values),
        "weak jax array": jax.jit(lambda s: jnp.broadcast_to(s, (3,)))(1.0 if np.dtype(dtype).kind in "fc" else 2),
    }[kind]
    both(FUNCTIONS[function], argument)


def test_x64_mode_keeps_64_bit_types() -> None:
    with jax.enable_x64(True):
        for value in (1.5, np.arange(3.0), np.int64(2**40), 2**40, 1j):
            both(lambda x: x * 3, value)


@pytest.mark.parametrize(
    "argument",
    ["foo", jnp.int32, np.ma.array([1, 2, 3], mask=[True, False, True]), 2**40],
    ids=["string", "dtype object", "masked array", "int too large"],
)
def test_bad_inputs_get_jax_jit_error(argument: Any) -> None:
    """The same exception, word for word, as jax.jit raises for the same function."""
    fn: Callable[[Any], Any] = lambda x: x  # noqa: E731
    with pytest.raises(Exception) as want:
        jax.jit(fn)(argument)
    with pytest.raises(want.type) as got:
        hj.jit(fn, passes=None)(argument)
    assert str(got.value) == str(want.value)


def test_not_callable() -> None:
    with pytest.raises(TypeError, match="Expected a callable value"):
        hj.jit(3)  # type: ignore[arg-type]


# --- pytrees, keywords, static arguments ---------------------------------------------------------------


class Point(NamedTuple):
    x: Any
    y: Any


def test_pytrees_in_and_out() -> None:
    def fn(tree: dict[str, Any], pair: tuple[Any, ...], point: Point, nothing: None) -> Any:
        assert nothing is None
        return {"sum": tree["a"] + pair[0], "point": Point(point.y, point.x), "none": None, "list": [pair[1], 2.0]}

    both(fn, {"a": np.ones(3), "b": None}, (1.0, np.arange(2)), Point(jnp.zeros(2), 3), None)


def test_many_arguments() -> None:
    both(sum, list(range(500)))


def test_keyword_arguments_recompile_once() -> None:
    """jax.jit's test_jit_kwargs: the same call by keyword is a new signature, then a cache hit."""
    traces: list[None] = []

    def fn(x: Any, y: Any, z: Any) -> Any:
        traces.append(None)
        return 100 * x + 10 * y + z.astype(y.dtype)

    jitted = hj.jit(fn, passes=None)
    one, two, three = (np.asarray(n, np.int32) for n in (1, 2, 3))
    assert jitted(one, two, three) == 123 and len(traces) == 1
    assert jitted(one, two, three) == 123 and len(traces) == 1
    assert jitted(one, two, z=three) == 123 and len(traces) == 2
    assert jitted(one, two, z=three) == 123 and len(traces) == 2
    assert_same(jitted(one, y=two, z=np.zeros(3)), jax.jit(fn)(one, y=two, z=np.zeros(3)))


@pytest.mark.parametrize("kind", ["python", "numpy"])
def test_static_arguments_cache_as_jax_jit(kind: str) -> None:
    """jax.jit's test_jit_static_args: one trace per static value, none for new dynamic values."""
    one, two, three = (1, 2, 3) if kind == "python" else (np.asarray(n, np.int32) for n in (1, 2, 3))
    traces: list[None] = []

    def fn(x: Any, y: Any, z: Any, flag: bool = False, flag2: bool = False) -> Any:
        assert flag
        traces.append(None)
        return 100 * x + 10 * y + z

    f1 = hj.jit(fn, passes=None, static_argnums=(3, 4))
    assert f1(one, two, three, True, False) == 123 and len(traces) == 1
    assert f1(one, two, three, True, False) == 123 and len(traces) == 1
    assert f1(two, one, three, True, False) == 213 and len(traces) == 1
    assert f1(two, one, three, True, True) == 213 and len(traces) == 2
    traces.clear()
    f2 = hj.jit(fn, passes=None, static_argnums=(0, 2, 3, 4))
    assert f2(1, 2, 3, True, False) == 123 and len(traces) == 1
    assert f2(1, 3, 3, True, False) == 133 and len(traces) == 1
    assert f2(2, 2, 3, True, False) == 223 and len(traces) == 2


def test_static_arguments_by_name_position_and_negative_index() -> None:
    def power(x: Any, n: int) -> Any:
        return x**n

    for jitted in (
        hj.jit(power, passes=None, static_argnums=1),
        hj.jit(power, passes=None, static_argnums=-1),
        hj.jit(power, passes=None, static_argnames="n"),
    ):
        assert_same(jitted(2.0, 3), jax.jit(power, static_argnums=1)(2.0, 3))
    # A position implies its name and back, as in jax.jit.
    assert_same(hj.jit(power, passes=None, static_argnums=1)(2.0, n=3), jax.jit(power, static_argnums=1)(2.0, n=3))
    assert_same(hj.jit(power, passes=None, static_argnames="n")(2.0, 3), jax.jit(power, static_argnames="n")(2.0, 3))
    assert_same(
        hj.jit(power, passes=None, static_argnames="n")(2.0, n=3), jax.jit(power, static_argnames="n")(2.0, n=3)
    )


def test_unhashable_static_argument_is_refused_as_jax_does() -> None:
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        hj.jit(lambda x, s: x, static_argnums=1)(1.0, [1])


def test_static_self_on_a_method() -> None:
    class Scaled:
        factor = 3.0

        def __hash__(self) -> int:
            return 1

        @functools.partial(hj.jit, passes=None, static_argnums=(0,))
        def apply(self, x: Any) -> Any:
            return x * self.factor

    assert_same(Scaled().apply(np.arange(3.0)), jax.jit(lambda x: x * 3.0)(np.arange(3.0)))


def test_wrapped_attributes() -> None:
    def fn(x: int) -> int:
        """docstring of fn."""
        return x + 1

    jitted = hj.jit(fn)
    for attribute in ("__doc__", "__name__", "__module__", "__qualname__", "__annotations__", "__wrapped__"):
        assert getattr(jitted, attribute) == getattr(jax.jit(fn), attribute)


def test_donation_is_accepted_and_leaves_the_input() -> None:
    x = jnp.ones(3)
    assert_same(hj.jit(lambda x: x + x - x, passes=None, donate_argnums=0)(x), jnp.ones(3))
    assert_same(x, jnp.ones(3))


def test_concurrent_calls() -> None:
    """jax.jit's test_concurrent_jit: one jitted function called from several threads at once."""
    jitted = hj.jit(lambda x: x + x - 3.0, passes=None)
    xs = [np.random.default_rng(n).standard_normal(n).astype(np.float32) for n in range(10)]
    with concurrent.futures.ThreadPoolExecutor(4) as executor:
        results = list(executor.map(jitted, xs))
    for x, result in zip(xs, results):
        assert_same(result, jax.jit(lambda x: x + x - 3.0)(x))


# --- signatures and introspection ----------------------------------------------------------------------


def test_one_compile_per_abstract_signature() -> None:
    jitted = hj.jit(lambda x: x * 2, passes=None)
    jitted(np.ones(3, np.float32))
    jitted(np.full(3, 5, np.float32))  # same signature
    jitted(np.ones(3, np.float64))  # float64 is float32 under x64-off: same signature
    assert len(jitted._compiled) == 1
    jitted(np.ones(4, np.float32))  # a new shape
    jitted(1.0)  # weak float32[]
    jitted(np.float32(1.0))  # strong float32[]
    assert len(jitted._compiled) == 4


def test_module_is_the_rewritten_module_for_the_arguments() -> None:
    jitted = hj.jit(lambda x, s: x * s, passes="all")
    module = jitted.module(jnp.ones(4, jnp.bfloat16), 0.5)
    parameters = [i.shape.to_text() for i in module.entry.instructions if i.opcode == "parameter" and i.shape]
    assert parameters == ["f32[4]{0}", "f32[]"]
    again = jitted.module(jnp.ones(4, jnp.bfloat16), 0.5)
    assert again is not module and again.entry is not module.entry and again.to_text() == module.to_text()
    assert len(jitted._compiled) == 1


# --- PRNG keys ---------------------------------------------------------------------------------------------


def sample(key: Any, x: Any) -> Any:
    first, second = jax.random.split(key)
    return {"keys": jax.random.split(second, 3), "noise": x + jax.random.normal(first, x.shape)}


@pytest.mark.parametrize(
    "key",
    [
        jax.random.key(0),
        jax.random.PRNGKey(0),
        jax.random.key(1, impl="rbg"),
        jax.random.split(jax.random.key(2), 2)[0],
    ],
    ids=["typed", "legacy uint32", "typed rbg", "split typed"],
)
@pytest.mark.parametrize("passes", [None, "all"])
def test_prng_keys_in_and_out(key: Any, passes: str | None) -> None:
    """Keys are u32 bits to the passes, which have nothing to change in them."""
    both(sample, key, np.zeros(5, np.float32), passes=passes)


def test_typed_keys_in_a_pytree() -> None:
    both(lambda keys: [jax.random.fold_in(k, 3) for k in keys], [jax.random.key(4), jax.random.key(5)])


# --- the dtype passes -----------------------------------------------------------------------------------


def bf16_layer(params: dict[str, Any], x: Any, scale: float) -> Any:
    return jnp.tanh(x @ params["w"] + params["b"]) * scale


def test_passes_keep_jax_jit_types_and_change_only_precision() -> None:
    """upcast-all computes the bf16 layer in f32: the results keep jax.jit's bf16 types, weak scalars
    promote as in jax, and the values differ from jax's by at most the bf16 roundings saved."""
    key = jax.random.key(7)
    params = {"w": jax.random.normal(key, (16, 8), jnp.bfloat16), "b": jnp.zeros(8, jnp.bfloat16)}
    x = jax.random.normal(jax.random.fold_in(key, 1), (4, 16), jnp.bfloat16)
    want = jax.jit(bf16_layer)(params, x, 0.5)
    got = hj.jit(bf16_layer, passes="all")(params, x, 0.5)
    assert jax.typeof(got) == jax.typeof(want)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2**-7)
    exact = hj.jit(lambda p, x, s: bf16_layer(p, x.astype(jnp.float32), s).astype(jnp.bfloat16), passes=None)
    assert_same(got, exact({k: v.astype(jnp.float32) for k, v in params.items()}, x, 0.5))


def train_step(params: dict[str, Any], x: Any, y: Any, lr: float) -> tuple[Any, Any]:
    def loss(p: dict[str, Any]) -> Any:
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


def test_train_step_with_a_python_learning_rate() -> None:
    """The issue's reproducer: a float64 Python scalar among the leaves."""
    key = jax.random.key(3)
    params = {"w": jax.random.normal(key, (8, 4)), "b": np.zeros(4)}  # b is float64 under x64-off
    x, y = jax.random.normal(jax.random.fold_in(key, 1), (16, 8)), jnp.ones((16, 4))
    both(train_step, params, x, y, 0.1)
    both(train_step, params, x, y, 0.1, passes="all")  # f32 only: nothing for the passes to change


def test_device_numerics_under_every_transformation() -> None:
    """The device saturates fp8 overflow at 448 where XLA gives NaN; every path must say 448."""

    def quantise(x: Any) -> Any:
        return (x * 2).astype(jnp.float8_e4m3fn).astype(jnp.float32)

    device = hj.jit(quantise, passes=None, numerics="neuron")
    assert np.isnan(np.asarray(jax.jit(quantise)(1000.0)))
    assert float(device(1000.0)) == 448
    assert float(jax.jit(device)(1000.0)) == 448
    assert np.asarray(jax.vmap(device)(jnp.array([1000.0, 1.0]))).tolist() == [448, 2]


# --- under transformations --------------------------------------------------------------------------------


def mlp(params: dict[str, Any], x: Any) -> Any:
    return jnp.sum(jnp.tanh(x @ params["w"]) * params["v"])


PARAMS = {"w": jax.random.normal(jax.random.key(0), (6, 5)), "v": jax.random.normal(jax.random.key(1), (5,))}
XS = jax.random.normal(jax.random.key(2), (3, 6))


#: Differentiated twice, the module is the pullback of the pullback module: the same derivative as
#: jax's, but not the same HLO as `grad(grad(f))` traced at once, so it may differ by an ulp (jax 0.12).
SECOND_ORDER = ("grad of grad", "hessian")


@pytest.mark.parametrize("passes", [None, "all"])
@pytest.mark.parametrize(
    "transform",
    [
        "grad",
        "value_and_grad",
        "jit",
        "vmap",
        "vmap unbatched params",
        "jit of vmap of grad",
        "grad of grad",
        "jacrev",
        "hessian",
    ],
)
def test_transformations_run_the_rewritten_transformed_module(transform: str, passes: str | None) -> None:
    """`T(hloopt.jax.jit(f))` is `hloopt.jax.jit(T(f))`: the transformed module after the passes,
    bit for bit (first-order transformations), so a transformation never swaps the device's
    numerics for jax's; and it agrees with jax's own `jax.jit(T(f))`."""
    x = XS[0]
    scalar: Callable[..., Any] = lambda x: jnp.sum(jnp.sin(x) * x[0])  # noqa: E731
    transforms: dict[str, tuple[Callable[[Callable[..., Any]], Callable[..., Any]], tuple[Any, ...]]] = {
        "grad": (jax.grad, (PARAMS, x)),
        "value_and_grad": (lambda f: jax.value_and_grad(f, argnums=(0, 1)), (PARAMS, x)),
        "jit": (jax.jit, (PARAMS, x)),
        "vmap": (lambda f: jax.vmap(f, in_axes=(None, 0)), (PARAMS, XS)),
        "vmap unbatched params": (
            lambda f: jax.vmap(jax.vmap(f, in_axes=(None, 0)), in_axes=(None, 0)),
            (PARAMS, XS[None]),
        ),
        "jit of vmap of grad": (lambda f: jax.jit(jax.vmap(jax.grad(f, argnums=1), in_axes=(None, 0))), (PARAMS, XS)),
        "grad of grad": (lambda f: jax.grad(lambda x: jnp.sum(jax.grad(f)(x))), (x,)),
        "jacrev": (jax.jacrev, (x,)),
        "hessian": (lambda f: jax.jacrev(jax.jacrev(f)), (x,)),
    }
    transform_fn, args = transforms[transform]
    fn = scalar if transform in ("grad of grad", "jacrev", "hessian") else mlp
    got = transform_fn(hj.jit(fn, passes=passes))(*args)
    if transform not in SECOND_ORDER:
        assert_same(got, hj.jit(transform_fn(fn), passes=passes)(*args))
    want = jax.jit(transform_fn(fn))(*args)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for have, expected in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(have), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_grad_with_integer_key_and_static_arguments() -> None:
    """Arguments that have no gradient (integers, keys, statics) are passed through; jax gives them
    the zero (float0) cotangent, as it does for jax.jit."""

    def fn(x: Any, n: Any, key: Any, mode: str) -> Any:
        noise = jax.random.normal(key, x.shape)
        return jnp.sum(x * n + noise) if mode == "sum" else jnp.max(x)

    args = (jnp.arange(3.0), jnp.int32(2), jax.random.key(0), "sum")
    got = jax.grad(hj.jit(fn, passes=None, static_argnums=3), argnums=(0, 1), allow_int=True)(*args)
    want = jax.grad(jax.jit(fn, static_argnums=3), argnums=(0, 1), allow_int=True)(*args)
    assert jax.typeof(got[1]) == jax.typeof(want[1])
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))


def test_vmap_over_keys() -> None:
    keys = jax.random.split(jax.random.key(0), 3)
    fn = lambda x, key: x + jax.random.normal(key)  # noqa: E731
    got = jax.vmap(hj.jit(fn, passes=None))(jnp.arange(3.0), keys)
    assert_same(got, hj.jit(jax.vmap(fn), passes=None)(jnp.arange(3.0), keys))


def test_forward_mode_is_refused_by_jax() -> None:
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(hj.jit(jnp.sin, passes=None), (1.0,), (1.0,))


def test_closing_over_a_tracer_is_a_clear_error() -> None:
    with pytest.raises(HloError, match="closes over a value traced by an enclosing"):
        jax.grad(lambda y: hj.jit(lambda x: x * y, passes=None)(2.0))(3.0)


def test_transformations_compile_once_per_signature() -> None:
    jitted = hj.jit(mlp, passes=None)
    for _ in range(3):
        jax.grad(jitted)(PARAMS, XS[0])
        jax.vmap(jitted, in_axes=(None, 0))(PARAMS, XS)
    assert len(jitted._compiled) == 1


def test_keys_under_an_outer_jit() -> None:
    key, x = jax.random.key(0), np.zeros(4, np.float32)
    assert_same(jax.jit(hj.jit(sample, passes=None))(key, x), jax.jit(sample)(key, x))
    assert jax.eval_shape(hj.jit(sample, passes=None), key, x) == jax.eval_shape(sample, key, x)


def test_inside_scan_and_checkpoint() -> None:
    def step(carry: Any, x: Any) -> tuple[Any, Any]:
        return carry * 0.5 + x, carry

    assert_same(jax.lax.scan(hj.jit(step, passes=None), 0.0, jnp.arange(4.0)), jax.lax.scan(step, 0.0, jnp.arange(4.0)))
    assert_same(jax.grad(jax.checkpoint(hj.jit(jnp.sin, passes=None)))(1.0), jax.grad(jax.jit(jnp.sin))(1.0))


def test_complex_gradient() -> None:
    def fn(z: Any) -> Any:
        return jnp.abs(z * z)

    assert_same(jax.grad(hj.jit(fn, passes=None))(1.0 + 1.0j), jax.grad(jax.jit(fn))(1.0 + 1.0j))


def test_a_host_callback_is_refused_by_name_in_the_callers_process_too() -> None:
    """jax compiles its own lowering with the callback's function; hloopt compiles the module's text, which
    has none: the call is refused before XLA runs it (it would die with SIGSEGV, taking the caller along)."""

    def doubled_on_the_host(x: jax.Array) -> jax.Array:
        return jax.pure_callback(lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    with pytest.raises(
        HloError, match=r"^doubled_on_the_host: %\S+ \(custom-call\) in %\S+ calls xla\w*_callback, a jax"
    ):
        hj.jit(doubled_on_the_host)(jnp.ones(3, jnp.float32))
