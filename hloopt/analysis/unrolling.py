"""Control flow brought into the entry computation for ``hloopt trace``: only entry values can be captured
(a copy's tuple root), so calls are inlined at every call site, a while loop is unrolled as many times as it
ran on the traced inputs (up to a cap per loop), and a conditional is replaced by the branch it took.

A copy of a computation's instruction is an `Instance`: the instruction copied (`template`), the call, while
or conditional it was copied for (`site`), and for a loop the iteration. The trace names it
``template@site`` (``#i`` for iteration i), composing the origins of both, so A's and B's copies match by
provenance as entry instructions do. How often a loop ran and which branch a conditional took are facts of
a run: `counted` makes the module that reports them, the worker runs it (`xla.tracing`), and `unrolled`
uses them. The module stays the same function of its inputs on those inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from hloopt.ir.attribute_values import ComparisonDirection, Int
from hloopt.ir.literal import Literal
from hloopt.ir.module import AttributeValue, Computation, ComputationList, Instruction, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape

_COUNTER = ArrayShape("s32")
#: The probe stops a loop after this many iterations: one that runs them all is taken not to end (a
#: ``while`` whose condition is constant true), which a trace cannot unroll and a run would never finish.
ENDLESS = 1 << 20
#: Opcodes whose computations the trace brings into the entry; any other callee is applied per element
#: (reduce, map, sort, scatter…) and is covered by the value of the instruction that calls it.
_CONTROL = frozenset({"call", "while", "conditional"})


@dataclass(frozen=True)
class Instance:
    """An entry instruction copied from `template` (of a called computation) for the call, while or
    conditional `site`; `iteration` is the loop's iteration it computes (None outside a loop body)."""

    template: str
    site: str
    iteration: int | None = None


@dataclass(frozen=True)
class Loop:
    """A while loop as it ran: how many iterations, and which of them are traced (the first ``cap - 1``
    and the last when it ran more than `cap`; the iterations between run as a loop, untraced)."""

    site: str
    iterations: int
    traced: tuple[int, ...]


@dataclass(frozen=True)
class Branch:
    """A conditional as it ran: the branch taken of how many (the others did not run)."""

    site: str
    taken: int
    branches: int


def _branches(instruction: Instruction) -> list[Computation]:
    listed = instruction.attributes.get("branch_computations")
    if isinstance(listed, ComputationList):
        return list(listed.computations)
    true, false = instruction.attributes["true_computation"], instruction.attributes["false_computation"]
    assert isinstance(true, Computation) and isinstance(false, Computation)
    return [true, false]


def _callee(instruction: Instruction, key: str) -> Computation:
    callee = instruction.attributes[key]
    assert isinstance(callee, Computation)
    return callee


def _copy(
    callee: Computation,
    arguments: Sequence[Instruction],
    emit: Callable[[Instruction], object],
    name: Callable[[Instruction], str],
) -> tuple[Instruction, list[tuple[Instruction, Instruction]]]:
    """`callee`'s instructions copied (its parameters read `arguments`), each given to `emit`; its root's
    copy, and each (original, copy)."""
    copies: dict[Instruction, Instruction] = {}
    made: list[tuple[Instruction, Instruction]] = []
    for inner in callee.post_order():
        if inner.opcode == "parameter":
            assert inner.parameter_number is not None
            copies[inner] = arguments[inner.parameter_number]
            continue
        attributes = {k: v for k, v in inner.attributes.items() if k != "control-predecessors"}
        operands = [copies[o] for o in inner.operands]
        twin = Instruction(name(inner), inner.opcode, inner.shape, operands, attributes, inner.literal)
        emit(twin)
        copies[inner] = twin
        made.append((inner, twin))
    assert callee.root is not None
    return copies[callee.root], made


def _at_site(
    module: Module, anchor: Instruction, callee: Computation, arguments: Sequence[Instruction]
) -> tuple[Instruction, list[tuple[Instruction, Instruction]]]:
    """`callee` copied into the entry before `anchor` for the site `anchor`, each copy named after its
    template and the site (`_copy`'s root and pairs)."""
    return _copy(
        callee,
        arguments,
        partial(module.entry.insert_before, anchor),
        lambda inner: module.unique_name(f"{inner.name}.{anchor.name}"),
    )


def _callers(module: Module) -> dict[Computation, int]:
    counts: dict[Computation, int] = {}
    for instruction in module.instructions():
        for callee in instruction.called_computations():
            counts[callee] = counts.get(callee, 0) + 1
    return counts


def _reachable(source: Module) -> Module:
    """`source` without the computations nothing reachable from the entry calls any more."""
    seen: set[Computation] = set()
    stack = [source.entry]
    while stack:
        computation = stack.pop()
        if computation in seen:
            continue
        seen.add(computation)
        stack += [c for i in computation.instructions for c in i.called_computations()]
    if len(seen) == len(source.computations):
        return source
    result = Module(source.name)
    result.attributes = dict(source.attributes)
    for computation in source.computations:
        if computation in seen:
            result.add_computation(computation)
    return result


def inlined(module: Module) -> tuple[Module, dict[str, Instance]]:
    """A copy of `module` with every entry ``call`` without control edges replaced by copies of its
    computation's instructions, nested calls included. A computation only that call calls keeps its
    instructions' names (unique module-wide, and the computation leaves the module), so provenance and
    names find them as they find entry instructions; one called from several places is copied per call
    site under fresh names, each an `Instance` of that site."""
    source = module.clone()
    entry = source.entry
    shared = {callee for callee, count in _callers(source).items() if count > 1}  # copied per site, every time
    instances: dict[str, Instance] = {}
    pending = [i for i in entry.instructions if i.opcode == "call"]
    while pending:
        call = pending.pop()
        (callee,) = call.called_computations()
        if callee.has_control_edges() or "control-predecessors" in call.attributes:
            continue
        if callee not in shared:
            root, made = _copy(callee, call.operands, partial(entry.insert_before, call), lambda i: i.name)
        else:
            root, made = _at_site(source, call, callee, call.operands)
            instances.update({twin.name: Instance(inner.name, call.name) for inner, twin in made})
        for _, twin in made:
            if callee in shared:  # copied once per site, so are its calls (a computation called once leaves)
                shared.update(twin.called_computations())
            if twin.opcode == "call":
                pending.append(twin)
        _replace(entry, call, root)
    return _reachable(source), instances


def _replace(computation: Computation, old: Instruction, new: Instruction) -> None:
    """`old`'s uses moved to `new`, and `old` removed; unlike ``replace_instruction`` its operands stay
    when unused (a conditional's selector, a loop's initial values: values the trace still captures)."""
    computation.replace_all_uses(old, new)
    computation.remove(old)


def control_flow(module: Module, kept: Iterable[str] = ()) -> tuple[list[str], dict[str, str]]:
    """The entry's while loops (but those `kept` as loops), and each entry conditional's selector."""
    skip = set(kept)
    whiles: list[str] = []
    selectors: dict[str, str] = {}
    for instruction in module.entry.instructions:
        if instruction.name in skip or "control-predecessors" in instruction.attributes:
            continue
        if instruction.opcode == "while":
            whiles.append(instruction.name)
        elif instruction.opcode == "conditional":
            selectors[instruction.name] = instruction.operands[0].name
    return whiles, selectors


def _counted_loop(
    module: Module, loop: Instruction, state: Instruction, limit: int | None, bound: int | None = None
) -> Instruction:
    """A while in the entry, before `loop`, running `loop`'s body from `state` with an s32 counter beside
    its state: for `limit` iterations, or (`limit` None) until `loop`'s condition fails or `bound` iterations
    ran. Returns the new while (its element 0 is the state, 1 the count)."""
    shape = TupleShape((loop.shape, _COUNTER)) if loop.shape is not None else None
    assert shape is not None

    def computation(kind: str) -> tuple[Computation, Instruction, Instruction, Instruction]:
        made = Computation(module.unique_name(f"trace.{kind}"))
        parameter = made.append(Instruction(module.unique_name("trace.state"), "parameter", shape, parameter_number=0))
        inner = made.append(_gte(module, parameter, 0, loop.shape))
        count = made.append(_gte(module, parameter, 1, _COUNTER))
        module.add_computation(made, before=module.entry)
        return made, parameter, inner, count

    def fresh(inner: Instruction) -> str:
        return module.unique_name(inner.name)

    body, _, inner, count = computation("body")
    after, _ = _copy(_callee(loop, "body"), [inner], body.append, fresh)
    one = body.append(_constant(module, 1))
    step = body.append(Instruction(module.unique_name("trace.count"), "add", _COUNTER, [count, one]))
    body.set_root(body.append(Instruction(module.unique_name("trace.next"), "tuple", shape, [after, step])))
    condition, _, inner, count = computation("condition")
    go: Instruction | None = None
    if limit is None:
        go, _ = _copy(_callee(loop, "condition"), [inner], condition.append, fresh)
    stop = bound if limit is None else limit
    if stop is not None:
        end = condition.append(_constant(module, stop))
        direction: dict[str, AttributeValue] = {"direction": ComparisonDirection.LT}
        under = Instruction(module.unique_name("trace.go"), "compare", ArrayShape("pred"), [count, end], direction)
        condition.append(under)
        go = (
            under
            if go is None
            else condition.append(Instruction(module.unique_name("trace.both"), "and", ArrayShape("pred"), [go, under]))
        )
    assert go is not None
    condition.set_root(go)
    entry = module.entry
    zero = _constant(module, 0)
    entry.insert_before(loop, zero)
    start = Instruction(module.unique_name("trace.start"), "tuple", shape, [state, zero])
    entry.insert_before(loop, start)
    counted = Instruction(
        module.unique_name("trace.loop"), "while", shape, [start], {"condition": condition, "body": body}
    )
    entry.insert_before(loop, counted)
    return counted


def _gte(module: Module, tuple_value: Instruction, index: int, shape: Shape | None) -> Instruction:
    return Instruction(
        module.unique_name("trace.element"), "get-tuple-element", shape, [tuple_value], {"index": Int(index)}
    )


def _constant(module: Module, value: int) -> Instruction:
    return Instruction(
        module.unique_name("trace.constant"), "constant", _COUNTER, literal=Literal(_COUNTER, text=str(value))
    )


def counted(module: Module, whiles: Sequence[str]) -> tuple[Module, dict[str, str]]:
    """A copy of `module` in which each named entry while also counts its iterations, stopping at `ENDLESS`
    (a count that reaches it: the loop does not end), and the entry instruction holding each count."""
    copy = module.clone()
    entry = copy.entry
    by_name = {i.name: i for i in entry.instructions}
    counters: dict[str, str] = {}
    for name in whiles:
        loop = by_name[name]
        new = _counted_loop(copy, loop, loop.operands[0], None, ENDLESS)
        state, count = _gte(copy, new, 0, loop.shape), _gte(copy, new, 1, _COUNTER)
        entry.insert_after(new, state)
        entry.insert_after(state, count)
        _replace(entry, loop, state)
        counters[name] = count.name
    return _reachable(copy), counters


def unrolled(
    module: Module, counts: Mapping[str, int], taken: Mapping[str, int], cap: int
) -> tuple[Module, dict[str, Instance], list[Loop], list[Branch], set[str]]:
    """A copy of `module` with each entry while in `counts` unrolled as many times as it ran (its
    condition copied before each iteration's body, for its values), and each conditional in `taken`
    replaced by a copy of the branch taken. A loop that ran more than `cap` times keeps the iterations
    from ``cap - 1`` to the one before last as a counted loop (returned, not to be unrolled again)."""
    copy = module.clone()
    entry = copy.entry
    instances: dict[str, Instance] = {}
    loops: list[Loop] = []
    branches: list[Branch] = []
    kept: set[str] = set()
    for instruction in list(entry.instructions):
        if instruction.name in counts:
            total = counts[instruction.name]
            state = instruction.operands[0]
            ran = list(range(total)) if total <= cap else [*range(cap - 1), total - 1]
            for iteration in ran:
                if iteration == total - 1 and total > cap:
                    middle = _counted_loop(copy, instruction, state, total - cap)
                    state = _gte(copy, middle, 0, instruction.shape)
                    entry.insert_before(instruction, state)
                    kept.add(middle.name)
                for kind in ("condition", "body"):
                    root, made = _at_site(copy, instruction, _callee(instruction, kind), [state])
                    instances.update({twin.name: Instance(t.name, instruction.name, iteration) for t, twin in made})
                    if kind == "body":
                        state = root
            _replace(entry, instruction, state)
            loops.append(Loop(instruction.name, total, tuple(ran)))
        elif instruction.name in taken:
            options = _branches(instruction)
            index = taken[instruction.name]
            root, made = _at_site(copy, instruction, options[index], [instruction.operands[index + 1]])
            instances.update({twin.name: Instance(t.name, instruction.name) for t, twin in made})
            _replace(entry, instruction, root)
            branches.append(Branch(instruction.name, index, len(options)))
    return _reachable(copy), instances, loops, branches, kept


def branch_taken(selector: object, branches: int) -> int:
    """The branch a conditional runs for its selector's value: a pred's true is branch 0 (its
    ``true_computation``); an index out of range runs the last branch."""
    import numpy as np

    value = np.asarray(selector)
    if value.dtype == np.bool_:
        return 0 if bool(value) else 1
    index = int(value)
    return index if 0 <= index < branches else branches - 1


def branch_count(module: Module, name: str) -> int:
    """How many branches the named entry conditional has."""
    (instruction,) = [i for i in module.entry.instructions if i.name == name]
    return len(_branches(instruction))


def entry_origins(module: Module, origin: Mapping[str, str], instances: Mapping[str, Instance]) -> dict[str, str]:
    """Each entry instruction's origin: `origin`'s (any computation's instructions), or for an `Instance`
    its template's ``@`` its site's (``#i`` for a loop's iteration i), composed in the order copies were
    made; an instruction without one (a pass made it from nothing) has none."""
    full = dict(origin)
    for name, instance in instances.items():
        template, site = full.get(instance.template), full.get(instance.site)
        if template is not None and site is not None:
            at = "" if instance.iteration is None else f"#{instance.iteration}"
            full[name] = f"{template}@{site}{at}"
    return {i.name: full[i.name] for i in module.entry.instructions if i.name in full}


def covered(module: Module) -> list[tuple[str, tuple[str, ...]]]:
    """The computations entry instructions apply per element (reduce, map, sort, scatter…), each with the
    entry instructions that call it: their values have no tensor of their own, the callers' cover them."""
    callers: dict[str, list[str]] = {}
    for instruction in module.entry.instructions:
        if instruction.opcode not in _CONTROL:
            for callee in instruction.called_computations():
                callers.setdefault(callee.name, []).append(instruction.name)
    return [(name, tuple(names)) for name, names in callers.items()]
