"""BatchNormTrainingUpcast (#51): BF16 batch-norm-training computed in F32.

BF16's 8-bit mantissa loses the running sums of mean and variance; the pass
widens the inputs, computes the statistics in F32 and narrows the three
results back to BF16, so the graph around it sees the same types as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.errors import HloError
from hloopt.ir.builder import Builder
from hloopt.ir.module import AttributeValue, Instruction
from hloopt.ir.shape import ArrayShape, Shape, TupleShape
from hloopt.passes.base import OpExpanderPass, known_shape, to_f32

#: CreateBatchNormTraining takes only these two attributes.
_KEPT = ("epsilon", "feature_index")


@dataclass(frozen=True)
class BatchNormTrainingUpcast(OpExpanderPass):
    """kBatchNormTraining with any BF16 operand → convert, F32 batch-norm-training, gte, convert, tuple."""

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        if instruction.opcode != "batch-norm-training":
            return False
        return any(_element_type(shapes(o)) == "bf16" for o in instruction.operands)

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        original = known_shape(shapes, instruction)
        if not isinstance(original, TupleShape) or len(original.elements) != 3:
            raise HloError(f"%{instruction.name}: batch-norm-training must return a 3-tuple, not {original.to_text()}")
        operand_shapes = [known_shape(shapes, operand) for operand in instruction.operands]
        widened = [
            operand if _element_type(shape) == "f32" else builder.convert(operand, to_f32(shape))
            for operand, shape in zip(instruction.operands, operand_shapes)
        ]
        attributes: dict[str, AttributeValue] = {
            k: instruction.attributes[k] for k in _KEPT if k in instruction.attributes
        }
        f32_bnt = builder.add("batch-norm-training", to_f32(original), widened, attributes)
        narrowed = [
            builder.convert(builder.get_tuple_element(f32_bnt, index, to_f32(element)), element)
            for index, element in enumerate(original.elements)
        ]
        return builder.tuple(narrowed, original)


def _element_type(shape: Shape | None) -> str | None:
    return shape.element_type if isinstance(shape, ArrayShape) else None
