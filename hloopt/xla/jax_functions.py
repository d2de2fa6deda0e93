"""jax functions as hloopt modules, and run after hloopt's passes: the code behind `hloopt.jax`.

`module(fn, *args)` is the HLO module jax gives XLA for `fn` (or, `optimised=True`, the one XLA
compiled), with metadata and every constant in full. `jit(fn, passes=...)` is a drop-in for
`jax.jit(fn)` — the same arguments accepted and converted (Python scalars, float64 arrays under
x64-off, typed PRNG keys, static arguments), the same pytrees, dtypes and weak types back, one
compile per abstract signature — but every number it returns is computed by a module *after* the
passes, so a user sees what the model computes once the Neuron compiler's dtype passes have run.

Under `jax.grad`, `jax.vmap` or an outer `jax.jit` the arguments are tracers, which cannot go to an
executable of their own. The call then becomes a `jax.pure_callback` that runs the rewritten module,
wrapped in a `custom_vmap` whose rule runs the rewritten `jax.vmap(fn)` module and a `custom_vjp`
whose backward runs the rewritten `jax.vjp(fn)` module: each transformation still measures a module
after the passes, never jax's own numerics. Forward-mode autodiff (`jax.jvp`, `jacfwd`) is refused
by jax itself, as for any `custom_vjp` function.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hloopt.arrays import ExecutionError
from hloopt.cast_engine import Numerics
from hloopt.ir.module import Module
from hloopt.passes.neuron_cc_flags import Compiler, parse_neuron_cc_flags
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse
from hloopt.xla.bridge import Executable, compile_cpu
from hloopt.xla.formats import print_options
from hloopt.xla.running import ExecutionWarning, check_numerics, convert_exact, with_numerics

#: What a pass list may be: a spec string (``"all"``, ``"upcast-all-to-fp32,fold-constant-converts"``) or names.
Passes = str | Sequence[str] | None


def hlo_text(fn: Callable[..., Any], *args: Any, optimised: bool = False, **kwargs: Any) -> str:
    """XLA's text of `fn` on `args`: lowered (what jax hands XLA) or optimised (what XLA compiled).

    Every argument stays a parameter (``keep_unused``), so parameters are the flattened leaves of
    ``(args, kwargs)`` in order.
    """
    import jax

    return _lowered_text(jax.jit(fn, keep_unused=True).lower(*args, **kwargs), optimised)


def _lowered_text(lowered: Any, optimised: bool = False) -> str:
    """The text of a `jax.stages.Lowered`, with every constant in full."""
    # jax types both calls as optional; they return None only for non-XLA backends.
    source: Any = lowered.compile().runtime_executable() if optimised else lowered.compiler_ir("hlo")
    module = source.hlo_modules()[0] if optimised else source.as_hlo_module()
    return str(module.to_string(print_options()))


def module(fn: Callable[..., Any], *args: Any, optimised: bool = False, passes: Passes = None, **kwargs: Any) -> Module:
    """The `hloopt.ir.Module` of `fn` on `args`, after `passes` if given."""
    parsed = parse(hlo_text(fn, *args, optimised=optimised, **kwargs), _name(fn))
    if passes:
        run_pipeline(parsed, _spec(passes))
    return parsed


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", "<jax function>")


def _spec(passes: str | Sequence[str]) -> str:
    return passes if isinstance(passes, str) else ",".join(passes)


# --- the boundary between jax values and the executable's buffers ----------------------------------


def _is_key(aval: Any) -> bool:
    import jax
    import jax.numpy as jnp

    return bool(jnp.issubdtype(aval.dtype, jax.dtypes.prng_key))


def _physical(aval: Any) -> Any:
    """The shape and dtype that carry `aval` in HLO: a typed key is its key data (``u32[..., 2]``)."""
    import jax

    if _is_key(aval):
        return jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype)


def _unwrap(leaf: Any, aval: Any) -> Any:
    """`leaf` as the bits its parameter takes: key data for a typed key, else the value itself."""
    import jax

    return jax.random.key_data(leaf) if _is_key(aval) else leaf


def _rewrap(data: Any, aval: Any) -> Any:
    """The jax value `aval` describes, from its bits: a typed key again, or the weak type jax.jit gives.

    A weak-typed result (``jax.jit(f)(1.0)`` is ``~float32[]``) matters: it promotes like a Python
    scalar in the caller's next operation. jax has no public spelling for making one, hence `_src`.
    """
    import jax
    from jax._src.lax.lax import _convert_element_type

    if _is_key(aval):
        # KeyTy keeps its PRNG implementation only as `_impl`; wrap_key_data needs it back.
        return jax.random.wrap_key_data(data, impl=aval.dtype._impl)
    return _convert_element_type(data, aval.dtype, weak_type=bool(aval.weak_type))


def _is_tracer(leaf: Any) -> bool:
    from jax.core import Tracer

    return isinstance(leaf, Tracer)


# --- one compiled signature -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Program:
    """One abstract input signature compiled: the rewritten module, and jax's view of its inputs and
    outputs (avals with weak types and key dtypes, the output tree), which the module does not carry."""

    rewritten: Module
    executable: Executable
    in_avals: tuple[Any, ...]
    out_avals: tuple[Any, ...]
    out_tree: Any
    #: jax's path of each argument leaf (``[0]['w']``), for errors.
    paths: tuple[str, ...]
    #: The function of the flat argument leaves to their flat result leaves, static arguments bound.
    flat: Callable[..., list[Any]]
    #: The shapes and dtypes that carry each argument and result (`_physical`), made once, not per call.
    in_physical: tuple[Any, ...] = field(init=False)
    out_physical: tuple[Any, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_physical", tuple(map(_physical, self.in_avals)))
        object.__setattr__(self, "out_physical", tuple(map(_physical, self.out_avals)))

    def run_physical(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """Run on concrete bits (key data for keys); results in the dtypes jax's module returns.

        A pass may retype parameters and results (upcast-all makes bf16 ones f32): inputs widen to
        the rewritten parameters exactly (refused if a value would change), results come back as
        the original module's types.
        """
        arrays = [
            convert_exact(self._host(value, physical), parameter, f"argument {path}")
            for value, physical, parameter, path in zip(
                inputs, self.in_physical, self.executable.parameters, self.paths
            )
        ]
        outputs = self.executable(arrays)
        return [np.asarray(out).astype(physical.dtype, copy=False) for out, physical in zip(outputs, self.out_physical)]

    @staticmethod
    def _host(value: Any, physical: Any) -> np.ndarray:
        """`value` as jax.jit would pass it: canonical dtype (x64 off: float64 → float32, int64 → int32,
        wrapping as jax does), whatever it was given as (Python scalar, numpy, jax Array)."""
        return np.asarray(value).astype(physical.dtype, copy=False)

    def run(self, leaves: Sequence[Any]) -> list[Any]:
        """Run on concrete argument leaves; jax values back (keys, weak types)."""
        import jax.numpy as jnp

        outputs = self.run_physical([_unwrap(leaf, aval) for leaf, aval in zip(leaves, self.in_avals)])
        return [_rewrap(jnp.asarray(out), aval) for out, aval in zip(outputs, self.out_avals)]

    def staged(self, leaves: Sequence[Any]) -> list[Any]:
        """The same run on tracers: a `pure_callback` to `run_physical`, its bits rewrapped."""
        import jax

        physical = [_unwrap(leaf, aval) for leaf, aval in zip(leaves, self.in_avals)]
        # vmap never reaches the callback (the custom_vmap around it runs the vmapped module); the
        # method is named only because jax requires one.
        results = jax.pure_callback(
            lambda *inputs: self.run_physical(inputs), list(self.out_physical), *physical, vmap_method="sequential"
        )
        return [_rewrap(out, aval) for out, aval in zip(results, self.out_avals)]


def _inexact(aval: Any) -> bool:
    import jax.numpy as jnp

    return not _is_key(aval) and bool(jnp.issubdtype(aval.dtype, jnp.inexact))


# --- jit ------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Jitted:
    """What `jit` returns: call it like the `jax.jit` function it stands for (a method too).

    Concrete arguments run the rewritten module directly; tracers (under grad, vmap, an outer jit)
    go through `_transformed`, so every path computes with modules after the passes.
    """

    fn: Callable[..., Any]
    passes: Passes
    numerics: Numerics
    static_argnums: tuple[int, ...] = ()
    static_argnames: tuple[str, ...] = ()
    #: jax's own jit of `fn`: it traces, checks and converts arguments exactly as `jax.jit(fn)` would.
    _reference: Any = field(init=False, repr=False)
    #: One compiled rewritten module per abstract signature (tree, avals, static values, jax's trace context).
    _compiled: dict[Any, _Program] = field(default_factory=dict[Any, _Program], repr=False)
    #: Per program: the call jax can transform (its vmapped and backward `Jitted` live in its closure).
    _transformable: dict[int, Callable[..., Any]] = field(default_factory=dict[int, Callable[..., Any]], repr=False)

    def __post_init__(self) -> None:
        import jax

        self._reference = jax.jit(
            self.fn, static_argnums=self.static_argnums, static_argnames=self.static_argnames, keep_unused=True
        )
        functools.update_wrapper(self, self.fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        program, leaves = self._program(args, kwargs)
        if any(_is_tracer(leaf) for leaf in leaves):
            results = self._transformed(program)(*leaves)
        else:
            results = program.run(leaves)
        return jax.tree_util.tree_unflatten(program.out_tree, results)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        """As a method, bound to its instance like the function it wraps (jax.jit's functions are too)."""
        return self if instance is None else functools.partial(self, instance)

    def module(self, *args: Any, **kwargs: Any) -> Module:
        """The rewritten module this function runs for these arguments (a copy to inspect or edit)."""
        return self._program(args, kwargs)[0].rewritten.clone()

    # -- signatures

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
        """The dynamic part of a call as jax flattens it, and the static values (with their places)."""
        count = len(args)
        positions = sorted({n + count if n < 0 else n for n in self.static_argnums if -count <= n < count})
        static_args = tuple((n, args[n]) for n in positions)
        static_kwargs = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        dynamic_args = tuple(a for n, a in enumerate(args) if n not in positions)
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return (dynamic_args, dynamic_kwargs), (static_args, static_kwargs)

    def _program(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[_Program, list[Any]]:
        """The compiled program for this call's signature (compiled on first sight), and its leaves."""
        import jax
        from jax._src import config  # jax.jit's own cache key: x64, matmul precision, … (no public name)

        dynamic, statics = self._split(args, kwargs)
        leaves, in_tree = jax.tree_util.tree_flatten(dynamic)
        try:
            key = (in_tree, tuple(jax.typeof(leaf) for leaf in leaves), statics, config.trace_context())
            program = self._compiled.get(key)
        except (TypeError, ValueError, OverflowError):
            # Not a jax type, too large for its type, an unhashable static: jax's own words say which argument.
            self._reference.trace(*args, **kwargs)
            raise
        if program is None:
            program = self._compiled[key] = self._compile(args, kwargs, in_tree, statics)
        return program, leaves

    def _compile(self, args: tuple[Any, ...], kwargs: dict[str, Any], in_tree: Any, statics: Any) -> _Program:
        """Trace and lower `fn` as jax.jit does, run the passes on its module and compile the result."""
        import jax

        traced = self._reference.trace(*args, **kwargs)
        in_avals = tuple(jax.tree_util.tree_leaves(traced.in_avals))
        if len(traced.jaxpr.in_avals) != len(in_avals):
            # jax passes a closed-over tracer as a hidden argument, which has no value to run on here.
            raise ExecutionError(
                f"hloopt.jax.jit cannot run {_name(self.fn)}: it closes over a value traced by an enclosing "
                "jax.grad, jax.vmap or jax.jit; pass that value as an argument instead"
            )
        paths = tuple(
            jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(traced.in_avals)[0]
        )
        rewritten = parse(_lowered_text(traced.lower()), _name(self.fn))
        if self.passes:
            run_pipeline(rewritten, _spec(self.passes), numerics=self.numerics)
        text, notes = with_numerics(rewritten, self.numerics, _name(self.fn))
        for note in notes:
            warnings.warn(note, ExecutionWarning, stacklevel=4)
        executable = compile_cpu(text)
        if len(executable.parameters) != len(in_avals):
            # Ordered effects (io_callback, ordered debug prints) add token parameters jax threads itself.
            raise ExecutionError(
                f"{_name(self.fn)}: the module takes {len(executable.parameters)} parameters for "
                f"{len(in_avals)} argument leaves; hloopt.jax.jit cannot run functions with ordered effects"
            )
        out_avals = tuple(traced.jaxpr.out_avals)
        return _Program(
            rewritten, executable, in_avals, out_avals, traced.out_tree, paths, self._flat(in_tree, statics)
        )

    def _flat(self, in_tree: Any, statics: Any) -> Callable[..., list[Any]]:
        """`fn` as a function of the dynamic leaves, with this call's static values put back in place."""
        import jax

        static_args, static_kwargs = statics

        def flat(*leaves: Any) -> list[Any]:
            dynamic_args, dynamic_kwargs = jax.tree_util.tree_unflatten(in_tree, leaves)
            call_args = list(dynamic_args)
            for position, value in static_args:
                call_args.insert(position, value)
            return jax.tree_util.tree_leaves(self.fn(*call_args, **dynamic_kwargs, **dict(static_kwargs)))

        return flat

    # -- under transformations

    def _transformed(self, program: _Program) -> Callable[..., Any]:
        """The program as a function jax can transform: vmap runs the rewritten vmapped module, grad the
        rewritten backward module, and a trace stages a callback to the rewritten module itself."""
        made = self._transformable.get(id(program))
        if made is None:
            made = self._transformable[id(program)] = self._make_transformable(program)
        return made

    def _make_transformable(self, program: _Program) -> Callable[..., Any]:
        import jax

        def nested(fn: Callable[..., Any]) -> Jitted:
            return Jitted(fn, self.passes, self.numerics)

        @jax.custom_batching.custom_vmap
        def staged(*leaves: Any) -> list[Any]:
            return program.staged(leaves)

        batched: dict[tuple[bool, ...], Jitted] = {}

        def vmap_rule(axis_size: int, in_batched: Sequence[bool], *leaves: Any) -> tuple[list[Any], list[bool]]:
            flags = tuple(bool(b) for b in in_batched)
            if flags not in batched:
                batched[flags] = nested(jax.vmap(program.flat, in_axes=[0 if b else None for b in flags]))
            return batched[flags](*leaves), [True] * len(program.out_avals)

        staged.def_vmap(vmap_rule)

        inputs = [n for n, aval in enumerate(program.in_avals) if _inexact(aval)]
        outputs = [n for n, aval in enumerate(program.out_avals) if _inexact(aval)]

        def backward(primals: list[Any], cotangents: list[Any]) -> Any:
            """The pullback of the differentiable results to the differentiable arguments."""

            def of_differentiable(*xs: Any) -> list[Any]:
                full = list(primals)
                for n, x in zip(inputs, xs):
                    full[n] = x
                results = program.flat(*full)
                return [results[n] for n in outputs]

            return jax.vjp(of_differentiable, *[primals[n] for n in inputs])[1](cotangents)

        pullback = nested(backward)

        @jax.custom_vjp
        def differentiable(*leaves: Any) -> list[Any]:
            return staged(*leaves)

        def forward(*leaves: Any) -> tuple[list[Any], tuple[Any, ...]]:
            # Through `differentiable` itself, so an outer grad (grad of grad) differentiates this call too.
            return differentiable(*leaves), leaves

        def reverse(primals: tuple[Any, ...], cotangents: list[Any]) -> tuple[Any, ...]:
            grads: list[Any] = [None] * len(primals)
            if inputs and outputs:
                for n, grad in zip(inputs, pullback(list(primals), [cotangents[n] for n in outputs])):
                    grads[n] = grad
            return tuple(grads)

        differentiable.defvjp(forward, reverse)
        return differentiable


def jit(
    fn: Callable[..., Any],
    passes: Passes = "all",
    numerics: Numerics = "xla",
    *,
    static_argnums: int | Iterable[int] | None = None,
    static_argnames: str | Iterable[str] | None = None,
    donate_argnums: int | Iterable[int] | None = None,
    donate_argnames: str | Iterable[str] | None = None,
    neuron_cc_flags: str | None = None,
    neuron_compiler: Compiler | None = None,
) -> Jitted:
    """`jax.jit(fn)`, executing the module after hloopt's `passes` (under device `numerics` if asked).

    `neuron_cc_flags` (neuronx-cc's dtype flags, or ``"env"`` for ``$NEURON_CC_FLAGS``, read now) and
    `neuron_compiler` (a release's defaults) add the ``neuron-auto-cast`` they ask for to `passes`, as
    ``hloopt run --neuron-cc-flags`` does; flags hloopt does not model are named in one warning.

    Static arguments are jax.jit's (a name implies its position and back, from `fn`'s signature).
    Donation is accepted and ignored: the rewritten module runs on copies, so nothing is donated.
    """
    import inspect

    from jax._src.api_util import infer_argnums_and_argnames  # jax.jit's own reading of the two

    del donate_argnums, donate_argnames
    check_numerics(numerics)
    if neuron_cc_flags is not None or neuron_compiler is not None:
        settings = parse_neuron_cc_flags(neuron_cc_flags or "", neuron_compiler)
        if settings.ignored:
            warnings.warn(f"neuron_cc_flags: not modelled, ignored: {', '.join(settings.ignored)}", stacklevel=2)
        passes = settings.with_passes(_spec(passes) if passes else None)
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    if signature is None:
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames or ())
    else:
        nums, names = infer_argnums_and_argnames(signature, static_argnums, static_argnames)
    return Jitted(fn, passes, numerics, tuple(nums), tuple(names))
