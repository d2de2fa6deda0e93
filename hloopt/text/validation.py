"""The semantic checks XLA's HLO parser makes after the grammar has matched.

Text that fits the grammar can still be refused by XLA: an unknown opcode, an
attribute the opcode does not take, a literal out of its type's range, an
async chain that does not line up, … hloopt refuses the same texts, so a user
learns at parse time, with a location, what XLA would reject later. The checks
work on the IR only; the parser turns an `InvalidHlo` into a located error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache, partial
from typing import Any

from hloopt.errors import HloParseError
from hloopt.ir.attribute_kinds import BY_OPCODE, KINDS, Kind
from hloopt.ir.attribute_values import ComparisonDirection, ComparisonType, FftType, FusionKind, RandomDistribution
from hloopt.ir.brackets import split_top
from hloopt.ir.element_types import FLOAT_TYPES, INT_TYPES
from hloopt.ir.literal import LiteralError
from hloopt.ir.module import Computation, ComputationList, Instruction, Module
from hloopt.ir.opcodes import ASYNC_WRAPPERS, BINARY_SAME, BY_NAME, allowed_attributes, base_opcode, required_attributes
from hloopt.ir.shape import UNBOUNDED, ArrayShape, BufferShape, Shape, TupleShape, leaf_shapes


@dataclass(frozen=True)
class InvalidHlo(Exception):
    """A semantic error, tied to an instruction (and attribute) or a computation, or the module header."""

    message: str
    instruction: Instruction | None = None
    attribute: str | None = None
    computation: Computation | None = None

    def __str__(self) -> str:
        return self.message


MODULE_ATTRIBUTES: frozenset[str] = frozenset(
    [
        "is_scheduled",
        "replica_count",
        "num_partitions",
        "input_output_alias",
        "buffer_donor",
        "alias_passthrough_params",
        "entry_computation_layout",
        "frontend_attributes",
        "allow_spmd_sharding_propagation_to_parameters",
        "allow_spmd_sharding_propagation_to_output",
        "origin_recovery_table",
    ]
)

_API_VERSIONS = {
    "API_VERSION_ORIGINAL",
    "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED",
    "API_VERSION_TYPED_FFI",
}
_DIRECTIONS = {direction.value for direction in ComparisonDirection}
_COMPARISON_TYPES = {kind.value for kind in ComparisonType}
_INT = re.compile(r"-?\d{1,18}")
_BOOL_LIST = re.compile(r"\{\s*(?:(?:true|false)\s*(?:,\s*(?:true|false)\s*)*)?\}")
#: XLA's blanks between tokens (after `parse` has refused any other character outside strings).
_W = r"[ \t\n\r]*"
_PADDING_TEXT = r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+(?:_[0-9]+)?)*"
_PADDING = re.compile(_PADDING_TEXT)
_SHAPE_INDEX = r"\{\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\}"
_ALIAS_ENTRY = re.compile(
    rf"\s*{_SHAPE_INDEX}\s*:\s*\(\s*(?:\d+|-0+)\s*,\s*{_SHAPE_INDEX}\s*(?:,\s*(?:may-alias|must-alias)\s*)?\)\s*"
)
_DONOR_ENTRY = re.compile(rf"\s*\(\s*\d+\s*,\s*{_SHAPE_INDEX}\s*\)\s*")


ShapeParser = Callable[[str], Shape]


def validate(module: Module, parse_shape: ShapeParser) -> None:
    """Raise InvalidHlo for the first thing XLA's parser would refuse.

    `parse_shape` reads the shapes inside attribute values (operand layout constraints).
    """
    for key in module.attributes:
        if key not in MODULE_ATTRIBUTES:
            allowed = ", ".join(sorted(MODULE_ATTRIBUTES))
            raise InvalidHlo(f'unexpected module attribute "{key}". Allowed attributes: {allowed}', attribute=key)
    for key, value in module.attributes.items():
        check_value_syntax(key, value)
    for key in ("input_output_alias", "buffer_donor"):
        if isinstance(value := module.attributes.get(key), str):
            _check_alias_list(value, key)
    if isinstance(value := module.attributes.get("frontend_attributes"), str):
        _check_frontend_attributes(value, "frontend_attributes")
    checked_shapes: set[int] = set()
    checked_maps: set[tuple[str, str]] = set()
    checked_literals: set[tuple[int, str]] = set()
    for computation in module.computations:
        numbers: dict[int, Instruction] = {}
        for instruction in computation.instructions:
            number = instruction.parameter_number
            if number is not None:
                if number in numbers:
                    raise _fail(instruction, f"Duplicate parameter number {number}")
                numbers[number] = instruction
            shape = instruction.shape
            if shape is None:  # XLA's parser asks right after the opcode, before any attribute
                _check_inferable(instruction.opcode, instruction)
            elif id(shape) not in checked_shapes:
                _check_shape(instruction, shape)
                checked_shapes.add(id(shape))  # shapes are interned: check each once
            # The instruction's own checks, here rather than in a call per instruction.
            attributes = instruction.attributes
            plan = _plan(instruction.opcode, tuple(attributes))
            for check in plan.first:
                check(instruction)
            if plan.arity is not None and len(instruction.operands) != plan.arity:
                _check_arity(instruction, plan.arity)
            if shape is None:
                _check_inferred(instruction)
            if plan.custom_call:
                _check_custom_call(instruction, parse_shape)
            if "outfeed_shape" in attributes:
                _check_outfeed_shape(instruction, parse_shape)
            for key in plan.syntax:
                value = attributes.get(key)
                if isinstance(value, str):
                    try:
                        check_value_syntax(key, value)
                    except InvalidHlo as issue:
                        raise _fail(instruction, issue.message, key) from None
            for check in plan.then:
                check(instruction)
            for key in plan.maps:  # each map text once a module: one jax operation's instructions share it
                text = str(attributes[key])
                if (key, text) not in checked_maps:
                    try:
                        _MAP_CHECKS[key](text, key)
                    except InvalidHlo as issue:
                        raise _fail(instruction, issue.message, key) from None
                    checked_maps.add((key, text))
            if instruction.literal is not None:
                _check_literal(instruction, checked_literals)
        _check_parameter_numbers(numbers)


def _check_parameter_numbers(numbers: dict[int, Instruction]) -> None:
    """A computation's parameters are numbered 0 to n-1: XLA's parser takes a gap, then aborts making the
    computation (``Check failed: param_no >= 0 && param_no < parameter_count``)."""
    count = len(numbers)
    past = sorted(number for number in numbers if number >= count)
    if past:
        said = f"{count} parameter" + ("" if count == 1 else "s")
        expected = "parameter(0)" if count == 1 else f"parameter(0) to parameter({count - 1})"
        message = f"parameter number {past[0]} in a computation of {said}: expects {expected}"
        raise _fail(numbers[past[0]], message)


def _fail(instruction: Instruction, message: str, attribute: str | None = None) -> InvalidHlo:
    return InvalidHlo(message, instruction=instruction, attribute=attribute)


def _check_alias_list(value: str, key: str) -> None:
    body = value.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise InvalidHlo(f"expects {{...}} for {key}", attribute=key)
    entry = _ALIAS_ENTRY if key == "input_output_alias" else _DONOR_ENTRY
    inner = body[1:-1].strip()
    if not inner:
        return
    parts = split_top(inner)
    if len(parts) > 1 and not parts[-1].strip(" \t\r\n"):  # XLA reads a comma after the last entry
        parts.pop()
    for part in parts:
        if not entry.fullmatch(part):
            raise InvalidHlo(f"malformed {key} entry {part.strip()!r}", attribute=key)
        if not all(map(_in_64_bits, re.findall("[0-9]+", part))):
            raise InvalidHlo("expects integer", attribute=key)


@dataclass(frozen=True, slots=True)
class _Plan:
    """The checks of every instruction with one opcode and one list of attribute names, in the order
    they run: `first`, the operand count, custom-call's (which reads shapes), the values' syntax, then
    `then`, then the map attributes `maps`. Worked out once per such pair: most instructions repeat one.
    A refusal is a plan of one check."""

    first: tuple[Callable[[Instruction], None], ...]
    #: The opcode's fixed operand count, checked after `first` (which say more: `reshape` without its operand)
    #: in `validate`'s loop, with no call.
    arity: int | None = None
    custom_call: bool = False
    #: The attributes whose value's syntax `check_value_syntax` checks (cached), in `validate`'s loop.
    syntax: tuple[str, ...] = ()
    then: tuple[Callable[[Instruction], None], ...] = ()
    maps: tuple[str, ...] = ()


def _refuse(message: str, attribute: str | None, instruction: Instruction) -> None:
    raise _fail(instruction, message, attribute)


@lru_cache(maxsize=4096)
def _plan(opcode: str, keys: tuple[str, ...]) -> _Plan:
    """The plan for `opcode` with attributes `keys` (in text order); a refusal is its only check."""
    try:
        base, suffix = base_opcode(opcode)
    except KeyError:
        return _Plan((partial(_refuse, f"unknown opcode {opcode}", None),))
    allowed = allowed_attributes(opcode)
    unexpected = [key for key in keys if key not in allowed]
    if unexpected:
        message = f'unexpected attribute "{unexpected[0]}". Allowed attributes: {", ".join(sorted(allowed))}'
        return _Plan((partial(_refuse, message, unexpected[0]),))
    missing = [key for key in sorted(required_attributes(opcode)) if key not in keys]
    if missing:
        return _Plan((partial(_refuse, f"attribute {missing[0]} is expected but not seen", None),))
    own = suffix in (None, "-start")  # an op's own checks: on it, and on the sugar start that wraps it
    arity = BY_NAME[base].arity if suffix is None else None
    first: list[Callable[[Instruction], None]] = (
        [_check_parameter_replication] if "parameter_replication" in keys else []
    )
    first.extend(_CHECKS.get(base, ()) if own else ())
    syntax = tuple(key for key in keys if key in _VALUE_SYNTAX)
    then = [check for key, check in _KEYED_CHECKS if key in keys]
    if base in ASYNC_WRAPPERS or suffix is not None:
        then.append(partial(_check_async, base=base, suffix=suffix))
    if "result_accuracy" in keys:
        then.append(_check_result_accuracy)
    maps = tuple(key for key in keys if key in _MAP_CHECKS)  # in text order, as XLA's parser reads them
    return _Plan(tuple(first), arity, own and base == "custom-call", syntax, tuple(then), maps)


def _check_tuple(instruction: Instruction) -> None:
    """A tuple written with its shape gets one operand per element (XLA's parser counts them)."""
    shape = instruction.shape
    if isinstance(shape, TupleShape) and len(instruction.operands) != len(shape.elements):
        count, given = len(shape.elements), len(instruction.operands)
        raise _fail(instruction, f"expects {count} operands, but has {given} operands")


def _check_arity(instruction: Instruction, arity: int) -> None:
    """An opcode with a fixed operand count gets that many, as XLA's parser requires."""
    if len(instruction.operands) != arity:
        raise _fail(instruction, f"expects {arity} operands, but has {len(instruction.operands)} operands")


#: The opcodes whose shape XLA's parser does not infer when the text leaves it out (``CanInferShape``, as
#: jaxlib 0.12 answers for every opcode of `ir/opcodes`): it refuses the text. It infers every other.
_XLA_NEEDS_SHAPE = frozenset(
    [
        "all-gather",
        "all-gather-done",
        "all-gather-start",
        "all-reduce",
        "all-reduce-done",
        "all-reduce-start",
        "all-to-all",
        "async-done",
        "async-start",
        "async-update",
        "bitcast",
        "bitcast-convert",
        "collective-broadcast",
        "collective-permute",
        "collective-permute-done",
        "collective-permute-start",
        "collective-reduce",
        "constant",
        "convert",
        "copy-done",
        "copy-start",
        "custom-call",
        "dynamic-reshape",
        "dynamic-slice",
        "dynamic-update-slice",
        "fusion",
        "infeed",
        "iota",
        "outfeed",
        "parameter",
        "ragged-all-to-all",
        "recv",
        "recv-done",
        "reduce-precision",
        "reduce-scatter",
        "reshape",
        "rng",
        "rng-bit-generator",
        "rng-get-and-update-state",
        "send",
        "send-done",
        "slice",
        "stochastic-convert",
    ]
)
#: The binary elementwise opcodes whose operands' shapes `_check_inferred` holds together.
_BINARY = BINARY_SAME | {"compare"}


def _check_inferable(opcode: str, instruction: Instruction) -> None:
    """An instruction written without its shape whose opcode XLA's parser does not infer (async sugar:
    `add-start` is an async-start) is refused; an unknown opcode is left to its own check."""
    try:
        suffix = None if opcode in BY_NAME else base_opcode(opcode)[1]
    except KeyError:
        return
    if opcode in _XLA_NEEDS_SHAPE or suffix is not None:
        raise _fail(instruction, f"cannot infer shape for opcode: {opcode if suffix is None else 'async' + suffix}")


def _check_inferred(instruction: Instruction) -> None:
    """An instruction written without its shape: XLA's parser infers it, and refuses the text where its
    shape inference fails (binary operations, transposes, clamps, calls and whiles here, from the shapes the text
    writes: operands and callee roots without shapes are left to XLA)."""
    opcode = instruction.opcode
    if opcode == "transpose" and len(instruction.operands) == 1:
        _check_inferred_transpose(instruction)
    if opcode == "clamp" and len(instruction.operands) == 3:
        _check_inferred_clamp(instruction)
    if opcode == "call":
        _check_inferred_call(instruction)
    if opcode == "while":
        _check_inferred_while(instruction)
    if opcode not in _BINARY or len(instruction.operands) != 2:
        return
    lhs, rhs = (operand.shape for operand in instruction.operands)
    if lhs is None or rhs is None:
        return
    failed = f"failed to infer shape for opcode: {opcode}, error: "
    for side, shape in (("lhs", lhs), ("rhs", rhs)):
        if isinstance(shape, TupleShape):
            message = (
                f"Expected array argument for {side} of binary operation {opcode}, but got {shape.to_text(False)}."
            )
            raise _fail(instruction, failed + message)
    if not (isinstance(lhs, ArrayShape) and isinstance(rhs, ArrayShape)):
        return
    a, b = lhs.to_text(False), rhs.to_text(False)
    if opcode in ("and", "or", "xor") and lhs.element_type != "pred" and lhs.element_type not in INT_TYPES:
        got = lhs.element_type.upper()
        raise _fail(instruction, f"{failed}Expected pred or integral type in argument to and/or operation; got {got}.")
    if lhs.element_type != rhs.element_type and not {lhs.element_type, rhs.element_type} <= FLOAT_TYPES:
        raise _fail(instruction, f"{failed}Binary op {opcode} with different element types: {a} and {b}.")
    if lhs.dims and rhs.dims and len(lhs.dims) != len(rhs.dims):  # a scalar goes with any shape
        small, large = (a, b) if len(lhs.dims) < len(rhs.dims) else (b, a)
        raise _fail(instruction, f"{failed}Shapes must be equal rank, but are {small} and {large}")
    if (
        lhs.dims
        and rhs.dims
        and any(x != y and 1 not in (x, y) and UNBOUNDED not in (x, y) for x, y in zip(lhs.dims, rhs.dims))
    ):
        # a dimension of size 1 broadcasts (XLA's degenerate-dimension broadcast)
        raise _fail(instruction, f"{failed}Binary op with incompatible shapes: {a} and {b}.")


def _check_inferred_clamp(instruction: Instruction) -> None:
    """A clamp without its shape: min and max are scalars or the operand's shape, all of one element type
    (floating-point precisions aside)."""
    shapes = [operand.shape for operand in instruction.operands]
    failed = "failed to infer shape for opcode: clamp, error: "
    for role, shape in zip(("min", "operand", "max"), shapes):
        if isinstance(shape, TupleShape):
            raise _fail(instruction, f"{failed}Expected array argument for clamp {role}, but got {_text(shape)}.")
    low, operand, high = shapes
    if not (isinstance(low, ArrayShape) and isinstance(operand, ArrayShape) and isinstance(high, ArrayShape)):
        return
    written = ", ".join(map(_text, shapes))
    types = {low.element_type, operand.element_type, high.element_type}
    if len(types) > 1 and not types <= FLOAT_TYPES:
        raise _fail(instruction, f"{failed}Clamp with incompatible element types: {written}.")
    if any(bound.dims and not _same_dims(bound, operand) for bound in (low, high)):
        raise _fail(instruction, f"{failed}Clamp with incompatible shapes: {written}.")


def _same_dims(a: ArrayShape, b: ArrayShape) -> bool:
    """Whether XLA's inference takes two arrays' dimensions as one (an unbounded one matches any)."""
    return len(a.dims) == len(b.dims) and all(x == y or UNBOUNDED in (x, y) for x, y in zip(a.dims, b.dims))


def _program_shape(computation: Computation) -> tuple[list[Shape], Shape] | None:
    """A callee's parameter shapes and result shape, as XLA's shape inference compares them; None when its
    root's shape is itself left to inference (not done here)."""
    root = computation.root
    if root is None or root.shape is None or any(p.shape is None for p in computation.parameters()):
        return None
    return [p.shape for p in computation.parameters() if p.shape is not None], root.shape


def _program_text(computation: Computation) -> str:
    """XLA's words for a program shape: ``(name: shape, …) -> shape``."""
    parameters = ", ".join(f"{p.name}: {_text(p.shape)}" for p in computation.parameters())
    return f"({parameters}) -> {_text(computation.root.shape if computation.root else None)}"


def _text(shape: Shape | None) -> str:
    return "" if shape is None else shape.to_text(False)


def _check_inferred_call(instruction: Instruction) -> None:
    """A call without its shape: XLA infers it from the callee, whose parameters must fit the arguments."""
    callee = instruction.attributes.get("to_apply")
    program = _program_shape(callee) if isinstance(callee, Computation) else None
    arguments = [op.shape for op in instruction.operands if op.shape is not None]
    if not isinstance(callee, Computation) or program is None or len(arguments) != len(instruction.operands):
        return
    failed = "failed to infer shape for opcode: call, error: "
    if len(arguments) != len(program[0]):
        raise _fail(
            instruction,
            f"{failed}Call applied function arity must match number of arguments; got: arity: {len(program[0])}, "
            f"arguments: {len(arguments)}; computation signature: {_program_text(callee)}; "
            f"argument shapes: [{', '.join(map(_text, arguments))}].",
        )
    for index, (argument, parameter) in enumerate(zip(arguments, program[0])):
        if not compatible(argument, parameter):
            raise _fail(
                instruction,
                f"{failed}Call parameter must match argument; got parameter {index} shape: {_text(parameter)}, "
                f"argument shape: {_text(argument)}.",
            )


def _check_inferred_while(instruction: Instruction) -> None:
    """A while without its shape: XLA infers it from the condition and body, which must fit the init."""
    condition, body = instruction.attributes.get("condition"), instruction.attributes.get("body")
    if not (isinstance(condition, Computation) and isinstance(body, Computation)) or len(instruction.operands) != 1:
        return
    cond_program, body_program, init = _program_shape(condition), _program_shape(body), instruction.operands[0].shape
    if cond_program is None or body_program is None or init is None:
        return
    failed = "failed to infer shape for opcode: while, error: "
    for role, parameters in (("Condition", cond_program[0]), ("Body", body_program[0])):
        if len(parameters) != 1:
            raise _fail(instruction, f"{failed}{role} must take 1 arguments; got {len(parameters)}.")
    shapes = f"Condition: {_program_text(condition)}; body: {_program_text(body)}; init: {_text(init)}."
    if not compatible(cond_program[1], ArrayShape("pred")):
        raise _fail(instruction, f"{failed}Condition must return a boolean; got {shapes}.")
    result = body_program[1]
    if not all(compatible(result, shape) for shape in (cond_program[0][0], body_program[0][0], init)):
        raise _fail(
            instruction,
            f"{failed}The parameter of condition and body, the result of the body, and init must all have the "
            f"same shape; got {shapes}.",
        )


def _check_inferred_transpose(instruction: Instruction) -> None:
    operand = _array(instruction.operands[0].shape)
    permutation = _dims(instruction.attributes.get("dimensions", ""))
    if operand is not None and sorted(permutation) != list(range(operand.rank)):
        raise _fail(
            instruction,
            "failed to infer shape for opcode: transpose, error: Transpose dimensions "
            f"[{','.join(map(str, permutation))}] are not a permutation of the operand dimensions "
            f"(operand shape is {operand.to_text(False)}).",
        )


def _check_shape(instruction: Instruction, shape: Shape | None) -> None:
    if shape is None:
        return
    for leaf in leaf_shapes(shape):
        layout = leaf.layout
        if layout is not None and layout.physical_shape is not None:
            raise _fail(instruction, f"Layout has physical shape, but is not for a sparse array: {layout.to_text()}")


def _dims(value: Any) -> list[int]:
    return [int(v) for v in _INT.findall(str(value))]


def _array(shape: Shape | None) -> ArrayShape | None:
    return shape if isinstance(shape, ArrayShape) else None


def compatible(a: Shape, b: Shape) -> bool:
    """XLA's ShapeUtil::Compatible: same structure, types and dimensions; layouts ignored.

    A stack, not recursion: a tuple shape in text may nest thousands of levels deep."""
    pairs = [(a, b)]
    while pairs:
        a, b = pairs.pop()
        if isinstance(a, TupleShape) or isinstance(b, TupleShape):
            if not (isinstance(a, TupleShape) and isinstance(b, TupleShape) and len(a.elements) == len(b.elements)):
                return False
            pairs.extend(zip(a.elements, b.elements))
        elif isinstance(a, BufferShape) or isinstance(b, BufferShape):
            if not (isinstance(a, BufferShape) and isinstance(b, BufferShape)):
                return False
            pairs.append((a.shape, b.shape))
        elif a.element_type != b.element_type or a.dims != b.dims:
            return False
    return True


def _require_operands(instruction: Instruction, minimum: int) -> None:
    if len(instruction.operands) < minimum:
        raise _fail(
            instruction, f"{instruction.opcode} expects at least {minimum} operand(s), got {len(instruction.operands)}"
        )


def _check_one_dimension(instruction: Instruction) -> None:
    value = instruction.attributes.get("dimensions")
    if value is not None and not _dims(value):
        raise _fail(instruction, f"{instruction.opcode} expects exactly one entry in dimensions={{}}", "dimensions")


def _check_collective(instruction: Instruction) -> None:
    if (
        instruction.opcode in _GLOBAL_IDS_NEED_CHANNEL
        and instruction.attributes.get("use_global_device_ids") == "true"
        and "channel_id" not in instruction.attributes
    ):
        raise _fail(instruction, "Cannot have use_global_device_ids=true without channel_id", "use_global_device_ids")
    groups = instruction.attributes.get("replica_groups")
    if isinstance(groups, str) and groups.startswith("mesh"):
        _check_mesh_groups(instruction, groups)
    if instruction.opcode.startswith(("all-gather", "reduce-scatter")):
        _check_one_dimension(instruction)


def _check_mesh_groups(instruction: Instruction, value: str) -> None:
    match = re.fullmatch(r"mesh\[(.*?)\]\s*\{(.*)\}", value, re.S)
    if match is None:
        raise _fail(instruction, "malformed mesh replica groups", "replica_groups")
    mesh, selected = match.groups()
    if "device_ids" in mesh:
        raise _fail(instruction, "expects string: device_ids in a mesh are not supported here", "replica_groups")
    axes = re.findall(r"'([^']*)'\s*=\s*(\d+)", mesh)
    names = [name for name, _ in axes]
    for item in re.findall(r"'([^']*)'|(\d{1,9})", selected):
        name, index = item
        if name and name not in names:
            raise _fail(instruction, f"'{name}' is not a valid axis name or index", "replica_groups")
        if index and int(index) >= len(names):
            raise _fail(instruction, f"axis index {index} is out of bounds for mesh", "replica_groups")


#: The values of ``mode=``: a shuffle's (jaxlib 0.12 knows only rotate), else a collective's group mode.
_SHUFFLE_MODES = frozenset({"rotate"})
_COLLECTIVE_MODES = frozenset({"cross_replica", "cross_partition", "cross_replica_and_partition", "flattened_id"})


def _check_mode(instruction: Instruction) -> None:
    value = instruction.attributes.get("mode")
    if value is None:
        return
    if base_opcode(instruction.opcode)[0] == "shuffle":
        if value not in _SHUFFLE_MODES:
            raise _fail(
                instruction, f"expects shuffle mode but sees: {value}, error: Unknown shuffle mode: {value}", "mode"
            )
        if "shifts" not in instruction.attributes:
            raise _fail(instruction, "expects shifts for a shuffle in rotate mode")
    elif value not in _COLLECTIVE_MODES:
        raise _fail(
            instruction,
            f"expects collective op group mode but sees: {value}, error: Invalid collective op group mode: {value}",
            "mode",
        )


#: Collectives whose parser refuses ``use_global_device_ids=true`` without a ``channel_id``
#: (all-gather takes it: XLA checks that in its verifier, not its parser).
_GLOBAL_IDS_NEED_CHANNEL = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter"})


def _check_parameter_replication(instruction: Instruction) -> None:
    """``parameter_replication={true,false,…}``: on a parameter only, one entry per leaf buffer."""
    if instruction.opcode != "parameter":
        # jaxlib aborts on this; XLA keeps the flag only for parameters.
        raise _fail(instruction, "parameter_replication is only allowed on a parameter", "parameter_replication")
    value = str(instruction.attributes["parameter_replication"])
    if not _BOOL_LIST.fullmatch(value):
        raise _fail(
            instruction,
            "error parsing attribute parameter_replication: expects {true|false, …}",
            "parameter_replication",
        )
    entries = len(_dims(value.replace("true", "1").replace("false", "0")))
    leaves = len(leaf_shapes(instruction.shape)) if instruction.shape is not None else entries
    if entries != leaves:
        raise _fail(
            instruction,
            f"parameter has {leaves} leaf buffers, but parameter_replication has {entries} elements.",
            "parameter_replication",
        )


def _check_conditional(instruction: Instruction) -> None:
    _require_operands(instruction, 1)
    selector = _array(instruction.operands[0].shape)
    if selector is not None:
        if selector.dims:
            raise _fail(instruction, "The first operand must be a scalar")
        if selector.element_type not in ("pred", "s32"):
            raise _fail(instruction, "The first operand must be a scalar of PRED or S32")
        if selector.element_type == "pred" and "branch_computations" in instruction.attributes:
            raise _fail(
                instruction, 'unexpected attribute "branch_computations" for a PRED selector', "branch_computations"
            )
        if selector.element_type == "s32" and "true_computation" in instruction.attributes:
            raise _fail(instruction, 'unexpected attribute "true_computation" for an S32 selector', "true_computation")
        needed = (
            ("true_computation", "false_computation") if selector.element_type == "pred" else ("branch_computations",)
        )
        for key in needed:
            if key not in instruction.attributes:
                raise _fail(instruction, f"attribute {key} is expected but not seen")
    branches = instruction.attributes.get("branch_computations")
    count = len(branches.computations) if isinstance(branches, ComputationList) else None
    if "true_computation" in instruction.attributes:  # a PRED selector's two branches
        count = 2
    if count is not None and count != len(instruction.operands) - 1:
        raise _fail(instruction, "conditional expects one operand per branch after the selector", "branch_computations")


def _check_channel_done(instruction: Instruction) -> None:
    """A send-done / recv-done names its send / recv's channel, or none if that has none."""
    if not instruction.operands or instruction.operands[0].opcode not in ("send", "recv"):
        return
    start = instruction.operands[0]
    mine, theirs = (_channel(op) for op in (instruction, start))
    if mine != theirs:
        raise _fail(
            instruction,
            f"{instruction.opcode} has channel_id={mine if mine is not None else 'none'} but its operand "
            f"{start.name} has channel_id={theirs if theirs is not None else 'none'}",
            "channel_id" if mine is not None else None,
        )


def _channel(instruction: Instruction) -> int | None:
    value = instruction.attributes.get("channel_id")
    return int(str(value)) if value is not None and _INT.fullmatch(str(value)) else None


#: ``PrecisionConfig.Algorithm`` names as the parser reads them (``ALG_`` dropped, any case).
_DOT_ALGORITHMS = frozenset(
    [
        "unset",
        "dot_any_f8_any_f8_f32",
        "dot_any_f8_any_f8_f32_fast_accum",
        "dot_f16_f16_f16",
        "dot_f16_f16_f32",
        "dot_bf16_bf16_bf16",
        "dot_bf16_bf16_f32",
        "dot_bf16_bf16_f32_x3",
        "dot_bf16_bf16_f32_x6",
        "dot_bf16_bf16_f32_x9",
        "dot_tf32_tf32_f32",
        "dot_tf32_tf32_f32_x3",
        "dot_f32_f32_f32",
        "dot_f64_f64_f64",
    ]
)
#: ``RandomAlgorithm`` names (any case): the same attribute name means this on rng-bit-generator.
_RNG_ALGORITHMS = frozenset({"rng_default", "rng_three_fry", "rng_philox"})
_INT_LIST = re.compile(r"\{\s*(?:-?\d+\s*(?:,\s*-?\d+\s*)*)?\}")
_INT_LIST_LIST = re.compile(rf"\{{\s*(?:{_INT_LIST.pattern}\s*(?:,\s*{_INT_LIST.pattern}\s*)*)?\}}")


def _check_algorithm(instruction: Instruction) -> None:
    value = instruction.attributes.get("algorithm")
    if value is None:
        return
    rng = base_opcode(instruction.opcode)[0] == "rng-bit-generator"
    if str(value).lower() not in (_RNG_ALGORITHMS if rng else _DOT_ALGORITHMS):
        kind = "a random algorithm" if rng else "algorithm"
        raise _fail(instruction, f"expects {kind} but sees: {value}, error: Unknown algorithm", "algorithm")


def _check_slice_sizes(instruction: Instruction) -> None:
    """``slice_sizes`` is a list on gather, a list of lists on collective-permute."""
    value = instruction.attributes.get("slice_sizes")
    if value is None:
        return
    nested = base_opcode(instruction.opcode)[0] != "gather"
    if not (_INT_LIST_LIST if nested else _INT_LIST).fullmatch(str(value)):
        shape = "{{…}, …}" if nested else "{…}"
        raise _fail(instruction, f"expects slice_sizes={shape} on {instruction.opcode}", "slice_sizes")
    if not all(map(_in_64_bits, re.findall(_INTEGER_TOKEN, str(value)))):
        raise _fail(instruction, "expects integer", "slice_sizes")
    if nested and len(instruction.operands) != 4:
        raise _fail(
            instruction,
            "CollectivePermute and CollectivePermuteStart must have exactly four operands for dynamic-slice "
            "and in-place update.",
        )


def _check_at_most_one_dimension(instruction: Instruction) -> None:
    if len(_dims(instruction.attributes.get("dimensions", ""))) > 1:
        raise _fail(instruction, f"{instruction.opcode} expects at most one entry in dimensions={{}}", "dimensions")


def _check_reshape(instruction: Instruction) -> None:
    _require_operands(instruction, 1)
    result, operand = _array(instruction.shape), _array(instruction.operands[0].shape)
    if result is None or operand is None:
        return
    if instruction.opcode == "dynamic-reshape" and len(instruction.operands) - 1 != result.rank:
        raise _fail(
            instruction,
            f"expects one dim size operand per result dimension; got {len(instruction.operands) - 1} "
            f"for {result.rank} result dimensions",
        )
    unbounded = UNBOUNDED in result.dims or UNBOUNDED in operand.dims
    if result.element_count != operand.element_count and not unbounded:
        raise _fail(
            instruction,
            f"expects the same number of elements in result shape {result.to_text(False)} "
            f"and operand shape {operand.to_text(False)}",
        )


def _check_broadcast(instruction: Instruction) -> None:
    operand = _array(instruction.operands[0].shape) if instruction.operands else None
    if "dimensions" not in instruction.attributes and operand is not None and operand.rank:
        raise _fail(instruction, "attribute dimensions is expected but not seen")


def _check_infeed(instruction: Instruction) -> None:
    shape = instruction.shape
    if shape is not None and not (isinstance(shape, TupleShape) and shape.elements):
        raise _fail(instruction, "infeed must have a non-empty tuple shape")


def _check_recv(instruction: Instruction) -> None:
    if instruction.shape is not None and not isinstance(instruction.shape, TupleShape):
        raise _fail(instruction, "recv expects a tuple shape (data, u32[], token[])")


def _check_parity(instruction: Instruction, odd: bool) -> None:
    """Reduce and reduce-window take inputs and init values in pairs, scatter inputs and updates in pairs
    around one index operand: XLA's parser counts them."""
    count = len(instruction.operands)
    if count % 2 != odd:
        parity = "an odd" if odd else "an even"
        raise _fail(instruction, f"expects {parity} number of operands, but has {count} operands")


def _check_dynamic_slicing(instruction: Instruction) -> None:
    """A dynamic-slice's (dynamic-update-slice's) operand, (update,) then one index per dimension or one
    index vector: XLA's parser counts them against the operand's rank."""
    update = base_opcode(instruction.opcode)[0] == "dynamic-update-slice"  # the `-start` sugar too
    operands = instruction.operands
    if len(operands) < 1 + update:
        raise _fail(instruction, "Expected at least two operands." if update else "Expected at least one operand.")
    array, indices = _array(operands[0].shape), operands[1 + update :]
    if array is None or any(index.shape is None for index in indices):
        return
    vector = len(indices) == 1 and isinstance(indices[0].shape, ArrayShape) and indices[0].shape.rank == 1
    if not vector and len(indices) != array.rank:
        raise _fail(instruction, "Wrong number of operands.")


def _check_exactly_one_dimension(instruction: Instruction) -> None:
    """Sort and concatenate work along one dimension: XLA's parser refuses another count (with no words)."""
    if len(_dims(instruction.attributes.get("dimensions", "{0}"))) != 1:
        raise _fail(instruction, f"{instruction.opcode} expects exactly one entry in dimensions={{}}", "dimensions")


def _check_scan(instruction: Instruction) -> None:
    """The operand counts XLA's parser checks, in its order, then the dimension against the operands' rank."""
    count, body = len(instruction.operands), instruction.attributes.get("to_apply")
    if isinstance(body, Computation) and count != len(body.parameters()):
        raise _fail(
            instruction,
            f"expects {count} operands to match the number of parameters of to_apply, but to_apply has "
            f"{len(body.parameters())} parameters",
        )
    if len(_dims(instruction.attributes.get("dimensions", "{0}"))) != 1:
        raise _fail(instruction, "expects exactly one dimension", "dimensions")
    carries = instruction.attributes.get("num_carries")
    if isinstance(carries, str) and _INT.fullmatch(carries) and count < int(carries):
        raise _fail(
            instruction, f"expects at least {carries} operands to match the number of carries, but has {count} operands"
        )
    dims = _dims(instruction.attributes.get("dimensions", ""))
    rank = max((leaf.rank for op in instruction.operands if op.shape for leaf in leaf_shapes(op.shape)), default=0)
    if any(d < 0 or d >= max(rank, 1) for d in dims):
        raise _fail(instruction, f"scan dimension {dims} is out of range", "dimensions")


def _check_pad(instruction: Instruction) -> None:
    value = instruction.attributes.get("padding")
    if isinstance(value, str) and not _PADDING.fullmatch(value):
        raise _fail(instruction, "expects padding_low and padding_high separated by '_'", "padding")


def _check_window(instruction: Instruction) -> None:
    value = instruction.attributes.get("window")
    if not isinstance(value, str):
        return
    fields = dict(re.findall(r"([a-z_]+)=([-0-9x_]+)", value.strip()[1:-1]))  # XLA's lexer ends `3pad` at the `p`
    size = fields.get("size")
    count = len(size.split("x")) if size else 0
    for key, field in fields.items():
        if key == "pad" and (not _PADDING.fullmatch(field) or any(len(p.split("_")) != 2 for p in field.split("x"))):
            raise _fail(instruction, "expects padding_low and padding_high separated by '_'", "window")
        if size and len(field.split("x")) != count:
            raise _fail(instruction, f"expects '{key}=' has the same size as 'size='", "window")
    labels = instruction.attributes.get("dim_labels")
    if isinstance(labels, str) and size and count != sum(ch.isdigit() for ch in labels.partition("_")[0]):
        raise _fail(instruction, "window size does not match the convolution's spatial dimensions", "window")


def _check_custom_call(instruction: Instruction, parse_shape: ShapeParser) -> None:
    api = instruction.attributes.get("api_version")
    if isinstance(api, str) and api not in _API_VERSIONS:
        reason = "Invalid API version" if api == "API_VERSION_UNSPECIFIED" else "Unknown API version"
        raise _fail(instruction, f"{reason}: {api}", "api_version")
    constraints = instruction.attributes.get("operand_layout_constraints")
    if isinstance(constraints, str):
        parts = [p for p in split_top(constraints.strip()[1:-1]) if p.strip()]
        if len(parts) != len(instruction.operands):
            raise _fail(
                instruction,
                f"Expected {len(instruction.operands)} operand layout constraints, {len(parts)} given",
                "operand_layout_constraints",
            )
        for index, (part, operand) in enumerate(zip(parts, instruction.operands)):
            shape = parse_shape(part.strip())
            if operand.shape is not None and not compatible(shape, operand.shape):
                raise _fail(
                    instruction,
                    f"Operand layout constraint shape {part.strip()} for operand {index} is not compatible "
                    f"with operand shape {operand.shape.to_text()}",
                    "operand_layout_constraints",
                )


def _check_outfeed_shape(instruction: Instruction, parse_shape: ShapeParser) -> None:
    """``outfeed_shape=`` is a shape to XLA's parser (kept as text here): one it cannot read is refused."""
    try:
        parse_shape(str(instruction.attributes["outfeed_shape"]))
    except HloParseError as err:
        raise _fail(instruction, f"error parsing attribute outfeed_shape: {err.message}", "outfeed_shape") from None


def _check_compare(instruction: Instruction) -> None:
    order = instruction.attributes.get("order")
    if order is not None:
        if "type" in instruction.attributes:
            raise _fail(instruction, "compare takes order= or type=, not both", "order")
        if order not in ("TOTAL", "PARTIAL"):
            raise _fail(instruction, f"expects order=TOTAL or order=PARTIAL, but sees {order}", "order")
    kind = instruction.attributes.get("type")
    if isinstance(kind, str) and kind not in _COMPARISON_TYPES:
        raise _fail(instruction, f"expects comparison type but sees: {kind}", "type")
    direction = instruction.attributes.get("direction")
    if isinstance(direction, str) and direction.upper() not in _DIRECTIONS:
        raise _fail(instruction, f"unknown comparison direction {direction}", "direction")


#: A token of a sharding: blanks and comments (group 1, skipped), a string, `<=`, a name (with its `=`: an
#: attribute name, as XLA's lexer reads it), an integer, or one other character.
_SHARDING_TOKEN = re.compile(
    r'([ \t\n\r]+|/\*(?:[^*]|\*(?!/))*\*/)|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|<='
    r"|[A-Za-z_][A-Za-z0-9_.\-]*=?|-?[0-9]+|[\s\S]"
)
#: The types ``last_tile_dims={…}`` may name.
_SUBGROUP_TYPES = frozenset({"replicated", "manual", "unreduced", "maximal"})
_SHARDING_KEYWORDS = frozenset({"maximal", "replicated", "manual", "unknown", "unreduced", "last_tile_dim_replicate"})


class _ShardingReader:
    """XLA's classic sharding syntax, read token by token: ``{replicated}``, ``{maximal device=0}``,
    ``{devices=[2,2]0,1,2,3 last_tile_dim_replicate metadata={…}}``, ``{devices=[4]<=[2,2]T(1,0)}``, and a
    tuple of them in braces. Refuses what XLA's ParseSharding refuses, with its words."""

    def __init__(self, value: str) -> None:
        self.value = value
        found = [m for m in _SHARDING_TOKEN.finditer(value) if m.group(1) is None]
        self.tokens = [m.group() for m in found] + [""]
        self.ends = [m.end() for m in found] + [len(value)]
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at]

    def take(self) -> str:
        token = self.tokens[self.at]
        self.at += min(1, len(self.tokens) - 1 - self.at)
        return token

    def expect(self, token: str, message: str) -> None:
        if self.take() != token:
            raise InvalidHlo(message, attribute="sharding")

    def integer(self, message: str = "expects integer") -> int:
        token = self.take()
        if not _INTEGER_TOKEN_RE.fullmatch(token) or not _in_64_bits(token):
            raise InvalidHlo(message, attribute="sharding")
        return int(token)

    def integers(self, end: str, what: str) -> list[int]:
        """``int (, int)*`` then `end` (an empty list too)."""
        found = []
        if self.peek() != end:
            found.append(self.integer())
            while self.peek() == ",":
                self.take()
                found.append(self.integer())
        self.expect(end, f"expected '{end}' to end {what}")
        return found

    def sharding(self) -> None:
        self.expect("{", "expected '{' to start sharding attribute")
        if self.peek() == "}":
            self.take()
        elif self.peek() == "{":
            while True:
                self.expect("{", "expected '{' to start sharding attribute")
                self.single()
                if self.peek() != ",":
                    break
                self.take()
            self.expect("}", "expected '}' to end sharding attribute")
        else:
            self.single()
        if self.peek() != "":
            raise InvalidHlo("expects the sharding to end", attribute="sharding")

    def single(self) -> None:
        """One sharding after its `{`, up to and with its `}`."""
        seen: set[str] = set()
        while (token := self.take()) != "}":
            seen.add(token)
            if token in _SHARDING_KEYWORDS:
                continue
            if token in ("shard_as", "shard_like"):
                self.integer()
            elif token == "device=":
                self.integer("device= attribute must be an integer")
            elif token == "devices=":
                self.devices()
            elif token == "metadata=":
                self.group()
            elif token == "last_tile_dims=":
                self.expect("{", "expected '{' to start last_tile_dims")
                if self.peek() != "}":
                    self.subgroup_type()
                    while self.peek() == ",":
                        self.take()
                        self.subgroup_type()
                self.expect("}", "expected '}' to end sharding type list")
            elif token.endswith("="):
                raise InvalidHlo(
                    "unknown attribute in sharding: expected device=, devices= metadata= or last_tile_dims=",
                    attribute="sharding",
                )
            else:
                raise InvalidHlo("unexpected token", attribute="sharding")
        if "maximal" in seen and "device=" not in seen:
            raise InvalidHlo("maximal shardings should have exactly one device assigned", attribute="sharding")
        if not seen & {"maximal", "replicated", "manual", "unknown", "unreduced", "devices=", "shard_as", "shard_like"}:
            raise InvalidHlo(
                "non-maximal shardings must have a tile assignment list including dimensions", attribute="sharding"
            )

    def devices(self) -> None:
        """After ``devices=``: ``[tiles]`` and a device list, or ``<=[dims]`` with an optional ``T(perm)``, whose
        size must be the tiles' product (jaxlib 0.12 checks it as it parses; 0.10 later, or for a list not at all)."""
        self.expect("[", "expected '[' to start sharding devices shape")
        if self.peek() == "]":
            raise InvalidHlo("expects integer", attribute="sharding")
        product = math.prod(self.integers("]", "sharding devices shape"))
        if self.peek() != "<=":
            count = 1
            self.integer()
            while self.peek() == ",":
                self.take()
                self.integer()
                count += 1
            if count != product:
                raise InvalidHlo(
                    f"sharding device count {count} does not match the tile assignment size {product}",
                    attribute="sharding",
                )
            return
        self.take()
        self.expect("[", "expected '[' to start sharding iota_reshape_dims")
        if self.peek() == "]":
            raise InvalidHlo("expects integer", attribute="sharding")
        dims = self.integers("]", "sharding iota_reshape_dims")
        if self.peek() == "(":
            raise InvalidHlo("expected 'T(' to start sharding devices iota_transpose_perm", attribute="sharding")
        if self.peek() == "T":
            self.take()
            self.expect("(", "expected 'T(' to start sharding devices iota_transpose_perm")
            perm = self.integers(")", "sharding devices iota_transpose_perm")
            if any(not 0 <= p < len(dims) for p in perm):
                raise InvalidHlo(
                    f"Out of range iota minor_to_major value, expecting value in range [0, {len(dims)})",
                    attribute="sharding",
                )
            if len(perm) != len(dims):
                raise InvalidHlo(
                    "iota_transpose_perm should have the same rank as iota_reshape_dims : "
                    f"expected {len(dims)}, saw {len(perm)}.",
                    attribute="sharding",
                )
        if math.prod(dims) != product:
            raise InvalidHlo(
                f"iota tile assignment size {math.prod(dims)} does not match the tile assignment dimensions "
                f"product {product}",
                attribute="sharding",
            )

    def subgroup_type(self) -> None:
        """One entry of ``last_tile_dims={…}``: a sharding type XLA can tile by (in lower case)."""
        if self.take() not in _SUBGROUP_TYPES:
            raise InvalidHlo("error parsing attribute sharding", attribute="sharding")

    def group(self) -> None:
        """A metadata `{…}` (or a list of them, not read further), checked as an instruction's."""
        start = self.ends[self.at] - 1
        self.expect("{", "expected '{' to start sharding metadata")
        listed = self.peek() == "{"
        depth = 1
        while depth:
            token = self.take()
            if token == "":
                raise InvalidHlo("expected '}' to end sharding metadata", attribute="sharding")
            depth += {"{": 1, "}": -1}.get(token, 0)
        if not listed:
            _check_metadata(self.value[start : self.ends[self.at - 1]], "sharding")


_INTEGER_TOKEN_RE = re.compile(r"-?[0-9]+")


@lru_cache(maxsize=4096)
def _check_sharding_syntax(value: str) -> None:
    """`_ShardingReader` on `value`, once per distinct sharding (a module repeats a few)."""
    _ShardingReader(value).sharding()


def _check_sharding(instruction: Instruction) -> None:
    value = instruction.attributes.get("sharding")
    if not isinstance(value, str):
        return
    try:
        if "mesh" in value:  # a sharding over a mesh's named axes (jaxlib 0.12's newer form)
            _check_mesh_sharding(value)
        else:
            _check_sharding_syntax(value)
    except InvalidHlo as issue:
        raise _fail(instruction, issue.message, "sharding") from None


#: A mesh's header, ``mesh['x'=2,'y'=4]``, and one of its axes.
_MESH = re.compile(r"mesh\[([^\]]*)\]")
_MESH_AXIS = re.compile(r"'([^']*)'\s*=\s*(-?[0-9]+)")
#: What a mesh sharding may name after its dimensions (`device_ids=` comes before them).
_MESH_ATTRIBUTES = frozenset({"replicated=", "unreduced=", "manual=", "metadata=", "device_ids="})


@lru_cache(maxsize=1024)
def _check_mesh_sharding(value: str) -> None:
    """A sharding over named mesh axes (``{mesh['x'=2,'y'=2] [{'x'}, {}], replicated={'y'}}``), as jaxlib 0.12
    reads it, in part: each axis named after the mesh is one of its axes, names are strings, the attributes are
    those XLA knows, `device_ids` lists one device per mesh position. (jaxlib 0.10 does not read the form.)"""
    text = re.sub(r"metadata=\{[^{}]*\}", "metadata={}", value)
    if re.search(r"\bmesh(?![ \t\r\n]*\[)", text):
        raise InvalidHlo("expected '[' after mesh", attribute="sharding")
    headers = list(_MESH.finditer(text))
    for index, header in enumerate(headers):
        mesh = header.group()
        axes = _MESH_AXIS.findall(header.group(1))
        names = {name for name, _ in axes}
        rest = text[header.end() : headers[index + 1].start() if index + 1 < len(headers) else len(text)]
        device_ids = re.search(r"device_ids=\(([^)]*)\)", rest)
        if device_ids is not None:
            count, expected = len(_dims(device_ids.group(1))), math.prod(int(size) for _, size in axes)
            if count != expected:
                message = f"Expected {expected} device_ids based on mesh axes, but got {count}"
                raise InvalidHlo(message, attribute="sharding")
        for token in re.findall(r"'[^']*'|[A-Za-z_][A-Za-z0-9_]*=?", rest):
            if token.startswith("'"):
                if token[1:-1] not in names:
                    message = f"axis {token} is not a valid axis name or index in mesh {mesh}"
                    raise InvalidHlo(message, attribute="sharding")
            elif token.endswith("="):
                if token not in _MESH_ATTRIBUTES:
                    raise InvalidHlo(
                        "unknown attribute in named sharding: expected replicated, unreduced, manual or metadata",
                        attribute="sharding",
                    )
            elif token not in ("replicated", "manual", "unreduced", "maximal", "last_tile_dim_replicate"):
                raise InvalidHlo("expects string", attribute="sharding")


def _check_iota_replica_groups(instruction: Instruction) -> None:
    groups = instruction.attributes.get("replica_groups")
    if isinstance(groups, str):
        match = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\].*", groups.strip())
        if match:
            outer = math.prod(_dims(match.group(1)))
            inner = math.prod(_dims(match.group(2)))
            if outer != inner:
                raise _fail(
                    instruction,
                    "replica group iota does not match the tile assignment dimensions product",
                    "replica_groups",
                )


def _check_result_accuracy(instruction: Instruction) -> None:
    value = str(instruction.attributes["result_accuracy"]).strip()
    mode = re.fullmatch(r"\{\s*mode\s*=\s*(\w+)\s*\}", value)
    if mode:
        if mode.group(1).lower() not in ("default", "highest"):
            raise _fail(
                instruction,
                f"expects ResultAccuracy type but sees: {mode.group(1)}, error: Unknown accuracy mode",
                "result_accuracy",
            )
        return
    tolerance = re.fullmatch(r"\{\s*tolerance\s*=\s*\{(.*)\}\s*\}", value, re.S)
    if tolerance is None:
        raise _fail(
            instruction, "expects attribute name in result_accuracy={mode=…} or {tolerance={…}}", "result_accuracy"
        )
    fields = tolerance.group(1)
    if fields.strip() and _TOLERANCE_FIELDS.fullmatch(fields) is None:
        raise _fail(instruction, "expects result_accuracy={tolerance={atol=D,rtol=D,ulps=N}}", "result_accuracy")
    for key, number in _TOLERANCE_FIELD.findall(fields):
        if key not in ("atol", "rtol", "ulps"):
            raise _fail(instruction, f"invalid attribute name: {key}", "result_accuracy")
        if not number:
            continue
        if _DECIMAL.fullmatch(number) is None or (number.lstrip("-") != "inf" and math.isinf(float(number))):
            raise _fail(instruction, f"expects decimal or integer for {key}, found {number[:40]!r}", "result_accuracy")
        if _INTEGER.fullmatch(number) and not -(2**63) <= int(number) < 2**63:  # XLA's lexer reads it as an int64
            raise _fail(instruction, f"expects decimal or integer for {key}, found {number[:40]!r}", "result_accuracy")
        # XLA keeps atol and rtol as doubles and ulps as the double cut to an int64; out of its range
        # (inf, nan, 1e30) the cut is undefined and XLA aborts, as it does on a negative or NaN tolerance.
        value = float(number)
        if value <= -1 or (key != "ulps" and value < 0):
            raise _fail(instruction, f"negative tolerance {key}={number}", "result_accuracy")
        if math.isnan(value) or (key == "ulps" and value >= 2**63):
            raise _fail(instruction, f"invalid tolerance {key}={number} (XLA aborts on it)", "result_accuracy")


#: A number as XLA's lexer reads one where it parses a double (no ``+``, no leading ``.``, no ``_``, ``inf``
#: and ``nan`` in lower case); a finite one too large for a double is refused after it is read.
_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|-\.\d+(?:[eE][+-]?\d+)?|-?inf|-?nan")
_TOLERANCE_FIELD = re.compile(r"\s*(\w+)\s*=\s*([^,\s{}]*)\s*")  # XLA reads `atol=` alone as 0
_TOLERANCE_FIELDS = re.compile(rf"{_TOLERANCE_FIELD.pattern}(?:,{_TOLERANCE_FIELD.pattern})*")


_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
#: One token of a brace map as XLA's lexer reads it: an attribute name with its ``=``, a string,
#: an integer, a bracket or comma, or anything else (which no rule accepts).
_MAP_TOKEN = re.compile(
    rf"\s*(?:(?P<name>[A-Za-z_][\w.\-]*)=|(?P<string>{_STRING})|(?P<int>-?\d+)(?![\w.])"
    r"|(?P<punct>[{},])|(?P<other>[^\s{},=]+=?|=))"
)
#: The fields of XLA's ``ParseMetadata`` and the kind of value each takes.
_METADATA_FIELDS = {
    "op_type": "string",
    "op_name": "string",
    "source_file": "string",
    "source_line": "int32",
    "source_end_line": "int32",
    "source_column": "int32",
    "source_end_column": "int32",
    "profile_type": "profile_type",
    "deduplicated_name": "string",
    "scheduling_name": "string",
    "stack_frame_id": "int32",
    "metadata_payload": "string",
}
#: ``ProfileType`` values XLA knows (INVALID, WINDOW, FLAG, INTEGER).
_PROFILE_TYPES = range(4)
#: A metadata map of well-formed entries only (integers short enough to be in range), as one
#: regex: most maps are only these. Anything else is read token by token, for the message.
_WELL_FORMED_METADATA = re.compile(
    r"\{(?:\s*+,?\s*+(?:"
    rf"(?:{'|'.join(k for k, v in _METADATA_FIELDS.items() if v == 'string')})=\s*{_STRING}"
    rf"|(?:{'|'.join(k for k, v in _METADATA_FIELDS.items() if v == 'int32')})=\s*-?\d{{1,9}}(?![\w.])"
    r"|profile_type=\s*\{\s*(?:[0-3]\s*(?:,\s*[0-3]\s*)*)?\}))*\s*\}"
)
#: Each field's ``name=``: a map in which none occurs twice (even inside a string) repeats no field.
_METADATA_NEEDLES = tuple(f"{name}=" for name in _METADATA_FIELDS)


class _MapReader:
    """XLA's lexer over one brace-map attribute value: the maps stay raw text in the IR, so the
    grammar XLA's ``ParseSubAttributes`` / ``ParseFrontendAttributes`` apply is checked here."""

    def __init__(self, text: str, key: str, prefix: str | None = None) -> None:
        self.text = text
        self.key = key
        #: What each refusal starts with: an attribute's name, or nothing in a stack-frame entry (as XLA says).
        self.prefix = f"error parsing attribute {key}: " if prefix is None else prefix
        self.position = 0
        self.kind, self.token = self._peek()

    def _peek(self) -> tuple[str, str]:
        match = _MAP_TOKEN.match(self.text, self.position)
        if match is None or match.lastgroup is None:
            return "end", "end of input"
        return match.lastgroup, match.group(match.lastgroup)

    def advance(self) -> str:
        """Consume the current token; return it."""
        token = self.token
        match = _MAP_TOKEN.match(self.text, self.position)
        assert match is not None
        self.position = match.end()
        self.kind, self.token = self._peek()
        return token

    def at(self, punct: str) -> bool:
        return self.kind == "punct" and self.token == punct

    def eat(self, punct: str) -> bool:
        if self.at(punct):
            self.advance()
            return True
        return False

    def expect(self, punct: str, message: str) -> None:
        if not self.eat(punct):
            raise self.error(message)

    def error(self, message: str) -> InvalidHlo:
        return InvalidHlo(f"{self.prefix}{message} but sees {self.token}", attribute=self.key)

    def name(self) -> str:
        if self.kind != "name":
            raise self.error("expects attribute name")
        return self.advance()

    def finish(self, message: str) -> None:
        self.expect("}", message)
        if self.kind != "end":
            raise self.error("expects the attribute to end")

    def skip_braces(self) -> None:
        """A ``{…}`` XLA lexes as one JSON dict: balanced braces, strings kept whole."""
        depth = 0
        while True:
            if self.kind == "end":
                raise self.error("expects JSON dict")
            depth += self.at("{") - self.at("}")
            self.advance()
            if depth == 0:
                return


def _check_metadata(value: str, key: str) -> None:
    """``metadata={op_type="…" source_line=3 …}``, read as XLA's ``ParseMetadata`` does."""
    if _WELL_FORMED_METADATA.fullmatch(value) and max(map(value.count, _METADATA_NEEDLES)) < 2:
        return
    _check_sub_attributes(_MapReader(value, key), _METADATA_FIELDS, required=False)


def _check_sub_attributes(reader: _MapReader, fields: dict[str, str], required: bool) -> dict[str, str]:
    """``{name=value …}`` (commas optional) as XLA's ``ParseSubAttributes`` reads it: each name once and
    one of `fields`, its value of that field's kind; with `required`, every field present. Returns the
    string fields' values, as written."""
    reader.expect("{", "expects '{' to start sub attributes")
    seen: set[str] = set()
    strings: dict[str, str] = {}
    while not reader.at("}"):
        reader.eat(",")
        name = reader.name()
        if name in seen:
            raise InvalidHlo(f"{reader.prefix}attribute {name} already exists", attribute=reader.key)
        seen.add(name)
        kind = fields.get(name)
        if kind is None:
            allowed = ", ".join(sorted(fields))
            raise InvalidHlo(
                f'{reader.prefix}unexpected attribute "{name}". Allowed attributes: {allowed}', attribute=reader.key
            )
        if kind == "string":
            if reader.kind != "string":
                raise reader.error(f"expects string for {name}")
            strings[name] = reader.advance()
        elif kind == "sharding":
            start = reader.position
            reader.skip_braces()
            try:
                _check_sharding_syntax(reader.text[start : reader.position].strip())
            except InvalidHlo as issue:
                raise InvalidHlo(issue.message, attribute=reader.key) from None
        elif kind == "int32":
            if reader.kind != "int":
                raise reader.error(f"expects integer for {name}")
            if not -(2**31) <= int(reader.advance()) < 2**31:
                raise InvalidHlo(f"{reader.prefix}value out of range for int32_t", attribute=reader.key)
        else:
            _check_profile_types(reader)
    missing = [name for name in fields if name not in seen] if required else []
    if missing:
        raise InvalidHlo(f"sub-attribute {missing[0]} is expected but not seen", attribute=reader.key)
    reader.finish("expects '}' to end sub attributes")
    return strings


#: A domain's fields: its kind (hloopt reads, as XLA does, the sharding kind only) and two shardings.
_DOMAIN_FIELDS = {"kind": "string", "entry": "sharding", "exit": "sharding"}


def _check_domain(value: str, key: str) -> None:
    """``domain={kind="sharding", entry={…}, exit={…}}``, read as XLA's ``ParseDomain`` reads it."""
    kind = _check_sub_attributes(_MapReader(value, key, prefix=""), _DOMAIN_FIELDS, required=True)["kind"]
    if kind != '"sharding"':
        raise InvalidHlo(f"unsupported domain kind: {kind[1:-1]}", attribute=key)


#: The fields of an entry of the stack-frame sections written in braces (XLA requires each, an int32).
_FRAME_FIELDS: dict[str, dict[str, str]] = {
    "FileLocations": dict.fromkeys(
        ("file_name_id", "function_name_id", "line", "end_line", "column", "end_column"), "int32"
    ),
    "StackFrames": dict.fromkeys(("file_location_id", "parent_frame_id"), "int32"),
}


#: What XLA's parser expects after each stack-frame section: a number it cannot lex ends the section.
_AFTER_SECTION = {
    "FileNames": "expects 'FunctionNames'",
    "FunctionNames": "expects 'FileLocations'",
    "FileLocations": "expects 'StackFrames'",
    "StackFrames": "expects name",
}


def check_stack_frame_id(section: str, number: str) -> None:
    """An entry's number is a 64-bit integer to XLA's lexer; past that it is no number, and the section ends."""
    if not _in_64_bits(number):
        raise InvalidHlo(_AFTER_SECTION[section])


def check_stack_frame_entry(section: str, value: str) -> None:
    """One entry's value in a stack-frame section (`FileNames 1 "a.py"`, `StackFrames 1 {file_location_id=1
    parent_frame_id=0}`), read as XLA reads it: a string in the name sections, the section's fields in braces
    in the others. hloopt keeps the sections as written; this is their only check."""
    fields = _FRAME_FIELDS.get(section)
    if fields is None:
        if not value.startswith('"'):
            raise InvalidHlo("expects string", attribute=section)
        return
    _check_sub_attributes(_MapReader(value, section, prefix=""), fields, required=True)


#: The one attribute XLA's parser reads after a computation's closing brace, and its value's syntax.
_COMPUTATION_ATTRIBUTES = {"execution_thread": re.compile(_STRING)}


def check_computation_attribute(key: str, value: str) -> None:
    """A computation's attribute (``}, execution_thread="x"``), which hloopt keeps as written: XLA
    knows only `_COMPUTATION_ATTRIBUTES`, each with its value's syntax."""
    syntax = _COMPUTATION_ATTRIBUTES.get(key)
    if syntax is None:
        allowed = ", ".join(sorted(_COMPUTATION_ATTRIBUTES))
        raise InvalidHlo(f'unexpected attribute "{key}". Allowed attributes: {allowed}', attribute=key)
    if not syntax.fullmatch(value.strip(" \t\n\r")):
        raise InvalidHlo("expects string", attribute=key)


def _check_profile_types(reader: _MapReader) -> None:
    """``profile_type={1,2}``: XLA's braced integer list, each a known `ProfileType`."""
    reader.expect("{", "expects a list starting with {")
    while not reader.at("}"):
        if reader.kind != "int":
            raise reader.error("expects integer for profile_type")
        number = reader.advance()
        if int(number) not in _PROFILE_TYPES:
            raise InvalidHlo(f"{reader.prefix}unknown profile_type {number}", attribute=reader.key)
        if not reader.eat(","):
            break
        if reader.at("}"):
            raise reader.error("expects integer for profile_type")
    reader.expect("}", "expects a list to end with }")


def _check_frontend_attributes(value: str, key: str) -> None:
    """``frontend_attributes={name="value",…}``, read as XLA's ``ParseFrontendAttributes`` does:
    comma-separated, each value a string or a JSON dict."""
    reader = _MapReader(value, key)
    reader.expect("{", "expected '{' to start frontend attributes")
    if not reader.at("}"):
        while True:
            name = reader.name()
            if reader.kind == "string":
                reader.advance()
            elif reader.at("{"):
                reader.skip_braces()
            else:
                raise reader.error(f"expects string or JSON dict for {name}")
            if not reader.eat(","):
                break
    reader.finish("expects '}' at the end of frontend attributes")


_ORIGIN_TOKEN = re.compile(
    rf"\s*(?:(?P<string>{_STRING})|(?P<int>-?\d+)|(?P<word>[A-Za-z_]\w*)|(?P<punct>[{{}}()\[\],]))"
)


def _check_origin(value: str, key: str) -> None:
    """``origin={…}``, read as jaxlib's ``ParseOriginalValue``: ``{[synthetic_call]}``, or a tuple
    tree whose leaves are ``{"name" {shape index}}`` arrays (either part may be left out). jaxlib
    0.11+ separates trees by commas and takes one call hierarchy among them, ``["name"]``: it prints
    ``{[synthetic_call]}`` as ``{(),[""]}``."""
    tokens: list[str] = []
    position = 0
    while (match := _ORIGIN_TOKEN.match(value, position)) is not None and match.end() > position:
        tokens.append(match.group(match.lastgroup or 0))
        position = match.end()
    if value[position:].strip():
        tokens.append(value[position:].split(maxsplit=1)[0])
    tokens.append("")
    at = 0

    def fail(message: str) -> InvalidHlo:
        return InvalidHlo(f"error parsing attribute {key}: {message}", attribute=key)

    def take(expected: str, message: str) -> None:
        nonlocal at
        if tokens[at] != expected:
            raise fail(message)
        at += 1

    def tree() -> None:
        nonlocal at
        if tokens[at] == "(":
            at += 1
            while tokens[at] != ")":
                if tokens[at] == ",":
                    at += 1
                elif tokens[at] in ("(", "{"):
                    tree()
                else:
                    raise fail("Expects '(' or '{' for an element of a tuple of original arrays")
            at += 1
            return
        take("{", "Expects '{' to start an OriginalArray")
        if tokens[at].startswith('"'):
            at += 1
        if tokens[at] == "{":
            at += 1
            while tokens[at] != "}":
                if not _INT.fullmatch(tokens[at]):
                    raise fail("expects integer")
                at += 1
                if tokens[at] != ",":
                    break
                at += 1
            take("}", "Expects '}' at the end of ShapeIndex")
        take("}", "Expects '} at end of OriginalArray'")

    take("{", "Expects '{' to start original value")
    if tokens[at] == "[":
        at += 1
        take("synthetic_call", "Expects 'synthetic_call' after '[' for a synthetic_call value.")
        take("]", "Expects ']' after synthetic_call")
    else:
        hierarchy = False
        while tokens[at] in ("(", "{", ",", "["):
            if tokens[at] == ",":
                at += 1
            elif tokens[at] == "[":
                if hierarchy:
                    raise fail("Duplicate call_hierarchy in original_value.")
                hierarchy = True
                at += 1
                if not tokens[at].startswith('"'):
                    raise fail("expects string")
                at += 1
                take("]", "Expects ']' to end call_hierarchy")
            else:
                tree()
        if tokens[at] != "}":
            raise fail("Expects '[synthetic]' or a tuple tree of original arrays in original_value field.")
    take("}", "Expects '}' to end original value")
    if tokens[at] != "":
        raise fail("expects the attribute to end")


def _listed(item: str) -> str:
    """A pattern for `item`s separated by commas (none at all too), blanks allowed around each."""
    return rf"(?:{item}{_W}(?:,{_W}{item}{_W})*)?"


def _braced(item: str) -> str:
    """A pattern for `_listed(item)` in braces."""
    return rf"\{{{_W}{_listed(item)}\}}"


_INTEGER_TOKEN = r"-?[0-9]+"
_IDENTIFIER_TOKEN = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_INTEGERS = _listed(_INTEGER_TOKEN)
_BRACED_INTEGERS = _braced(_INTEGER_TOKEN)
_SLICE_RANGE = rf"\[{_W}{_INTEGER_TOKEN}{_W}:{_W}{_INTEGER_TOKEN}{_W}(?::{_W}{_INTEGER_TOKEN}{_W})?\]"
_NON_NEGATIVES = _listed("[0-9]+")
_ALIASING = rf"\{{{_W}{_NON_NEGATIVES}\}}{_W}:{_W}\({_W}-?[0-9]+{_W},{_W}\{{{_W}{_NON_NEGATIVES}\}}{_W}\)"
#: Value syntaxes of typed attributes, as XLA's attribute parser reads them: (pattern, what XLA expects).
_INTEGER_VALUE = (re.compile(_INTEGER_TOKEN), "expects integer")
_BOOL_VALUE = (re.compile("true|false"), "expects true or false")
_INTEGER_LIST_VALUE = (re.compile(_BRACED_INTEGERS), "expects a list of integers in braces, e.g. {0,1}")


def _spellings(enum: type[Enum]) -> re.Pattern[str]:
    """The pattern of an enum attribute's spellings, from its typed value (one list of them, in `ir`)."""
    return re.compile("|".join(member.value for member in enum))


#: Each attribute `attribute_kinds` types as an integer, a boolean or an integer list gets that kind's
#: syntax (a name another opcode reads as another kind, `slice_sizes`, is checked by its opcode).
_KIND_SYNTAX = {Kind.INT: _INTEGER_VALUE, Kind.BOOL: _BOOL_VALUE, Kind.INT_LIST: _INTEGER_LIST_VALUE}
_RETYPED = frozenset(name for _, name in BY_OPCODE)
_VALUE_SYNTAX: dict[str, tuple[re.Pattern[str], str]] = {
    **{name: _KIND_SYNTAX[kind] for name, kind in KINDS.items() if kind in _KIND_SYNTAX and name not in _RETYPED},
    # the module's attributes of those kinds
    **dict.fromkeys(("num_partitions", "replica_count"), _INTEGER_VALUE),
    **dict.fromkeys(("alias_passthrough_params", "is_scheduled"), _BOOL_VALUE),
    **dict.fromkeys(
        ("allow_spmd_sharding_propagation_to_parameters", "allow_spmd_sharding_propagation_to_output"),
        (re.compile(rf"true|false|{_braced('(?:true|false)')}"), "expects true, false or a list of them in braces"),
    ),
    "window": (
        re.compile(
            rf"\{{{_W}(?:(?:size|stride|lhs_dilate|rhs_dilate|rhs_reversal)=(?:-?[0-9]+|[0-9]+(?:x[0-9]+)+){_W}"
            rf"|pad={_PADDING_TEXT}{_W})*\}}"
        ),
        "expects a window: {size=… stride=… pad=… lhs_dilate=… rhs_dilate=… rhs_reversal=…}",
    ),
    "replica_groups": (
        re.compile(
            _braced(_BRACED_INTEGERS)
            + rf"|\[{_W}{_INTEGERS}\]{_W}<={_W}\[{_W}{_INTEGERS}\](?:{_W}T{_W}\({_W}{_INTEGERS}\))?"
            r"|mesh\[[\s\S]*"  # groups over a mesh's axes: not checked here
        ),
        "expects replica groups, e.g. {{0,1},{2,3}} or [2,2]<=[4]",
    ),
    **dict.fromkeys(("custom_call_target", "async_execution_thread"), (re.compile(_STRING), "expects string")),
    "kind": (_spellings(FusionKind), "expects fusion kind kLoop, kInput, kOutput or kCustom"),
    "schedule": (
        re.compile("SCHEDULE_NONE|SCHEDULE_LATEST|SCHEDULE_EARLIEST"),
        "expects custom-call schedule SCHEDULE_NONE, SCHEDULE_LATEST or SCHEDULE_EARLIEST",
    ),
    "distribution": (_spellings(RandomDistribution), "expects random distribution rng_uniform or rng_normal"),
    "fft_type": (_spellings(FftType), "expects fft type FFT, IFFT, RFFT or IRFFT"),
    "output_to_operand_aliasing": (
        re.compile(_braced(_ALIASING)),
        "expects output_to_operand_aliasing, e.g. {{}: (0, {})}",
    ),
    "dim_labels": (
        re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}"),
        "expects dim labels pattern, e.g., 'bf0_0io->0bf'",
    ),
    "operand_precision": (
        re.compile(_braced(_IDENTIFIER_TOKEN)),
        "expects a list of precisions in braces, e.g. {default,highest}",
    ),
    "slice": (
        re.compile(_braced(_SLICE_RANGE)),
        "expects slice ranges, e.g. {[0:2], [1:4:2]}",
    ),
    "source_target_pairs": (
        re.compile(_braced(_BRACED_INTEGERS)),
        "expects pairs of integers in braces, e.g. {{0,1},{1,0}}",
    ),
}
#: The most an integer token may say: XLA's lexer reads it as a 64-bit integer (unsigned when positive).
_INTEGER_RANGE = range(-(2**63), 2**64)


@lru_cache(maxsize=4096)
def check_value_syntax(key: str, value: str) -> None:
    """Refuse the value of a typed attribute that XLA's attribute parser would not read (`dimensions={}{0}`,
    `index=+1`, `slice={[0x7f:3:1]}`); an attribute with no entry in the table is not checked here.
    Cached: values repeat from line to line (`index=0`, `dimensions={0}`), and a refusal is not cached."""
    syntax = _VALUE_SYNTAX.get(key)
    if syntax is None:
        return
    text = re.sub(r"/\*(?:[^*]|\*(?!/))*\*/", " ", value) if "/*" in value else value
    pattern, expected = syntax
    if not pattern.fullmatch(text.strip(" \t\n\r")):
        raise InvalidHlo(f"{expected}, found {value}", attribute=key)
    for number in re.findall(_INTEGER_TOKEN, text):
        if not _in_64_bits(number):
            raise InvalidHlo(f"integer {number} is out of the 64-bit range", attribute=key)
    if key in _VALUE_CHECKS:
        _VALUE_CHECKS[key](text.strip(" \t\n\r"))
    if key == "source_target_pairs" and any(
        len(re.findall(_INTEGER_TOKEN, inner)) != 2 for inner in _inner_braces(text)
    ):
        raise InvalidHlo("expects 'source_target_pairs=' to be a list of pairs", attribute=key)


def _check_precisions(text: str) -> None:
    """Each entry of ``operand_precision={…}`` names a precision, in any case (XLA's `StringToPrecision`)."""
    for name in _IDENTIFIER.findall(text):
        if name.lower() not in _PRECISIONS:
            raise InvalidHlo(
                f"expects precision but sees: {name}, error: Unknown precision", attribute="operand_precision"
            )


def _check_dim_labels(text: str) -> None:
    """``dim_labels=lhs_rhs->out`` as XLA's ParseConvolutionDimensionNumbers reads it: each side's labels
    unique, its digits below its length, and as many spatial dimensions on each side."""
    lhs, _, rest = text.partition("_")
    rhs, _, out = rest.partition("->")
    spatial = []
    for side, part, named in (("lhs", lhs, "bf"), ("rhs", rhs, "io"), ("output", out, "bf")):
        labels = part.replace("?", "")
        if len(set(labels)) != len(labels):
            raise InvalidHlo(f"expects unique {side} dimension numbers, but sees {part}", attribute="dim_labels")
        if any(c not in named and not "0" <= c < chr(ord("0") + len(part)) for c in labels):
            raise InvalidHlo(f"expects [0-{len(part) - 1}{named}?] in {side} dimension numbers", attribute="dim_labels")
        spatial.append(sum(c not in named for c in labels))
    if len(set(spatial)) != 1:
        raise InvalidHlo(
            "input, kernel, and output must have same number of spatial dimensions, "
            f"but got {spatial[0]}, {spatial[1]}, {spatial[2]}, respectively.",
            attribute="dim_labels",
        )


_PRECISIONS = frozenset({"default", "high", "highest", "packed_nibble"})
_IDENTIFIER = re.compile(_IDENTIFIER_TOKEN)
#: The checks of typed values past their syntax, by attribute name.
_VALUE_CHECKS: dict[str, Callable[[str], None]] = {
    "operand_precision": _check_precisions,
    "dim_labels": _check_dim_labels,
}


def _in_64_bits(number: str) -> bool:
    """Whether XLA's lexer reads the integer `number` (the length first: int() of 5000 digits raises)."""
    return len(number) <= 21 and int(number) in _INTEGER_RANGE


def _inner_braces(text: str) -> list[str]:
    """The `{…}` lists inside the outer braces of a list of lists (`{{0,1},{1,0}}`: `0,1` and `1,0`)."""
    return re.findall(r"\{([^{}]*)\}", text.strip()[1:-1])


_MAP_CHECKS: dict[str, Callable[[str, str], None]] = {
    "domain": _check_domain,
    "metadata": _check_metadata,
    "frontend_attributes": _check_frontend_attributes,
    "origin": _check_origin,
}
#: The checks of attributes by name that run after an opcode's own, in order (async's comes between
#: these and result_accuracy's).
_KEYED_CHECKS: tuple[tuple[str, Callable[[Instruction], None]], ...] = (
    ("sharding", _check_sharding),
    ("replica_groups", _check_iota_replica_groups),
)


def _check_async(instruction: Instruction, base: str, suffix: str | None) -> None:
    shape = instruction.shape
    is_start = instruction.opcode == "async-start" or suffix == "-start"
    if is_start:
        if shape is None:
            return
        if not (
            isinstance(shape, TupleShape) and len(shape.elements) >= 2 and isinstance(shape.elements[0], TupleShape)
        ):
            raise _fail(
                instruction,
                "AsyncStart expects the op shape to be in the form of ((async-operands), async-outputs, state).",
            )
        return
    if len(instruction.operands) != 1:
        raise _fail(instruction, "AsyncUpdate and AsyncDone expect a single async op as their operand.")
    operand = instruction.operands[0]
    try:
        operand_base, operand_suffix = base_opcode(operand.opcode)
    except KeyError:
        operand_base, operand_suffix = operand.opcode, None
    is_async = operand.opcode in ("async-start", "async-update") or operand_suffix in ("-start", "-update")
    if not is_async:
        raise _fail(instruction, "AsyncUpdate and AsyncDone expect a single async op as their operand.")
    if suffix is not None and operand_suffix is not None and operand_base != base:
        raise _fail(instruction, f"Expect async wrapped opcode to be {operand_base}, but got {base}")
    if suffix is None and operand_suffix is not None:
        raise _fail(instruction, f"Expect async wrapped opcode to be {operand_base}, but got {instruction.opcode}")
    if (
        instruction.opcode.endswith("update")
        and shape is not None
        and operand.shape is not None
        and shape != operand.shape  # layouts and memory spaces too: XLA compares shapes with ==
    ):
        raise _fail(instruction, "AsyncUpdate expects the op shape to be the same as the operand shape.")
    start = operand
    while start.opcode.endswith("update") and start.operands:
        start = start.operands[0]
    calls, operand_calls = instruction.attributes.get("calls"), start.attributes.get("calls")
    if isinstance(calls, Computation) and isinstance(operand_calls, Computation) and calls is not operand_calls:
        raise _fail(
            instruction, f"Expect async_wrapped_computation to be {operand_calls.name}, but got {calls.name}", "calls"
        )
    thread = instruction.attributes.get("async_execution_thread")
    operand_thread = operand.attributes.get("async_execution_thread", '"main"')
    if thread is not None and thread != operand_thread:
        raise _fail(
            instruction,
            f"Expect async_execution_thread to be {str(operand_thread).strip(chr(34))}, but got {str(thread).strip(chr(34))}",
            "async_execution_thread",
        )


_CHECKS: dict[str, tuple[Callable[[Instruction], None], ...]] = {
    "all-gather": (_check_collective,),
    "all-gather-start": (_check_collective,),
    "all-reduce": (_check_collective, _check_mode),
    "all-reduce-start": (_check_collective, _check_mode),
    "collective-permute-start": (_check_collective, _check_slice_sizes),
    "collective-reduce": (_check_collective,),
    "reduce-scatter": (_check_collective, _check_mode),
    "shuffle": (_check_mode,),
    "all-to-all": (_check_collective, _check_at_most_one_dimension),
    "ragged-all-to-all": (_check_at_most_one_dimension,),
    "collective-broadcast": (_check_collective,),
    "collective-permute": (_check_collective, _check_slice_sizes),
    "gather": (_check_slice_sizes,),
    "dot": (_check_algorithm,),
    "convolution": (partial(_check_arity, arity=2), _check_window, _check_algorithm),  # 2: XLA's parser, not `arity`
    "scaled-dot": (_check_algorithm,),
    "rng-bit-generator": (lambda i: _require_operands(i, 1), _check_algorithm),
    "get-dimension-size": (_check_one_dimension,),
    "conditional": (_check_conditional,),
    "reshape": (_check_reshape,),
    "dynamic-reshape": (_check_reshape,),
    "infeed": (_check_infeed,),
    "broadcast": (_check_broadcast,),
    "recv": (_check_recv,),
    "scan": (_check_scan,),
    "reduce": (partial(_check_parity, odd=False),),
    "scatter": (partial(_check_parity, odd=True),),
    "dynamic-slice": (_check_dynamic_slicing,),
    "dynamic-update-slice": (_check_dynamic_slicing,),
    "sort": (_check_exactly_one_dimension,),
    "concatenate": (_check_exactly_one_dimension,),
    "pad": (_check_pad,),
    "reduce-window": (partial(_check_parity, odd=False), lambda i: _require_operands(i, 2), _check_window),
    "select-and-scatter": (_check_window,),
    "compare": (_check_compare,),
    "tuple": (_check_tuple,),
    "send-done": (_check_channel_done,),
    "recv-done": (_check_channel_done,),
}


def _check_literal(instruction: Instruction, checked: set[tuple[int, str]]) -> None:
    """Brace nesting of a constant (its counts and values were checked as it was parsed), once per short
    literal's shape and text (`Literal.check_once`; `checked` holds those that passed)."""
    literal = instruction.literal
    assert literal is not None
    try:
        literal.check_once(literal.check_nesting, checked)
    except LiteralError as err:
        raise _fail(instruction, str(err)) from None
