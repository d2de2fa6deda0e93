"""Shapes the source text left out (``x = add(a, b)``), inferred from operands.

XLA's parser infers the shape of such instructions with ShapeInference; hloopt
keeps them unshaped (so they print back as written) and infers on demand here,
for the verifier and for passes that must build new instructions around them.
Only opcodes whose result follows from operands and attributes are covered;
for anything else the answer is None ("unknown").
"""

from __future__ import annotations

from hloopt.ir.attribute_values import DotDimensionNumbers, dot_dimension_numbers, integers
from hloopt.ir.element_types import COMPLEX_OF, COMPLEX_PARTS
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.ir.opcodes import (
    BINARY_SAME,
    ELEMENTWISE_INFERRED,
    PREDICATES,
    RESULT_FROM,
    SELECTS,
    UNARY_SAME,
    UNARY_TO_REAL,
)
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, default_layout, map_leaves

#: The opcodes whose result shape `infer` computes from the operands (given their shapes).
INFERABLE: frozenset[str] = ELEMENTWISE_INFERRED | {
    "tuple",
    "get-tuple-element",
    "dot",
    "transpose",
    "batch-norm-training",
    "batch-norm-inference",
    "batch-norm-grad",
    "shuffle",
}


def _complex_part(shape: ArrayShape) -> ArrayShape:
    return shape.with_element_type(COMPLEX_PARTS.get(shape.element_type, shape.element_type))


def dot_shape(lhs: ArrayShape, rhs: ArrayShape, numbers: DotDimensionNumbers, element_type: str) -> ArrayShape | None:
    """Batch dims, then lhs free dims, then rhs free dims (XLA's InferDotOpShape)."""
    lb, rb, lc, rc = numbers.lhs_batch, numbers.rhs_batch, numbers.lhs_contracting, numbers.rhs_contracting
    if any(not 0 <= d < lhs.rank for d in lb + lc) or any(not 0 <= d < rhs.rank for d in rb + rc):
        return None
    picked = [(lhs, i) for i in lb]
    picked += [(lhs, i) for i in range(lhs.rank) if i not in lb and i not in lc]
    picked += [(rhs, i) for i in range(rhs.rank) if i not in rb and i not in rc]
    return ArrayShape(element_type, tuple(s.dims[i] for s, i in picked), tuple(s.dynamic[i] for s, i in picked))


def infer(instruction: Instruction, operands: list[Shape | None]) -> Shape | None:
    """The shape XLA would give `instruction` from its operands' shapes, or None when unknown."""
    op = instruction.opcode
    if op == "tuple":
        known = [s for s in operands if s is not None]
        return TupleShape(tuple(known)) if len(known) == len(operands) else None
    if op == "get-tuple-element":
        source = operands[0] if operands else None
        index = integers(instruction.attributes.get("index"))
        if isinstance(source, TupleShape) and index and 0 <= index[0] < len(source.elements):
            return source.elements[index[0]]
        return None
    arrays = [s for s in operands if isinstance(s, ArrayShape)]
    if len(arrays) != len(operands) or not arrays:
        return None
    first = arrays[0]
    if op in UNARY_SAME or op in BINARY_SAME or op == "shuffle":  # a shuffle moves elements within the shape
        return first
    if op in UNARY_TO_REAL:
        return _complex_part(first)
    if op in PREDICATES:
        return first.with_element_type("pred")
    if op in SELECTS:
        return arrays[1] if len(arrays) == 3 else None
    if op == "complex":
        return first.with_element_type(COMPLEX_OF.get(first.element_type, "c64"))
    if op == "dot" and len(arrays) == 2:
        return dot_shape(arrays[0], arrays[1], dot_dimension_numbers(instruction.attributes), first.element_type)
    if op == "transpose":
        perm = integers(instruction.attributes.get("dimensions"))
        if sorted(perm) != list(range(first.rank)):
            return None
        return ArrayShape(first.element_type, tuple(first.dims[p] for p in perm), tuple(first.dynamic[p] for p in perm))
    if op == "batch-norm-training" and len(arrays) == 3:
        return TupleShape((first, arrays[1], arrays[1]))
    if op in ("batch-norm-inference", "batch-norm-grad") and arrays:
        return first if op == "batch-norm-inference" else TupleShape((first, arrays[1], arrays[1]))
    return None


def _with_layout(shape: ArrayShape) -> ArrayShape:
    """Inferred arrays get XLA's default layout, as ShapeUtil::MakeShape gives them."""
    if shape.layout is not None or shape.element_type in ("token", "opaque"):
        return shape
    return ArrayShape(shape.element_type, shape.dims, shape.dynamic, default_layout(shape.rank))


class ShapeResolver:
    """Every instruction's shape: the written one, or an inferred one (cached), or None."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self._inferred: dict[Instruction, Shape | None] = {}

    def __call__(self, instruction: Instruction) -> Shape | None:
        if instruction.shape is not None:
            return instruction.shape
        if instruction in self._inferred:
            return self._inferred[instruction]
        # Iterative: an unshaped chain (a = add(b, c), b = add(…)…) can be arbitrarily long.
        stack = [instruction]
        while stack:
            current = stack[-1]
            pending = [o for o in current.operands if o.shape is None and o not in self._inferred]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if current not in self._inferred:
                self._inferred[current] = self._infer_one(current)
        return self._inferred[instruction]

    def _infer_one(self, instruction: Instruction) -> Shape | None:
        operand_shapes = [o.shape if o.shape is not None else self._inferred.get(o) for o in instruction.operands]
        callee = instruction.attributes.get(RESULT_FROM.get(instruction.opcode, ""))
        if isinstance(callee, Computation):
            root = callee.root
            return None if root is None else (root.shape or self._inferred.get(root))
        inferred = infer(instruction, operand_shapes)
        return None if inferred is None else map_leaves(inferred, _with_layout)
