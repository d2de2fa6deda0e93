"""neuron-auto-cast: the element types neuronx-cc's ``--auto-cast`` and mixed-precision accumulation give.

``mode=matmult`` casts the operands of each F32 dot and convolution to the auto-cast type; the
matrix engine accumulates in F32 and writes F32, so the op keeps its F32 result (a ``dot`` with
bf16 operands and an f32 shape, as XLA writes ``preferred_element_type``). ``mode=all`` casts
every F32 value: each op then reads and writes the cast type (XLA computes a bf16 ``add`` in F32
and rounds once, as the device's engines do). The entry signature is kept, with converts at its
edges; ops stamped ``auto_cast`` (spec 000: ``none`` pins an op) and everything a stamped op calls
keep their types. ``accumulate=f32`` makes each low-precision reduce, reduce-window, dot and
convolution accumulate in F32 and round once at the end.

Every cast the pass inserts is a ``convert`` (the device's ``CastToNewDType`` once
``emulate-neuron-converts`` lowers it), except the ``tf32`` cast, which has no HLO element type:
it is emitted as that lowering (``device_cast`` to ``float32r``). Each op the pass changes is
stamped ``auto_cast="<what it now computes in>"``, so a second run leaves it alone. The decisions
are `auto_cast_plan`'s, which ``hloopt dtypes`` reads too; see docs/decisions.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

import numpy as np

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.cast_engine import DEFAULT_FP8_CONFIG
from hloopt.errors import HloError
from hloopt.ir.async_form import fresh_computation_name
from hloopt.ir.attribute_values import ComparisonDirection, FrontendAttributes, Int, IntList, integers
from hloopt.ir.attributes import MapSyntaxError, with_frontend_attribute
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import FLOAT_TYPES
from hloopt.ir.literal import Literal as HloLiteral
from hloopt.ir.module import AttributeValue, Computation, Instruction, Module
from hloopt.ir.opcodes import ASYNC_WRAPPERS, ROWS, Elementwise
from hloopt.ir.shape import ArrayShape, BufferShape, Shape, TupleShape, default_layout, leaf_shapes
from hloopt.passes.base import HloPass, PassResult, provenance_of
from hloopt.passes.emulate_neuron_converts import device_cast
from hloopt.passes.retyping import (
    Converts,
    Retyping,
    apply_plans,
    convert_chain,
    is_boundary,
    packed_size_dropped,
    plan_computation,
)

Mode = Literal["none", "matmult", "all"]
AutoCastType = Literal["bf16", "fp16", "tf32", "fp8_e4m3"]
Accumulate = Literal["f32", "native"]
SkipReason = Literal["stamped", "io", "integer", "not-covered", "buffer", "unknown-shape"]

#: The HLO element type each auto-cast type is stored in; tf32 has none (f32 values rounded as float32r).
STORAGE: dict[str, str | None] = {"bf16": "bf16", "fp16": "f16", "fp8_e4m3": "f8e4m3", "tf32": None}
#: The cast engine's name of the tf32 cast: spec 002's fp32r (docs/decisions.md).
TF32_DTYPE = "float32r"
#: The frontend attribute the compiler's auto-cast keys off (spec 000).
STAMP_KEY = "auto_cast"
#: Ops on the matrix-multiplication engine.
MATMUL = frozenset({"dot", "convolution"})
#: Ops that accumulate, which mixed-precision accumulation makes accumulate in F32.
ACCUMULATING = frozenset({"reduce", "reduce-window", "dot", "convolution"})
#: Float types below F32 that an accumulation runs in natively (the device's, with an HLO element type).
LOW_PRECISION = frozenset({"bf16", "f16", "f8e4m3", "f8e4m3fn", "f8e5m2", "f8e3m4"})
#: The opcodes a plan lists: accumulations and the elementwise ops that compute (a convert is a cast).
LISTED = ACCUMULATING | frozenset(
    row.name for row in ROWS if row.elementwise not in (Elementwise.NONE, Elementwise.CONVERT)
)
#: Opcodes that call computations.
_CALLING = frozenset(row.name for row in ROWS if row.callees)
#: The opcodes `_callers_and_accumulations` collects.
_WALKED = _CALLING | ACCUMULATING


@dataclass(frozen=True)
class Decision:
    """What the pass does to one op: the auto-cast type it now computes in, whether it accumulates in
    F32 and rounds once, or (neither) why it is left alone."""

    cast: AutoCastType | None = None
    accumulate_f32: bool = False
    reason: SkipReason | None = None
    #: A low-precision reduce under ``accumulate=native``: rounded to its own type after each step, in order.
    per_step: bool = False

    @property
    def changes(self) -> bool:
        return self.cast is not None or self.accumulate_f32 or self.per_step


def listed(instruction: Instruction) -> bool:
    """The ops a plan decides on: dots, convolutions, reduces, reduce-windows and computing elementwise ops."""
    return instruction.opcode in LISTED


def stamped(instruction: Instruction) -> bool:
    value = instruction.attributes.get("frontend_attributes")
    return isinstance(value, FrontendAttributes) and STAMP_KEY in value


def _types(shape: Shape | None) -> frozenset[str]:
    if isinstance(shape, ArrayShape):
        return _ONE_TYPE.get(shape.element_type) or frozenset((shape.element_type,))
    return frozenset(leaf.element_type for leaf in leaf_shapes(shape)) if shape is not None else frozenset()


_ONE_TYPE = {name: frozenset((name,)) for name in ("f32", "bf16", "f16", "s32", "pred")}


def _callers_and_accumulations(
    module: Module,
) -> tuple[dict[Computation, list[Instruction]], dict[Computation, list[Instruction]]]:
    """The callers of each computation, and each computation's accumulating ops: one walk of the module."""
    found: dict[Computation, list[Instruction]] = {}
    accumulating: dict[Computation, list[Instruction]] = {}
    for computation in module.computations:
        own: list[Instruction] = []
        accumulating[computation] = own
        for instruction in computation.instructions:
            if instruction.opcode not in _WALKED:  # most ops: one test
                continue
            if instruction.opcode in ACCUMULATING:
                own.append(instruction)
            if instruction.opcode in _CALLING:  # the opcode table's callees: no other op's attributes name one
                for callee in instruction.called_computations():
                    found.setdefault(callee, []).append(instruction)
    return found, accumulating


def auto_cast_plan(module: Module, options: NeuronAutoCast) -> dict[Instruction, Decision]:
    """A decision for every listed op and, in ``all`` mode, every F32 entry parameter (``io``)."""
    return _plan(module, options)[0]


Inheritance = dict[Computation, Decision | None]


def _plan(
    module: Module, options: NeuronAutoCast, *, complete: bool = True
) -> tuple[dict[Instruction, Decision], Inheritance]:
    """The plan, and what each computation takes from its callers.

    A computation whose every caller is stamped is stamped with them (a pinned reduce pins its
    reducer); one whose every caller accumulates in F32 is that accumulation (its ops accumulate_f32).
    Callers come after their callees in a module, so computations are decided last to first. Not
    `complete` (the pass itself), outside ``all`` mode the ops no decision could change are left out:
    most of a module, whose reasons only ``hloopt dtypes`` reads.
    """
    shapes = ShapeResolver(module)
    callers, accumulating = _callers_and_accumulations(module)
    complete = complete or options.mode == "all"
    calls = _Calls(callers)
    matmult = options.mode == "matmult"
    plan: dict[Instruction, Decision] = {}
    inherited: Inheritance = {}
    held = _held(module, shapes) if options.mode == "all" else {}
    for computation in reversed(module.computations):
        found = callers.get(computation, [])
        kept = _kept_by_callers(found, held, inherited) if options.mode == "all" else None
        inherited[computation] = kept or _inherited(found, plan, inherited)
        if not complete and inherited[computation] is None:  # most computations: their accumulations only
            for instruction in accumulating[computation]:
                if (matmult and instruction.opcode in MATMUL) or _low_precision(instruction, shapes):
                    plan[instruction] = _decide(instruction, shapes, options, None, calls)
            continue
        for instruction in computation.instructions:
            if instruction in held:
                plan[instruction] = held[instruction]
            elif instruction.opcode == "parameter":
                if options.mode == "all" and computation.is_entry and "f32" in _types(shapes(instruction)):
                    plan[instruction] = _IO
            elif instruction.opcode in LISTED:
                plan[instruction] = _decide(instruction, shapes, options, inherited[computation], calls)
    return plan, inherited


def _low_precision(instruction: Instruction, shapes: ShapeResolver) -> bool:
    """Whether an op's result is low-precision floats only: outside ``all`` mode, what `_decide` can change of an
    accumulating op that inherits nothing, besides a dot or convolution under ``matmult`` (the rest are left out
    of the pass's plan)."""
    result = _types(instruction.shape or shapes(instruction))
    return bool(result) and result <= LOW_PRECISION


def _inherited(
    callers: list[Instruction], plan: dict[Instruction, Decision], inherited: Inheritance
) -> Decision | None:
    """What a computation's ops take from their callers: stamped, accumulating in F32, or nothing."""
    if not callers:
        return None
    decisions = [plan.get(c) or _from_parent(c, inherited) or _NOT_COVERED for c in callers]
    if all(stamped(c) or d.reason == "stamped" for c, d in zip(callers, decisions)):
        return _STAMPED
    if all(d.accumulate_f32 for d in decisions):
        return _ACCUMULATING
    return None


def _held(module: Module, shapes: ShapeResolver) -> dict[Instruction, Decision]:
    """``all`` mode: the ops that keep their types because of what they hold or read, with the reason. A buffer
    (``b(…)``, custom-call Pin) is a place, not a value a convert can read or write; a shape the text left out
    that hloopt cannot infer (a while's, say) can be neither retyped nor converted. An op whose shape or an
    operand's is such keeps its types, so every value crossing to a cast op is an array of known type (converts
    at the edges); the computations it calls keep theirs (`_kept_by_callers`). The rest of the module is cast."""
    held: dict[Instruction, Decision] = {}
    for instruction in module.instructions():
        found: Decision | None = None
        for value in (instruction, *instruction.operands):
            shape = value.shape or shapes(value)  # the resolver only for a shape the text left out
            if shape is None:
                found = _UNKNOWN_SHAPE
                break
            if found is None and type(shape) is not ArrayShape and holds_buffer(shape):
                found = _BUFFER
        if found is not None:
            held[instruction] = found
    return held


def _kept_by_callers(
    callers: list[Instruction], held: dict[Instruction, Decision], inherited: Inheritance
) -> Decision | None:
    """``all`` mode: why a computation keeps its types, if a caller makes it: an async op calls it (its callers'
    async shapes would have to change with it, and the printer spells it as sugar), a held op does
    (`_held`), or a caller sits in a computation that keeps its types."""
    for caller in callers:
        if caller in held:
            return held[caller]
        if caller.opcode in ASYNC_WRAPPERS:
            return _NOT_COVERED
        if _wrapped(caller.parent, inherited):
            return _from_parent(caller, inherited)
    return None


def _wrapped(computation: Computation | None, inherited: Inheritance) -> bool:
    """Whether `computation` keeps its types under ``all`` because of its callers (`_kept_by_callers`)."""
    decision = inherited.get(computation) if computation is not None else None
    return decision is not None and decision.reason in _KEEPING


def _from_parent(caller: Instruction, inherited: Inheritance) -> Decision | None:
    return inherited.get(caller.parent) if caller.parent is not None else None


_INTEGER = Decision(reason="integer")
_STAMPED = Decision(reason="stamped")
_NOT_COVERED = Decision(reason="not-covered")
_ACCUMULATING = Decision(accumulate_f32=True)
_PER_STEP = Decision(per_step=True)
_BUFFER = Decision(reason="buffer")
_UNKNOWN_SHAPE = Decision(reason="unknown-shape")
_IO = Decision(reason="io")
#: The decisions that cast, made once: a module's ops share a handful (a frozen dataclass is slow to make).
_CASTS = {
    (cast, accumulate_f32, per_step): Decision(cast, accumulate_f32, per_step=per_step)
    for cast in get_args(AutoCastType)
    for accumulate_f32 in (False, True)
    for per_step in (False, True)
}
#: Reasons an op keeps its types under ``all`` with converts at its edges.
_PINNING = frozenset(("stamped", "io", "buffer", "unknown-shape"))
#: Reasons a computation keeps its types under ``all`` whatever its own ops are.
_KEEPING = frozenset(("not-covered", "buffer", "unknown-shape"))
_F32 = frozenset(("f32",))
_TWO_F32 = [_F32, _F32]


def _decide(
    instruction: Instruction,
    shapes: ShapeResolver,
    options: NeuronAutoCast,
    inherited: Decision | None,
    calls: _Calls,
) -> Decision:
    result = _types(instruction.shape or shapes(instruction))  # the resolver when the text left the shape out
    operands = [_types(o.shape or shapes(o)) for o in instruction.operands]
    if result.isdisjoint(FLOAT_TYPES) and all(o.isdisjoint(FLOAT_TYPES) for o in operands):
        return _INTEGER
    if stamped(instruction):
        return _STAMPED
    if inherited is not None:
        return inherited
    opcode = instruction.opcode
    if options.mode == "matmult" and opcode in MATMUL and result == _F32 and operands[:2] == _TWO_F32:
        return _CASTS[options.type, False, False]
    accumulates = (
        options.accumulate == "f32"
        and opcode in ACCUMULATING
        and (opcode not in _CALLING or calls.free.issuperset(instruction.called_computations()))
    )
    native = options.accumulate == "native" and opcode == "reduce" and _steps_writable(instruction, shapes, calls.fused)
    if options.mode == "all" and "f32" in result.union(*operands) and not is_boundary(instruction, shapes):
        return _CASTS[options.type, accumulates, native]
    if accumulates and result and result <= LOW_PRECISION:
        return _ACCUMULATING
    if native and result and result <= LOW_PRECISION:
        return _PER_STEP
    return _NOT_COVERED


def _steps_writable(reduce: Instruction, shapes: ShapeResolver, fused: set[Computation]) -> bool:
    """Whether a reduce's steps can be written out (`_reduce_per_step`): one input of static shape and a single
    result, outside a fusion (whose computation holds no loop)."""
    source = shapes(reduce.operands[0]) if len(reduce.operands) == 2 else None
    return isinstance(source, ArrayShape) and not any(source.dynamic) and reduce.parent not in fused


def holds_buffer(shape: Shape | None) -> bool:
    """Whether `shape` is or holds a ``b(…)`` buffer."""
    if isinstance(shape, TupleShape):
        return any(holds_buffer(element) for element in shape.elements)
    return isinstance(shape, BufferShape)


class _Calls:
    """Who calls each computation, and what `_decide` reads of that, found when first read: most of a
    module's decisions read neither (a module's shared reducer has thousands of callers)."""

    def __init__(self, callers: dict[Computation, list[Instruction]]) -> None:
        self.callers = callers

    @cached_property
    def free(self) -> set[Computation]:
        return _free_reducers(self.callers)

    @cached_property
    def fused(self) -> set[Computation]:
        """Computations a fusion calls."""
        return {callee for callee, found in self.callers.items() if any(c.opcode == "fusion" for c in found)}


def _free_reducers(callers: dict[Computation, list[Instruction]]) -> set[Computation]:
    """Reducers that can accumulate in F32: nothing but unstamped reduces and reduce-windows call them (the pass
    retypes the computation itself)."""
    return {
        callee
        for callee, found in callers.items()
        if all(c.opcode in ("reduce", "reduce-window") and not stamped(c) for c in found)
    }


@dataclass(frozen=True)
class NeuronAutoCast(HloPass):
    """F32 dots and convolutions (``matmult``) or every F32 op (``all``) computed in the auto-cast type;
    low-precision accumulations in F32 (``accumulate=f32``)."""

    mode: Mode = "matmult"
    type: AutoCastType = "bf16"
    accumulate: Accumulate = "f32"

    def matches(self, module: Module) -> list[Instruction]:
        return [i for i, d in _plan(module, self, complete=False)[0].items() if d.changes]

    def run_on_module(self, module: Module) -> PassResult:
        plan, inherited = _plan(module, self, complete=False)
        changing = {i: d for i, d in plan.items() if d.changes}
        if not changing:
            return PassResult(False)
        provenance: list[tuple[str, str]] = []
        storage = STORAGE[self.type]
        if self.mode == "matmult":
            provenance += _cast_matmul_operands(module, changing, storage)
        elif self.mode == "all" and storage is not None:
            provenance += _cast_all(module, plan, inherited, storage) + _engines_in_f32(module, plan, storage)
        elif self.mode == "all":
            provenance += _round_all(module, plan)
        provenance += _accumulate_in_f32(module, plan, inherited)
        stamps: dict[tuple[object, str], FrontendAttributes] = {}
        shapes = ShapeResolver(module)  # after the rewrites above
        for instruction, decision in changing.items():
            if decision.per_step:
                provenance += _reduce_per_step(instruction, shapes, stamps)
            else:
                _stamp(instruction, decision.cast or "f32", stamps)
        return PassResult(True, len(changing), provenance=tuple(provenance))


# --------------------------------------------------------------------------- casting


def _stamp(
    instruction: Instruction, value: str, made: dict[tuple[object, str], FrontendAttributes] | None = None
) -> None:
    """Add ``auto_cast="value"``; `made` shares one attribute value among ops that had the same (most had none)."""
    current = instruction.attributes.get("frontend_attributes")
    key = (current, value)
    stamp = made.get(key) if made is not None else None
    if stamp is None:
        try:
            stamp = with_frontend_attribute(current, STAMP_KEY, value)
        except MapSyntaxError as err:
            raise HloError(f"%{instruction.name}: cannot read its frontend attributes: {err}") from None
        if made is not None:
            made[key] = stamp
    instruction.set_attributes(instruction.attributes | {"frontend_attributes": stamp}, merged=True)


def _tf32_cast(builder: Builder, value: Instruction, shape: ArrayShape) -> Instruction:
    """`value` rounded to tf32, which has no HLO element type: the float32r cast as HLO."""
    result = device_cast(builder, value, shape, TF32_DTYPE, DEFAULT_FP8_CONFIG)
    for made in builder.created:  # the cast's own float ops (its NaN test and select) are not re-cast
        if listed(made) and "f32" in _types(made.shape).union(*(_types(o.shape) for o in made.operands)):
            _stamp(made, "tf32")
    return result


def _cast_matmul_operands(
    module: Module, changing: dict[Instruction, Decision], storage: str | None
) -> list[tuple[str, str]]:
    """Each cast dot's and convolution's two operands cast (one cast per operand and computation), read as they
    are: the op keeps its F32 result, as the matrix engine writes it. XLA's CPU refuses some bf16 × bf16 → f32
    dots (DotThunk); cpu-runnable widens their operands when a module is to run there, which is exact.

    A cast to a storage type is one ``convert`` (`Converts`); tf32's is `_tf32_cast`'s ops."""
    made: dict[Instruction, Instruction] = {}
    narrowed: dict[int, tuple[Shape, ArrayShape]] = {}
    shapes = ShapeResolver(module)
    converts = Converts(module)
    provenance = converts.provenance
    for instruction, decision in reversed(changing.items()):
        if decision.cast is None:
            continue
        casts: dict[Instruction, Instruction] = {}
        for operand in instruction.operands[:2]:
            narrow = made.get(operand)
            if narrow is None:
                shape = operand.shape or shapes(operand)  # the text may leave it out
                assert isinstance(shape, ArrayShape)  # the plan checked the operand is an f32 array
                if storage is None:
                    builder = Builder.after(operand)  # before every user, whichever comes first
                    narrow = _tf32_cast(builder, operand, shape)
                    provenance += provenance_of(instruction, builder.created)
                else:
                    seen = narrowed.get(id(shape))  # by identity: the parser shares equal shapes, and hashing
                    if seen is None:  # one costs as much as the rest here; the entry keeps its id the shape's
                        seen = narrowed[id(shape)] = (shape, packed_size_dropped(shape, storage))
                    narrow = converts.after(operand, seen[1], instruction)
                made[operand] = narrow
            casts[operand] = narrow
        instruction.replace_operands(casts)
    return provenance


def _cast_all(
    module: Module, plan: dict[Instruction, Decision], inherited: Inheritance, storage: str
) -> list[tuple[str, str]]:
    """Every F32 leaf becomes `storage` in every computation its callers do not pin, the entry signature
    kept. A reduce that accumulates in F32 is pinned too: the converts at its edges are then exactly the
    accumulation's (its reducer, which it alone calls, stays F32)."""

    def pinned(instruction: Instruction) -> bool:
        decision = plan.get(instruction)
        if decision is None:  # a caller of a computation that keeps its types keeps its own, and so does its -done
            if instruction.opcode.endswith(("-update", "-done")) and instruction.operands:  # sugar -done too
                return pinned(instruction.operands[0])
            return instruction.opcode in _CALLING and any(
                _wrapped(c, inherited) for c in instruction.called_computations()
            )
        return decision.reason in _PINNING or (decision.accumulate_f32 and instruction.opcode not in MATMUL)

    def to_storage(shape: ArrayShape) -> ArrayShape:
        return packed_size_dropped(shape, storage)

    retyping = Retyping(frozenset({"f32"}), to_storage, "neuron", pinned)
    shapes = ShapeResolver(module)
    entry = module.entry
    root_shape = _inferred(shapes, module, entry.root) if entry.root is not None else None  # None: a held root
    plans = [(c, plan_computation(c, shapes, retyping)) for c in module.computations if inherited.get(c) is None]
    kept_root = entry.root is not None and not plan.get(entry.root, _NOT_COVERED).accumulate_f32
    for computation, computation_plan in plans:  # an entry root that keeps its types is the output as it is
        if computation is entry and kept_root:  # (one accumulating in F32 rounds once, to the cast type)
            computation_plan.widen = [(user, fixed) for user, fixed in computation_plan.widen if user is not None]
    _, provenance = apply_plans(plans, shapes, retyping)
    root = entry.root
    if root is not None and root.shape is None and root_shape is not None:  # its shape left out: written now,
        root.set_shape(root_shape if pinned(root) else retyping.shape(root_shape))  # as its operands now give it
    now = root.shape if root is not None else None
    if root is not None and root_shape is not None and now is not None and now != root_shape:
        builder = Builder.after(root)
        entry.set_root(convert_chain(builder, root, now, root_shape))
        provenance += provenance_of(root, builder.created)
    return provenance


def _inferred(shapes: ShapeResolver, module: Module, instruction: Instruction) -> Shape | None:
    """`instruction`'s shape, inferred after every instruction before it: the resolver infers a ``while`` left
    unshaped from its body's root only once that root's shape is known (as `_held` found it, in module order)."""
    shape = shapes(instruction)
    if shape is None:  # a resolver keeps what it could not infer: a fresh one, warmed in order
        warmed = ShapeResolver(module)
        for other in module.instructions():
            warmed(other)
        shape = warmed(instruction)
    return shape


def _round_all(module: Module, plan: dict[Instruction, Decision]) -> list[tuple[str, str]]:
    """tf32 in ``all`` mode: F32 stays F32 with its low mantissa bits rounded away (float32r), after every cast
    op with an F32 array result, and on every operand of one that no cast op made."""
    provenance: list[tuple[str, str]] = []
    for computation in module.computations:
        rounded: dict[Instruction, Instruction] = {}
        finished: set[Instruction] = set()  # the rounded results of cast ops
        for instruction in list(computation.instructions):
            decision = plan.get(instruction)
            if decision is None or decision.cast is None:
                continue
            for operand in dict.fromkeys(instruction.operands):
                if operand in finished or not _f32_array(operand):
                    continue
                if operand not in rounded:
                    builder = Builder.before(instruction)
                    rounded[operand] = _tf32_cast(builder, operand, _array(operand))
                    provenance += provenance_of(instruction, builder.created)
                instruction.replace_operand(operand, rounded[operand])
            if _f32_array(instruction):
                builder = Builder.after(instruction)
                result = _tf32_cast(builder, instruction, _array(instruction))
                _redirect(computation, instruction, result, builder.created)
                finished.add(result)
                provenance += provenance_of(instruction, builder.created)
    return provenance


def _f32_array(instruction: Instruction) -> bool:
    return isinstance(instruction.shape, ArrayShape) and instruction.shape.element_type == "f32"


def _array(instruction: Instruction) -> ArrayShape:
    assert isinstance(instruction.shape, ArrayShape)
    return instruction.shape


def _redirect(computation: Computation, old: Instruction, new: Instruction, made: Iterable[Instruction]) -> None:
    """Every use of `old` outside `made` (the instructions computing `new` from it) becomes a use of `new`."""
    own = set(made)
    for user in list(old.users):
        if user not in own:
            user.replace_operand(old, new)
    if computation.root is old:
        computation.set_root(new)


# --------------------------------------------------------------------------- mixed-precision accumulation


def _to_f32(shape: ArrayShape) -> ArrayShape:
    return packed_size_dropped(shape, "f32")


#: Low-precision leaves → F32, for accumulations and their reducers (widening is exact in any cast rules).
WIDEN = Retyping(LOW_PRECISION, _to_f32, "neuron")


def _accumulate_in_f32(
    module: Module, plan: dict[Instruction, Decision], inherited: Inheritance
) -> list[tuple[str, str]]:
    """Each accumulating op the plan marks that holds a low-precision value: its reduce inputs widened, its
    reducer computing in F32, its result F32 and converted back once."""
    shapes = ShapeResolver(module)
    reducers = [c for c, d in inherited.items() if d is not None and d.accumulate_f32]
    ops = [
        i
        for i, d in plan.items()
        if d.accumulate_f32
        and i.opcode in ACCUMULATING
        and (WIDEN.changes(shapes(i)) or any(WIDEN.changes(shapes(o)) for o in i.operands))
    ]
    made: dict[Instruction, Instruction] = {}
    converts = Converts(module)
    for instruction in ops:  # a dot reads its narrow operands as they are, as the matrix engine does
        _in_f32(instruction, WIDEN, made, shapes, converts, widen_operands=instruction.opcode not in MATMUL)
    _, reducer_provenance = apply_plans([(c, plan_computation(c, shapes, WIDEN)) for c in reducers], shapes, WIDEN)
    return converts.provenance + reducer_provenance


def _engines_in_f32(module: Module, plan: dict[Instruction, Decision], storage: str) -> list[tuple[str, str]]:
    """``all`` mode: each cast op but an accumulation reads its operands widened to F32, computes in F32 and
    rounds its result to the cast type once, as the scalar and vector engines do ("compute internally in FP32
    and cast on input and output"); each rounding is then a convert, the device's cast under
    emulate-neuron-converts (XLA's own rounding inside a bf16 op is XLA's convert: f8e4m3 overflows to Inf)."""
    widen = Retyping(frozenset({storage}), _to_f32, "neuron")
    shapes = ShapeResolver(module)  # after the retyping
    made: dict[Instruction, Instruction] = {}
    converts = Converts(module)
    for instruction, decision in plan.items():
        if decision.cast is not None and instruction.opcode not in ACCUMULATING:
            _in_f32(instruction, widen, made, shapes, converts)
    return converts.provenance


def _in_f32(
    instruction: Instruction,
    widen: Retyping,
    made: dict[Instruction, Instruction],
    shapes: ShapeResolver,
    converts: Converts,
    *,
    widen_operands: bool = True,
) -> None:
    """`instruction` computing in F32: its narrow operands widened (one convert per value, `made`; not a dot's
    or convolution's, `widen_operands` false), its result F32 and converted back to the narrow type once for
    its users. Shapes the text left out are inferred (the result's before its operands change), and the
    result's new shape is then written out. The converts' provenance goes to `converts`."""
    shape = instruction.shape or shapes(instruction)
    wide: dict[Instruction, Instruction] = {}
    for operand in instruction.operands if widen_operands else ():
        if operand in wide:
            continue
        operand_shape = operand.shape or shapes(operand)
        if operand_shape is None or not widen.changes(operand_shape):
            continue
        if operand not in made:
            made[operand] = converts.chain(operand, operand_shape, widen.shape(operand_shape), instruction)[-1]
        wide[operand] = made[operand]
    if wide:
        instruction.replace_operands(wide)
    if shape is not None and widen.changes(shape):
        instruction.set_shape(widen.shape(shape))
        converts.provenance.append((instruction.name, instruction.name))
        rounded = converts.chain(instruction, widen.shape(shape), shape, instruction)
        parent = instruction.parent
        assert parent is not None
        _redirect(parent, instruction, rounded[-1], rounded)


# --------------------------------------------------------------------------- native accumulation


def _reduce_per_step(
    reduce: Instruction, shapes: ShapeResolver, stamps: dict[tuple[object, str], FrontendAttributes]
) -> list[tuple[str, str]]:
    """A low-precision reduce as the device computes it without mixed-precision accumulation: one step per
    element, in row-major order of the reduced dimensions, each rounded to the reduce's type.

    XLA's CPU reorders a reduce (windows of 32 steps, then the windows' sums: jax 0.10) and computes
    some in f32, so the steps are written as a ``while`` over the reduced elements, each applying the
    reducer with ``map`` (a bf16 ``map`` computes in f32 and rounds, step by step).
    """
    computation = reduce.parent
    module = computation.parent if computation is not None else None
    assert computation is not None and module is not None
    data, init = reduce.operands
    source, result, reducer = shapes(data), shapes(reduce), reduce.attributes.get("to_apply")
    assert isinstance(source, ArrayShape) and isinstance(result, ArrayShape) and isinstance(reducer, Computation)
    reduced = sorted(integers(reduce.attributes.get("dimensions")))
    kept = [d for d in range(source.rank) if d not in reduced]
    rows_shape = _default(source.element_type, (math.prod(source.dims[d] for d in reduced), *result.dims))
    row_shape = _default(source.element_type, (1, *result.dims))
    state_shape = TupleShape((_S32, result, rows_shape))

    def made(
        where: Computation,
        opcode: str,
        shape: Shape,
        operands: Sequence[Instruction] = (),
        attributes: dict[str, AttributeValue] | None = None,
        number: int | None = None,
        literal: HloLiteral | None = None,
    ) -> Instruction:
        made_name = module.unique_name(f"{reduce.name}.state" if number is not None else opcode)
        instruction = Instruction(made_name, opcode, shape, operands, attributes, literal, number, written_order=False)
        return where.append(instruction)

    def constant(where: Computation, value: int) -> Instruction:
        return made(where, "constant", _S32, literal=_s32(value))

    def part(state: Instruction, index: int) -> Instruction:
        return made(
            state.parent or computation,
            "get-tuple-element",
            state_shape.elements[index],
            [state],
            {"index": Int(index)},
        )

    condition = Computation(fresh_computation_name(module, f"{reduce.name}.steps"))
    state = made(condition, "parameter", state_shape, number=0)
    limit = constant(condition, rows_shape.dims[0])
    less: dict[str, AttributeValue] = {"direction": ComparisonDirection.LT}
    condition.set_root(made(condition, "compare", ArrayShape("pred"), [part(state, 0), limit], less))

    body = Computation(fresh_computation_name(module, f"{reduce.name}.step"))
    state = made(body, "parameter", state_shape, number=0)
    count, total, rows = (part(state, index) for index in range(3))
    zeros = [constant(body, 0)] * len(kept) if kept else []  # where each kept dimension starts
    sizes: dict[str, AttributeValue] = {"dynamic_slice_sizes": IntList(row_shape.dims)}
    row = made(body, "dynamic-slice", row_shape, [rows, count, *zeros], sizes)
    element = made(body, "reshape", result, [row])
    mapped: dict[str, AttributeValue] = {"dimensions": IntList(tuple(range(result.rank))), "to_apply": reducer}
    total = made(body, "map", result, [total, element], mapped)
    one = constant(body, 1)
    after = made(body, "add", _S32, [count, one])
    body.set_root(made(body, "tuple", state_shape, [after, total, rows]))
    module.add_computation(body, before=computation)  # as XLA prints a while's computations
    module.add_computation(condition, before=computation)

    builder = Builder.before(reduce)
    order = (*reduced, *kept)
    rows = data
    if order != tuple(range(source.rank)):  # the reduced dimensions first, in their order
        moved = _default(source.element_type, tuple(source.dims[d] for d in order))
        rows = builder.add("transpose", moved, [data], {"dimensions": IntList(order)})
    if rows.shape != rows_shape:
        rows = builder.add("reshape", rows_shape, [rows])
    start = builder.add("broadcast", result, [init], {"dimensions": IntList(())}) if result.rank else init
    first = builder.tuple([builder.constant(_s32(0)), start, rows], state_shape)
    loop = builder.add("while", state_shape, [first], {"condition": condition, "body": body})
    _stamp(loop, result.element_type, stamps)
    out = builder.get_tuple_element(loop, 1, result)
    computation.replace_all_uses(reduce, out)
    computation.remove(reduce)
    return list(provenance_of(reduce, [*builder.created, *condition.instructions, *body.instructions]))


_S32 = ArrayShape("s32")


def _s32(value: int) -> HloLiteral:
    return HloLiteral.from_value(_S32, np.array(value, np.int32))


def _default(element_type: str, dims: tuple[int, ...]) -> ArrayShape:
    return ArrayShape(element_type, dims, (False,) * len(dims), default_layout(len(dims)))
