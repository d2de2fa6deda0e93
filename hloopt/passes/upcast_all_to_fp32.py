"""UpcastAllToFP32 (#60): every non-F32 float in the module becomes F32.

The dtype policy is the binary's ``UpcastShapeToFP32`` transcribed by
PrimitiveType code: F16/F64/BF16, and of the FP8/FP4 block the codes that the
CSWTCH_446 selector table marks, plus the 0x20/0x21 special case. Integers,
PRED, S4/U4/S2/U2/S1/U1, complex and token stay. Instructions whose element
types are part of an outside contract ("fixed" below) keep their types and get
converts at the boundary instead, so the module stays valid; see
docs/decisions.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any
from typing import cast as cast_type

import numpy as np

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.analysis.verifier import byte_size
from hloopt.cast_engine import cast
from hloopt.ir import element_types
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import COMPLEX_TYPES
from hloopt.ir.literal import Literal, LiteralValue
from hloopt.ir.module import Computation, Instruction, Module, ProgramLayout
from hloopt.ir.shape import (
    ArrayShape,
    Shape,
    TupleShape,
    fold_tree,
    leaf_shapes,
    literal_parts,
    map_leaves,
)
from hloopt.passes.base import HloPass, PassResult, known_shape, provenance_of

#: CSWTCH_446 @ VA 0x410830, indexed by code − 0x13 (the 16th byte is outside the range check).
CSWTCH_446 = bytes.fromhex("01010000010101000001010000000100")
F32 = 0x0B


def upcasts_to_f32(code: int) -> bool:
    """The branch structure of ``UpcastShapeToFP32`` @ 0x1f74020, on one PrimitiveType code."""
    if 0 <= code - 0x0A <= 2 or code == 0x10:
        return code != F32
    if 0 <= code - 0x13 <= 0x0E:
        return bool(CSWTCH_446[code - 0x13]) or 0 <= code - 0x20 <= 1
    return False


#: Element types the pass turns into F32 (f6e3m2fn/f6e2m3fn, codes 35/36, fall outside the dispatch).
UPCAST_TYPES: frozenset[str] = frozenset(row.name for row in element_types.ROWS if upcasts_to_f32(row.code))

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


def _upcast_leaf(shape: ArrayShape) -> ArrayShape:
    if shape.element_type not in UPCAST_TYPES:
        return shape
    layout = shape.layout
    if layout is not None and layout.element_size_in_bits:  # a packed element size belongs to the old type
        layout = replace(layout, element_size_in_bits=0)
    return ArrayShape("f32", shape.dims, shape.dynamic, layout)


@lru_cache(maxsize=4096)
def upcast_shape(shape: Shape) -> Shape:
    """``UpcastShapeToFP32``: each upcast leaf to F32, tuples element by element (shapes are
    immutable and repeat across a module, so each distinct one is mapped once)."""
    return map_leaves(shape, _upcast_leaf)


def has_upcast_type(shape: Shape | None) -> bool:
    if isinstance(shape, ArrayShape):
        return shape.element_type in UPCAST_TYPES
    return shape is not None and any(leaf.element_type in UPCAST_TYPES for leaf in leaf_shapes(shape))


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
class _Plan:
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


def fixed_instructions(computation: Computation, shapes: ShapeResolver) -> set[Instruction]:
    """Boundary ops, pieces of them, and converts/tuples/constants that only feed them."""
    order = computation.post_order()
    fixed: set[Instruction] = set()
    for instruction in order:
        if is_boundary(instruction, shapes) or (
            instruction.opcode in _STRUCTURAL and instruction.operands and instruction.operands[0] in fixed
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


def plan_computation(computation: Computation, shapes: ShapeResolver) -> _Plan:
    plan = _Plan()
    fixed = fixed_instructions(computation, shapes)
    for instruction in computation.instructions:
        if instruction in fixed:
            if instruction.opcode in _ANY_INPUT:
                continue
            for operand in dict.fromkeys(instruction.operands):
                if operand not in fixed and has_upcast_type(shapes(operand)):
                    plan.narrow.append((instruction, operand))
            continue
        if has_upcast_type(instruction.shape) or (
            instruction.literal is not None and has_upcast_type(instruction.literal.shape)
        ):
            plan.retype.append(instruction)
        if instruction.opcode in _ANY_INPUT:
            continue
        for operand in dict.fromkeys(instruction.operands):
            if operand in fixed and has_upcast_type(shapes(operand)):
                plan.widen.append((instruction, operand))
    root = computation.root
    if root is not None and root in fixed and has_upcast_type(shapes(root)):
        plan.widen.append((None, root))
    return plan


@dataclass(frozen=True)
class UpcastAllToFP32(HloPass):
    """Every F16/BF16/F64/FP8/FP4 value and constant → F32, in every computation; the entry layout follows."""

    def matches(self, module: Module) -> list[Instruction]:
        shapes = ShapeResolver(module)
        return [i for c in module.computations for i in plan_computation(c, shapes).instructions()]

    def run_on_module(self, module: Module) -> PassResult:
        shapes = ShapeResolver(module)
        plans = [(c, plan_computation(c, shapes)) for c in module.computations]
        # Shapes as they were, for every operand a boundary convert must restore.
        original = {operand: known_shape(shapes, operand) for _, plan in plans for _, operand in plan.narrow}
        original |= {f: known_shape(shapes, f) for _, plan in plans for _, f in plan.widen}
        rewritten = 0
        provenance: list[tuple[str, str]] = []
        for computation, plan in plans:
            for instruction in plan.retype:
                _retype(instruction)
                provenance += provenance_of(instruction, [instruction])
            provenance += _narrow(plan, original) + _widen(computation, plan, original)
            rewritten += len(set(plan.instructions()))
        changed = rewritten > 0
        layout = module.entry_layout
        if layout is not None:
            upcast = ProgramLayout(tuple(upcast_shape(p) for p in layout.parameters), upcast_shape(layout.result))
            if upcast != layout:
                module.entry_layout = upcast
                changed = True
                rewritten = max(rewritten, 1)  # the entry signature counts as one rewrite when nothing else changed
        return PassResult(changed, rewritten, provenance=tuple(provenance))


def _retype(instruction: Instruction) -> None:
    """F32 result shape in place; a constant gets its literal rebuilt by the cast engine (XLA convert rules)."""
    literal = instruction.literal
    if literal is not None:
        new_shape = upcast_shape(literal.shape)
        if isinstance(literal.shape, ArrayShape) and isinstance(new_shape, ArrayShape):
            instruction.set_literal(literal.converted(new_shape, partial(_upcast_array, shape=literal.shape)))
        elif literal.is_elided:
            instruction.set_literal(Literal(new_shape, text=literal.text))
        else:
            instruction.set_literal(Literal.from_value(new_shape, _upcast_value(literal.value, literal.shape)))
    if instruction.shape is not None:
        instruction.set_shape(upcast_shape(instruction.shape))


def _upcast_array(array: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """The values of an array of `shape` as the f32 ones XLA's convert gives (others unchanged)."""
    if shape.element_type not in UPCAST_TYPES:
        return array
    return cast(np.ascontiguousarray(array), shape.element_type, "f32", profile="xla")


def _upcast_value(value: LiteralValue, shape: Shape) -> LiteralValue:
    def leaf(item: tuple[object, Shape]) -> LiteralValue:
        value, array_shape = item
        assert isinstance(value, np.ndarray) and isinstance(array_shape, ArrayShape)
        return _upcast_array(
            cast_type("np.ndarray[Any, Any]", value), array_shape
        )  # an array shape's value is an array

    return fold_tree((value, shape), literal_parts, leaf, lambda _, values: tuple(values))


def _convert_chain(builder: Builder, value: Instruction, source: Shape, target: Shape) -> Instruction:
    """Make the instructions turning `value` (of shape `source`) into `target`; the last one is the result.

    Tuples are taken apart element by element (get-tuple-element, convert, tuple) at any depth;
    an element whose shape already matches passes through as its get-tuple-element.
    """
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


def _narrow(plan: _Plan, original: dict[Instruction, Shape]) -> list[tuple[str, str]]:
    """Before each fixed instruction, convert F32 operands back to the types it was written with;
    the provenance of the converts (each from the operand it narrows)."""
    made: dict[Instruction, Instruction] = {}
    provenance: list[tuple[str, str]] = []
    for user, operand in plan.narrow:
        if operand not in made:
            builder = Builder.before(user)
            made[operand] = _convert_chain(builder, operand, upcast_shape(original[operand]), original[operand])
            provenance += provenance_of(operand, builder.created)
        user.replace_operand(operand, made[operand])
    return provenance


def _widen(computation: Computation, plan: _Plan, original: dict[Instruction, Shape]) -> list[tuple[str, str]]:
    """After each fixed instruction, convert its result up to F32 for the upcast instructions using it;
    the provenance of the converts (each from the fixed instruction it widens)."""
    made: dict[Instruction, Instruction] = {}
    provenance: list[tuple[str, str]] = []
    for user, fixed in plan.widen:
        if fixed not in made:
            builder = Builder.after(fixed)
            made[fixed] = _convert_chain(builder, fixed, original[fixed], upcast_shape(original[fixed]))
            provenance += provenance_of(fixed, builder.created)
        if user is None:
            computation.set_root(made[fixed])
        else:
            user.replace_operand(fixed, made[fixed])
    return provenance
