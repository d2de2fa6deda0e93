"""NeuronIntMatmulDowncast (#68): an integer dot routed through the F32 datapath.

The Neuron PE array has no integer matmul, so an integer dot becomes
convert → F32 dot → convert back ("down" onto the float path, not a narrowing).
Every new instruction is stamped ``auto_cast="none"`` so later auto-casting
leaves the F32 routing alone. There is no overflow guard (as in the binary);
hloopt only warns when the F32 accumulation can stop being exact.
"""
from __future__ import annotations

from hloopt.ir.module import Instruction, Module
from hloopt.ir.shape import INT_TYPES, SIGNED_INT_TYPES, ArrayShape, Shape, leaf_shapes
from hloopt.ir.attributes import canonical_order, with_frontend_attribute, with_op_name_suffix
from hloopt.passes.base import OpExpanderPass, PassResult, known_shape, new_instruction, replace_like_xla, to_f32
from hloopt.analysis.shape_inference import ShapeResolver, int_list

#: Appended, verbatim with its spaces, to each new instruction's metadata op_name.
METADATA_SUFFIX = " Downcast for int support "
#: CreateDot passes only the dimension numbers and the precision config through.
_DOT_ATTRIBUTES = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims", "sparsity", "operand_precision")
#: Integers up to 2**24 in magnitude are exact in F32 (24-bit significand).
F32_EXACT = 1 << 24


def all_leaves_integers(shape: Shape | None) -> bool:
    """XLA's ``Shape::AreAllLeavesIntegers`` (PRED is not an integer)."""
    leaves = leaf_shapes(shape) if shape is not None else []
    return bool(leaves) and all(leaf.element_type in INT_TYPES for leaf in leaves)


def _max_magnitude(element_type: str) -> int:
    bits = int(element_type[1:])
    return 1 << (bits - 1) if element_type in SIGNED_INT_TYPES else (1 << bits) - 1


class NeuronIntMatmulDowncast(OpExpanderPass):
    """kDot with an all-integer result → F32 dot between converts, locked with auto_cast=none."""

    name = "neuron-int-matmul-downcast"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == "dot" and all_leaves_integers(shapes(instruction))

    def expand(self, module: Module, dot: Instruction, shapes: ShapeResolver, result: PassResult) -> None:
        computation = dot.parent
        assert computation is not None
        created: list[Instruction] = []
        operands: list[Instruction] = []
        for position, operand in enumerate(dot.operands):
            shape = known_shape(shapes, operand)
            if position < 2 and all_leaves_integers(shape):  # sparsity metadata stays as it is
                operand = new_instruction(module, "convert", to_f32(shape), [operand])
                created.append(operand)
            operands.append(operand)
        dot_shape = known_shape(shapes, dot)
        attributes = {k: dot.attributes[k] for k in _DOT_ATTRIBUTES if k in dot.attributes}
        created.append(new_instruction(module, "dot", to_f32(dot_shape), operands, attributes))
        narrowed = new_instruction(module, "convert", dot_shape, [created[-1]])
        created.append(narrowed)
        metadata = with_op_name_suffix(_text(dot.attributes.get("metadata")), METADATA_SUFFIX)
        frontend = with_frontend_attribute(_text(dot.attributes.get("frontend_attributes")), "auto_cast", '"none"')
        for instruction in created:
            instruction.attributes["frontend_attributes"] = frontend
            instruction.attributes["metadata"] = metadata
            instruction.attributes = canonical_order(instruction.attributes)
        warning = _overflow_warning(dot, shapes)
        if warning:
            result.warnings.append(warning)
        computation.insert_all_before(dot, created)
        replace_like_xla(computation, dot, narrowed)
        narrowed.attributes = canonical_order(narrowed.attributes)


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
