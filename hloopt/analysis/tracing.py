"""The graph work of ``hloopt trace``: which instructions of two modules stand for each other, and the
modules that capture values and recompute instructions on given operands.

Only the entry computation's array-shaped instructions are traced: those are the values XLA can hand
back as outputs. Calls, loops and conditionals are first brought into the entry (`unrolling`), so the
instructions they run are traced too. A pass rewrites ``%x`` into a group of instructions whose provenance is ``%x``
(operand converts, the op, a convert back); the one of them no other member uses is the one that
stands for ``%x`` (`representatives`): the value the rest of the module reads in its place.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hloopt.errors import HloError
from hloopt.ir.attribute_values import Metadata
from hloopt.ir.element_types import BY_NAME, Kind
from hloopt.ir.literal import Literal
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, map_leaves

#: Attributes a captured or recomputed copy leaves out: they name outputs or instructions it does not keep.
_DROPPED_HEADER = ("input_output_alias", "buffer_donor")


def traced(instruction: Instruction) -> bool:
    """Whether `instruction`'s value can be captured: an array (not a token) of the entry computation."""
    shape = instruction.shape
    return isinstance(shape, ArrayShape) and shape.element_type not in ("token", "opaque")


def origins(module: Module, provenance: Mapping[str, str], input_names: Iterable[str]) -> dict[str, str]:
    """Each instruction's name (of any computation: a call site's and a body's instructions name the copies
    `unrolling` makes of them) → the name of the input instruction it comes from: its provenance, else its
    own name when the input had it; an instruction a pass made from nothing (neither) has no entry."""
    known = set(input_names)
    found: dict[str, str] = {}
    for instruction in module.instructions():
        origin = provenance.get(instruction.name, instruction.name if instruction.name in known else None)
        if origin is not None:
            found[instruction.name] = origin
    return found


def representatives(module: Module, origin: Mapping[str, str]) -> dict[str, Instruction]:
    """Origin name → the entry instruction that stands for it: of the instructions with that origin,
    the one no other of them uses (the last in dependency order when several are unused)."""
    groups: dict[str, list[Instruction]] = {}
    for instruction in module.entry.post_order():
        name = origin.get(instruction.name)
        if name is not None and traced(instruction):
            groups.setdefault(name, []).append(instruction)
    chosen: dict[str, Instruction] = {}
    for name, members in groups.items():
        inside = set(members)
        unused = [m for m in members if not any(user in inside for user in m.users)]
        chosen[name] = (unused or members)[-1]
    return chosen


@dataclass(frozen=True)
class Pair:
    """One instruction of A and the one of B that stands for it (`origin` is A's input name for both)."""

    origin: str
    a: str
    b: str
    scope: str


def matched(a: Module, a_origin: Mapping[str, str], b: Module, b_origin: Mapping[str, str]) -> list[Pair]:
    """A's and B's instructions that stand for the same input instruction and have the same dimensions,
    in A's dependency order."""
    in_a, in_b = representatives(a, a_origin), representatives(b, b_origin)
    by_a = {instruction: origin for origin, instruction in in_a.items()}
    pairs: list[Pair] = []
    for instruction in a.entry.post_order():
        origin = by_a.get(instruction)
        other = in_b.get(origin) if origin is not None else None
        if origin is None or other is None:
            continue
        assert isinstance(instruction.shape, ArrayShape) and isinstance(other.shape, ArrayShape)
        if instruction.shape.dims == other.shape.dims:
            pairs.append(Pair(origin, instruction.name, other.name, scope(instruction)))
    return pairs


def scope(instruction: Instruction) -> str:
    """The ``op_name`` scope of `instruction`'s metadata (its name without the last ``/`` part), or ``""``."""
    metadata = instruction.attributes.get("metadata")
    name = metadata.get("op_name") if isinstance(metadata, Metadata) else None
    if not name:
        return ""
    return name.strip('"').rpartition("/")[0] or name.strip('"')


def outputs_of(module: Module) -> list[str | None]:
    """The entry instruction each flattened output is, where one is (a root or an element of a root tuple)."""
    root = module.entry.root
    assert root is not None
    if traced(root):
        return [root.name]
    if root.opcode == "tuple" and all(isinstance(o.shape, ArrayShape) for o in root.operands):
        return [o.name if traced(o) else None for o in root.operands]
    return [None] * len(_leaves(root.shape))


def _leaves(shape: Shape | None) -> list[Shape]:
    if isinstance(shape, TupleShape):
        return [leaf for element in shape.elements for leaf in _leaves(element)]
    return [] if shape is None else [shape]


def element_count(instruction: Instruction) -> int:
    """How many elements `instruction`'s (array) value has."""
    shape = instruction.shape
    assert isinstance(shape, ArrayShape)
    return shape.element_count


def byte_count(instruction: Instruction) -> int:
    """The bytes `instruction`'s value takes on the host."""
    shape = instruction.shape
    assert isinstance(shape, ArrayShape)
    return shape.element_count * max(1, BY_NAME[shape.element_type].bits // 8)


def _without_alias(module: Module) -> None:
    module.entry_layout = None
    for key in _DROPPED_HEADER:
        module.attributes.pop(key, None)


def held(shape: Shape | None) -> ArrayShape | None:
    """The shape a value of `shape` crosses to or from the host as when numpy has no type for its elements:
    s1 as s8, u1 as u8 (exact both ways); None when it crosses as it is."""
    if isinstance(shape, ArrayShape):
        row = BY_NAME.get(shape.element_type)
        if row is not None and row.numpy_name is None and row.kind in (Kind.SIGNED, Kind.UNSIGNED):
            return shape.with_element_type("s8" if row.kind is Kind.SIGNED else "u8")
    return None


def _to_host(computation: Computation, value: Instruction, name: str) -> Instruction:
    """`value`, or its convert to the `held` type (appended to `computation`) when numpy cannot hold it."""
    wide = held(value.shape)
    if wide is None:
        return value
    return computation.append(Instruction(name, "convert", wide, [value]))


def capture(module: Module, names: Sequence[str]) -> Module:
    """A copy of `module` whose output is the tuple of the named entry instructions' values, in order (an
    s1 or u1 value widened to s8 or u8: `held`)."""
    copy = module.clone()
    _without_alias(copy)
    entry = copy.entry
    by_name = {instruction.name: instruction for instruction in entry.instructions}
    wanted = [_to_host(entry, by_name[name], copy.unique_name("trace.held")) for name in names]
    root = entry.root
    assert root is not None
    result = Instruction(
        copy.unique_name("trace.capture"), "tuple", TupleShape(tuple(i.shape for i in wanted if i.shape)), wanted
    )
    entry.insert_after(root, result)
    entry.set_root(result)
    return copy


def recompute(module: Module, roots: Sequence[str], fed: Collection[str]) -> tuple[Module, list[str]]:
    """A module whose parameters are the values of `fed` instructions and whose output is the tuple of
    `roots`, each computed by `module`'s own instructions from those parameters: an instruction in
    `fed` is never recomputed (a root's own operands read the parameters), one outside it is, back to
    constants and the like. Returns the module and the names of `fed` its parameters stand for, in order.
    """
    source = module.clone()
    entry = source.entry
    by_name = {instruction.name: instruction for instruction in entry.instructions}
    result = Module(source.name)
    result.attributes = dict(source.attributes)
    _without_alias(result)
    for computation in source.computations:
        if not computation.is_entry:
            result.add_computation(computation)
    body = Computation(entry.name, is_entry=True)
    result.add_computation(body)
    # A fed instruction is a parameter where it is read, even when it is also a root recomputed.
    copies: dict[tuple[Instruction, bool], Instruction] = {}
    parameters: list[str] = []

    def copied(instruction: Instruction, root: bool) -> Instruction:
        given = instruction.name in fed and (not root or instruction.opcode == "parameter")
        twin = copies.get((instruction, given))
        if twin is not None:
            return twin
        if given:
            wide = held(instruction.shape)
            twin = Instruction(
                f"trace.in.{len(parameters)}", "parameter", wide or instruction.shape, parameter_number=len(parameters)
            )
            parameters.append(instruction.name)
            if wide is not None:  # fed as the host holds it, narrowed back here
                body.append(twin)
                twin = Instruction(f"trace.narrow.{len(parameters)}", "convert", instruction.shape, [twin])
        elif instruction.opcode == "parameter":
            raise HloError(f"%{instruction.name} is a parameter with no value given")
        else:
            operands = [copied(operand, False) for operand in instruction.operands]
            attributes = {k: v for k, v in instruction.attributes.items() if k != "control-predecessors"}
            twin = Instruction(instruction.name, instruction.opcode, instruction.shape, operands, attributes)
            twin.literal = instruction.literal
        body.append(twin)
        copies[instruction, given] = twin
        return twin

    outputs = [_to_host(body, copied(by_name[name], True), f"trace.held.{i}") for i, name in enumerate(roots)]
    shapes = tuple(output.shape for output in outputs if output.shape is not None)
    root = Instruction("trace.recomputed", "tuple", TupleShape(shapes), outputs)
    body.append(root)
    body.set_root(root)
    return result, parameters


def _widened(shape: ArrayShape) -> ArrayShape:
    if BY_NAME[shape.element_type].kind is Kind.FLOAT and shape.element_type != "f64":
        return shape.with_element_type("f64")
    if BY_NAME[shape.element_type].kind is Kind.COMPLEX:
        return shape.with_element_type("c128")
    return shape


#: Opcodes whose meaning depends on the bits of a float type: a module with one of them has no f64 twin.
_BIT_LEVEL = frozenset({"bitcast-convert", "bitcast", "custom-call"})


def widened(module: Module) -> tuple[Module, dict[str, str]]:
    """The f64 twin of `module`, and which instruction of it stands for which of `module` where a name
    does not say: every float type widened to f64 (complex to c128), and each convert to a narrower float
    type (or from an integer) kept as that convert followed by a convert back to f64, so the casts the
    module makes still round; the convert back stands for the convert. Refuses a module whose float
    values are read as bits."""
    copy = module.clone()
    _without_alias(copy)
    back: dict[str, str] = {}
    for computation in copy.computations:
        written = {instruction: instruction.shape for instruction in computation.instructions}
        for instruction in list(computation.instructions):
            shape = written[instruction]
            if instruction.opcode in _BIT_LEVEL and _has_float(instruction):
                raise HloError(f"%{instruction.name} ({instruction.opcode}) reads float bits: no f64 reference")
            if shape is None:
                continue
            wide = map_leaves(shape, _widened)
            if wide == shape:
                continue
            if instruction.opcode == "convert" and _narrowing(written[instruction.operands[0]], shape):
                after = Instruction(copy.unique_name("convert"), "convert", wide, written_order=False)
                computation.insert_after(instruction, after)
                computation.replace_all_uses(instruction, after)
                after.append_operand(instruction)
                back[after.name] = instruction.name
                continue
            instruction.set_shape(wide)
            if instruction.literal is not None:
                instruction.set_literal(Literal(wide, text=instruction.literal.text))
    return copy, back


def _narrowing(source: Shape | None, target: Shape) -> bool:
    """Whether a convert from `source` to the float `target` rounds: an integer source, or a float one
    with more mantissa bits or a wider exponent."""
    if not isinstance(source, ArrayShape) or not isinstance(target, ArrayShape):
        return False
    given, made = BY_NAME[source.element_type], BY_NAME[target.element_type]
    if given.kind not in (Kind.FLOAT, Kind.COMPLEX):
        return True
    return given.mantissa_bits > made.mantissa_bits or given.exponent_bits > made.exponent_bits


def _has_float(instruction: Instruction) -> bool:
    shapes = [instruction.shape, *(o.shape for o in instruction.operands)]
    return any(
        BY_NAME[leaf.element_type].kind in (Kind.FLOAT, Kind.COMPLEX)
        for shape in shapes
        if shape is not None
        for leaf in _leaves(shape)
        if isinstance(leaf, ArrayShape)
    )


def region_inputs(module: Module, root: str, fed: Collection[str]) -> list[str] | None:
    """The `fed` instructions that `recompute` of `root` reads, in first-use order; None when it would
    reach a parameter not in `fed` (its value is not at hand) or a while loop (the iterations past a loop's
    cap: a recomputation would run them all, not one instruction)."""
    by_name = {instruction.name: instruction for instruction in module.entry.instructions}
    found: dict[str, None] = {}
    seen: set[Instruction] = set()
    start = by_name[root]
    if start.opcode == "parameter":  # recomputed as itself: its own value, given
        return [root] if root in fed else None
    stack = list(reversed(start.operands))
    while stack:
        instruction = stack.pop()
        if instruction in seen:
            continue
        seen.add(instruction)
        if instruction.name in fed:
            found[instruction.name] = None
        elif instruction.opcode in ("parameter", "while"):  # a while left: iterations not traced (`unrolling`)
            return None
        else:
            stack += reversed(instruction.operands)
    return list(found)


def matched_inputs(module: Module, names: Collection[str]) -> dict[str, list[str]]:
    """For each of the named entry instructions, the named ones its value is computed from directly:
    its operands, looking through operands not named (a tuple, a convert a pass made)."""
    inputs: dict[str, list[str]] = {}
    for instruction in module.entry.instructions:
        if instruction.name in names and instruction.opcode != "parameter":
            found = region_inputs(module, instruction.name, names)
            inputs[instruction.name] = found if found is not None else _named_operands(instruction, names)
    return inputs


def _named_operands(instruction: Instruction, names: Collection[str]) -> list[str]:
    return [operand.name for operand in instruction.operands if operand.name in names]
