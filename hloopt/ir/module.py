"""The HLO graph: Module → Computation → Instruction.

Operands, called computations and control predecessors are object
references, not names, so a pass can rewrite the graph without worrying
about text. Attributes hloopt does not model keep their value text exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Union

from hloopt.ir.attribute_values import Typed, is_true
from hloopt.ir.literal import Literal
from hloopt.ir.opcodes import SIDE_EFFECT_OPCODES
from hloopt.ir.shape import Shape


@dataclass(frozen=True, slots=True)
class AsyncSugar:
    """A fact for the printer, on an async-wrapped computation the text wrote as sugar
    (``<base>-start``/``-update``/``-done``): while the computation is one op over its parameters
    it prints as that sugar, not as a computation of its own."""

    #: The wrapped op's opcode as read (``call`` for a computation a pass expanded and `call` wraps).
    base: str
    #: The start's attribute names in the order read: the sugar prints in it while the op is `base`.
    order: tuple[str, ...]


#: Attributes whose value is a list of instructions of the same computation.
INSTRUCTION_LIST_ATTRIBUTES: frozenset[str] = frozenset({"control-predecessors"})


def _name_parts(name: str) -> tuple[str, int]:
    """``base.N`` as (base, N), any other name as (name, 0): what ``^(.*)\\.(\\d+)$`` reads, without a regex."""
    base, dot, number = name.rpartition(".")
    return (base, int(number)) if dot and number.isdecimal() else (name, 0)


def _next_number(taken: str, base: str) -> int:
    """One past the largest N of the names `taken` (each between newlines) that `_name_parts` reads as
    (`base`, N); 0 when there is none. One C-level search for the base's names: a pass that makes names of
    a few bases reads a 100k-instruction module's names in milliseconds, not a Python step per name."""
    plain = _name_parts(base)[0] == base  # a name of the form x.N is x's, never a base of its own
    suffix = r"(?:\.(\d+))?" if plain else r"\.(\d+)"
    found = re.findall("\n" + re.escape(base) + suffix + "(?=\n)", taken)
    return max(int(number or 0) for number in found) + 1 if found else 0


@dataclass(frozen=True, slots=True)
class ComputationList:
    """``{%a, %b}``: an ordered list of called computations."""

    computations: tuple[Computation, ...]


@dataclass(frozen=True, slots=True)
class InstructionList:
    """``{%a, %b}``: control predecessors."""

    instructions: tuple[Instruction, ...]


#: An attribute's value: typed (`attribute_values`), a callee or control predecessors, or the text of
#: an attribute hloopt does not model.
AttributeValue = Union[str, Typed, "Computation", ComputationList, InstructionList]


class Instruction:
    """One HLO instruction. Identity matters: instructions hash and compare by object."""

    __slots__ = (
        "attributes",
        "literal",
        "name",
        "opcode",
        "operands",
        "parameter_number",
        "parent",
        "shape",
        "users",
        "written_order",
    )

    def __init__(
        self,
        name: str,
        opcode: str,
        shape: Shape | None,
        operands: Iterable[Instruction] = (),
        attributes: dict[str, AttributeValue] | None = None,
        literal: Literal | None = None,
        parameter_number: int | None = None,
        written_order: bool = True,
    ) -> None:
        self.name = name
        self.opcode = opcode
        #: None when the text omitted an inferable shape.
        self.shape = shape
        self.attributes: dict[str, AttributeValue] = dict(attributes) if attributes else {}
        self.literal = literal
        #: The N of ``parameter(N)``; None for other opcodes.
        self.parameter_number = parameter_number
        #: A fact for the printer: True while the attributes are in the order their writer gave (the
        #: text's, for a parsed instruction); False once the IR made or merged them (`Builder`,
        #: `replace_instruction`), when they print in XLA's order.
        self.written_order = written_order
        self.parent: Computation | None = None
        #: Instructions that use this one as an operand (ordered set).
        self.users: dict[Instruction, None] = {}
        self.operands: list[Instruction] = list(operands)
        for operand in self.operands:  # `append_operand`'s bookkeeping, without a call per operand
            operand.users[self] = None

    def __repr__(self) -> str:
        return f"<Instruction %{self.name} = {self.opcode}>"

    def append_operand(self, operand: Instruction) -> None:
        self.operands.append(operand)
        operand.users[self] = None

    def replace_operand(self, old: Instruction, new: Instruction) -> None:
        """Make every use of `old` among this instruction's operands a use of `new`."""
        self.operands = [new if op is old else op for op in self.operands]
        old.users.pop(self, None)
        new.users[self] = None
        self._edited()

    def replace_operands(self, replacements: dict[Instruction, Instruction]) -> None:
        """`replace_operand` for each pair at once (each operand mapped once, not in turn): one new operand list,
        one edit."""
        self.operands = [replacements.get(op, op) for op in self.operands]
        for old in replacements:
            old.users.pop(self, None)
        for new in replacements.values():
            new.users[self] = None
        self._edited()

    def set_shape(self, shape: Shape) -> None:
        """Give the instruction a new result shape (a pass changing its element type)."""
        self.shape = shape
        self._edited()

    def set_literal(self, literal: Literal) -> None:
        """Give a constant a new value."""
        self.literal = literal
        self._edited()

    def set_attributes(self, attributes: dict[str, AttributeValue], *, merged: bool = False) -> None:
        """Replace the attributes (printed in the dict's order while `written_order` holds; `merged`: a pass
        added to what was written, so they print in XLA's order, as XLA prints an attribute it set)."""
        self.attributes = attributes
        if merged:
            self.written_order = False
        self._edited()
        if self.parent is not None:
            self.parent.note_control_edges(self)

    def respell(self, opcode: str, attributes: dict[str, AttributeValue]) -> None:
        """The same operation written another way (async sugar and its explicit form): not an edit, so a
        computation whose ops are only respelled still prints as it was read."""
        self.opcode = opcode
        self.attributes = attributes
        if self.parent is not None:
            self.parent.note_control_edges(self)

    def _edited(self) -> None:
        if self.parent is not None:
            self.parent.edits += 1

    def drop_operands(self) -> None:
        for operand in self.operands:
            operand.users.pop(self, None)
        self.operands = []

    def called_computations(self) -> list[Computation]:
        called: list[Computation] = []
        for value in self.attributes.values():
            if isinstance(value, Computation):
                called.append(value)
            elif isinstance(value, ComputationList):
                called.extend(value.computations)
        return called

    def control_predecessors(self) -> tuple[Instruction, ...]:
        value = self.attributes.get("control-predecessors")
        return value.instructions if isinstance(value, InstructionList) else ()


def attribute_text(value: AttributeValue) -> str:
    """An attribute's value as the printer writes it after ``key=``: the printer's and the viewer's one spelling."""
    if isinstance(value, str):
        return value
    if not isinstance(value, (Computation, ComputationList, InstructionList)):
        return value.to_text()  # a typed value
    if isinstance(value, Computation):
        return f"%{value.name}"
    if isinstance(value, ComputationList):
        return "{" + ", ".join(f"%{c.name}" for c in value.computations) + "}"
    return "{" + ", ".join(f"%{i.name}" for i in value.instructions) + "}"


#: What ``HloComputation::ReplaceInstruction`` carries over when the replacement has none of its own.
_INHERITED = ("metadata", "frontend_attributes", "sharding")


class Computation:
    """A named list of instructions with a root; the entry computation is marked.

    Every edit goes through a method here or on `Instruction`, and each one counts
    in `edits`: a pass compares the count before and after to know which
    computations it changed (they are then printed in XLA's order), so no pass
    has to list them.
    """

    def __init__(self, name: str, is_entry: bool = False) -> None:
        self.name = name
        self.is_entry = is_entry
        self.root: Instruction | None = None
        #: Attributes after the closing brace (``execution_thread="..."``), verbatim.
        self.attributes: dict[str, str] = {}
        self.parent: Module | None = None
        #: A fact for the printer: how many edits this computation has had since its text was read
        #: (`mark_as_read`); one that has had some prints in XLA's post order, as XLA prints what it edited.
        self.edits = 0
        #: How the text wrote this async-wrapped computation, if as sugar (`async_form.unwrap_sugar`).
        self.sugar: AsyncSugar | None = None
        #: Whether any instruction has control predecessors; None until first asked. A rewrite of a
        #: computation without control edges then skips the scans for them (O(1), not O(n), per edit).
        self._control_edges: bool | None = None
        self._listed: list[Instruction] = []
        #: Insertions not yet spliced into the list: what goes just before / just after an instruction (the
        #: latest insertion after it last). A pass inserting next to many instructions then costs one rebuild
        #: of the list when it is next read, not a memmove of its tail per insertion.
        self._before: dict[Instruction, list[Instruction]] = {}
        self._after: dict[Instruction, list[Instruction]] = {}
        #: Removed instructions not yet dropped from the list (dropped at the same rebuild).
        self._removed: set[Instruction] = set()

    @property
    def instructions(self) -> list[Instruction]:
        """The instructions in text order (definitions before uses, as inserted)."""
        if self._before or self._after or self._removed:
            self._splice()
        return self._listed

    def _splice(self) -> None:
        """Rebuild the list once with the pending insertions and removals: one set test per instruction, the
        runs placed only around the instructions that have some (`_place`)."""
        before, after, removed = self._before, self._after, self._removed
        anchors = before.keys() | after.keys()
        listed: list[Instruction] = []
        for item in self._listed:
            if item in anchors:
                self._place(item, listed)
            elif item not in removed:
                listed.append(item)
        self._listed = listed
        self._removed = set()

    def _place(self, anchor: Instruction, listed: list[Instruction]) -> None:
        """Append `anchor` with what was inserted around it, and around those in turn (iterative: runs nest)."""
        before, after, removed = self._before, self._after, self._removed
        stack: list[Instruction | tuple[Instruction]] = [anchor]
        while stack:
            item = stack.pop()
            if isinstance(item, tuple):
                if item[0] not in removed:
                    listed.append(item[0])
                continue
            ahead, behind = before.pop(item, None), after.pop(item, None)
            if ahead is None and behind is None:
                if item not in removed:
                    listed.append(item)
                continue
            stack.extend(behind or ())
            stack.append((item,))
            stack.extend(reversed(ahead or ()))

    def __repr__(self) -> str:
        return f"<Computation %{self.name}>"

    def mark_as_read(self) -> None:
        """Its instructions are in the order the text wrote them (the parser's last step): no edits yet."""
        self.edits = 0

    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.parameter_number or 0)

    def append(self, instruction: Instruction) -> Instruction:
        if instruction in self._removed:
            self._splice()
        instruction.parent = self
        self._listed.append(instruction)
        self.edits += 1
        if self._control_edges is False:  # `note_control_edges`, without a call per instruction
            self.note_control_edges(instruction)
        return instruction

    def has_control_edges(self) -> bool:
        if self._control_edges is None:
            self._control_edges = any("control-predecessors" in i.attributes for i in self.instructions)
        return self._control_edges

    def note_control_edges(self, instruction: Instruction) -> None:
        """Keep `has_control_edges` true once `instruction` (added or given attributes) has some."""
        if self._control_edges is False and "control-predecessors" in instruction.attributes:
            self._control_edges = True

    def set_root(self, instruction: Instruction) -> None:
        """Make `instruction` (already in this computation) the root."""
        self.root = instruction
        self.edits += 1

    def insert_before(self, anchor: Instruction, instruction: Instruction) -> None:
        """Add `instruction` just before `anchor` (after what was inserted before it already), so definitions
        still precede uses in text."""
        self._pending(anchor, instruction, self._before).append(instruction)

    def insert_after(self, anchor: Instruction, instruction: Instruction) -> None:
        """Add `instruction` just after `anchor` in text order (before what was inserted after it already)."""
        self._pending(anchor, instruction, self._after).append(instruction)

    def _pending(
        self, anchor: Instruction, instruction: Instruction, side: dict[Instruction, list[Instruction]]
    ) -> list[Instruction]:
        """The insertions on one side of `anchor`, which `instruction` joins (spliced in on the next read)."""
        if anchor.parent is not self:
            raise ValueError(f"%{anchor.name} is not in %{self.name}")
        if instruction in self._removed:
            self._splice()  # it goes back in: drop it from where it was first
        instruction.parent = self
        self.edits += 1
        self.note_control_edges(instruction)
        found = side.get(anchor)
        if found is None:
            found = side[anchor] = []
        return found

    def replace_all_uses(self, old: Instruction, new: Instruction) -> None:
        """Redirect every user of `old` (and the root, and control edges) to `new`."""
        for user in list(old.users):
            if user is not new:
                user.replace_operand(old, new)
        for instruction in self.instructions if self.has_control_edges() else ():
            preds = instruction.attributes.get("control-predecessors")
            if isinstance(preds, InstructionList) and old in preds.instructions:
                instruction.attributes["control-predecessors"] = InstructionList(
                    tuple(new if p is old else p for p in preds.instructions)
                )
        if self.root is old:
            self.root = new
        self.edits += 1

    def remove(self, instruction: Instruction) -> None:
        """Remove an instruction that nothing uses any more."""
        if instruction.users:
            raise ValueError(f"%{instruction.name} still has users")
        instruction.drop_operands()
        self._removed.add(instruction)
        instruction.parent = None
        self.edits += 1

    def replace_instruction(self, old: Instruction, new: Instruction) -> None:
        """Put `new` where `old` was, as XLA's ``HloComputation::ReplaceInstruction`` does.

        `new` (inserted just before `old` if it is not in the computation yet) inherits
        metadata, frontend attributes and sharding when it has none of its own and takes
        over `old`'s control predecessors, so a rewrite keeps what profilers, schedulers
        and partitioners rely on. Every use of `old` (operands, root, control edges) moves
        to `new`; `old` is removed, and so are operands it leaves unused (XLA's
        ``RemoveInstructionAndUnusedOperands``). `new`'s attributes are then XLA's, not as
        written: the printer gives them XLA's order.
        """
        if new.parent is None:
            self.insert_before(old, new)
        for key in _INHERITED:
            if key in old.attributes and key not in new.attributes:
                new.attributes[key] = old.attributes[key]
        predecessors = old.control_predecessors()
        if predecessors:
            merged = tuple(dict.fromkeys(new.control_predecessors() + predecessors))
            new.attributes.pop("control-predecessors", None)
            new.attributes["control-predecessors"] = InstructionList(merged)
        new.written_order = False
        new.set_attributes(new.attributes)
        self.replace_all_uses(old, new)
        if old.users:
            raise ValueError(f"%{old.name} still has users")
        operands = list(old.operands)
        self.remove(old)
        self.remove_dead_code(operands)

    def remove_dead_code(self, candidates: Iterable[Instruction] | None = None) -> int:
        """Remove side-effect-free instructions nothing uses; returns how many went.

        With `candidates`, only those (and operands they leave dead) are considered,
        so instructions the user wrote unused stay untouched.
        """
        work = list(candidates if candidates is not None else self.instructions)
        removed = 0
        while work:
            instruction = work.pop()
            if (
                instruction.parent is not self
                or instruction.users
                or instruction is self.root
                or instruction.opcode in SIDE_EFFECT_OPCODES
                or is_true(instruction.attributes.get("custom_call_has_side_effect"))
                or (
                    self.has_control_edges() and any(instruction in i.control_predecessors() for i in self.instructions)
                )
            ):
                continue
            operands = list(instruction.operands)
            self.remove(instruction)
            removed += 1
            work.extend(operands)
        return removed

    def print_order(self) -> list[Instruction]:
        """The order XLA prints a computation in (``HloComputation::MakeInstructionPostOrder``).

        DFS from each instruction nothing uses, in list order; operands are visited
        first-operand-first, control predecessors before operands. Iterative.
        """
        state: dict[Instruction, bool] = {}  # False while visiting, True once emitted
        order: list[Instruction] = []
        for start in self.instructions:
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
        order += [i for i in self.instructions if i not in state]
        return order

    def post_order(self) -> list[Instruction]:
        """Dependency order: operands before users, from the root; unreachable instructions included (iterative).

        Text order already is this order when every instruction follows its operands
        and control predecessors, as parsed text does: that case costs one scan.
        """
        root = self.root
        order = [i for i in self.instructions if i is not root] + ([root] if root else [])
        placed: set[Instruction] = set()
        for instruction in order:
            for dependency in instruction.operands:
                if dependency not in placed:
                    return self._depth_first_post_order(order)
            if "control-predecessors" in instruction.attributes:
                for dependency in instruction.control_predecessors():
                    if dependency not in placed:
                        return self._depth_first_post_order(order)
            placed.add(instruction)
        return order

    def _depth_first_post_order(self, roots: list[Instruction]) -> list[Instruction]:
        order: list[Instruction] = []
        visited: set[Instruction] = set()
        for start in roots:
            if start in visited:
                continue
            stack: list[tuple[Instruction, Iterator[Instruction]]] = [(start, _dependencies(start))]
            visited.add(start)
            while stack:
                node, deps = stack[-1]
                for dep in deps:
                    if dep not in visited:
                        visited.add(dep)
                        stack.append((dep, _dependencies(dep)))
                        break
                else:
                    stack.pop()
                    order.append(node)
        return order


def _dependencies(instruction: Instruction) -> Iterator[Instruction]:
    yield from instruction.operands
    yield from instruction.control_predecessors()


@dataclass(frozen=True, slots=True)
class ProgramLayout:
    """``entry_computation_layout``: the entry's parameter and result shapes with layouts."""

    parameters: tuple[Shape, ...]
    result: Shape

    def to_text(self) -> str:
        from hloopt.ir.shape import TupleShape

        params = TupleShape(self.parameters).to_text()
        return "{" + params + "->" + self.result.to_text() + "}"


class Module:
    """An HLO module: header attributes, computations (callees first) and the entry."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: Header attributes in source order: typed values where `attribute_kinds.MODULE_KINDS` models them, else
        #: verbatim text (entry layout is modelled apart).
        self.attributes: dict[str, str | Typed] = {}
        self.entry_layout: ProgramLayout | None = None
        #: The ``FileNames … StackFrames …`` block, verbatim.
        self.stack_frames: str | None = None
        self.computations: list[Computation] = []
        #: `unique_name`'s next N per base, and the names taken when it was first called.
        self._names: dict[str, int] | None = None
        self._taken = ""

    def __repr__(self) -> str:
        return f"<Module {self.name}>"

    @property
    def entry(self) -> Computation:
        for computation in self.computations:
            if computation.is_entry:
                return computation
        raise ValueError("module has no entry computation")

    def add_computation(self, computation: Computation, before: Computation | None = None) -> Computation:
        computation.parent = self
        index = self.computations.index(before) if before is not None else len(self.computations)
        self.computations.insert(index, computation)
        return computation

    def instructions(self) -> Iterator[Instruction]:
        for computation in self.computations:
            yield from computation.instructions

    def unique_name(self, prefix: str) -> str:
        """A module-wide fresh name ``prefix.N`` (XLA's NameUniquer style), deterministic."""
        if self._names is None:  # the names taken, read once: each base's next N comes from them when first asked
            self._names = {}
            self._taken = "\n" + "\n".join([i.name for c in self.computations for i in c.instructions]) + "\n"
        base = _name_parts(prefix)[0]
        counter = self._names.get(base)
        if counter is None:
            counter = _next_number(self._taken, base)
        name = f"{base}.{counter}" if counter else base
        self._names[base] = counter + 1
        return name

    def unique_names(self, prefix: str) -> Iterator[str]:
        """`unique_name(prefix)` for each name taken, sharing its numbering: a pass making thousands of names
        of one base looks the base up once."""
        yield self.unique_name(prefix)
        base, names = _name_parts(prefix)[0], self._names
        assert names is not None  # set by the first name
        while True:
            counter = names[base]
            names[base] = counter + 1
            yield f"{base}.{counter}"

    def clone(self) -> Module:
        """A deep copy: new computations and instructions, the (immutable) shapes and literals shared, so
        a pass can rewrite the copy while the caller keeps the module it was given."""
        copy = Module(self.name)
        copy.attributes = dict(self.attributes)
        copy.entry_layout = self.entry_layout
        copy.stack_frames = self.stack_frames
        computations = {c: Computation(c.name, c.is_entry) for c in self.computations}
        instructions = {
            i: Instruction(
                i.name,
                i.opcode,
                i.shape,
                literal=i.literal,
                parameter_number=i.parameter_number,
                written_order=i.written_order,
            )
            for c in self.computations
            for i in c.instructions
        }

        def mapped(value: AttributeValue) -> AttributeValue:
            if isinstance(value, Computation):
                return computations.get(value, value)
            if isinstance(value, ComputationList):
                return ComputationList(tuple(computations.get(c, c) for c in value.computations))
            if isinstance(value, InstructionList):
                return InstructionList(tuple(instructions[i] for i in value.instructions))
            return value

        for old, new in computations.items():
            new.attributes = dict(old.attributes)
            for instruction in old.instructions:
                twin = instructions[instruction]
                twin.attributes = {key: mapped(value) for key, value in instruction.attributes.items()}
                for operand in instruction.operands:
                    twin.append_operand(instructions[operand])
                new.append(twin)
            if old.root is not None:
                new.set_root(instructions[old.root])
            new.sugar = old.sugar
            new.edits = old.edits  # a copy is as edited as its original, not a computation built anew
            copy.add_computation(new)
        return copy

    def to_text(self) -> str:
        """The module in XLA's canonical text style."""
        from hloopt.text.printer import print_module

        return print_module(self)
