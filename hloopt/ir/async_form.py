"""Async operations in one form: the explicit ``async-start … calls=``, whatever the text wrote.

XLA prints an async-wrapped op as ``<op>-start`` / ``-update`` / ``-done`` when its wrapped
computation is just that op (``CanExpandIntoSingleInstruction``). The parser reads the sugar,
validates it as written, then `unwrap_sugar` makes each chain explicit once, with its own wrapped
computation, and records on that computation how it was written (`AsyncSugar`). Passes, analysis
and the verifier see one form; the printer (`sugared`) puts the sugar back while the wrapped
computation is still one op over its parameters, and then does not print that computation.
"""

from __future__ import annotations

from hloopt.ir.module import AsyncSugar, AttributeValue, Computation, Instruction, Module
from hloopt.ir.opcodes import ASYNC_OWN_ATTRIBUTES, GENERIC_ATTRIBUTES, base_opcode
from hloopt.ir.shape import TupleShape

#: Ops the IR holds by a field, not by operands (a parameter's number, a constant's literal): XLA prints a
#: wrapped one as sugar over the start's operands (``parameter-start(%p0, %p1)``, as a verifier test
#: writes it), which no instruction of the IR can stand for, so such a chain stays as written.
_KEPT_AS_WRITTEN = frozenset({"parameter", "constant"})

#: The start's attributes XLA also sets on the op it wraps.
SHARED_WITH_WRAPPED = frozenset({"metadata", "frontend_attributes"})


def unwrap_sugar(module: Module) -> None:
    """Every sugared chain of `module` made explicit (the parser's step as the module closes)."""
    for computation in list(module.computations):
        for start in [i for i in computation.instructions if i.opcode.endswith("-start")]:
            _unwrap(module, computation, start)


def _unwrap(module: Module, computation: Computation, start: Instruction) -> None:
    try:
        base, suffix = base_opcode(start.opcode)
    except KeyError:
        return
    shape = start.shape
    if suffix != "-start" or base in _KEPT_AS_WRITTEN or not isinstance(shape, TupleShape) or len(shape.elements) < 2:
        return
    operand_shapes = shape.elements[0]
    if not isinstance(operand_shapes, TupleShape) or len(operand_shapes.elements) != len(start.operands):
        return
    chain: list[Instruction] = []
    current = start
    while next_ := [u for u in current.users if u.opcode in (f"{base}-update", f"{base}-done")]:
        current = next_[0]
        chain.append(current)
    wrapped = Computation(fresh_computation_name(module, f"{start.name}.wrapped"))
    params = [
        wrapped.append(Instruction(module.unique_name(f"{start.name}.param"), "parameter", s, parameter_number=i))
        for i, s in enumerate(operand_shapes.elements)
    ]
    own = {k: v for k, v in start.attributes.items() if k in GENERIC_ATTRIBUTES or k in ASYNC_OWN_ATTRIBUTES}
    # XLA gives the wrapped op the start's metadata and frontend attributes (the passes stamp them).
    inherited = {k: v for k, v in own.items() if k in SHARED_WITH_WRAPPED}
    op_attributes = {k: v for k, v in start.attributes.items() if k not in own} | inherited
    root = wrapped.append(
        Instruction(module.unique_name(f"{start.name}.{base}"), base, shape.elements[1], params, op_attributes)
    )
    wrapped.set_root(root)
    wrapped.sugar = AsyncSugar(base, tuple(start.attributes))
    module.add_computation(wrapped, before=computation)
    start.respell("async-start", {"calls": wrapped} | own)
    for link in chain:  # XLA prints no calls= on async-update/-done
        link.respell(link.opcode.replace(base, "async", 1), link.attributes)


def single_op(computation: Computation) -> bool:
    """One op applied to the parameters in order: what an async computation must be (XLA's verifier)
    and what sugar can spell."""
    root, params = computation.root, computation.parameters()
    return (
        root is not None
        and root.opcode != "parameter"
        and root.operands == params
        and len(computation.instructions) == len(params) + 1
    )


def printed_as_sugar(computation: Computation) -> bool:
    """Whether `computation` prints inside its start's sugar rather than as a computation."""
    return computation.sugar is not None and single_op(computation)


def sugared(instruction: Instruction) -> tuple[str, dict[str, AttributeValue], bool] | None:
    """How an explicit async op prints when its start was read as sugar and the wrapped computation is
    still one op: the sugar's opcode, attributes, and whether they are in the order written (as read
    while the op is the one written, else XLA's). None to print it as it is."""
    opcode = instruction.opcode
    if opcode not in ("async-start", "async-update", "async-done"):
        return None
    start = instruction
    while start.opcode != "async-start" and start.operands:
        start = start.operands[0]
    wrapped = start.attributes.get("calls")
    if not isinstance(wrapped, Computation) or not printed_as_sugar(wrapped):
        return None
    sugar, root = wrapped.sugar, wrapped.root
    assert sugar is not None and root is not None
    if instruction is not start:
        return opcode.replace("async", root.opcode, 1), instruction.attributes, instruction.written_order
    op_attributes = {k: v for k, v in root.attributes.items() if k not in GENERIC_ATTRIBUTES}
    merged = {k: v for k, v in start.attributes.items() if k != "calls"} | op_attributes
    if root.opcode != sugar.base:
        return f"{root.opcode}-start", op_attributes | merged, False
    rank = {name: index for index, name in enumerate(sugar.order)}
    ordered = dict(sorted(merged.items(), key=lambda item: rank.get(item[0], len(rank))))
    return f"{root.opcode}-start", ordered, start.written_order


def written_as(module: Module) -> dict[str, str]:
    """The name of each instruction inside a computation read as sugar → the name of the start the text
    wrote it as, so what a pass says of it can name what the text holds."""
    return {
        instruction.name: start.name
        for computation in module.computations
        for start in computation.instructions
        if start.opcode == "async-start"
        and isinstance(wrapped := start.attributes.get("calls"), Computation)
        and wrapped.sugar is not None
        for instruction in wrapped.instructions
    }


def fresh_computation_name(module: Module, prefix: str) -> str:
    """`prefix`, or `prefix.N` for the first N no computation of `module` is named."""
    taken = {c.name for c in module.computations}
    name, counter = prefix, 1
    while name in taken:
        name, counter = f"{prefix}.{counter}", counter + 1
    return name
