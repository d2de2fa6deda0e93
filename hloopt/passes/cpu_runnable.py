"""cpu-runnable: an optimised module (XLA's ``after_optimizations`` print) made one XLA's CPU compiler takes again.

An optimised module is the input of a backend's code generator, not of its compiler: its
fusions need the backend_config the fusion emitter wrote, its bitcasts only mean something
under the physical layouts of their operand and result, and its layouts and configs may be a
GPU's or a TPU's. hloopt compiles through StableHLO, which keeps no instruction layouts, so a
module that is to run must say everything with logical operations. The rewrites, each exact:

- a ``fusion`` becomes a ``call`` of its fused computation (the computation *is* the fusion's
  meaning; the CPU compiler inlines calls and fuses again as it likes);
- a ``bitcast`` becomes the transpose, reshape and bitcast-convert its layouts stand for: the
  operand in its physical (major-to-minor) order, reshaped to the result's physical dimensions,
  transposed to the result's logical order; a same-bytes bitcast with no layout change is a
  reshape, one that changes nothing is its operand;
- ``copy-done(copy-start(x))``, a copy between memory spaces that the CPU emitter lacks, is
  ``copy(x)``;
- a ``dot`` or ``convolution`` whose floating-point operands are narrower than its result (bf16 × bf16
  → f32, as auto-cast and jax's ``preferred_element_type`` write it) reads them widened to the result's
  type: XLA's CPU refuses some such dots ("Unsupported element type for DotThunk::Execute: BF16 x BF16 =
  F32") and runs others, and widening is exact, so the products and their f32 sum are the same;
- every layout becomes XLA's default (descending) one, entry_computation_layout included, and
  tiles, memory spaces and element sizes go: outside bitcasts a layout says where bytes are,
  never what the values are. Custom calls keep theirs: a library call reads and writes the bytes
  in the layout it was given;
- ``backend_config`` goes from every instruction but custom calls (where it carries the call's
  own attributes): the CPU compiler reads it as its own config and refuses a GPU's or a TPU's;
  a fusion's ``kind`` and ``output_to_operand_aliasing`` go with the fusion, and the header's
  ``is_scheduled`` with the schedule the rewrites no longer follow.

A module the CPU cannot run at all (a custom call only a GPU or TPU implements, a jax host
callback, a bitcast over tiled or packed layouts) is refused with `NotCpuRunnable`, which names the instruction. A
constant printed without its value (``{...}``, as ``compiled.as_text()`` prints large ones)
is a warning: XLA runs it with made-up values, so the results are not the program's.
`cpu_runnable` works on a copy; the pass itself, like every pass, rewrites the module it is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.errors import HloError
from hloopt.ir.attribute_values import IntList, String
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import BY_NAME, FLOAT_TYPES
from hloopt.ir.literal import Literal
from hloopt.ir.module import (
    AttributeValue,
    Computation,
    Instruction,
    Module,
    ProgramLayout,
)
from hloopt.ir.shape import ArrayShape, Shape, default_layout, map_leaves
from hloopt.passes.base import HloPass, PassResult, known_shape, provenance_of, where
from hloopt.passes.pipeline import run_pipeline

#: Custom-call targets XLA's CPU backend cannot run, as regular expressions over the whole target, each with
#: why (read after "calls TARGET, "): what only a GPU or TPU implements (XLA's, jaxlib's GPU plugins',
#: Transformer Engine's), and jax's host callbacks (`jax.pure_callback`, `io_callback`, `debug.print`).
_UNRUNNABLE_TARGETS = (
    (
        re.compile(
            r"__cublas\$.*|__cudnn\$.*|__cusolver\$.*|__cub\$.*|__triton.*|__gpu\$.*|__xla_gpu_.*|xla\.gpu\..*"
            r"|cu_.*|cublas_.*|cusolver_.*|cusparse_.*|cudnn_.*|hip_.*|hipblas.*|hipsolver_.*|hipsparse_.*"
            r"|triton_kernel_call.*|mosaic_gpu.*|te_.*_ffi"
            r"|tpu_.*|__tpu\$.*|SparseDenseMatmul.*|SparseCore.*"
        ),
        "which only a GPU or TPU implements: XLA's CPU backend cannot run it",
    ),
    (
        re.compile(r"xla(?:_ffi)?(?:_partitioned)?(?:_buffer)?_python_(?:cpu_|gpu_)?callback"),
        "a jax host callback: it calls a Python function by its index in a list that jax hands only to its own"
        " compile of what it lowered; XLA compiling the module's text has no such list, and dies running it",
    ),
)
#: The fusion attributes that mean nothing to a call.
_FUSION_ONLY = frozenset({"kind", "calls", "output_to_operand_aliasing", "backend_config"})


class NotCpuRunnable(HloError):
    """The module cannot be brought to a form XLA's CPU backend runs; the message names the instruction."""


@dataclass(frozen=True)
class CpuRunnable(HloPass):
    """Fusions become calls, bitcasts logical ops, layouts default, backend configs go (see the module doc)."""

    def run_on_module(self, module: Module) -> PassResult:
        _refuse_unrunnable(module)
        replaced = _explicit_bitcasts(module) + _calls_for_fusions(module) + _plain_copies(module)
        replaced += _widened_matmul_operands(module)
        stripped = [i for i in list(module.instructions()) if _strip(i)]
        provenance = tuple(replaced) + tuple(pair for i in stripped for pair in provenance_of(i, [i]))
        rewritten = len({old for _, old in replaced}) + len(stripped)
        changed = rewritten > 0
        layout = module.entry_layout
        if layout is not None:
            default = ProgramLayout(tuple(map(_default, layout.parameters)), _default(layout.result))
            if default != layout:
                module.entry_layout = default
                changed = True
        if module.attributes.pop("is_scheduled", None) is not None:
            changed = True
        return PassResult(changed, rewritten, _elided_constants(module), provenance)

    def matches(self, module: Module) -> list[Instruction]:
        """Fusions, bitcasts, and instructions with a backend_config or a layout the pass would drop."""
        shapes = ShapeResolver(module)
        return [
            i
            for i in module.instructions()
            if i.opcode in ("fusion", "bitcast")
            or _async_copy(i) is not None
            or _strippable(i)
            or _narrow_operands(i, shapes)
        ]


def cpu_runnable(module: Module) -> tuple[Module, tuple[str, ...]]:
    """A copy of `module` that XLA's CPU compiler compiles and that computes the same results, and
    the pass's warnings (each names an instruction).

    `module` itself is not changed. The pipeline's verifier checks the copy, and blames `module`
    when that was invalid already.
    """
    copy = module.clone()
    report = run_pipeline(copy, [CpuRunnable()], original=lambda: module)
    return copy, tuple(warning for result in report.passes for warning in result.warnings)


# --- refusals ------------------------------------------------------------------------------------


def _refuse_unrunnable(module: Module) -> None:
    """Raise `NotCpuRunnable` for the first custom call XLA's CPU backend cannot run (`_UNRUNNABLE_TARGETS`)."""
    for instruction in module.instructions():
        if instruction.opcode == "custom-call":
            written = instruction.attributes.get("custom_call_target")
            target = written.value if isinstance(written, String) else ""
            for pattern, reason in _UNRUNNABLE_TARGETS:
                if pattern.fullmatch(target):
                    raise NotCpuRunnable(f"{where(instruction)} calls {target}, {reason}")


def _elided_constants(module: Module) -> tuple[str, ...]:
    """A warning per constant printed as ``{...}``: XLA's parser makes up its values."""
    return tuple(
        f"{where(i)} was printed without its value ({{...}}); XLA runs it with made-up values, so the "
        "results are not the program's: print the module with print_large_constants"
        for i in module.instructions()
        if i.literal is not None and i.literal.is_elided
    )


# --- bitcasts ------------------------------------------------------------------------------------


def _physical_order(shape: ArrayShape) -> tuple[int, ...]:
    """The dimensions from the most major to the most minor (a shape written without layout has the default)."""
    layout = shape.layout
    if layout is None or len(layout.minor_to_major) != shape.rank:
        return tuple(range(shape.rank))
    return tuple(reversed(layout.minor_to_major))


def _is_row_major(shape: ArrayShape) -> bool:
    """Logical and physical element order agree: the dimensions of size > 1 are laid out in order."""
    order = [d for d in _physical_order(shape) if shape.dims[d] != 1]
    return order == sorted(order)


def _array(shapes: ShapeResolver, instruction: Instruction) -> ArrayShape:
    """The array shape of a bitcast or of its operand; a tuple has no bytes to reinterpret."""
    shape = known_shape(shapes, instruction)
    if not isinstance(shape, ArrayShape):
        raise NotCpuRunnable(f"{where(instruction)} has the shape {shape.to_text()}, which no bitcast can reinterpret")
    return shape


def _explicit_bitcasts(module: Module) -> list[tuple[str, str]]:
    """Replace every bitcast by what it stands for; the provenance of what replaced them.

    Each is read under the layouts as written, all before the first is replaced: an operand
    that is itself a rewritten bitcast has the same values but no longer its layout.
    """
    shapes = ShapeResolver(module)
    bitcasts = [
        (computation, i, _array(shapes, i.operands[0]), _array(shapes, i))
        for computation in module.computations
        for i in computation.instructions
        if i.opcode == "bitcast"
    ]
    provenance: list[tuple[str, str]] = []
    for computation, bitcast, source, target in bitcasts:
        builder = Builder.before(bitcast)
        replacement = _explicit_bitcast(builder, bitcast, source, target, shapes)
        computation.replace_instruction(bitcast, replacement)
        provenance += provenance_of(bitcast, [*builder.created, replacement])
    return provenance


def _explicit_bitcast(
    builder: Builder, bitcast: Instruction, source: ArrayShape, target: ArrayShape, shapes: ShapeResolver
) -> Instruction:
    """The logical operations that `bitcast` from `source` to `target` (layouts as written) stands for,
    made with `builder`."""
    (operand,) = bitcast.operands
    if source == target:  # whatever the layout, tiles included, it holds its own bytes
        return operand
    problem = _inexpressible(source, target)
    if problem is not None:
        raise NotCpuRunnable(f"{where(bitcast)} {source.to_text()} → {target.to_text()}: {problem}")
    value = operand
    if not _is_row_major(source):  # the operand's elements in the order they are stored
        order = _physical_order(source)
        value = _transpose(builder, value, _row_major(source.element_type, [source.dims[d] for d in order]), order)
    out_order = _physical_order(target) if not _is_row_major(target) else tuple(range(target.rank))
    stored = [target.dims[d] for d in out_order]  # the result's dimensions in storage order
    value = _retype(builder, value, shapes, source, target.element_type)
    value = _reshape(builder, value, shapes, stored)
    if out_order != tuple(range(target.rank)):
        inverse = tuple(out_order.index(d) for d in range(target.rank))
        value = _transpose(builder, value, _row_major(target.element_type, target.dims), inverse)
    return value


def _inexpressible(source: ArrayShape, target: ArrayShape) -> str | None:
    """Why the bitcast cannot be said with logical operations, or None."""
    single = source.element_count <= 1 and target.element_count <= 1  # its one element comes first in any layout
    for shape in (source, target):
        if shape.layout is not None and shape.layout.element_size_in_bits and not single:
            return f"the layout {shape.layout.to_text()} packs the elements, which the CPU backend does not"
        if any(shape.dynamic):
            return "a dynamic shape's padding makes the byte order unknown"
    if not single and not _same_tiling(source, target):
        return "hloopt cannot tell that the two tilings put the elements in the same order"
    source_type, target_type = BY_NAME.get(source.element_type), BY_NAME.get(target.element_type)
    if source_type is None or target_type is None or not source_type.bits or not target_type.bits:
        return "it has no array of numbers on one side"
    if source.element_type != target.element_type and min(source_type.bits, target_type.bits) < 8:
        return "it reinterprets sub-byte elements, whose packing the layout does not say"
    if source.element_count * source_type.bits != target.element_count * target_type.bits:
        return "the two sides hold different numbers of bytes"
    return None


def _tiles(shape: ArrayShape) -> tuple[tuple[int, ...], ...]:
    return () if shape.layout is None else shape.layout.tiles


def _same_tiling(source: ArrayShape, target: ArrayShape) -> bool:
    """The tiles reorder both sides' elements alike, so the bitcast means what it means untiled.

    True without tiles; with them, when both sides have the same tiles and the dimensions the
    first tile covers (the most minor ones, in storage order) have the same sizes: the tiles then
    pad and permute the same minor blocks, and the major dimensions only enumerate the blocks.
    """
    tiles, other = _tiles(source), _tiles(target)
    if not tiles or not other:
        return tiles == other
    if tiles != other:
        return False
    covered = max(len(tiles[0]), 1)  # a bare `T` (one empty tile) is read as covering one dimension

    def minor_sizes(shape: ArrayShape) -> list[int]:
        stored = [1] * covered + [shape.dims[d] for d in _physical_order(shape)]
        return stored[-covered:]

    return minor_sizes(source) == minor_sizes(target)


def _row_major(element_type: str, dims: Iterable[int]) -> ArrayShape:
    dims = tuple(dims)
    return ArrayShape(element_type, dims, (False,) * len(dims), default_layout(len(dims)))


def _transpose(builder: Builder, value: Instruction, shape: ArrayShape, permutation: Iterable[int]) -> Instruction:
    return builder.add("transpose", shape, [value], {"dimensions": IntList(tuple(permutation))})


def _reshape(builder: Builder, value: Instruction, shapes: ShapeResolver, dims: list[int]) -> Instruction:
    """`value` with `dims` (itself when it has them)."""
    current = _array(shapes, value)
    if list(current.dims) == dims:
        return value
    return builder.add("reshape", _row_major(current.element_type, dims), [value])


def _retype(
    builder: Builder, value: Instruction, shapes: ShapeResolver, source: ArrayShape, element_type: str
) -> Instruction:
    """The stored elements of `value` reinterpreted as `element_type`, flat when the widths differ."""
    if source.element_type == element_type:
        return value
    current = _array(shapes, value)
    bits, target_bits = BY_NAME[source.element_type].bits, BY_NAME[element_type].bits
    if bits == target_bits:
        return builder.add("bitcast-convert", _row_major(element_type, current.dims), [value])
    count = current.element_count
    if bits > target_bits:  # each element becomes a minor dimension of narrower ones
        flat = _reshape(builder, value, shapes, [count])
        split = builder.add("bitcast-convert", _row_major(element_type, (count, bits // target_bits)), [flat])
        return _reshape(builder, split, shapes, [count * (bits // target_bits)])
    ratio = target_bits // bits
    grouped = _reshape(builder, value, shapes, [count // ratio, ratio])
    return builder.add("bitcast-convert", _row_major(element_type, (count // ratio,)), [grouped])


# --- fusions, layouts, configs -------------------------------------------------------------------


def _calls_for_fusions(module: Module) -> list[tuple[str, str]]:
    """Replace every fusion by a call of its fused computation; the provenance of the calls."""
    fusions = [(c, i) for c in module.computations for i in c.instructions if i.opcode == "fusion"]
    provenance: list[tuple[str, str]] = []
    for computation, fusion in fusions:
        call = _as_call(fusion)
        computation.replace_instruction(fusion, call)
        provenance += provenance_of(fusion, [call])
    return provenance


def _async_copy(done: Instruction) -> Instruction | None:
    """The copy-start that a copy-done completes, when that is all the start is used for."""
    if done.opcode != "copy-done" or done.operands[0].opcode != "copy-start":
        return None
    start = done.operands[0]
    return start if list(start.users) == [done] else None


def _plain_copies(module: Module) -> list[tuple[str, str]]:
    """Replace each copy-start/copy-done pair by a copy; the provenance of the copies (each from its done)."""
    shapes = ShapeResolver(module)
    pairs = [(c, i, start) for c in module.computations for i in c.instructions if (start := _async_copy(i))]
    provenance: list[tuple[str, str]] = []
    for computation, done, start in pairs:
        copy = Builder.before(done).add("copy", known_shape(shapes, done), start.operands)
        computation.replace_instruction(done, copy)
        provenance += provenance_of(done, [copy])
    return provenance


def _narrow_operands(instruction: Instruction, shapes: ShapeResolver) -> list[tuple[Instruction, ArrayShape]]:
    """A dot's or convolution's operands of a float type narrower than its float result, each with its shape
    widened to the result's type."""
    if instruction.opcode not in ("dot", "convolution"):
        return []
    result = shapes(instruction)
    if not isinstance(result, ArrayShape) or result.element_type not in FLOAT_TYPES:
        return []
    wide = BY_NAME[result.element_type]
    found: list[tuple[Instruction, ArrayShape]] = []
    for operand in dict.fromkeys(instruction.operands[:2]):
        shape = shapes(operand)
        if not isinstance(shape, ArrayShape) or shape.element_type not in FLOAT_TYPES:
            continue
        if BY_NAME[shape.element_type].bits < wide.bits:
            found.append((operand, shape.with_element_type(wide.name)))
    return found


def _widened_matmul_operands(module: Module) -> list[tuple[str, str]]:
    """Each dot and convolution reads its narrow float operands widened to its result's type (one convert per
    operand and user); the provenance of the converts."""
    shapes = ShapeResolver(module)
    provenance: list[tuple[str, str]] = []
    for instruction in [i for i in module.instructions() if i.opcode in ("dot", "convolution")]:
        for operand, wide in _narrow_operands(instruction, shapes):
            builder = Builder.before(instruction)
            instruction.replace_operand(operand, builder.convert(operand, wide))
            provenance += provenance_of(instruction, builder.created)
    return provenance


def _as_call(fusion: Instruction) -> Instruction:
    """``call`` of the fused computation, with the fusion's metadata and other generic attributes."""
    callee = fusion.attributes["calls"]
    assert isinstance(callee, Computation), f"%{fusion.name} calls no computation"
    attributes: dict[str, AttributeValue] = {"to_apply": callee}
    attributes |= {k: v for k, v in fusion.attributes.items() if k not in _FUSION_ONLY}
    shape = fusion.shape if fusion.shape is not None else callee.root.shape if callee.root is not None else None
    assert shape is not None, f"%{fusion.name} has no shape"
    return Builder.before(fusion).add("call", shape, fusion.operands, attributes)


def _default_array(shape: ArrayShape) -> ArrayShape:
    if shape.layout is None or shape.element_type in ("token", "opaque"):
        return shape
    default = default_layout(shape.rank)
    return shape if shape.layout == default else ArrayShape(shape.element_type, shape.dims, shape.dynamic, default)


def _default(shape: Shape) -> Shape:
    """`shape` with XLA's default layout on every array (the same object when it has it)."""
    return map_leaves(shape, _default_array)


def _strippable(instruction: Instruction) -> bool:
    """A non-custom-call with a backend_config or a layout other than the default."""
    if instruction.opcode == "custom-call":
        return False
    literal = instruction.literal
    return (
        "backend_config" in instruction.attributes
        or (instruction.shape is not None and _default(instruction.shape) != instruction.shape)
        or (literal is not None and _default(literal.shape) != literal.shape)
    )


def _strip(instruction: Instruction) -> bool:
    """Drop a non-custom-call's backend_config and layouts; whether there were any."""
    if not _strippable(instruction):
        return False
    if "backend_config" in instruction.attributes:
        instruction.set_attributes({k: v for k, v in instruction.attributes.items() if k != "backend_config"})
    if instruction.shape is not None:
        instruction.set_shape(_default(instruction.shape))
    literal = instruction.literal
    if literal is not None and _default(literal.shape) != literal.shape:
        instruction.set_literal(Literal(_default(literal.shape), text=literal.text))
    return True
