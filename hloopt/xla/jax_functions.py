"""jax functions as hloopt modules, and run after hloopt's passes: the code behind `hloopt.jax`.

`module(fn, *args)` is the HLO module jax gives XLA for `fn` (or, `optimised=True`, the one XLA
compiled), with metadata and every constant in full. `jit(fn, passes=...)` behaves like
`jax.jit(fn)` — the same pytrees in and out, jax arrays back, one compile per new input
signature — but executes the module *after* the passes, so a user sees what the model computes
once the Neuron compiler's dtype passes have run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hloopt.errors import HloError
from hloopt.ir.module import Module
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse
from hloopt.xla.bridge import Executable, compile_cpu
from hloopt.xla.execution import convert_exact
from hloopt.xla.formats import print_options

Numerics = Literal["xla", "neuron"]
#: What a pass list may be: a spec string (``"all"``, ``"upcast-all-to-fp32,fold-constant-converts"``) or names.
Passes = str | Sequence[str] | None


def hlo_text(fn: Callable[..., Any], *args: Any, optimised: bool = False, **kwargs: Any) -> str:
    """XLA's text of `fn` on `args`: lowered (what jax hands XLA) or optimised (what XLA compiled).

    Every argument stays a parameter (``keep_unused``), so parameters are the flattened leaves of
    ``(args, kwargs)`` in order.
    """
    import jax

    lowered = jax.jit(fn, keep_unused=True).lower(*args, **kwargs)
    # jax types both calls as optional; they return None only for non-XLA backends.
    source: Any = lowered.compile().runtime_executable() if optimised else lowered.compiler_ir("hlo")
    module = source.hlo_modules()[0] if optimised else source.as_hlo_module()
    return str(module.to_string(print_options()))


def module(fn: Callable[..., Any], *args: Any, optimised: bool = False, passes: Passes = None, **kwargs: Any) -> Module:
    """The `hloopt.ir.Module` of `fn` on `args`, after `passes` if given."""
    parsed = parse(hlo_text(fn, *args, optimised=optimised, **kwargs), getattr(fn, "__name__", "<jax function>"))
    if passes:
        run_pipeline(parsed, _spec(passes))
    return parsed


def _spec(passes: str | Sequence[str]) -> str:
    return passes if isinstance(passes, str) else ",".join(passes)


@dataclass
class Jitted:
    """What `jit` returns: call it like the `jax.jit` function it stands for."""

    fn: Callable[..., Any]
    passes: Passes
    numerics: Numerics
    #: One compiled rewritten module (and its output tree) per input signature.
    _compiled: dict[Any, tuple[Executable, Any]] = field(default_factory=dict[Any, tuple[Executable, Any]])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
        arrays = [np.asarray(leaf) for leaf in leaves]
        key = (in_tree, tuple((a.shape, a.dtype) for a in arrays))
        if key not in self._compiled:
            self._compiled[key] = self._compile(args, kwargs)
        executable, shapes = self._compiled[key]
        inputs = [
            convert_exact(array, leaf, f"argument leaf {index}")
            for index, (array, leaf) in enumerate(zip(arrays, executable.parameters))
        ]
        outputs = executable(inputs)
        leaves_out, out_tree = jax.tree_util.tree_flatten(shapes)
        # A pass may retype the results (upcast-all makes them f32): hand them back as jax.jit would.
        results = [jax.numpy.asarray(x.astype(like.dtype)) for x, like in zip(outputs, leaves_out)]
        return jax.tree_util.tree_unflatten(out_tree, results)

    def _compile(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Executable, Any]:
        """The rewritten module compiled, and the shapes and dtypes `jax.jit(fn)` returns."""
        import jax

        rewritten = module(self.fn, *args, passes=self.passes, **kwargs)
        if self.numerics == "neuron":
            run_pipeline(rewritten, "emulate-neuron-converts")
        return compile_cpu(rewritten.to_text()), jax.eval_shape(self.fn, *args, **kwargs)

    def module(self, *args: Any, **kwargs: Any) -> Module:
        """The rewritten module this function runs for these arguments."""
        return module(self.fn, *args, passes=self.passes, **kwargs)


def jit(fn: Callable[..., Any], passes: Passes = "all", numerics: Numerics = "xla") -> Jitted:
    """`jax.jit(fn)`, executing the module after hloopt's `passes` (under device `numerics` if asked)."""
    if numerics not in ("xla", "neuron"):
        raise HloError(f"numerics must be 'xla' or 'neuron', not {numerics!r}")
    return Jitted(fn, passes, numerics)
