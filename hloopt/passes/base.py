"""What every pass is, and the graph edits the passes share.

A pass mirrors XLA's ``HloModulePass``: it has a name and ``run(module)``
reports whether it changed anything. `OpExpanderPass` mirrors XLA's class of
the same name: collect the matching instructions first, then expand each, so a
rewrite never sees instructions created by an earlier rewrite.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from hloopt.ir.module import Computation, Instruction, InstructionList, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, fold_tree, tuple_elements
from hloopt.analysis.shape_inference import ShapeResolver


@dataclass
class PassResult:
    """What one run did: instructions rewritten (for reports) and warnings for the user."""

    rewritten: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Computations the pass edited; they are re-laid out in XLA's print order.
    touched: list[Computation] = field(default_factory=list)


class HloPass(ABC):
    """One module-to-module rewrite. `last` holds the counts of the latest run."""

    name: str = ""

    def __init__(self) -> None:
        self.last = PassResult()

    def run(self, module: Module) -> bool:
        """Rewrite `module` in place; True when it changed."""
        self.last = PassResult()
        self.run_on_module(module, self.last)
        # XLA prints a scheduled module in schedule order (our list order, where new
        # instructions sit just before their first user) and any other in post order.
        if module.attributes.get("is_scheduled") != "true":
            for computation in dict.fromkeys(self.last.touched):
                computation.instructions = xla_post_order(computation)
        return self.last.rewritten > 0

    @abstractmethod
    def run_on_module(self, module: Module, result: PassResult) -> None:
        """Do the work, counting each rewritten instruction in `result`."""

    @abstractmethod
    def matches(self, module: Module) -> list[Instruction]:
        """The instructions this pass would still rewrite (empty once it has run)."""


class OpExpanderPass(HloPass):
    """Find every instruction the pattern matches, then expand them one by one (XLA's OpExpanderPass)."""

    def run_on_module(self, module: Module, result: PassResult) -> None:
        shapes = ShapeResolver(module)
        for instruction in self.matches(module, shapes):
            result.touched.append(instruction.parent)  # type: ignore[arg-type]
            self.expand(module, instruction, shapes, result)
            result.rewritten += 1

    def matches(self, module: Module, shapes: ShapeResolver | None = None) -> list[Instruction]:  # type: ignore[override]
        shapes = shapes or ShapeResolver(module)
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
    def expand(self, module: Module, instruction: Instruction, shapes: ShapeResolver, result: PassResult) -> None:
        """Replace `instruction` with its expansion (XLA's ExpandInstruction)."""


def to_f32(shape: Shape) -> Shape:
    """``ShapeUtil::ChangeElementType(shape, F32)`` for an array; tuples element by element."""
    def leaf(current: Shape) -> Shape:
        if isinstance(current, ArrayShape):
            return current.with_element_type("f32")
        raise TypeError(f"cannot change the element type of {current.to_text()}")

    return fold_tree(shape, tuple_elements, leaf, lambda _, elements: TupleShape(tuple(elements)))


def new_instruction(
    module: Module, opcode: str, shape: Shape, operands: list[Instruction], attributes: dict | None = None
) -> Instruction:
    """A fresh instruction named like XLA's NameUniquer would name it (``convert.3``)."""
    return Instruction(module.unique_name(opcode), opcode, shape, operands, attributes or {})


def insert_after(computation: Computation, anchor: Instruction, instructions: list[Instruction]) -> None:
    """Put `instructions` right after `anchor` in text order (definitions still precede uses)."""
    index = computation.instructions.index(anchor) + 1
    for instruction in instructions:
        instruction.parent = computation
    computation.instructions[index:index] = instructions


#: What ``HloComputation::ReplaceInstruction`` carries over when the replacement has none of its own.
_INHERITED = ("metadata", "frontend_attributes", "sharding")


def replace_like_xla(computation: Computation, old: Instruction, new: Instruction) -> None:
    """Replace `old` by `new` (already inserted) the way XLA's ReplaceInstruction does.

    The replacement inherits metadata, frontend attributes and sharding when it
    has none, and takes over `old`'s control predecessors, so a rewrite keeps
    what profilers, schedulers and partitioners rely on.
    """
    for key in _INHERITED:
        if key in old.attributes and key not in new.attributes:
            new.attributes[key] = old.attributes[key]
    predecessors = old.control_predecessors()
    if predecessors:
        merged = tuple(dict.fromkeys(new.control_predecessors() + predecessors))
        new.attributes.pop("control-predecessors", None)
        new.attributes["control-predecessors"] = InstructionList(merged)
    computation.replace_all_uses(old, new)
    computation.remove(old)


def known_shape(shapes: ShapeResolver, instruction: Instruction) -> Shape:
    """The instruction's shape, written or inferred; an error when the source left it unknowable."""
    from hloopt.errors import HloError

    shape = shapes(instruction)
    if shape is None:
        raise HloError(f"cannot infer the shape of %{instruction.name} ({instruction.opcode}); write it out")
    return shape


def xla_post_order(computation: Computation) -> list[Instruction]:
    """The order XLA prints a computation in (``HloComputation::MakeInstructionPostOrder``).

    DFS from each instruction nothing uses, in list order; operands are visited
    first-operand-first, control predecessors before operands. Iterative.
    """
    state: dict[Instruction, bool] = {}  # False while visiting, True once emitted
    order: list[Instruction] = []
    for start in computation.instructions:
        if start.users or start in state:
            continue
        stack = [start]
        while stack:
            current = stack[-1]
            seen = state.get(current)
            if seen is not None:
                stack.pop()
                if seen is False:
                    state[current] = True
                    order.append(current)
                continue
            state[current] = False
            stack.extend(reversed(current.operands))
            if "control-predecessors" in current.attributes:
                stack.extend(current.control_predecessors())
    order += [i for i in computation.instructions if i not in state]
    return order
