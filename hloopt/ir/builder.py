"""Create instructions at an insertion point, named like XLA names them (``convert.3``).

Passes build their rewrites with a `Builder` instead of constructing
`Instruction` objects and splicing lists: each new instruction gets a
module-wide unique name from `Module.unique_name` and goes into the
computation at once, in creation order, just before (or just after) the
anchor the builder was made for.
"""

from __future__ import annotations

from collections.abc import Sequence

from hloopt.ir.attribute_values import Int
from hloopt.ir.literal import Literal
from hloopt.ir.module import AttributeValue, Computation, Instruction, Module
from hloopt.ir.shape import Shape


class Builder:
    """An insertion point in one computation: `before(anchor)` or `after(anchor)`."""

    def __init__(self, anchor: Instruction, *, after: bool = False) -> None:
        computation = anchor.parent
        if computation is None or computation.parent is None:
            raise ValueError(f"%{anchor.name} is not in a computation of a module")
        self.computation: Computation = computation
        self.module: Module = computation.parent
        #: New instructions go before this one (`after` false) or after it (it is then the last one made).
        self._anchor = anchor
        self._after = after
        #: Every instruction made here, in creation (and text) order.
        self.created: list[Instruction] = []

    @classmethod
    def before(cls, anchor: Instruction) -> Builder:
        return cls(anchor)

    @classmethod
    def after(cls, anchor: Instruction) -> Builder:
        return cls(anchor, after=True)

    def add(
        self,
        opcode: str,
        shape: Shape,
        operands: Sequence[Instruction] = (),
        attributes: dict[str, AttributeValue] | None = None,
        literal: Literal | None = None,
    ) -> Instruction:
        """A new `opcode` instruction, inserted at the insertion point."""
        name = self.module.unique_name(opcode)
        instruction = Instruction(name, opcode, shape, operands, attributes, literal, written_order=False)
        if self._after:
            self.computation.insert_after(self._anchor, instruction)
            self._anchor = instruction
        else:
            self.computation.insert_before(self._anchor, instruction)
        self.created.append(instruction)
        return instruction

    def convert(self, operand: Instruction, shape: Shape) -> Instruction:
        return self.add("convert", shape, [operand])

    def get_tuple_element(self, operand: Instruction, index: int, shape: Shape) -> Instruction:
        return self.add("get-tuple-element", shape, [operand], {"index": Int(index)})

    def tuple(self, elements: Sequence[Instruction], shape: Shape) -> Instruction:
        return self.add("tuple", shape, elements)

    def constant(self, literal: Literal) -> Instruction:
        return self.add("constant", literal.shape, literal=literal)
