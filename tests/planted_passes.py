"""Passes with planted bugs, for ``trace --bisect``'s tests; XLA workers unpickle them by name, so a test
that uses one puts this folder on the workers' path (`xla_workers.on_worker_path`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.ir.builder import Builder
from hloopt.ir.module import Instruction
from hloopt.passes.base import OpExpanderPass, known_shape


@dataclass(frozen=True)
class WrongAtSome(OpExpanderPass):
    """Rewrites every add into a new add (a correct rewrite), except those named in `wrong`, which become
    subtracts."""

    name = "test-wrong-at-some"
    matched: ClassVar[str] = "add"
    wrong: frozenset[str] = frozenset()

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == self.matched

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        opcode = "subtract" if instruction.name in self.wrong else self.matched
        return builder.add(opcode, known_shape(shapes, instruction), instruction.operands)


@dataclass(frozen=True)
class WrongMultiplyAtSome(WrongAtSome):
    """`WrongAtSome` for multiplies: a second pass, for bisecting a pipeline."""

    name = "test-wrong-multiply-at-some"
    matched: ClassVar[str] = "multiply"


@dataclass(frozen=True)
class BrokenMultiply(WrongMultiplyAtSome):
    """A multiply pass with a bug: its expansion raises a plain exception (a `PassError` names it)."""

    name = "test-broken-multiply"

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        raise KeyError(instruction.name)


@dataclass(frozen=True)
class BrokenMatching(WrongMultiplyAtSome):
    """A multiply pass whose matching raises: it fails before any site is filtered."""

    name = "test-broken-matching"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        raise ValueError("no match today")
