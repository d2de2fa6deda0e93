"""What every pass is: XLA's pass framework in xDSL's dress.

A pass is a small frozen dataclass whose fields are its options (xDSL); ``run(module)``
rewrites the module in place and *returns* what it did (torch.fx), never keeping
state on the pass object. `OpExpanderPass` mirrors XLA's class of the same name:
collect the matching instructions first, then expand each, so a rewrite never sees
instructions created by an earlier rewrite; ``expand`` returns the replacement and
the base replaces the instruction with XLA's ``ReplaceInstruction`` semantics.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.errors import HloError
from hloopt.ir.builder import Builder
from hloopt.ir.module import Instruction, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, fold_tree, tuple_elements
from hloopt.passes.async_ops import unwrapped_async


@dataclass(frozen=True)
class PassResult:
    """What one run did: whether the module changed (as the pass itself reports it), how many
    instructions it rewrote (for reports) and warnings for the user."""

    changed: bool
    rewritten: int = 0
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class HloPass(ABC):
    """One module-to-module rewrite (XLA's ``HloModulePass``); options are dataclass fields."""

    #: The kebab-case name the registry, reports and dumps use.
    name: ClassVar[str] = ""

    def run(self, module: Module) -> PassResult:
        """Rewrite `module` in place and say what changed.

        The pass sees async sugar as the explicit wrapped op (`unwrapped_async`).

        The computations the pass edited are found by their edit counts, and, as XLA
        prints a module it rewrote, laid out in post order; a scheduled module keeps
        its list order (new instructions sit just before their first user).
        """
        with unwrapped_async(module):
            before = {computation: computation.edits for computation in module.computations}
            result = self.run_on_module(module)
            edited = [c for c in module.computations if before.get(c) != c.edits]
        if module.attributes.get("is_scheduled") != "true":
            for computation in edited:
                if computation in module.computations:  # not a wrapped computation sugared again
                    computation.sort_in_print_order()
        return result

    @abstractmethod
    def run_on_module(self, module: Module) -> PassResult:
        """Do the work; report `changed` truthfully (the pipeline can check it against the printed text)."""

    @abstractmethod
    def matches(self, module: Module) -> list[Instruction]:
        """The instructions this pass would still rewrite (empty once it has run)."""


@dataclass(frozen=True)
class OpExpanderPass(HloPass):
    """Find every instruction the pattern matches, then expand them one by one (XLA's OpExpanderPass)."""

    def run_on_module(self, module: Module) -> PassResult:
        shapes = ShapeResolver(module)
        rewritten = 0
        warnings: list[str] = []
        for instruction in self.matches(module, shapes):
            computation = instruction.parent
            if computation is None:  # removed as dead code by an earlier expansion
                continue
            warnings += self.warnings(instruction, shapes)
            computation.replace_instruction(instruction, self.expand(Builder.before(instruction), instruction, shapes))
            rewritten += 1
        return PassResult(rewritten > 0, rewritten, tuple(warnings))

    def matches(self, module: Module, shapes: ShapeResolver | None = None) -> list[Instruction]:
        if shapes is None:  # called from outside `run`: look into async sugar too
            with unwrapped_async(module):
                return self.matches(module, ShapeResolver(module))
        found: list[Instruction] = []
        for computation in module.computations:
            matched = {i for i in computation.instructions if self.instruction_matches(i, shapes)}
            if matched:  # most computations match nothing: order only those that do
                found += [i for i in computation.post_order() if i in matched]
        return found

    @abstractmethod
    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        """The gate (XLA's InstructionMatchesPattern)."""

    @abstractmethod
    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        """The replacement of `instruction` (XLA's ExpandInstruction).

        New instructions are made with `builder`, which inserts them just before
        `instruction`; the replacement may also be an instruction that already exists.
        """

    def warnings(self, instruction: Instruction, shapes: ShapeResolver) -> list[str]:
        """Warnings for the user about expanding `instruction` (read before it is replaced)."""
        del instruction, shapes
        return []


def to_f32(shape: Shape) -> Shape:
    """``ShapeUtil::ChangeElementType(shape, F32)`` for an array; tuples element by element."""

    def leaf(current: Shape) -> Shape:
        if isinstance(current, ArrayShape):
            return current.with_element_type("f32")
        raise TypeError(f"cannot change the element type of {current.to_text()}")

    return fold_tree(shape, tuple_elements, leaf, lambda _, elements: TupleShape(tuple(elements)))


def known_shape(shapes: ShapeResolver, instruction: Instruction) -> Shape:
    """The instruction's shape, written or inferred; an error when the source left it unknowable."""
    shape = shapes(instruction)
    if shape is None:
        raise HloError(f"cannot infer the shape of %{instruction.name} ({instruction.opcode}); write it out")
    return shape
