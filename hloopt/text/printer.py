"""IR → HLO text in XLA's canonical style (what ``HloModule::ToString`` prints).

Names get ``%``, shapes carry layouts (signatures do not), operand lists get
``/*index=N*/`` every fifth operand, computations are separated by a blank
line. Attribute values hloopt does not model are printed exactly as parsed.

The printer decides the layout from facts the IR keeps: an instruction's attributes print
in the order written while `Instruction.written_order` holds, else in XLA's order; a
computation's instructions as listed until it is edited (`Computation.edits`), then in
XLA's post order; an async op the text wrote as sugar (`ir.async_form`) as that sugar while its
wrapped computation is one op, which then is not printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter

from hloopt.ir.async_form import printed_as_sugar, sugared
from hloopt.ir.attribute_values import is_true
from hloopt.ir.module import (
    AttributeValue,
    Computation,
    Instruction,
    Module,
    ProgramLayout,
    attribute_text,
)
from hloopt.ir.shape import Shape

#: XLA's order of module header attributes (``HloModule::Print``).
_HEADER_ORDER = (
    "is_scheduled",
    "input_output_alias",
    "buffer_donor",
    "alias_passthrough_params",
    "entry_computation_layout",
    "allow_spmd_sharding_propagation_to_parameters",
    "allow_spmd_sharding_propagation_to_output",
    "replica_count",
    "num_partitions",
    "frontend_attributes",
    "origin_recovery_table",
)


#: Where XLA prints the generic attributes, after the opcode-specific ones
#: (``HloInstruction::PrintExtraAttributes`` then ``PrintWithCanonicalNameMap``).
_GENERIC_ORDER = ("sharding", "frontend_attributes", "control-predecessors", "metadata", "origin", "backend_config")
_GENERIC_RANK = {key: rank for rank, key in enumerate(_GENERIC_ORDER)}
#: XLA's order of an opcode's own attributes where hloopt makes them (``HloDotInstruction``'s
#: ``ExtraAttributesToStringImpl``); any other of its attributes follows in the dict's order.
_SPECIFIC_ORDER: dict[str, tuple[str, ...]] = {
    "dot": (
        "lhs_batch_dims",
        "lhs_contracting_dims",
        "rhs_batch_dims",
        "rhs_contracting_dims",
        "sparsity",
        "operand_precision",
    ),
}


def xla_attribute_order(opcode: str, attributes: dict[str, AttributeValue]) -> list[str]:
    """The attribute names as XLA prints them: the opcode's own first (in its order where known),
    then the generic ones in XLA's order."""
    known = _SPECIFIC_ORDER.get(opcode, ())
    specific = [key for key in known if key in attributes]
    specific += [key for key in attributes if key not in _GENERIC_RANK and key not in known]
    return specific + sorted((key for key in attributes if key in _GENERIC_RANK), key=_GENERIC_RANK.__getitem__)


def _entry_layout(module: Module) -> ProgramLayout | None:
    """The module's entry layout, or the one XLA would derive (None if a shape was omitted)."""
    if module.entry_layout is not None:
        return module.entry_layout
    entry = module.entry
    parameters = entry.parameters()
    params = tuple(p.shape for p in parameters if p.shape is not None)
    root_shape = entry.root.shape if entry.root is not None else None
    if root_shape is None or len(params) != len(parameters):
        return None
    return ProgramLayout(params, root_shape)


def _header(module: Module) -> str:
    items: dict[str, AttributeValue] = dict(module.attributes)
    layout = _entry_layout(module)
    if layout is not None:
        items["entry_computation_layout"] = layout.to_text()
    rank = {name: i for i, name in enumerate(_HEADER_ORDER)}
    ordered = sorted(items.items(), key=lambda kv: rank.get(kv[0], len(rank)))
    parts = [f"HloModule {module.name}"] + [f"{key}={attribute_text(value)}" for key, value in ordered]
    text = ", ".join(parts)
    # XLA ends the recovery table's line with a newline of its own.
    return text + "\n" if "origin_recovery_table" in items else text


_NAME = attrgetter("name")


def _indexed_operands(operands: list[Instruction]) -> str:
    """More than five operands: ``/*index=N*/`` before every fifth."""
    parts = []
    for index, operand in enumerate(operands):
        prefix = f"/*index={index}*/" if index and index % 5 == 0 else ""
        parts.append(f"{prefix}%{operand.name}")
    return ", ".join(parts)


@dataclass
class _Texts:
    """A print's texts of shapes (with layouts for instructions, without for signatures) and of typed
    attribute values, by the object's id: interned shapes and the values `read_attributes` shares repeat,
    so each is spelled once without hashing its fields. `kept` holds every object spelled, so that no id
    is reused by another object while the print runs."""

    with_layout: dict[int, str] = field(default_factory=dict[int, str])
    without_layout: dict[int, str] = field(default_factory=dict[int, str])
    values: dict[int, str] = field(default_factory=dict[int, str])
    kept: list[object] = field(default_factory=list[object])


def _shape_text(shape: Shape, texts: _Texts, with_layout: bool = True) -> str:
    spelled = texts.with_layout if with_layout else texts.without_layout
    text = spelled.get(id(shape))
    if text is None:
        text = spelled[id(shape)] = shape.to_text(with_layout)
        texts.kept.append(shape)
    return text


def _value_text(value: AttributeValue, texts: _Texts) -> str:
    text = texts.values[id(value)] = attribute_text(value)
    texts.kept.append(value)
    return text


def print_instruction(instruction: Instruction, is_root: bool = False, shape_texts: _Texts | None = None) -> str:
    """One instruction line, without indentation."""
    head, tail = _head_and_tail(instruction, "ROOT %" if is_root else "%", shape_texts or _Texts())
    literal = instruction.literal
    return head + tail if literal is None else head + literal.text + tail


def _head_and_tail(instruction: Instruction, lead: str, texts: _Texts) -> tuple[str, str]:
    """An instruction line, starting with `lead` (indentation, `ROOT`, `%`), in two parts around its literal,
    which is left out (streamed in pieces when large): up to its `(` and its operands or parameter number,
    and from the `)` on. An async op read as sugar is spelled as sugar again while it can be.

    One call per line: the argument and attribute texts are built here, the attributes in a loop, not a
    comprehension (a call of its own), and the shapes' and typed values' texts looked up without a call."""
    opcode, attributes, written_order = instruction.opcode, instruction.attributes, instruction.written_order
    if opcode.startswith("async-") and (sugar := sugared(instruction)) is not None:
        opcode, attributes, written_order = sugar
    if instruction.literal is not None:
        arguments = ""
    elif instruction.parameter_number is not None:
        arguments = str(instruction.parameter_number)
    else:
        operands = instruction.operands
        if not operands:
            arguments = ""
        elif len(operands) <= 5:  # no /*index=N*/ comment yet: the common case, in one join
            arguments = "%" + ", %".join(map(_NAME, operands))
        else:
            arguments = _indexed_operands(operands)
    shape = instruction.shape
    if shape is None:
        head = f"{lead}{instruction.name} = {opcode}({arguments}"
    else:
        head = f"{lead}{instruction.name} = {texts.with_layout.get(id(shape)) or _shape_text(shape, texts)} {opcode}({arguments}"
    tail = ")"
    if attributes:
        values = texts.values
        items = (
            attributes.items()
            if written_order
            else [(k, attributes[k]) for k in xla_attribute_order(opcode, attributes)]
        )
        for key, value in items:
            tail += (
                f", {key}={value}"
                if type(value) is str
                else f", {key}={values.get(id(value)) or _value_text(value, texts)}"
            )
    return head, tail


def _signature(computation: Computation, texts: _Texts) -> str:
    """``(p: f32[2]) -> f32[]`` without layouts; empty when a shape was omitted in the source."""
    params = computation.parameters()
    root = computation.root
    shapes = [p.shape for p in params if p.shape is not None]
    if root is None or root.shape is None or len(shapes) != len(params):
        return ""
    spelled = texts.without_layout  # a known shape's text looked up without a call, as in `_head_and_tail`
    listed = ", ".join(
        [f"{p.name}: {spelled.get(id(shape)) or _shape_text(shape, texts, False)}" for p, shape in zip(params, shapes)]
    )
    return f" ({listed}) -> {_shape_text(root.shape, texts, False)}"


def _instruction_order(computation: Computation) -> list[Instruction]:
    """As read until edited; then XLA's post order, as XLA prints a module it rewrote, except in a
    scheduled module, whose list order is its schedule (new instructions sit before their first user)."""
    module = computation.parent
    if not computation.edits or (module is not None and is_true(module.attributes.get("is_scheduled"))):
        return computation.instructions
    return computation.print_order()


def print_computation(computation: Computation, shape_texts: _Texts | None = None) -> str:
    return "".join(_computation_pieces(computation, shape_texts or _Texts(), stream=False))


def _computation_pieces(computation: Computation, texts: _Texts, stream: bool) -> Iterator[str]:
    """A computation's text: its lines joined, in one piece unless `stream`, when a large literal's line
    is cut around its literal, which comes in the literal's own pieces (`Literal.text_pieces`)."""
    lines = [("ENTRY " if computation.is_entry else "") + f"%{computation.name}{_signature(computation, texts)} {{"]
    root = computation.root
    for instruction in _instruction_order(computation):
        head, tail = _head_and_tail(instruction, "  ROOT %" if instruction is root else "  %", texts)
        literal = instruction.literal
        if literal is None:
            lines.append(head + tail)
        elif stream and literal.is_large:
            lines.append(head)
            yield "\n".join(lines)
            yield from literal.text_pieces()
            lines = [tail]  # the rest of the literal's line, joined to the lines after it
        else:
            lines.append(head + literal.text + tail)
    closing = "}"
    for key, value in computation.attributes.items():
        closing += f", {key}={value}"
    lines.append(closing)
    yield "\n".join(lines)


def print_module(module: Module) -> str:
    """The whole module as text, ending in a newline."""
    return "".join(_module_pieces(module, stream=False))


def print_module_pieces(module: Module) -> Iterator[str]:
    """`print_module`'s text in pieces, for a writer that streams them: a large literal's text is never
    made whole (a view of the source is sliced, a large value formatted a piece at a time), nor the module's."""
    return _module_pieces(module, stream=True)


def _module_pieces(module: Module, stream: bool) -> Iterator[str]:
    yield _header(module)
    if module.stack_frames:
        yield "\n\n" + module.stack_frames + "\n"
    shape_texts = _Texts()
    for computation in module.computations:
        if not printed_as_sugar(computation):
            yield "\n\n"
            yield from _computation_pieces(computation, shape_texts, stream)
    yield "\n\n"
