"""A structural HLO verifier: the checks the pass manager runs after each changing pass.

It catches what a buggy rewrite produces — a shape that no longer follows from
the operands, an element type an opcode cannot take, a dangling operand or a
duplicated name, an entry signature out of step with entry_computation_layout —
before XLA does, and names the pass. It is not XLA's full HloVerifier: opcodes
outside the common set are checked only for defined operands and legal types.
"""

from __future__ import annotations

import math

from hloopt.analysis.shape_inference import INFERABLE, ShapeResolver, infer, int_list
from hloopt.errors import HloError
from hloopt.ir import element_types
from hloopt.ir.element_types import COMPLEX_TYPES, FLOAT_TYPES, INT_TYPES, PRIMITIVE_TYPES
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.ir.opcodes import (
    BINARY_SAME,
    FLOAT_OPERANDS,
    INTEGER_OPERANDS,
    INTEGER_OR_PRED_OPERANDS,
    RESULT_FROM,
    UNARY_SAME,
)
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, leaf_shapes

#: Elementwise opcodes with no element-type rule of their own.
_PLAIN_ELEMENTWISE = (UNARY_SAME | BINARY_SAME) - INTEGER_OR_PRED_OPERANDS - INTEGER_OPERANDS - FLOAT_OPERANDS
#: Opcodes whose element types `_check_types` looks at beyond the result's.
_TYPED = INTEGER_OR_PRED_OPERANDS | INTEGER_OPERANDS | FLOAT_OPERANDS | BINARY_SAME | {"convert"}


class VerificationError(HloError):
    """The module breaks an HLO invariant; `problems` lists each one."""

    def __init__(self, problems: list[str], culprit: str | None = None, before_passes: bool = False) -> None:
        self.problems = problems
        self._args = (problems, culprit, before_passes)
        head = f"after pass {culprit}: " if culprit else ""
        if before_passes:
            head = "the input, before any pass: "
        shown = problems[:10] + ([f"… and {len(problems) - 10} more"] if len(problems) > 10 else [])
        super().__init__(head + "invalid module:\n  " + "\n  ".join(shown))

    def __reduce__(self) -> tuple[type[VerificationError], tuple[list[str], str | None, bool]]:
        """Rebuilt from its arguments, so it crosses from a worker process as itself."""
        return VerificationError, self._args


def same_shape(a: Shape | None, b: Shape | None) -> bool:
    """Equal element types and dimensions; layouts are not compared."""
    if a is None or b is None:
        return False
    if a is b:
        return True
    if (
        isinstance(a, ArrayShape)
        and isinstance(b, ArrayShape)
        and a.element_type == b.element_type
        and a.dims == b.dims
    ):
        return a.dynamic == b.dynamic or a.to_text(with_layout=False) == b.to_text(with_layout=False)
    return a.to_text(with_layout=False) == b.to_text(with_layout=False)


def verify(module: Module, culprit: str | None = None) -> None:
    """Raise VerificationError listing every problem found, or return quietly."""
    problems: list[str] = []
    shapes = ShapeResolver(module)
    for computation in module.computations:
        problems += _check_computation(computation, shapes)
    problems += _check_entry(module)
    if problems:
        raise VerificationError(problems, culprit)


def _check_computation(computation: Computation, shapes: ShapeResolver) -> list[str]:
    problems: list[str] = []
    defined: set[Instruction] = set()
    names: set[str] = set()
    if computation.root is None or computation.root.parent is not computation:
        problems.append(f"%{computation.name}: root is not an instruction of the computation")
    for instruction in computation.instructions:
        found: list[str] = []
        if instruction.name in names:
            found.append("name used twice")
        names.add(instruction.name)
        for operand in instruction.operands:
            if operand not in defined:
                state = "not in this computation" if operand.parent is not computation else "used before it is defined"
                found.append(f"operand %{operand.name} is {state}")
        defined.add(instruction)
        if instruction.shape is not None and not _plainly_elementwise(instruction, shapes):
            found += _check_types(instruction, shapes) + _check_shape(instruction, shapes)
        problems += [f"%{instruction.name} in %{computation.name}: {p}" for p in found]
    return problems


def _plainly_elementwise(instruction: Instruction, shapes: ShapeResolver) -> bool:
    """An elementwise op whose operands all have its result's type and dimensions: every check
    below would pass, so skip them (most instructions after an upcast are like this)."""
    shape = instruction.shape
    if instruction.opcode not in _PLAIN_ELEMENTWISE or not isinstance(shape, ArrayShape) or not instruction.operands:
        return False
    if shape.element_type not in PRIMITIVE_TYPES:
        return False
    for operand in instruction.operands:
        other = shapes(operand)
        if not (
            isinstance(other, ArrayShape)
            and other.element_type == shape.element_type
            and other.dims == shape.dims
            and other.dynamic == shape.dynamic
        ):
            return False
    return True


def _check_types(instruction: Instruction, shapes: ShapeResolver) -> list[str]:
    shape = instruction.shape
    assert shape is not None
    leaves = [shape] if isinstance(shape, ArrayShape) else leaf_shapes(shape)
    problems = [
        f"unknown element type {leaf.element_type}" for leaf in leaves if leaf.element_type not in PRIMITIVE_TYPES
    ]
    op = instruction.opcode
    if op not in _TYPED:
        return problems
    operand_types = [s.element_type for o in instruction.operands if isinstance(s := shapes(o), ArrayShape)]
    if op in INTEGER_OR_PRED_OPERANDS and any(t not in INT_TYPES and t != "pred" for t in operand_types):
        problems.append(f"{op} needs integer or pred operands, not {', '.join(operand_types)}")
    if op in INTEGER_OPERANDS and any(t not in INT_TYPES for t in operand_types):
        problems.append(f"{op} needs integer operands, not {', '.join(operand_types)}")
    if op in FLOAT_OPERANDS and any(t not in FLOAT_TYPES for t in operand_types):
        problems.append(f"{op} needs floating-point operands, not {', '.join(operand_types)}")
    if op in BINARY_SAME and len(set(operand_types)) > 1:
        problems.append(f"{op} operands have different element types: {', '.join(operand_types)}")
    if op == "convert" and not isinstance(shape, ArrayShape):
        problems.append("convert must produce an array")
    return problems


def _check_shape(instruction: Instruction, shapes: ShapeResolver) -> list[str]:
    shape = instruction.shape
    assert shape is not None  # the caller checks written shapes only
    op = instruction.opcode
    operands = [shapes(o) for o in instruction.operands]
    source = operands[0] if operands else None
    if op == "get-tuple-element" and isinstance(source, TupleShape):
        index, size = int_list(instruction.attributes.get("index")), len(source.elements)
        if not index or not 0 <= index[0] < size:
            return [f"index {index[0] if index else '(none)'} is out of range for a tuple of {size} elements"]
    if (
        op in ("bitcast", "bitcast-convert")
        and isinstance(source, ArrayShape)
        and isinstance(shape, ArrayShape)
        and source.element_type != shape.element_type
    ):
        return _check_bitcast(op, source, shape)
    if op in INFERABLE:  # the shape must be exactly what `infer` gives (layout aside)
        expected = infer(instruction, operands)
        if op == "dot" and isinstance(expected, ArrayShape) and isinstance(shape, ArrayShape):
            expected = expected.with_element_type(shape.element_type)
        if expected is not None and not same_shape(expected, shape):
            return [f"shape {shape.to_text(False)} does not follow from the operands ({expected.to_text(False)})"]
        return []
    if op == "convert" and operands and isinstance(operands[0], ArrayShape) and isinstance(shape, ArrayShape):
        if operands[0].dims != shape.dims:
            return [f"convert changes dimensions {operands[0].to_text(False)} → {shape.to_text(False)}"]
        if (operands[0].element_type in COMPLEX_TYPES) != (shape.element_type in COMPLEX_TYPES) and operands[
            0
        ].element_type in COMPLEX_TYPES:
            return [f"convert from complex {operands[0].element_type} to {shape.element_type} is not allowed"]
    if op == "constant" and instruction.literal is not None and not same_shape(instruction.literal.shape, shape):
        return [f"literal shape {instruction.literal.shape.to_text(False)} differs from {shape.to_text(False)}"]
    if op in RESULT_FROM:
        return _check_calls(instruction, shapes)
    return []


def _byte_width(element_type: str) -> int:
    """``ShapeUtil::ByteSizeOfPrimitiveType``: sub-byte types take a byte each."""
    return max(1, element_types.BY_NAME[element_type].bits // 8)


def byte_size(shape: ArrayShape) -> int | None:
    """``ShapeUtil::ByteSizeOf`` of an array; None when unknown (token, opaque, packed ``E(n)`` layouts)."""
    row = element_types.BY_NAME.get(shape.element_type)
    if row is None or row.bits == 0 or (shape.layout is not None and "E(" in shape.layout.tail):
        return None
    return math.prod(shape.dims) * _byte_width(shape.element_type)


def _check_bitcast(op: str, source: ArrayShape, shape: ArrayShape) -> list[str]:
    """Bits are reinterpreted, so the sizes must agree (a pass that widened one side breaks them).

    Only bitcasts between two element types are checked: XLA's parser accepts a same-type
    bitcast of any size, which no pass makes.

    bitcast: equal ``ShapeUtil::ByteSizeOf``. bitcast-convert (``InferBitcastConvertShape``):
    equal dimensions for equal bit widths, else the narrower side has one more, minor,
    dimension of the width ratio.
    """
    before, after = byte_size(source), byte_size(shape)
    if before is None or after is None:
        return []
    text = f"{op} {source.to_text(False)} → {shape.to_text(False)}"
    if op == "bitcast":
        return [] if before == after else [f"{text} changes the byte size ({before} → {after})"]
    known = element_types.BY_NAME
    source_bits, bits = known[source.element_type].bits, known[shape.element_type].bits
    wide, narrow = (source, shape) if source_bits >= bits else (shape, source)
    ratio = max(source_bits, bits) // min(source_bits, bits)
    expected = tuple(wide.dims) if ratio == 1 else (*wide.dims, ratio)
    return [] if tuple(narrow.dims) == expected else [f"{text} changes the bit width without matching dimensions"]


def _check_calls(instruction: Instruction, shapes: ShapeResolver) -> list[str]:
    """Callee signatures against the caller: parameters take the operands, roots give the result."""
    problems: list[str] = []
    shape = instruction.shape
    attrs = instruction.attributes
    pairs: list[tuple[Computation, list[Shape | None], Shape | None]] = []
    operands = [shapes(o) for o in instruction.operands]
    for key in ("to_apply", "calls"):
        callee = attrs.get(key)
        if isinstance(callee, Computation):
            pairs.append((callee, operands, shape))
    if instruction.opcode == "while":
        for key, result in (("body", shape), ("condition", ArrayShape("pred"))):
            callee = attrs.get(key)
            if isinstance(callee, Computation):
                pairs.append((callee, operands, result))
    for callee, args, result in pairs:
        params = [p.shape for p in callee.parameters()]
        if len(params) != len(args):
            problems.append(f"calls %{callee.name} with {len(args)} operands, it takes {len(params)}")
        for index, (param, arg) in enumerate(zip(params, args)):
            if arg is not None and param is not None and not same_shape(param, arg):
                problems.append(f"operand {index} is {arg.to_text(False)}, %{callee.name} takes {param.to_text(False)}")
        root_shape = shapes(callee.root) if callee.root is not None else None
        if root_shape is not None and result is not None and not same_shape(root_shape, result):
            problems.append(f"%{callee.name} returns {root_shape.to_text(False)}, expected {result.to_text(False)}")
    return problems


def _check_entry(module: Module) -> list[str]:
    layout = module.entry_layout
    if layout is None:
        return []
    entry = module.entry
    params = entry.parameters()
    problems: list[str] = []
    if len(params) != len(layout.parameters):
        problems.append(f"entry has {len(params)} parameters, entry_computation_layout lists {len(layout.parameters)}")
    for param, expected in zip(params, layout.parameters):
        if param.shape is not None and not same_shape(param.shape, expected):
            problems.append(
                f"entry parameter %{param.name} is {param.shape.to_text(False)}, "
                f"entry_computation_layout says {expected.to_text(False)}"
            )
    root = entry.root
    if root is not None and root.shape is not None and not same_shape(root.shape, layout.result):
        problems.append(
            f"entry result is {root.shape.to_text(False)}, entry_computation_layout says {layout.result.to_text(False)}"
        )
    return problems
