"""Changing element types across a whole module while it stays valid: one machinery, several policies.

`upcast-all-to-fp32` (every non-F32 float → F32) and `neuron-auto-cast` in `all` mode (every F32 →
the cast type) rewrite the same way: each instruction whose shape holds a changing type gets the new
type in place, in every computation, so callees and callers stay consistent; instructions whose
types are an outside contract ("fixed": boundary opcodes, and what the policy pins) keep theirs,
with converts at their edges. A `Retyping` says which leaves change, to what, and what else is
pinned; see docs/decisions.md ("UpcastAllToFP32 — … convert back at the boundary").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any
from typing import cast as cast_type

import numpy as np

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.analysis.verifier import byte_size
from hloopt.cast_engine import Numerics, cast
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import COMPLEX_TYPES
from hloopt.ir.literal import Literal, LiteralValue
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, fold_tree, leaf_shapes, literal_parts, map_leaves
from hloopt.passes.base import known_shape, provenance_of

#: Opcodes whose element types are an outside contract: kept, with converts around them.
BOUNDARY_OPCODES = frozenset(
    {
        "custom-call",
        "bitcast-convert",
        "stochastic-convert",
        "infeed",
        "outfeed",
        "send",
        "recv",
        "fft",
        "complex",
        "real",
        "imag",
    }
)
#: Opcodes whose result is a piece of their first operand's: fixed when that operand is.
_STRUCTURAL = frozenset({"get-tuple-element", "send-done", "recv-done"})
#: Opcodes that keep their types when everything they feed is fixed (converts back, tuples, constants).
_FEEDERS = frozenset({"convert", "tuple", "constant"})
#: Opcodes that accept any element type in, so never need a convert in front.
_ANY_INPUT = frozenset({"convert"})


_CACHED_SHAPES = 4096


def _never(instruction: Instruction) -> bool:
    del instruction
    return False


@dataclass(frozen=True)
class Retyping:
    """One policy: the element types that change, each changing leaf's new shape, the cast rules that
    rebuild a constant's values, and the instructions pinned besides the boundary opcodes."""

    types: frozenset[str]
    leaf: Callable[[ArrayShape], ArrayShape]
    numerics: Numerics
    pinned: Callable[[Instruction], bool] = _never
    #: Shapes repeat across a module and are immutable, so each distinct one is mapped once (bounded: a
    #: long-lived policy such as upcast's serves every module a process reads). The parser shares one
    #: object per distinct shape, so the object is looked up first (hashing a shape hashes its layout);
    #: the entry holds the shape, so its id is not reused while cached.
    _mapped: dict[Shape, Shape] = field(default_factory=dict[Shape, Shape], compare=False, repr=False)
    _by_id: dict[int, tuple[Shape, Shape]] = field(
        default_factory=dict[int, tuple[Shape, Shape]], compare=False, repr=False
    )

    def shape(self, shape: Shape) -> Shape:
        known = self._by_id.get(id(shape))
        if known is not None and known[0] is shape:
            return known[1]
        found = self._mapped.get(shape)
        if found is None:
            if len(self._mapped) >= _CACHED_SHAPES:
                self._mapped.clear()
            found = self._mapped[shape] = map_leaves(shape, self._leaf)
        if len(self._by_id) >= _CACHED_SHAPES:
            self._by_id.clear()
        self._by_id[id(shape)] = (shape, found)
        return found

    def _leaf(self, shape: ArrayShape) -> ArrayShape:
        return self.leaf(shape) if shape.element_type in self.types else shape

    def changes(self, shape: Shape | None) -> bool:
        if isinstance(shape, ArrayShape):
            return shape.element_type in self.types
        return shape is not None and any(leaf.element_type in self.types for leaf in leaf_shapes(shape))


def is_boundary(instruction: Instruction, shapes: ShapeResolver) -> bool:
    if instruction.opcode in BOUNDARY_OPCODES:
        return True
    if instruction.opcode == "bitcast":
        return _puns_types(instruction, shapes)
    # abs of a complex number is real: |c128| is f64 and must stay so.
    return instruction.opcode == "abs" and any(
        isinstance(s := shapes(o), ArrayShape) and s.element_type in COMPLEX_TYPES for o in instruction.operands
    )


def _puns_types(bitcast: Instruction, shapes: ShapeResolver) -> bool:
    """A bitcast that changes the element type and keeps the byte size reinterprets bits, like
    bitcast-convert, so neither side may be widened. (One whose sizes already differ reinterprets
    nothing; it is upcast as before.)"""
    result = shapes(bitcast)
    source = shapes(bitcast.operands[0]) if bitcast.operands else None
    if not (isinstance(result, ArrayShape) and isinstance(source, ArrayShape)):
        return False
    sizes = (byte_size(result), byte_size(source))
    return result.element_type != source.element_type and (None in sizes or sizes[0] == sizes[1])


@dataclass
class Plan:
    """What one computation needs: retyped instructions and converts at fixed boundaries."""

    retype: list[Instruction] = field(default_factory=list[Instruction])
    narrow: list[tuple[Instruction, Instruction]] = field(
        default_factory=list[tuple[Instruction, Instruction]]
    )  # (fixed user, operand)
    widen: list[tuple[Instruction | None, Instruction]] = field(
        default_factory=list[tuple[Instruction | None, Instruction]]
    )  # (user or None=root, fixed)

    def instructions(self) -> list[Instruction]:
        return self.retype + [user for user, _ in self.narrow] + [fixed for _, fixed in self.widen]


def fixed_instructions(computation: Computation, shapes: ShapeResolver, retyping: Retyping) -> set[Instruction]:
    """Boundary and pinned ops, pieces of them, and converts/tuples/constants that only feed them."""
    order = computation.post_order()
    fixed: set[Instruction] = set()
    for instruction in order:
        if (
            is_boundary(instruction, shapes)
            or retyping.pinned(instruction)
            or (instruction.opcode in _STRUCTURAL and instruction.operands and instruction.operands[0] in fixed)
        ):
            fixed.add(instruction)
    for instruction in reversed(order):
        if (
            instruction.opcode in _FEEDERS
            and instruction is not computation.root
            and instruction.users
            and all(user in fixed for user in instruction.users)
        ):
            fixed.add(instruction)
    return fixed


def plan_computation(computation: Computation, shapes: ShapeResolver, retyping: Retyping) -> Plan:
    plan = Plan()
    fixed = fixed_instructions(computation, shapes, retyping)
    changes = retyping.changes
    for instruction in computation.instructions:
        if instruction in fixed:
            if instruction.opcode in _ANY_INPUT:
                continue
            for operand in dict.fromkeys(instruction.operands):
                if operand not in fixed and changes(shapes(operand)):
                    plan.narrow.append((instruction, operand))
            continue
        if changes(instruction.shape) or (instruction.literal is not None and changes(instruction.literal.shape)):
            plan.retype.append(instruction)
        if instruction.opcode in _ANY_INPUT:
            continue
        for operand in dict.fromkeys(instruction.operands):
            if operand in fixed and changes(shapes(operand)):
                plan.widen.append((instruction, operand))
    root = computation.root
    if root is not None and root in fixed and changes(shapes(root)):
        plan.widen.append((None, root))
    return plan


def apply_plans(
    plans: list[tuple[Computation, Plan]], shapes: ShapeResolver, retyping: Retyping
) -> tuple[int, list[tuple[str, str]]]:
    """Carry out the plans (made before any of them changes a shape); (rewritten count, provenance)."""
    # Shapes as they were, for every operand a boundary convert must restore.
    original = {operand: known_shape(shapes, operand) for _, plan in plans for _, operand in plan.narrow}
    original |= {f: known_shape(shapes, f) for _, plan in plans for _, f in plan.widen}
    rewritten = 0
    provenance: list[tuple[str, str]] = []
    for computation, plan in plans:
        for instruction in plan.retype:
            retype(instruction, retyping)
            provenance += provenance_of(instruction, [instruction])
        module = computation.parent
        assert module is not None
        converts = Converts(module, provenance)
        _narrow(plan, original, retyping, converts)
        _widen(computation, plan, original, retyping, converts)
        rewritten += len(set(plan.instructions()))
    return rewritten, provenance


def retype(instruction: Instruction, retyping: Retyping) -> None:
    """The new result shape in place; a constant gets its literal rebuilt by the cast engine."""
    literal = instruction.literal
    if literal is not None:
        new_shape = retyping.shape(literal.shape)
        if isinstance(literal.shape, ArrayShape) and isinstance(new_shape, ArrayShape):
            convert = partial(_cast_array, shape=literal.shape, target=new_shape, retyping=retyping)
            instruction.set_literal(literal.converted(new_shape, convert))
        elif literal.is_elided:
            instruction.set_literal(Literal(new_shape, text=literal.text))
        else:
            instruction.set_literal(Literal.from_value(new_shape, _cast_value(literal.value, literal.shape, retyping)))
    if instruction.shape is not None:
        instruction.set_shape(retyping.shape(instruction.shape))


def _cast_array(array: np.ndarray, shape: ArrayShape, target: ArrayShape, retyping: Retyping) -> np.ndarray:
    """The values of an array of `shape` as the policy's cast rules give them in `target`'s type."""
    if shape.element_type not in retyping.types:
        return array
    converted = cast(np.ascontiguousarray(array), shape.element_type, target.element_type, profile=retyping.numerics)
    return converted.reshape(array.shape)  # the engine gives a scalar back as one element


def _cast_value(value: LiteralValue, shape: Shape, retyping: Retyping) -> LiteralValue:
    def leaf(item: tuple[object, Shape]) -> LiteralValue:
        value, array_shape = item
        assert isinstance(value, np.ndarray) and isinstance(array_shape, ArrayShape)
        target = retyping.shape(array_shape)
        assert isinstance(target, ArrayShape)
        array = cast_type("np.ndarray[Any, Any]", value)  # an array shape's value is an array
        return _cast_array(array, array_shape, target, retyping)

    return fold_tree((value, shape), literal_parts, leaf, lambda _, values: tuple(values))


class Converts:
    """Converts put in place without a `Builder`, named from one `Module.unique_names` (sharing
    `unique_name`'s numbering), each paired in `provenance` with the instruction it is made for: a pass
    makes tens of thousands, and a builder each was a third of neuron-auto-cast's cost."""

    def __init__(self, module: Module, provenance: list[tuple[str, str]] | None = None) -> None:
        self.names = module.unique_names("convert")
        self.provenance: list[tuple[str, str]] = [] if provenance is None else provenance

    def after(self, value: Instruction, shape: ArrayShape, made_for: Instruction) -> Instruction:
        """`value` converted to `shape`, just after it (before what was inserted after it already)."""
        return self._put(value, shape, made_for, value, after=True)

    def before(self, user: Instruction, value: Instruction, shape: ArrayShape, made_for: Instruction) -> Instruction:
        """`value` converted to `shape`, just before `user` (after what was inserted before it already)."""
        return self._put(value, shape, made_for, user, after=False)

    def _put(
        self, value: Instruction, shape: ArrayShape, made_for: Instruction, anchor: Instruction, *, after: bool
    ) -> Instruction:
        convert = Instruction(next(self.names), "convert", shape, (value,), written_order=False)
        computation = anchor.parent
        assert computation is not None
        if after:
            computation.insert_after(anchor, convert)
        else:
            computation.insert_before(anchor, convert)
        self.provenance.append((convert.name, made_for.name))
        return convert

    def chain(
        self, value: Instruction, source: Shape, target: Shape, made_for: Instruction, before: Instruction | None = None
    ) -> list[Instruction]:
        """`convert_chain` from `value`, just after it or just `before` an instruction, the result last: one
        convert for an array, a builder's parts for a tuple."""
        if isinstance(source, ArrayShape) and isinstance(target, ArrayShape):
            if before is not None:
                return [self.before(before, value, target, made_for)]
            return [self.after(value, target, made_for)]
        builder = Builder.after(value) if before is None else Builder.before(before)
        convert_chain(builder, value, source, target)
        self.provenance += provenance_of(made_for, builder.created)
        return builder.created


def convert_chain(builder: Builder, value: Instruction, source: Shape, target: Shape) -> Instruction:
    """Make the instructions turning `value` (of shape `source`) into `target`; the last one is the result.

    Tuples are taken apart element by element (get-tuple-element, convert, tuple) at any depth;
    an element whose shape already matches passes through as its get-tuple-element.
    """
    if not isinstance(source, TupleShape):  # one array: one convert (the common case, kept cheap)
        return builder.convert(value, target)
    root = (value, source, target)

    def take(part: Instruction, index: int, s: Shape, t: Shape) -> tuple[Instruction, Shape, Shape]:
        return builder.get_tuple_element(part, index, s), s, t

    def elements(item: tuple[Instruction, Shape, Shape]) -> Iterator[tuple[Instruction, Shape, Shape]] | None:
        part, s, t = item
        if not (isinstance(s, TupleShape) and isinstance(t, TupleShape)) or (s == t and item is not root):
            return None
        return (take(part, index, es, et) for index, (es, et) in enumerate(zip(s.elements, t.elements)))

    def leaf(item: tuple[Instruction, Shape, Shape]) -> Instruction:
        part, s, t = item
        return builder.convert(part, t) if s != t or item is root else part

    def node(item: tuple[Instruction, Shape, Shape], parts: list[Instruction]) -> Instruction:
        return builder.tuple(parts, item[2])

    fold_tree(root, elements, leaf, node)
    return builder.created[-1]


def _narrow(plan: Plan, original: dict[Instruction, Shape], retyping: Retyping, converts: Converts) -> None:
    """Before each fixed instruction, convert retyped operands back to the types it was written with (each
    convert's provenance from the operand it narrows)."""
    made: dict[Instruction, Instruction] = {}
    for user, operand in plan.narrow:
        if operand not in made:
            shape = original[operand]
            made[operand] = converts.chain(operand, retyping.shape(shape), shape, operand, before=user)[-1]
        user.replace_operand(operand, made[operand])


def _widen(
    computation: Computation, plan: Plan, original: dict[Instruction, Shape], retyping: Retyping, converts: Converts
) -> None:
    """After each fixed instruction, convert its result to the new types for the retyped instructions using
    it (each convert's provenance from the fixed instruction it converts)."""
    made: dict[Instruction, Instruction] = {}
    for user, fixed in plan.widen:
        if fixed not in made:
            shape = original[fixed]
            made[fixed] = converts.chain(fixed, shape, retyping.shape(shape), fixed)[-1]
        if user is None:
            computation.set_root(made[fixed])
        else:
            user.replace_operand(fixed, made[fixed])


def packed_size_dropped(shape: ArrayShape, element_type: str) -> ArrayShape:
    """`shape` with `element_type`; a packed element size in its layout belonged to the old type."""
    layout = shape.layout
    if layout is not None and layout.element_size_in_bits:
        layout = replace(layout, element_size_in_bits=0)
    return ArrayShape(element_type, shape.dims, shape.dynamic, layout)
