"""NeuronIntMatmulDowncast (#68): an integer dot routed through the F32 datapath.

The Neuron PE array has no integer matmul, so an integer dot becomes
convert → F32 dot → convert back ("down" onto the float path, not a narrowing).
Every new instruction is stamped ``auto_cast="none"`` so later auto-casting
leaves the F32 routing alone. There is no overflow guard (as in the binary);
hloopt only warns when the F32 accumulation can stop being exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloopt.analysis.shape_inference import ShapeResolver, int_list
from hloopt.errors import HloError
from hloopt.ir import element_types
from hloopt.ir.attributes import MapSyntaxError, canonical_order, with_frontend_attribute, with_op_name_suffix
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import INT_TYPES
from hloopt.ir.module import AttributeValue, Instruction
from hloopt.ir.shape import ArrayShape, Shape, leaf_shapes
from hloopt.passes.base import OpExpanderPass, known_shape, to_f32

#: Appended, verbatim with its spaces, to each new instruction's metadata op_name.
METADATA_SUFFIX = " Downcast for int support "
#: CreateDot passes only the dimension numbers and the precision config through.
_DOT_ATTRIBUTES = (
    "lhs_batch_dims",
    "lhs_contracting_dims",
    "rhs_batch_dims",
    "rhs_contracting_dims",
    "sparsity",
    "operand_precision",
)
#: Integers up to 2**24 in magnitude are exact in F32 (24-bit significand).
F32_EXACT = 1 << 24


def all_leaves_integers(shape: Shape | None) -> bool:
    """XLA's ``Shape::AreAllLeavesIntegers`` (PRED is not an integer)."""
    leaves = leaf_shapes(shape) if shape is not None else []
    return bool(leaves) and all(leaf.element_type in INT_TYPES for leaf in leaves)


def _max_magnitude(element_type: str) -> int:
    row = element_types.BY_NAME[element_type]
    return int(max(-row.lowest, row.highest))


@dataclass(frozen=True)
class NeuronIntMatmulDowncast(OpExpanderPass):
    """kDot with an all-integer result → F32 dot between converts, locked with auto_cast=none."""

    name = "neuron-int-matmul-downcast"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == "dot" and all_leaves_integers(shapes(instruction))

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        operand_shapes = [known_shape(shapes, operand) for operand in instruction.operands]
        dot_shape = known_shape(shapes, instruction)
        stamp = _stamp(instruction)

        def stamped(attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
            return canonical_order(attributes | stamp)

        operands = [
            # sparsity metadata (operands 2 and up) stays as it is
            builder.add("convert", to_f32(shape), [operand], stamped({}))
            if position < 2 and all_leaves_integers(shape)
            else operand
            for position, (operand, shape) in enumerate(zip(instruction.operands, operand_shapes))
        ]
        attributes = {k: instruction.attributes[k] for k in _DOT_ATTRIBUTES if k in instruction.attributes}
        f32_dot = builder.add("dot", to_f32(dot_shape), operands, stamped(attributes))
        return builder.add("convert", dot_shape, [f32_dot], stamped({}))

    def warning(self, instruction: Instruction, shapes: ShapeResolver) -> str | None:
        return _overflow_warning(instruction, shapes)


def _stamp(dot: Instruction) -> dict[str, AttributeValue]:
    """The frontend attributes and metadata every new instruction gets: auto_cast=none, the op_name suffix."""
    try:
        return {
            "frontend_attributes": with_frontend_attribute(
                _text(dot.attributes.get("frontend_attributes")), "auto_cast", '"none"'
            ),
            "metadata": with_op_name_suffix(_text(dot.attributes.get("metadata")), METADATA_SUFFIX),
        }
    except MapSyntaxError as err:
        raise HloError(f"%{dot.name}: cannot read its metadata or frontend attributes: {err}") from None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _overflow_warning(dot: Instruction, shapes: ShapeResolver) -> str | None:
    """A warning when K·max|a|·max|b| can pass 2**24, where F32 sums stop being exact integers."""
    lhs, rhs = (shapes(o) for o in dot.operands[:2])
    if not (isinstance(lhs, ArrayShape) and isinstance(rhs, ArrayShape)):
        return None
    if lhs.element_type not in INT_TYPES or rhs.element_type not in INT_TYPES:
        return None
    k = 1
    for d in int_list(dot.attributes.get("lhs_contracting_dims")):
        k *= lhs.dims[d] if d < lhs.rank else 1
    worst = k * _max_magnitude(lhs.element_type) * _max_magnitude(rhs.element_type)
    if worst <= F32_EXACT:
        return None
    return (
        f"%{dot.name}: {lhs.element_type}×{rhs.element_type} dot with K={k} can reach |{worst}| > 2^24; "
        "the F32 emulation is then no longer exact (the pass has no overflow guard)"
    )
