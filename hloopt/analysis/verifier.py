"""A structural HLO verifier: the checks the pass manager runs after each changing pass.

It catches what a buggy rewrite produces — a shape that no longer follows from
the operands, an element type an opcode cannot take, a dangling operand or a
duplicated name, an entry signature out of step with entry_computation_layout —
before XLA does, and names the pass. It is not XLA's full HloVerifier: opcodes
outside the common set are checked only for defined operands and legal types.
"""

from __future__ import annotations

import math

from hloopt.analysis.shape_inference import INFERABLE, ShapeResolver, infer
from hloopt.errors import HloError, Subject, about, located
from hloopt.ir import element_types
from hloopt.ir.attribute_values import dot_dimension_numbers, integers
from hloopt.ir.element_types import COMPLEX_TYPES, FLOAT_TYPES, INT_TYPES, PRIMITIVE_TYPES
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.ir.opcodes import (
    BINARY_SAME,
    ELEMENTWISE,
    FLOAT_OPERANDS,
    INTEGER_OPERANDS,
    INTEGER_OR_PRED_OPERANDS,
    PREDICATES,
    RESULT_FROM,
    UNARY_SAME,
)
from hloopt.ir.shape import UNBOUNDED, ArrayShape, BufferShape, Shape, TupleShape, leaf_shapes

#: Elementwise opcodes with no element-type rule of their own.
_PLAIN_ELEMENTWISE = (UNARY_SAME | BINARY_SAME) - INTEGER_OR_PRED_OPERANDS - INTEGER_OPERANDS - FLOAT_OPERANDS
#: Opcodes whose element types `_check_types` looks at beyond the result's.
_TYPED = INTEGER_OR_PRED_OPERANDS | INTEGER_OPERANDS | FLOAT_OPERANDS | BINARY_SAME | {"convert"}


class VerificationError(HloError):
    """The module breaks an HLO invariant; `problems` lists each one, `subjects` the instruction each is about
    (None for one about a computation or the module), so the first that has one can be located."""

    def __init__(
        self,
        problems: list[str],
        culprit: str | None = None,
        before_passes: bool = False,
        subjects: list[Subject | None] | None = None,
    ) -> None:
        self.problems = problems
        self.subjects: list[Subject | None] = subjects if subjects is not None else [None] * len(problems)
        self._args = (problems, culprit, before_passes, self.subjects)
        head = f"after pass {culprit}: " if culprit else ""
        if before_passes:
            head = "the input, before any pass: "
        self._head = head + "invalid module:"
        self.subject = next((subject for subject in self.subjects if subject is not None), None)
        super().__init__(self._head + "\n" + self._listed(problems))

    @staticmethod
    def _listed(problems: list[str]) -> str:
        shown = problems[:10] + ([f"… and {len(problems) - 10} more"] if len(problems) > 10 else [])
        return "\n".join(f"  {problem}" for problem in shown)

    def headline(self) -> tuple[str, str]:
        """The first problem about an instruction beside its location, the others below."""
        first = self.subjects.index(self.subject) if self.subject is not None else 0
        others = self.problems[:first] + self.problems[first + 1 :]
        return f"{self._head} {self.problems[first]}", self._listed(others)

    def __reduce__(
        self,
    ) -> tuple[type[VerificationError], tuple[list[str], str | None, bool, list[Subject | None]]]:
        """Rebuilt from its arguments, so it crosses from a worker process as itself."""
        return VerificationError, self._args

    def blamed_on_input(self) -> VerificationError:
        """The same problems, blamed on the input rather than on a pass."""
        return VerificationError(self.problems, before_passes=True, subjects=self.subjects)


def same_shape(a: Shape | None, b: Shape | None) -> bool:
    """Equal structure, element types and dimensions (bounded or not, as written); layouts are not compared."""
    if a is None or b is None:
        return False
    pairs: list[tuple[Shape, Shape]] = [(a, b)]
    while pairs:  # a loop, not recursion: tuples nest deep
        left, right = pairs.pop()
        if left is right:
            continue
        if isinstance(left, ArrayShape) and isinstance(right, ArrayShape):
            if left.element_type != right.element_type or _dimensions(left) != _dimensions(right):
                return False
        elif isinstance(left, TupleShape) and isinstance(right, TupleShape):
            if len(left.elements) != len(right.elements):
                return False
            pairs.extend(zip(left.elements, right.elements))
        elif isinstance(left, BufferShape) and isinstance(right, BufferShape):
            pairs.append((left.shape, right.shape))
        else:
            return False
    return True


def _dimensions(shape: ArrayShape) -> list[tuple[int, bool]]:
    """Each dimension's size and whether it is a bound (an unbounded one is just that)."""
    return [(size, dynamic and size != UNBOUNDED) for size, dynamic in zip(shape.dims, shape.dynamic)]


def verify(module: Module, culprit: str | None = None) -> None:
    """Raise VerificationError listing every problem found, or return quietly."""
    problems: list[tuple[str, Subject | None]] = []
    shapes = ShapeResolver(module)
    for computation in module.computations:
        problems += _check_computation(computation, shapes)
    problems += [(problem, None) for problem in _check_entry(module)]
    if problems:
        raise VerificationError([problem for problem, _ in problems], culprit, subjects=[s for _, s in problems])


def _check_computation(computation: Computation, shapes: ShapeResolver) -> list[tuple[str, Subject | None]]:
    """Each problem, with the instruction it is about."""
    problems: list[tuple[str, Subject | None]] = []
    defined: set[Instruction] = set()
    names: set[str] = set()
    if computation.root is None or computation.root.parent is not computation:
        problems.append((f"%{computation.name}: root is not an instruction of the computation", None))
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
        subject = (instruction.name, computation.name)
        problems += [(f"%{instruction.name} in %{computation.name}: {p}", subject) for p in found]
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
        index, size = integers(instruction.attributes.get("index")), len(source.elements)
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
    if row is None or row.bits == 0 or (shape.layout is not None and shape.layout.element_size_in_bits):
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


def check_executable(module: Module, source: str | None = None, filename: str = "<string>") -> None:
    """Refuse, before XLA sees it, a module XLA's parser takes but its compiler will not run.

    XLA's parser checks no shape it is given, so ``add`` of f32[4] and f32[8] parses, prints
    and round-trips, and plain ``run`` must keep accepting it; only compiling it fails, with a
    multi-line MLIR diagnostic that names no file. Call this where a module is about to be
    executed (--verify-numerics, exec, compare). The error names the first offending
    instruction; with `source`, the HLO text `module` was parsed from, it is located there
    (``FILE:LINE:COL``, the line and a caret), else (or if `source` does not define it) it is
    one line naming `filename`.
    """
    shapes = ShapeResolver(module)
    for computation in module.computations:
        for instruction in computation.instructions:
            problems = _executable_problems(instruction, shapes)
            if not problems:
                continue
            message = f"%{instruction.name} in %{computation.name}: {problems[0]}; XLA would refuse to run the module"
            refusal = about(HloError(message), instruction.name, computation.name)
            pointed = refusal if source is None else located(refusal, source, filename)
            if pointed is refusal:  # no text, or one that does not define it: named, not at 1:1
                raise HloError(f"{filename}: {message}")
            raise pointed


def _executable_problems(instruction: Instruction, shapes: ShapeResolver) -> list[str]:
    """What XLA's shape checks (HloVerifier, and the StableHLO its compiler reads) refuse in `instruction`."""
    if _plainly_elementwise(instruction, shapes):
        return []
    found = _check_elementwise(instruction, shapes) + _check_sizes(instruction, shapes)
    if instruction.shape is not None:
        found += _check_types(instruction, shapes) + _check_shape(instruction, shapes)
    return found


def _check_elementwise(instruction: Instruction, shapes: ShapeResolver) -> list[str]:
    """HLO has no implicit broadcast: each operand of an elementwise op has its result's dimensions
    (but select's predicate and clamp's bounds may be scalars), and compare, select and clamp
    take operands of one element type (select's predicate is pred)."""
    op = instruction.opcode
    result = shapes(instruction)
    if op not in ELEMENTWISE or not isinstance(result, ArrayShape):
        return []
    operands = [shapes(operand) for operand in instruction.operands]
    for index, (operand, shape) in enumerate(zip(instruction.operands, operands)):
        if not isinstance(shape, ArrayShape) or shape.dims == result.dims:
            continue
        if not shape.dims and ((op == "select" and index == 0) or (op == "clamp" and index != 1)):
            continue
        return [
            f"operand {index} (%{operand.name}) is {shape.to_text(False)}, but {op} takes operands of its result's "
            f"dimensions, {result.to_text(False)} (HLO has no implicit broadcast)"
        ]
    types = [shape.element_type if isinstance(shape, ArrayShape) else None for shape in operands]
    if op == "select" and len(types) == 3:
        if types[0] not in ("pred", None):
            return [f"select's predicate is {types[0]}, not pred"]
        types = types[1:]
    if op in PREDICATES | {"select", "clamp"} and len(set(types) - {None}) > 1:
        return [f"{op} operands have different element types: {', '.join(t or '?' for t in types)}"]
    return []


def _check_sizes(instruction: Instruction, shapes: ShapeResolver) -> list[str]:
    """A reshape keeps its element count; a broadcast puts each operand dimension on a result
    dimension of its size (or broadcasts a size-1 one); a dot contracts and batches equal sizes."""
    op = instruction.opcode
    result = shapes(instruction)
    source = shapes(instruction.operands[0]) if instruction.operands else None
    if op == "dot" and isinstance(source, ArrayShape) and len(instruction.operands) == 2:
        return _check_dot(instruction, source, shapes(instruction.operands[1]))
    if op not in ("reshape", "broadcast") or not isinstance(result, ArrayShape) or not isinstance(source, ArrayShape):
        return []
    if any(source.dynamic) or any(result.dynamic):
        return []
    if op == "reshape":
        before, after = math.prod(source.dims), math.prod(result.dims)
        if before != after:
            return [f"reshape of {source.to_text(False)} ({before} elements) to {result.to_text(False)} ({after})"]
        return []
    dimensions = integers(instruction.attributes.get("dimensions"))
    if len(dimensions) != source.rank or any(not 0 <= d < result.rank for d in dimensions):
        return [
            f"broadcast dimensions={{{','.join(map(str, dimensions))}}} do not map {source.to_text(False)} into "
            f"{result.to_text(False)}"
        ]
    for index, (size, d) in enumerate(zip(source.dims, dimensions)):
        if size not in (1, result.dims[d]):
            return [f"broadcast operand dimension {index} ({size}) is not result dimension {d} ({result.dims[d]})"]
    return []


def _check_dot(instruction: Instruction, lhs: ArrayShape, rhs: Shape | None) -> list[str]:
    if not isinstance(rhs, ArrayShape):
        return []
    numbers = dot_dimension_numbers(instruction.attributes)
    for kind, left, right in (
        ("batch", numbers.lhs_batch, numbers.rhs_batch),
        ("contracting", numbers.lhs_contracting, numbers.rhs_contracting),
    ):
        if len(left) != len(right):
            return [f"dot has {len(left)} lhs and {len(right)} rhs {kind} dimensions"]
        for a, b in zip(left, right):
            if not (0 <= a < lhs.rank and 0 <= b < rhs.rank):
                return [f"dot {kind} dimension {a if a >= lhs.rank or a < 0 else b} is out of range"]
            if lhs.dims[a] != rhs.dims[b]:
                return [
                    f"dot {kind} dimensions differ in size: lhs {a} of {lhs.to_text(False)} is {lhs.dims[a]}, "
                    f"rhs {b} of {rhs.to_text(False)} is {rhs.dims[b]}"
                ]
    return []
