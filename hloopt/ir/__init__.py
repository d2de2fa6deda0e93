"""hloopt's typed IR of an HLO module (no parsing or printing here)."""

from hloopt.ir.literal import Literal
from hloopt.ir.module import (
    Computation,
    ComputationList,
    Instruction,
    InstructionList,
    Module,
    ProgramLayout,
)
from hloopt.ir.shape import ArrayShape, Layout, Shape, TupleShape

__all__ = [
    "ArrayShape",
    "Computation",
    "ComputationList",
    "Instruction",
    "InstructionList",
    "Layout",
    "Literal",
    "Module",
    "ProgramLayout",
    "Shape",
    "TupleShape",
]
