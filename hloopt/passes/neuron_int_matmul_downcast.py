"""NeuronIntMatmulDowncast (#68): an integer dot routed through the F32 datapath.

The Neuron PE array has no integer matmul, so an integer dot becomes
convert → F32 dot → convert back ("down" onto the float path, not a narrowing).
Every new instruction is stamped ``auto_cast="none"`` so later auto-casting
leaves the F32 routing alone. There is no overflow guard (as in the binary);
hloopt warns when the result type cannot hold every exact sum (the original
wraps, the F32 route saturates in the convert back) and when the F32
accumulation can stop being exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloopt.analysis.integer_bounds import dot_bound
from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.errors import HloError
from hloopt.ir.attributes import MapSyntaxError, with_frontend_attribute, with_op_name_suffix
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import INT_TYPES
from hloopt.ir.module import AttributeValue, Instruction
from hloopt.ir.opcodes import BY_NAME
from hloopt.ir.shape import ArrayShape, Shape, leaf_shapes
from hloopt.passes.base import OpExpanderPass, known_shape, to_f32

#: Appended, verbatim with its spaces, to each new instruction's metadata op_name.
METADATA_SUFFIX = " Downcast for int support "
#: CreateDot passes the dimension numbers, the sparsity and the whole precision config
#: (``operand_precision``, ``algorithm``, …) through: every attribute a dot takes of its own
#: (printed in XLA's order by the printer).
_DOT_ATTRIBUTES = BY_NAME["dot"].attributes
#: Integers up to 2**24 in magnitude are exact in F32 (24-bit significand).
F32_EXACT = 1 << 24


def all_leaves_integers(shape: Shape | None) -> bool:
    """XLA's ``Shape::AreAllLeavesIntegers`` (PRED is not an integer)."""
    leaves = leaf_shapes(shape) if shape is not None else []
    return bool(leaves) and all(leaf.element_type in INT_TYPES for leaf in leaves)


@dataclass(frozen=True)
class NeuronIntMatmulDowncast(OpExpanderPass):
    """kDot with an all-integer result → F32 dot between converts, locked with auto_cast=none."""

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == "dot" and all_leaves_integers(shapes(instruction))

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        operand_shapes = [known_shape(shapes, operand) for operand in instruction.operands]
        dot_shape = known_shape(shapes, instruction)
        stamp = _stamp(instruction)
        operands = [
            # sparsity metadata (operands 2 and up) stays as it is
            builder.add("convert", to_f32(shape), [operand], stamp)
            if position < 2 and all_leaves_integers(shape)
            else operand
            for position, (operand, shape) in enumerate(zip(instruction.operands, operand_shapes))
        ]
        attributes = {k: v for k, v in instruction.attributes.items() if k in _DOT_ATTRIBUTES}
        f32_dot = builder.add("dot", to_f32(dot_shape), operands, attributes | stamp)
        return builder.add("convert", dot_shape, [f32_dot], stamp)

    def warnings(self, instruction: Instruction, shapes: ShapeResolver) -> list[str]:
        return _overflow_warnings(instruction, shapes)


def _stamp(dot: Instruction) -> dict[str, AttributeValue]:
    """The frontend attributes and metadata every new instruction gets: auto_cast=none, the op_name suffix."""
    try:
        return {
            "frontend_attributes": with_frontend_attribute(
                dot.attributes.get("frontend_attributes"), "auto_cast", "none"
            ),
            "metadata": with_op_name_suffix(dot.attributes.get("metadata"), METADATA_SUFFIX),
        }
    except MapSyntaxError as err:
        raise HloError(f"%{dot.name}: cannot read its metadata or frontend attributes: {err}") from None


def _overflow_warnings(dot: Instruction, shapes: ShapeResolver) -> list[str]:
    """Warnings when the result type cannot hold K·max|a|·max|b|, and when that can pass 2**24."""
    bound = dot_bound(dot, shapes)
    result = shapes(dot)
    if bound is None or not isinstance(result, ArrayShape):
        return []
    lhs, rhs = (known_shape(shapes, o) for o in dot.operands[:2])
    assert isinstance(lhs, ArrayShape) and isinstance(rhs, ArrayShape)  # dot_bound checked them
    found: list[str] = []
    if not bound.fits(result.element_type):
        found.append(
            f"%{dot.name}: {lhs.element_type}×{rhs.element_type} dot with K={bound.k} can reach "
            f"|{bound.magnitude}| (sums in [{bound.lowest}, {bound.highest}]), which {result.element_type} cannot hold; "
            "the original wraps, the F32 route saturates in the convert back"
        )
    if bound.magnitude > F32_EXACT:
        found.append(
            f"%{dot.name}: {lhs.element_type}×{rhs.element_type} dot with K={bound.k} can reach |{bound.magnitude}| > 2^24; "
            "the F32 emulation is then no longer exact (the pass has no overflow guard)"
        )
    return found
