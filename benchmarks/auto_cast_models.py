"""Real programs under each auto-cast mode × type: what ``hloopt dtypes`` lists, and what each mode adds.

The programs are jax written in the style of public examples, not for hloopt: an MLP, single-head
attention, a small conv net's training step (loss and gradients) and an RNN as a ``lax.scan``, all
in f32; and the repository's examples/ (its .hlo modules and the bf16 MLP of ``jax_mlp.py``). Each is
lowered to HLO, rewritten by ``neuron-auto-cast{mode=…,type=…}`` and run on XLA's CPU with every cast
the device's (``--numerics neuron``). For each, the script prints:

- the dtypes table's coverage: the share of the input's dots and convolutions it lists (must be 100%);
- per output, the error the mode adds against the program as written run by XLA (``jax.jit`` in f32
  for the jax programs): max ULP (f32 units in the last place of the reference), max |error|, and
  max |error| / max |reference|;
- under ``matmult`` bf16, whether the results move by what bf16 operands predict: each operand carries a
  relative error up to 2⁻⁹, so a dot of K products moves its result by about 2⁻⁸ (relative to the scale of
  the values) and at most by 2⁻⁸·√K for errors that do not cancel: the check is 2⁻¹² ≤ relative error
  ≤ 2⁻⁸·√K, K the longest contraction of the program (a mode that moved nothing, or too much, fails).

Usage (a few minutes; a slice with ``--programs``):

    python benchmarks/auto_cast_models.py [--programs mlp,attention] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hloopt.driver.dtypes import MATRIX, auto_cast_decisions, dtype_table  # noqa: E402
from hloopt.ir.attribute_values import dot_dimension_numbers  # noqa: E402
from hloopt.ir.module import Instruction  # noqa: E402
from hloopt.ir.shape import ArrayShape, leaf_shapes  # noqa: E402
from hloopt.passes.neuron_auto_cast import NeuronAutoCast, auto_cast_plan  # noqa: E402
from hloopt.passes.registry import lookup  # noqa: E402
from hloopt.passes.simplify_converts import preserves_values  # noqa: E402
from hloopt.text.parser import parse  # noqa: E402
from hloopt.xla.bridge import execute  # noqa: E402
from hloopt.xla.running import random_inputs, with_numerics  # noqa: E402

MODES = ("none", "matmult", "all")
TYPES = ("bf16", "fp16", "tf32", "fp8_e4m3")
#: bf16's unit roundoff: an operand rounded to bf16 is off by at most this much, relatively.
BF16_ROUNDOFF = 2.0**-9
#: Below this relative error a bf16 matmult did not move the results (f32 noise is ~2^-23).
MOVED = 2.0**-12


@dataclass(frozen=True)
class Program:
    """A module to rewrite, its inputs, and what it computes as written (the reference)."""

    name: str
    text: str
    inputs: list[np.ndarray]
    reference: list[np.ndarray]


@dataclass(frozen=True)
class Error:
    output: int
    ulp: float
    abs: float
    rel: float


@dataclass(frozen=True)
class Result:
    program: str
    mode: str
    type: str
    listed: int
    matrix_ops: int
    errors: tuple[Error, ...]
    #: The longest contraction of the program (K of the 2^-8·sqrt(K) bound).
    contraction: int
    #: The most matrix ops chained on one path (each adds its own error: the bound is that many times one's).
    depth: int
    #: The ops the auto-cast cast whose operands bf16 does not hold exactly: without any (no f32 dot or
    #: convolution, or only ones reading dequantized fp8 or int8 values), nothing can move.
    cast_ops: int

    @property
    def coverage(self) -> float:
        return self.listed / self.matrix_ops if self.matrix_ops else 1.0

    @property
    def rel(self) -> float:
        return max((e.rel for e in self.errors), default=0.0)

    @property
    def bound(self) -> float:
        return self.depth * 2 * BF16_ROUNDOFF * math.sqrt(self.contraction)

    @property
    def as_predicted(self) -> bool | None:
        """Under ``matmult`` bf16: whether the results moved by what bf16 operands predict; None elsewhere, and
        where the mode cast nothing (a program whose dots are bf16, fp8 or integer already)."""
        if (self.mode, self.type) != ("matmult", "bf16") or not self.cast_ops:
            return None
        return MOVED <= self.rel <= self.bound


# --------------------------------------------------------------------------- the programs (plain jax)


def _jax_programs() -> dict[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]]:
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)

    def normal(i: int, shape: tuple[int, ...], scale: float = 1.0) -> Any:
        return jax.random.normal(jax.random.fold_in(key, i), shape, jnp.float32) * scale

    def mlp() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        sizes = [256, 512, 512, 10]
        params = [
            (normal(i, (m, n), m**-0.5), normal(100 + i, (n,), 0.1))
            for i, (m, n) in enumerate(itertools.pairwise(sizes))
        ]

        def forward(params: list[tuple[Any, Any]], x: Any) -> Any:
            for w, b in params[:-1]:
                x = jax.nn.relu(x @ w + b)
            w, b = params[-1]
            return jax.nn.log_softmax(x @ w + b)

        return forward, (params, normal(99, (64, 256)))

    def attention() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        def forward(x: Any, wq: Any, wk: Any, wv: Any) -> Any:
            q, k, v = x @ wq, x @ wk, x @ wv
            weights = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1)
            return weights @ v

        d = 64
        return forward, (normal(1, (128, d)), *(normal(2 + i, (d, d), d**-0.5) for i in range(3)))

    def conv_step() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        def loss(params: dict[str, Any], images: Any, labels: Any) -> Any:
            dims = ("NHWC", "HWIO", "NHWC")
            x = jax.lax.conv_general_dilated(images, params["c1"], (1, 1), "SAME", dimension_numbers=dims)
            x = jax.nn.relu(x)
            x = jax.lax.conv_general_dilated(x, params["c2"], (2, 2), "SAME", dimension_numbers=dims)
            x = jax.nn.relu(x).reshape(x.shape[0], -1)
            logits = x @ params["dense"]
            return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))

        def step(params: dict[str, Any], images: Any, labels: Any) -> Any:
            return jax.value_and_grad(loss)(params, images, labels)

        params = {
            "c1": normal(1, (3, 3, 3, 8), 0.2),
            "c2": normal(2, (3, 3, 8, 16), 0.1),
            "dense": normal(3, (8 * 8 * 16, 10), 0.03),
        }
        labels = jax.nn.one_hot(jnp.arange(8) % 10, 10)
        return step, (params, normal(4, (8, 16, 16, 3)), labels)

    def scan() -> tuple[Callable[..., Any], tuple[Any, ...]]:
        def rnn(w: Any, u: Any, xs: Any) -> Any:
            def cell(h: Any, x: Any) -> tuple[Any, Any]:
                h = jnp.tanh(h @ w + x @ u)
                return h, h

            return jax.lax.scan(cell, jnp.zeros((16, 128)), xs)

        return rnn, (normal(1, (128, 128), 128**-0.5), normal(2, (32, 128), 32**-0.5), normal(3, (8, 16, 32)))

    return {"mlp": mlp, "attention": attention, "conv_step": conv_step, "scan": scan}


def _lowered(name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Program:
    """`fn` as jax lowers it, its flattened arguments, and what ``jax.jit`` computes."""
    import jax

    jitted = jax.jit(fn)
    text = jitted.lower(*args).as_text(dialect="hlo")
    inputs = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(args)]
    reference = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jitted(*args))]
    return Program(name, text, inputs, reference)


def _example_mlp() -> Program:
    """examples/jax_mlp.py's bf16 MLP (its own parameters), as jax lowers it."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(ROOT / "examples"))
    from jax_mlp import mlp  # pyright: ignore[reportMissingImports]  # the example's model

    key = jax.random.PRNGKey(0)
    sizes = [64, 128, 128, 10]
    params = [
        (
            jax.random.normal(jax.random.fold_in(key, i), (m, n), jnp.bfloat16) / jnp.bfloat16(m**0.5),
            jnp.zeros(n, jnp.bfloat16),
        )
        for i, (m, n) in enumerate(itertools.pairwise(sizes))
    ]
    x = jax.random.normal(jax.random.fold_in(key, 99), (32, 64), jnp.bfloat16)
    return _lowered("examples/jax_mlp.py", mlp, (params, x))


def _example_module(path: Path) -> Program:
    """An example module on random inputs; its reference is the module as written, run by XLA."""
    text = path.read_text()
    entry = parse(text, str(path)).entry
    leaves = [
        leaf for p in entry.parameters() if p.shape for leaf in leaf_shapes(p.shape) if isinstance(leaf, ArrayShape)
    ]
    # A quarter of unit scale: at unit scale the fp8 example's activations overflow its calibrated scale (×128
    # into f8e4m3fn, whose overflow is NaN) and every output is NaN on XLA as written.
    inputs = [i / 4 if np.asarray(i).dtype.kind == "f" else i for i in random_inputs(leaves, seed=0)]
    reference = execute(with_numerics(text, "xla", path.name).text, inputs)
    return Program(f"examples/{path.name}", text, inputs, reference)


def programs(names: Sequence[str] | None = None) -> Iterator[Program]:
    """The programs named (every one when None): the jax ones, then the repository's examples."""
    jax_programs = _jax_programs()
    examples: dict[str, Callable[[], Program]] = {"examples/jax_mlp.py": _example_mlp}
    examples |= {
        f"examples/{p.name}": (lambda p=p: _example_module(p)) for p in sorted((ROOT / "examples").glob("*.hlo"))
    }
    for name, make in jax_programs.items():
        if names is None or name in names:
            yield _lowered(name, *make())
    for name, make_example in examples.items():
        if names is None or name in names:
            yield make_example()


# --------------------------------------------------------------------------- measuring


def chained(text: str) -> int:
    """The most dots and convolutions any value of the module passes through, one after the other (within a
    computation): a training step's gradients go through the forward products and then the backward ones."""
    deepest = 1
    for computation in parse(text, "module").computations:
        depth: dict[Instruction, int] = {}
        for instruction in computation.post_order():
            before = max((depth[o] for o in instruction.operands if o in depth), default=0)
            depth[instruction] = before + (instruction.opcode in MATRIX)
            deepest = max(deepest, depth[instruction])
    return deepest


def _exact_operands(op: Instruction, element_type: str) -> bool:
    """Whether `op`'s two operands are values `element_type` holds exactly, as far as the text shows: widened from
    a type it holds (dequantized fp8 or int8), possibly scaled by a power of two (a dequantization scale)."""

    def exact(value: Instruction) -> bool:
        if value.opcode == "convert" and isinstance(source := value.operands[0].shape, ArrayShape):
            return preserves_values(source.element_type, element_type)
        if value.opcode == "multiply":
            return any(_power_of_two(o) for o in value.operands) and all(
                exact(o) or _power_of_two(o) for o in value.operands
            )
        return False

    return all(exact(o) for o in op.operands[:2])


def _power_of_two(value: Instruction) -> bool:
    """A constant (or a broadcast of one) whose value is a power of two."""
    while value.opcode == "broadcast":
        value = value.operands[0]
    if value.opcode != "constant" or value.literal is None or value.literal.is_elided:
        return False
    numbers = np.asarray(value.literal.value, np.float64)
    return bool(numbers.size == 1 and numbers.item() != 0 and math.frexp(abs(numbers.item()))[0] == 0.5)


def longest_contraction(text: str) -> int:
    """The largest number of products any dot or convolution of the module sums (its K)."""
    longest = 1
    for instruction in parse(text, "module").instructions():
        shapes = [o.shape for o in instruction.operands]
        if instruction.opcode == "dot" and isinstance(shapes[0], ArrayShape):
            dims = dot_dimension_numbers(instruction.attributes)
            longest = max(longest, math.prod(shapes[0].dims[d] for d in dims.lhs_contracting))
        elif instruction.opcode == "convolution" and isinstance(shapes[1], ArrayShape):
            kernel = shapes[1].dims  # every kernel dimension but the output features is summed over
            longest = max(longest, math.prod(kernel) // max(kernel))
    return longest


def errors(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> tuple[Error, ...]:
    """Per floating-point output: max ULP (of the reference, in f32), max |error|, max |error| / max |reference|."""
    found = []
    for index, (out, ref) in enumerate(zip(got, want)):
        if np.asarray(ref).dtype.kind not in "fV" and not str(np.asarray(ref).dtype).startswith(("bfloat", "float")):
            continue
        o, r = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        finite = np.isfinite(r) & np.isfinite(o)
        if not finite.any():
            continue
        difference = np.abs(o - r)[finite]
        spacing = np.spacing(np.abs(r[finite]).astype(np.float32)).astype(np.float64)
        scale = float(np.max(np.abs(r[finite]))) or 1.0
        found.append(
            Error(index, float(np.max(difference / spacing)), float(difference.max()), float(difference.max()) / scale)
        )
    return tuple(found)


def measure(program: Program, mode: str, cast_type: str) -> Result:
    spec = f"neuron-auto-cast{{mode={mode},type={cast_type}}}"
    table = dtype_table(parse(program.text, program.name), spec, program.name, plan=auto_cast_decisions)
    listed, matrix_ops = table.coverage
    prepared = with_numerics(program.text, "neuron", program.name, passes=spec)
    got = execute(prepared.text, program.inputs)
    hlo_pass = lookup("neuron-auto-cast").create({"mode": mode, "type": cast_type})
    assert isinstance(hlo_pass, NeuronAutoCast)
    decisions = auto_cast_plan(parse(program.text, program.name), hlo_pass)
    cast_ops = sum(1 for op, d in decisions.items() if d.cast is not None and not _exact_operands(op, "bf16"))
    error = errors(got, program.reference)
    return Result(
        program.name,
        mode,
        cast_type,
        listed,
        matrix_ops,
        error,
        longest_contraction(program.text),
        chained(program.text),
        cast_ops,
    )


def configurations() -> list[tuple[str, str]]:
    """Each mode × type; ``none`` casts nothing, so once."""
    return [("none", "bf16")] + [(mode, cast_type) for mode in MODES[1:] for cast_type in TYPES]


def run(names: Sequence[str] | None = None, configs: Sequence[tuple[str, str]] | None = None) -> list[Result]:
    return [measure(p, mode, t) for p in programs(names) for mode, t in (configs or configurations())]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--programs", help="comma-separated names (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run(args.programs.split(",") if args.programs else None)
    if args.json:
        print(json.dumps([asdict(r) | {"as_predicted": r.as_predicted} for r in results], indent=2))
    else:
        print(
            f"{'program':34} {'mode':8} {'type':9} {'coverage':>9}  {'out':>3} {'max ULP':>11} {'max |err|':>10} {'rel':>9}"
        )
        for r in results:
            for e in r.errors or (Error(-1, 0, 0, 0),):
                print(
                    f"{r.program:34} {r.mode:8} {r.type:9} {r.listed:>4}/{r.matrix_ops:<4}  {e.output:>3} "
                    f"{e.ulp:11.4g} {e.abs:10.3g} {e.rel:9.3g}"
                )
            if r.as_predicted is not None:
                print(
                    f"{'':34} bf16 matmult: rel {r.rel:.3g} in [2^-12, 2^-8*sqrt({r.contraction})={r.bound:.3g}]: {r.as_predicted}"
                )
    covered = all(r.coverage == 1.0 for r in results)
    predicted = all(r.as_predicted is not False for r in results)
    print(f"coverage 100% everywhere: {covered}; bf16 matmult as predicted everywhere: {predicted}", file=sys.stderr)
    return 0 if covered and predicted else 1


if __name__ == "__main__":
    sys.exit(main())
