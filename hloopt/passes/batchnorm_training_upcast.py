"""BatchNormTrainingUpcast (#51): BF16 batch-norm-training computed in F32.

BF16's 8-bit mantissa loses the running sums of mean and variance; the pass
widens the inputs, computes the statistics in F32 and narrows the three
results back to BF16, so the graph around it sees the same types as before.
"""
from __future__ import annotations

from hloopt.errors import HloError
from hloopt.ir.module import Instruction, Module
from hloopt.ir.shape import ArrayShape, TupleShape
from hloopt.ir.attributes import canonical_order
from hloopt.passes.base import OpExpanderPass, PassResult, known_shape, new_instruction, replace_like_xla, to_f32
from hloopt.analysis.shape_inference import ShapeResolver

#: CreateBatchNormTraining takes only these two attributes.
_KEPT = ("epsilon", "feature_index")


class BatchNormTrainingUpcast(OpExpanderPass):
    """kBatchNormTraining with any BF16 operand → convert, F32 batch-norm-training, gte, convert, tuple."""

    name = "batchnorm-training-upcast"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        if instruction.opcode != "batch-norm-training":
            return False
        return any(_element_type(shapes(o)) == "bf16" for o in instruction.operands)

    def expand(self, module: Module, bnt: Instruction, shapes: ShapeResolver, result: PassResult) -> None:
        computation = bnt.parent
        assert computation is not None
        original = known_shape(shapes, bnt)
        if not isinstance(original, TupleShape) or len(original.elements) != 3:
            raise HloError(f"%{bnt.name}: batch-norm-training must return a 3-tuple, not {original.to_text()}")
        created: list[Instruction] = []
        widened: list[Instruction] = []
        for operand in bnt.operands:
            shape = known_shape(shapes, operand)
            if _element_type(shape) == "f32":
                widened.append(operand)
                continue
            convert = new_instruction(module, "convert", to_f32(shape), [operand])
            created.append(convert)
            widened.append(convert)
        attributes = {k: bnt.attributes[k] for k in _KEPT if k in bnt.attributes}
        f32_bnt = new_instruction(module, "batch-norm-training", to_f32(original), widened, attributes)
        created.append(f32_bnt)
        narrowed: list[Instruction] = []
        for index, element in enumerate(original.elements):
            gte = new_instruction(
                module, "get-tuple-element", to_f32(element), [f32_bnt], {"index": str(index)}
            )
            convert = new_instruction(module, "convert", element, [gte])
            created += [gte, convert]
            narrowed.append(convert)
        replacement = new_instruction(module, "tuple", original, narrowed)
        created.append(replacement)
        computation.insert_all_before(bnt, created)
        replace_like_xla(computation, bnt, replacement)
        replacement.attributes = canonical_order(replacement.attributes)


def _element_type(shape: object) -> str | None:
    return shape.element_type if isinstance(shape, ArrayShape) else None
