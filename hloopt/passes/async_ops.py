"""Async sugar taken apart for the passes, and put back when nothing inside changed.

XLA prints an async-wrapped op as ``<op>-start`` / ``-update`` / ``-done`` when its
wrapped computation is just that op (``CanExpandIntoSingleInstruction``); the parser
keeps the sugar as one instruction. A pass must see the wrapped op whichever
spelling the text used, so while a pass runs each sugared chain becomes the
explicit ``async-start … calls=`` form with its own wrapped computation, which the
passes already visit like any other. Afterwards a wrapped computation that is
still a single op over its parameters is printed as sugar again, exactly as it
was; one a pass expanded stays explicit, as XLA prints it.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass

from hloopt.ir.module import AttributeValue, Computation, Instruction, Module
from hloopt.ir.opcodes import ASYNC_OWN_ATTRIBUTES, GENERIC_ATTRIBUTES, base_opcode
from hloopt.ir.shape import TupleShape

#: The start's attributes XLA also sets on the op it wraps.
_SHARED_WITH_WRAPPED = frozenset({"metadata", "frontend_attributes"})


@dataclass(frozen=True)
class _Unwrapped:
    """One sugared chain made explicit: what putting the sugar back needs."""

    base: str
    start: Instruction
    #: The ``-update``s and the ``-done`` that followed the start.
    chain: tuple[Instruction, ...]
    #: The start's attribute names in their original order, to print them as they were.
    order: tuple[str, ...]


@contextmanager
def unwrapped_async(module: Module) -> Generator[dict[str, str]]:
    """Inside the block every async sugar chain of `module` is explicit; on leaving, the sugar is back
    wherever the wrapped computation is still a single op.

    Yields the name of each instruction made explicit (a wrapped op and its parameters) → the name of
    the sugared instruction it was written as, so what a pass says of it can name what the text holds.
    """
    records = [
        record
        for computation in list(module.computations)
        for start in list(computation.instructions)
        if (record := _unwrap(module, computation, start)) is not None
    ]
    written_as = {
        instruction.name: record.start.name
        for record in records
        if isinstance(wrapped := record.start.attributes.get("calls"), Computation)
        for instruction in wrapped.instructions
    }
    ours = {record.start for record in records}
    # Explicit starts whose computation is a single op now (one written otherwise stays as written).
    explicit = [start for start in _explicit_starts(module) if start not in ours and _calls_single_op(start)]
    try:
        yield written_as
    finally:
        for record in records:
            _keep_single(module, record.start)
        # An explicit start whose computation had to become a call is printed as call-start, as XLA does.
        records += [r for start in explicit if (r := _keep_single(module, start)) is not None]
        for record in records:
            _rewrap(module, record)


def _explicit_starts(module: Module) -> list[Instruction]:
    return [i for c in module.computations for i in c.instructions if i.opcode == "async-start"]


def _calls_single_op(start: Instruction) -> bool:
    wrapped = start.attributes.get("calls")
    return isinstance(wrapped, Computation) and _single_op(wrapped)


def _unwrap(module: Module, computation: Computation, start: Instruction) -> _Unwrapped | None:
    try:
        base, suffix = base_opcode(start.opcode)
    except KeyError:
        return None
    shape = start.shape
    if suffix != "-start" or not isinstance(shape, TupleShape) or len(shape.elements) < 2:
        return None
    operand_shapes = shape.elements[0]
    if not isinstance(operand_shapes, TupleShape) or len(operand_shapes.elements) != len(start.operands):
        return None
    chain: list[Instruction] = []
    current = start
    while next_ := [u for u in current.users if u.opcode in (f"{base}-update", f"{base}-done")]:
        current = next_[0]
        chain.append(current)
    wrapped = Computation(_computation_name(module, f"{start.name}.wrapped"))
    params = [
        wrapped.append(Instruction(module.unique_name(f"{start.name}.param"), "parameter", s, parameter_number=i))
        for i, s in enumerate(operand_shapes.elements)
    ]
    own = {k: v for k, v in start.attributes.items() if k in GENERIC_ATTRIBUTES or k in ASYNC_OWN_ATTRIBUTES}
    # XLA gives the wrapped op the start's metadata and frontend attributes (the passes stamp them).
    inherited = {k: v for k, v in own.items() if k in _SHARED_WITH_WRAPPED}
    op_attributes = {k: v for k, v in start.attributes.items() if k not in own} | inherited
    root = wrapped.append(
        Instruction(module.unique_name(f"{start.name}.{base}"), base, shape.elements[1], params, op_attributes)
    )
    wrapped.set_root(root)
    module.add_computation(wrapped, before=computation)
    order = tuple(start.attributes)
    start.respell("async-start", {"calls": wrapped} | own)
    for link in chain:  # XLA prints no calls= on async-update/-done
        link.respell(link.opcode.replace(base, "async", 1), link.attributes)
    return _Unwrapped(base, start, tuple(chain), order)


def _single_op(computation: Computation) -> bool:
    """One op applied to the parameters in order: what an async computation must be (XLA's verifier)
    and what sugar can spell."""
    root, params = computation.root, computation.parameters()
    return (
        root is not None
        and root.opcode != "parameter"
        and root.operands == params
        and len(computation.instructions) == len(params) + 1
    )


def _chain(start: Instruction) -> list[Instruction]:
    """The ``async-update``s and the ``async-done`` following an explicit start."""
    chain: list[Instruction] = []
    current = start
    while next_ := [u for u in current.users if u.opcode in ("async-update", "async-done")]:
        current = next_[0]
        chain.append(current)
    return chain


def _keep_single(module: Module, start: Instruction) -> _Unwrapped | None:
    """A wrapped computation a pass expanded becomes the callee of a ``call``, the new single wrapped op
    (returned as a chain to spell as ``call-start``).

    XLA's verifier requires an async computation to hold only its root and parameters. The
    call takes XLA's parser's view of the wrapped op: the async ops' metadata and frontend
    attributes, the last one written winning.
    """
    expanded = start.attributes.get("calls")
    if not isinstance(expanded, Computation) or _single_op(expanded) or expanded.root is None:
        return None
    chain = _chain(start)
    wrapper = Computation(_computation_name(module, f"{expanded.name}.async"))
    params = [
        wrapper.append(
            Instruction(module.unique_name(f"{start.name}.param"), "parameter", p.shape, parameter_number=index)
        )
        for index, p in enumerate(expanded.parameters())
    ]
    inherited: dict[str, AttributeValue] = {}
    for op in (start, *chain):
        inherited |= {k: v for k, v in op.attributes.items() if k in _SHARED_WITH_WRAPPED}
    call = Instruction(
        module.unique_name(f"{start.name}.call"),
        "call",
        expanded.root.shape,
        params,
        {"to_apply": expanded} | inherited,
        written_order=False,
    )
    wrapper.set_root(wrapper.append(call))
    assert start.parent is not None
    module.add_computation(wrapper, before=start.parent)
    for op in (start, *chain):
        if op.attributes.get("calls") is expanded:
            # the same ops, now through a call: a respelling of the start, not an edit of its computation
            op.respell(op.opcode, {k: wrapper if v is expanded else v for k, v in op.attributes.items()})
    return _Unwrapped("call", start, tuple(chain), ())


def _rewrap(module: Module, record: _Unwrapped) -> None:
    """Sugar again for the wrapped op, now the computation the start calls (the original or a call)."""
    start = record.start
    wrapped = start.attributes.get("calls")
    if not (isinstance(wrapped, Computation) and _single_op(wrapped)):
        return
    root = wrapped.root
    assert root is not None
    op_attributes = {k: v for k, v in root.attributes.items() if k not in GENERIC_ATTRIBUTES}
    merged = {k: v for k, v in start.attributes.items() if k != "calls"} | op_attributes
    if root.opcode == record.base:  # as it was, attribute order included
        rank = {name: index for index, name in enumerate(record.order)}
        merged = dict(sorted(merged.items(), key=lambda item: rank.get(item[0], len(rank))))
    else:
        merged = op_attributes | merged
        start.written_order = False
    start.respell(f"{root.opcode}-start", merged)
    for link in record.chain:
        link.respell(link.opcode.replace("async", root.opcode, 1), link.attributes)
    module.computations.remove(wrapped)


def _computation_name(module: Module, prefix: str) -> str:
    taken = {c.name for c in module.computations}
    name, counter = prefix, 1
    while name in taken:
        name, counter = f"{prefix}.{counter}", counter + 1
    return name
