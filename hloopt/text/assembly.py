"""Names → references: instructions into computations, computations into the module.

The parser hands over each instruction with its operands still as names. When
a computation closes, its instructions are placed in text order and every
operand name is resolved in the scope built so far, exactly as XLA requires
(an operand must be defined earlier in the same computation). Callees may be
defined after their callers, so they are resolved when the module closes,
just before validation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import chain

from hloopt.errors import HloParseError
from hloopt.ir.async_form import unwrap_sugar
from hloopt.ir.module import Computation, ComputationList, Instruction, InstructionList, Module
from hloopt.ir.opcodes import COMPUTATION_LIST_ATTRIBUTES
from hloopt.ir.shape import ArrayShape, TupleShape
from hloopt.text.attribute_reader import read_attributes
from hloopt.text.locations import Locations, OperandIssue
from hloopt.text.shapes import ShapeReader
from hloopt.text.splitting import Piece, attribute, attribute_name_offset
from hloopt.text.validation import InvalidHlo, compatible, validate

_NAME_LIST = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
#: A list of computation names as XLA reads it: braces, names, commas (and blanks and comments between).
_GAP = r"(?:[ \t\r\n]|/\*(?:[^*]|\*(?!/))*\*/)*"
_COMPUTATION_LIST = re.compile(
    rf"\{{{_GAP}(?:%?[A-Za-z_][A-Za-z0-9_.\-]*{_GAP}(?:,{_GAP}%?[A-Za-z_][A-Za-z0-9_.\-]*{_GAP})*)?\}}"
)
#: A ``control-predecessors`` value XLA reads: one name or more (``{}`` and a trailing comma are refused).
_PREDECESSORS = re.compile(r"\{\s*%?[A-Za-z_][\w.\-]*(?:\s*,\s*%?[A-Za-z_][\w.\-]*)*\s*\}")

#: An operand as written: its name, its name with the shape text it declares, or a nested instruction.
OperandItem = str | tuple[str, str] | Instruction
#: An instruction's operand items, its control-predecessors text (if any) and its argument list's offset.
Pending = tuple[Sequence[OperandItem], str | None, int]


class Scope:
    """One computation's names while it is read.

    `defined` holds the names the text gave; `taken` the other names in use (a name in use is in one or
    the other; most are only in `defined`, with no set to add them to): those of the get-tuple-elements
    that XLA 0.11+'s compact operands (``%p#1``) stand for, and the names given instead. XLA names such a
    get-tuple-element ``p_1`` (``p_1_0`` for ``%p#1#0``), uniquified by a ``.N`` suffix, reuses
    it for every later use, and renames a later instruction that wants its name the same way.
    """

    __slots__ = ("compact", "defined", "root", "taken")

    def __init__(self) -> None:  # a plain class: one per computation, and dataclass factories cost more
        self.defined: dict[str, Instruction] = {}
        self.taken: set[str] = set()
        self.compact: dict[str, Instruction] = {}
        self.root: Instruction | None = None

    def fresh(self, name: str) -> str:
        """`name`, or ``name.N`` with the smallest N not in use."""
        if not self.in_use(name):
            return name
        number = 1
        while self.in_use(f"{name}.{number}"):
            number += 1
        return f"{name}.{number}"

    def in_use(self, name: str) -> bool:
        return name in self.defined or name in self.taken


class Assembly:
    """The computations of one parse, and the instructions waiting for their computation to close."""

    def __init__(self, shapes: ShapeReader, locations: Locations, callees_first: bool = False) -> None:
        self._shapes = shapes
        self._locations = locations
        #: Let a computation be called before it is defined, and put callees first in the module
        #: (XLA's print of a proto can be in such an order, which its own parser refuses).
        self._callees_first = callees_first
        self.computations: dict[str, Computation] = {}
        self.ordered: list[Computation] = []
        #: Each instruction's operand items, control-predecessors text and argument list offset, until
        #: placed. The parser fills it directly (one entry per instruction: no call on the hot path).
        self.pending: dict[Instruction, Pending] = {}
        self._callee_refs: list[tuple[Instruction, str]] = []
        self._roots: set[Instruction] = set()
        self._inline_count = 0
        #: The scopes of the computations open now (an inline computation opens inside another).
        self._scopes: dict[Computation, Scope] = {}

    # -- what the parser hands over besides `pending` ------------------------------
    def hold_control_predecessors(self, instruction: Instruction, names: str) -> None:
        """Resolve ``control-predecessors={...}`` when the instruction is placed."""
        if not _PREDECESSORS.fullmatch(names):
            message = "error parsing attribute control-predecessors: expects an instruction name in {...}"
            raise self._fail(message, instruction, key="control-predecessors")
        operands, _, arguments = self.pending[instruction]
        self.pending[instruction] = (operands, names, arguments)
        instruction.attributes["control-predecessors"] = InstructionList(())

    def hold_callee(self, instruction: Instruction, key: str) -> None:
        """Resolve this attribute's computation names when the module closes (callees may come later)."""
        self._callee_refs.append((instruction, key))

    def mark_root(self, instruction: Instruction) -> None:
        self._roots.add(instruction)

    # -- computations ------------------------------------------------------------
    def open_computation(self, name: str, name_at: int, is_entry: bool) -> Computation:
        """A new computation named at `name_at`; its instructions come with `place` or `close_computation`."""
        if name in self.computations:
            raise self._locations.error(name_at, f"computation {name} already exists")
        computation = Computation(name, is_entry)
        self._scopes[computation] = Scope()
        return computation

    def scope(self, computation: Computation) -> Scope:
        """The names of open `computation`, for `place`."""
        return self._scopes[computation]

    def close_computation(
        self, computation: Computation, name_at: int, instructions: list[Instruction], declared_result: Piece | None
    ) -> Computation:
        """Place the instructions; `declared_result` is the result shape the signature writes, checked against the root
        (and read even when the root's shape is left to inference: XLA reads it first)."""
        self._finish(computation, instructions, name_at)
        root = computation.root
        if declared_result is not None:
            declared = self._shapes.read(declared_result, declared_result.start_pos)
            if root is not None and root.shape is not None and not compatible(declared, root.shape):
                raise self._locations.error(
                    declared_result.start_pos,
                    f"Shape of computation {computation.name}, {declared.to_text(False)}, is not compatible "
                    f"with that of its root instruction {root.name}, {root.shape.to_text(False)}",
                )
        return computation

    def inline_computation(self, instructions: list[Instruction], offset: int) -> Computation:
        """A computation written in place of a callee's name (``to_apply={...}``), named ``_``, ``_.1``, …"""
        name = "_" if self._inline_count == 0 else f"_.{self._inline_count}"
        while name in self.computations:
            self._inline_count += 1
            name = f"_.{self._inline_count}"
        self._inline_count += 1
        return self._finish(Computation(name), instructions, offset)

    def _finish(self, computation: Computation, instructions: list[Instruction], offset: int) -> Computation:
        self._locations.computations[computation] = offset
        if not instructions:
            raise self._locations.error(
                offset, f"computation {computation.name} has no instructions: XLA expects at least one"
            )
        scope = self._scopes.pop(computation, None) or Scope()
        if self.pending:  # some not placed as they were read (the exact reading places them here)
            for instruction in instructions:
                if instruction in self.pending:
                    self.place(instruction, computation, scope)
        computation.root = scope.root if scope.root is not None else instructions[-1]
        self.computations[computation.name] = computation
        self.ordered.append(computation)
        return computation

    def place(self, instruction: Instruction, computation: Computation, scope: Scope) -> None:
        """Resolve an instruction's operands in `scope`, then append it (nested operands first).

        The parser places each instruction of a body as soon as it is read: errors come in text
        order, as XLA reports them, and nothing waits in `pending` (a body can hold a million).
        The common operand, a plain name already defined, is resolved here without a call; from the
        first other one on, `_place_rest` goes on.
        """
        defined, operands = scope.defined, instruction.operands
        items = iter(self.pending[instruction][0])
        for item in items:
            if type(item) is str and "#" not in item and (operand := defined.get(item)) is not None:
                operands.append(operand)  # `append_operand`, without a call
                operand.users[instruction] = None
                continue
            self._place_rest(instruction, computation, scope, chain((item,), items))
            return
        self._define(instruction, computation, scope)

    def _place_rest(
        self, instruction: Instruction, computation: Computation, scope: Scope, items: Iterator[OperandItem]
    ) -> None:
        """`place` from operand `items` on: nested operands are placed from an explicit stack, not by
        recursion (XLA reads them 1,024 deep: `splitting.MAX_OPERAND_NESTING`)."""
        stack = [(instruction, items)]
        while stack:
            current, items = stack[-1]
            for item in items:  # an iterator: after a nested operand is placed, its list goes on from there
                if isinstance(item, Instruction):
                    stack.append((item, iter(self.pending[item][0])))
                    break
                current.append_operand(self._operand(item, computation, scope, self.pending[current][2]))
            else:
                stack.pop()
                self._define(current, computation, scope)
                if stack:
                    stack[-1][0].append_operand(current)

    def _operand(
        self, item: str | tuple[str, str], computation: Computation, scope: Scope, arguments: int
    ) -> Instruction:
        """The instruction an operand name (with the shape it declares, if any) stands for in `scope`."""
        name, declared_text = (item, None) if isinstance(item, str) else item
        operand = self._compact(name, computation, scope, arguments) if "#" in name else scope.defined.get(name)
        if operand is None:
            message = f"instruction {name} does not exist (operands must be defined earlier in the computation)"
            raise self._locations.fail(OperandIssue(message, arguments, name))
        if declared_text is not None and operand.shape is not None:
            declared = self._shapes.get(declared_text)
            if declared is None:
                declared_at = self._locations.operand(arguments, name, declared_text)
                declared = self._shapes.read(declared_text, declared_at)
            # Shapes are interned by text: most operands are declared as the very shape they have.
            if declared is not operand.shape and not compatible(declared, operand.shape):
                message = (
                    f"The declared operand shape {declared.to_text()} is not compatible with the shape "
                    f"of the operand instruction {operand.shape.to_text()}."
                )
                raise self._locations.fail(OperandIssue(message, arguments, name, declared_text))
        return operand

    def _define(self, instruction: Instruction, computation: Computation, scope: Scope) -> None:
        """Append `instruction`, its operands resolved, to `computation` under its name."""
        _, control, _ = self.pending.pop(instruction)
        if instruction.opcode == "recv-done" and instruction.operands:
            # Like XLA's parser: recv-done yields (the recv's data, token[]), whatever the text says.
            recv_shape = instruction.operands[0].shape
            if isinstance(recv_shape, TupleShape) and recv_shape.elements:
                instruction.shape = TupleShape((recv_shape.elements[0], ArrayShape("token")))
        if control is not None:
            predecessors: list[Instruction] = []
            for name in _NAME_LIST.findall(control):
                if name not in scope.defined:
                    message = f"control predecessor {name} does not exist"
                    raise self._fail(message, instruction, computation, "control-predecessors")
                predecessors.append(scope.defined[name])
            instruction.attributes["control-predecessors"] = InstructionList(tuple(predecessors))
        written = instruction.name
        if written in scope.defined:
            message = f"instruction {written} already exists in computation {computation.name}"
            raise self._fail(message, instruction, computation)
        if written in scope.taken:  # a compact operand's get-tuple-element has the name
            instruction.name = scope.fresh(written)
            scope.taken.add(instruction.name)
        scope.defined[written] = instruction
        computation.append(instruction)
        if instruction in self._roots:
            if scope.root is not None:
                raise self._fail(f"computation {computation.name} has more than one ROOT", instruction, computation)
            scope.root = instruction

    def _compact(self, name: str, computation: Computation, scope: Scope, arguments: int) -> Instruction | None:
        """The get-tuple-element a compact operand ``%p#1#0`` stands for, made at its first use."""
        made = scope.compact.get(name)
        if made is not None:
            return made
        base, _, index = name.rpartition("#")
        tuple_ = self._compact(base, computation, scope, arguments) if "#" in base else scope.defined.get(base)
        if tuple_ is None:
            return None
        shape = tuple_.shape
        if not isinstance(shape, TupleShape) or int(index) >= len(shape.elements):
            shown = shape.to_text(False) if shape is not None else "unknown"
            message = f"GTE index {index} out of bounds for shape: {shown}"
            raise self._locations.fail(OperandIssue(message, arguments, name))
        made = Instruction(
            scope.fresh(f"{tuple_.name}_{index}"),
            "get-tuple-element",
            shape.elements[int(index)],
            [tuple_],
            {"index": str(int(index))},
        )
        scope.compact[name] = made
        scope.taken.add(made.name)
        computation.append(made)
        return made

    def _fail(
        self, message: str, instruction: Instruction, computation: Computation | None = None, key: str | None = None
    ) -> HloParseError:
        return self._locations.fail(
            InvalidHlo(message, instruction=instruction, attribute=key, computation=computation)
        )

    # -- the module ----------------------------------------------------------------
    def module(self, name: str | None, attributes: Sequence[Piece], stack_frames: str | None) -> Module:
        """The module of every computation read, its callees resolved, then validated as XLA does."""
        end = len(self._locations.text)
        entries = [c for c in self.ordered if c.is_entry]
        if len(entries) > 1:
            raise self._locations.error(end, "expects only one ENTRY computation")
        if not self.ordered:
            raise self._locations.error(end, "module has no computations")
        if not entries:
            self.ordered[-1].is_entry = True
        entry = next(c for c in self.ordered if c.is_entry)
        self._resolve_callees()
        module = Module(name if name is not None else f"module_{entry.name}")
        for token in attributes:
            key, value = attribute(token)
            name_at = token.start_pos + attribute_name_offset(token)
            self._locations.module_attributes[key] = name_at
            if key in module.attributes or (key == "entry_computation_layout" and module.entry_layout):
                raise self._locations.error(name_at, f"module attribute {key} already exists")
            if key == "entry_computation_layout":
                module.entry_layout = self._shapes.program_layout(value, token.start_pos + token.index(value))
            else:
                module.attributes[key] = value
        module.stack_frames = stack_frames
        for computation in self.ordered:
            module.add_computation(computation)
        try:
            validate(module, lambda text: self._shapes.read(text, 0))
        except InvalidHlo as issue:
            raise self._locations.fail(issue) from None
        read_attributes(module)
        unwrap_sugar(module)  # after validation, whose messages point into the sugar as written
        for computation in module.computations:
            computation.mark_as_read()
        return module

    def _resolve_callees(self) -> None:
        position = {computation: index for index, computation in enumerate(self.ordered)}
        for instruction, key in self._callee_refs:
            value = str(instruction.attributes[key])
            if key in COMPUTATION_LIST_ATTRIBUTES:
                if not _COMPUTATION_LIST.fullmatch(value):
                    said = "to end with kRbrace" if value.startswith("{") else "starting with kLbrace"
                    raise self._fail(f"expects a list {said}", instruction, key=key)
                names = _NAME_LIST.findall(value)
                callees = tuple(self._callee(n, instruction, key, position) for n in names)
                instruction.attributes[key] = ComputationList(callees)
            else:
                instruction.attributes[key] = self._callee(value, instruction, key, position)
        if self._callees_first:
            self.ordered = _callees_first(self.ordered)

    def _callee(self, name: str, instruction: Instruction, key: str, position: dict[Computation, int]) -> Computation:
        computation = self.computations.get(name.lstrip("%"))
        if computation is None:
            raise self._fail(f"computation {name.lstrip('%')} does not exist", instruction, key=key)
        caller = instruction.parent
        if not self._callees_first and caller is not None and position[computation] > position[caller]:
            message = f"computation {computation.name} is called before it is defined; XLA reads computations in order"
            raise self._fail(message, instruction, key=key)
        return computation


def _callees_first(computations: list[Computation]) -> list[Computation]:
    """`computations` reordered so that each comes after every computation it calls (else stable)."""
    done: set[Computation] = set()
    ordered: list[Computation] = []

    def callees(computation: Computation) -> Iterator[Computation]:
        return (callee for instruction in computation.instructions for callee in instruction.called_computations())

    def visit(computation: Computation) -> None:
        stack = [(computation, callees(computation))]
        done.add(computation)
        while stack:
            current, pending = stack[-1]
            callee = next((c for c in pending if c not in done), None)
            if callee is None:
                stack.pop()
                ordered.append(current)
            else:
                done.add(callee)
                stack.append((callee, callees(callee)))

    for computation in computations:
        if computation not in done:
            visit(computation)
    return ordered
