"""``hloopt trace``'s runs: every instruction's value in A and B captured on the same inputs, in rounds
that stay under ``--max-bytes``, and B's instructions recomputed on A's operand values.

A round takes the next matched instructions (A's dependency order) that fit: one run of A made to
output them and the values their recomputation needs, one run of B, one of the f64 reference when it
is asked for, and one run of a module of B's instructions whose parameters are A's values
(`analysis.tracing.recompute`). Each round's arrays are measured (`arrays.tracing`) and dropped.
Everything here runs in an XLA worker (`trace_prepared`, `nan_prepared`), as `compare` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hloopt.analysis import tracing as graph
from hloopt.analysis import unrolling
from hloopt.arrays import ExecutionError
from hloopt.arrays.tracing import (
    BranchTrace,
    LoopTrace,
    NanOrigin,
    OutputTrace,
    Traced,
    TraceReport,
    first_nonfinite,
    instance_of,
    measure,
    path_back,
    value_at,
    verdict,
)
from hloopt.cast_engine import Numerics
from hloopt.errors import HloError
from hloopt.ir import Module
from hloopt.ir.module import Instruction
from hloopt.ir.shape import ArrayShape
from hloopt.support.tolerances import TRACE_ITERATIONS, TRACE_TOP
from hloopt.xla.bridge import Executable, IsolatedPool, host_spec, isolated_call, worker_pool
from hloopt.xla.running import (
    DEFAULT_MAX_BYTES,
    Prepared,
    _check_runnable,
    _compile,
    _host,
    _prepare,
    _shared_inputs,
    byte_size,
    numerics_sides,
    prepared_with_provenance,
)
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit


@dataclass(frozen=True)
class Side:
    """A module as it runs (`with_numerics`), and for each of its instructions (any computation's) the
    name, in the module traced, of the instruction it stands for."""

    prepared: Prepared
    origin: dict[str, str]
    label: str


def side(text: str, numerics: Numerics, label: str, passes: str | None = None, *, located: bool = True) -> Side:
    """`text` prepared to run, after `passes` when given, with the provenance of every pass composed
    back to `text`'s own instructions (`PipelineReport.provenance`)."""
    from hloopt.text.parser import parse

    names = [
        instruction.name for instruction in parse(text, label).instructions()
    ]  # a called one is traced once copied
    prepared, provenance = prepared_with_provenance(
        text, numerics, label, located=located and not passes, passes=passes
    )
    ran = parse(prepared.text, label)
    composed = {i.name: provenance[i.name] for i in ran.instructions() if i.name in provenance}
    return Side(prepared, graph.origins(ran, composed, names), label)


@dataclass(frozen=True)
class TraceJob:
    """What a worker needs for one trace: A, B, the reference when asked for (A's module prepared
    under XLA's numerics, widened in the worker), the inputs or their seed, and the memory cap."""

    a: Side
    b: Side
    reference: Side | None
    inputs: list[np.ndarray] | None
    seed: int
    max_bytes: int
    matched_by: str = "provenance"
    top: int = TRACE_TOP
    warnings: tuple[str, ...] = field(default=())
    iterations: int = TRACE_ITERATIONS


@dataclass
class _Running:
    """A module compiled once, its parsed IR, and its inputs: what each round's modules are made from."""

    module: Module
    executable: Executable
    inputs: list[np.ndarray]
    runs: int = 0

    def values(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        """The named entry instructions' values, from one run of a copy that outputs them."""
        if not names:
            return {}
        unique = list(dict.fromkeys(names))
        outputs = _run(graph.capture(self.module, unique), self.inputs, self.executable.name)
        self.runs += 1
        return dict(zip(unique, outputs))


def _run(module: Module, inputs: Sequence[np.ndarray], label: str) -> list[np.ndarray]:
    executable = _compile(Prepared(module.to_text(), ()), label)
    return executable(list(inputs))


@dataclass
class _Expanded:
    """A module with its calls, loops and conditionals brought into the entry (`unrolling`), each entry
    instruction's origin, and what ran: how often each loop, which branch each conditional."""

    module: Module
    origin: dict[str, str]
    loops: list[unrolling.Loop]
    branches: list[unrolling.Branch]
    runs: int


#: How many times control flow inside control flow is brought into the entry (each a run to see how it ran).
_DEPTH = 8


def _expanded(module: Module, origin: dict[str, str], inputs: Sequence[np.ndarray], label: str, cap: int) -> _Expanded:
    """`module` with its control flow in the entry, as it ran on `inputs`: one run per level of nesting
    tells how many times each loop ran and which branch each conditional took (`unrolling.counted`)."""
    instances: dict[str, unrolling.Instance] = {}
    loops: list[unrolling.Loop] = []
    branches: list[unrolling.Branch] = []
    kept: set[str] = set()
    runs = 0
    for _ in range(_DEPTH):
        module, made = unrolling.inlined(module)
        instances.update(made)
        whiles, selectors = unrolling.control_flow(module, kept)
        if not whiles and not selectors:
            break
        probe, counters = unrolling.counted(module, whiles)
        wanted = list(dict.fromkeys([*counters.values(), *selectors.values()]))
        values = dict(zip(wanted, _run(graph.capture(probe, wanted), inputs, label)))
        runs += 1
        counts = {name: int(values[counter]) for name, counter in counters.items()}
        endless = [name for name, count in counts.items() if count >= unrolling.ENDLESS]
        if endless:
            named = ", ".join(f"%{origin.get(name, name)}" for name in endless)
            raise ExecutionError(
                f"{label}: while {named} did not end within {unrolling.ENDLESS} iterations on these inputs: "
                "an endless loop cannot be traced (nor run)"
            )
        taken = {
            name: unrolling.branch_taken(values[selector], unrolling.branch_count(module, name))
            for name, selector in selectors.items()
        }
        module, made, ran, chosen, middle = unrolling.unrolled(module, counts, taken, cap)
        instances.update(made)
        loops += ran
        branches += chosen
        kept |= middle
    module, made = unrolling.inlined(module)
    instances.update(made)
    return _Expanded(module, unrolling.entry_origins(module, origin, instances), loops, branches, runs)


def _leaf_bytes(executable: Executable) -> int:
    total = 0
    for leaf in executable.parameters:
        dims, dtype = host_spec(leaf)
        total += int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    return total


def _budget(max_bytes: int, used: int, labels: str) -> int:
    if used >= max_bytes:
        raise ExecutionError(f"{labels}: inputs need {byte_size(used)}, over the limit of {byte_size(max_bytes)}")
    return max_bytes - used


def _rounds(
    costs: Sequence[tuple[int, set[str]]], shared: Callable[[str], int], budget: int, what: str
) -> list[list[int]]:
    """Consecutive groups of items whose own bytes plus the bytes of the names they share (each counted once
    per group) stay within `budget`; an item alone over it is refused."""
    groups: list[list[int]] = []
    current: list[int] = []
    used, names = 0, set[str]()
    for index, (own, needs) in enumerate(costs):
        extra = own + sum(shared(name) for name in needs - names)
        if current and used + extra > budget:
            groups.append(current)
            current, used, names = [], 0, set()
            extra = own + sum(shared(name) for name in needs)
        if extra > budget:
            raise ExecutionError(
                f"{what}: tracing one instruction needs {byte_size(extra)}, over the limit of {byte_size(budget)} "
                "left after the inputs"
            )
        current.append(index)
        used += extra
        names |= needs
    if current:
        groups.append(current)
    return groups


def trace_prepared(job: TraceJob) -> TraceReport:
    """The trace of B against A (`TraceJob`), in this process: what a worker runs."""
    from hloopt.text.parser import parse

    labels = [job.a.label, job.b.label]
    run_a, run_b = _compile(job.a.prepared, labels[0]), _compile(job.b.prepared, labels[1])
    _check_runnable([run_a, run_b], labels, job.max_bytes)
    shared = _shared_inputs([run_a, run_b], labels, job.inputs, job.seed)
    inputs_a, inputs_b = _prepare(run_a, shared, job.seed), _prepare(run_b, shared, job.seed)
    ran_a = _expanded(parse(job.a.prepared.text, labels[0]), job.a.origin, inputs_a, labels[0], job.iterations)
    ran_b = _expanded(parse(job.b.prepared.text, labels[1]), job.b.origin, inputs_b, labels[1], job.iterations)
    module_a, module_b = ran_a.module, ran_b.module
    a = _Running(module_a, run_a, inputs_a, ran_a.runs)
    b = _Running(module_b, run_b, inputs_b, ran_b.runs)
    pairs = graph.matched(module_a, ran_a.origin, module_b, ran_b.origin)
    reference, reference_of, reference_error = _reference(job, a.inputs)
    b_to_a = {pair.b: pair.a for pair in pairs}
    sizes_a = {i.name: graph.byte_count(i) for i in module_a.entry.instructions if graph.traced(i)}
    sizes_b = {i.name: graph.byte_count(i) for i in module_b.entry.instructions if graph.traced(i)}
    elements = {i.name: graph.element_count(i) for i in module_a.entry.instructions if graph.traced(i)}
    a_names = {pair.a: pair.a for pair in pairs}
    feeds = [graph.region_inputs(module_b, pair.b, b_to_a) for pair in pairs]
    feeds_a = [graph.region_inputs(module_a, pair.a, a_names) for pair in pairs]
    costs = []
    for pair, fed in zip(pairs, feeds):
        wide = 0 if reference is None else 8 * elements[pair.a]  # the f64 value
        own = sizes_a[pair.a] + 2 * sizes_b[pair.b] + wide
        costs.append((own + sizes_a[pair.a], {b_to_a[name] for name in fed or ()}))
    used = _leaf_bytes(run_a) + _leaf_bytes(run_b) + (0 if reference is None else _leaf_bytes(reference.executable))
    budget = _budget(job.max_bytes, used, " and ".join(labels))
    groups = _rounds(costs, lambda name: 2 * sizes_a[name], budget, " and ".join(labels))
    traced: list[Traced] = []
    recomputes = 0
    for group in groups:
        batch = [pairs[index] for index in group]
        fed = [feeds[index] for index in group]
        fed_a = [feeds_a[index] for index in group]
        values_a = a.values(
            [
                *(p.a for p in batch),
                *(b_to_a[n] for names in fed for n in names or ()),
                *(n for names in fed_a for n in names or ()),
            ]
        )
        values_b = b.values([p.b for p in batch])
        values_r = (
            {}
            if reference is None
            else reference.values([reference_of[p.origin] for p in batch if p.origin in reference_of])
        )
        local = _recomputed(module_b, [(p.b, names) for p, names in zip(batch, fed)], values_a, b_to_a, labels[1])
        own = _recomputed(module_a, [(p.a, names) for p, names in zip(batch, fed_a)], values_a, a_names, labels[0])
        recomputes += bool(local) + bool(own)
        for pair in batch:
            value_a, value_b = values_a[pair.a], values_b[pair.b]
            value_r = values_r.get(reference_of.get(pair.origin, ""))
            traced.append(
                Traced(
                    pair.origin,
                    pair.a,
                    pair.b,
                    pair.scope,
                    measure(value_a, value_b),
                    None if pair.b not in local or pair.a not in own else measure(own[pair.a], local[pair.b]),
                    None if value_r is None else verdict(value_a, value_b, value_r),
                    *instance_of(pair.origin),
                )
            )
    by_a = {t.a: t for t in traced}
    inputs = graph.matched_inputs(module_a, set(by_a))
    outputs = tuple(
        OutputTrace(
            index,
            name,
            () if name is None else path_back(name, by_a, inputs),
            None if name is None or name not in by_a else by_a[name].verdict,
        )
        for index, name in enumerate(graph.outputs_of(module_a))
    )
    executions = a.runs + b.runs + recomputes + (0 if reference is None else reference.runs)
    return TraceReport(
        tuple(traced),
        outputs,
        len(groups),
        executions,
        "names" if job.matched_by == "names" else "provenance",
        None if job.reference is None else "f64",
        reference_error,
        tuple(dict.fromkeys((*job.warnings, *job.a.prepared.warnings, *job.b.prepared.warnings))),
        job.top,
        _loops(ran_a, ran_b, job.iterations),
        _branches(ran_a, ran_b),
        tuple((name, tuple(ran_a.origin.get(c, c) for c in callers)) for name, callers in unrolling.covered(module_a)),
    )


def _loops(a: _Expanded, b: _Expanded, cap: int) -> tuple[LoopTrace, ...]:
    """Each loop of A as it ran in A and in B (matched by origin), and the iterations traced."""
    in_b = {b.origin.get(loop.site, loop.site): loop for loop in b.loops}
    traces = []
    for loop in a.loops:
        site = a.origin.get(loop.site, loop.site)
        other = in_b.get(site)
        traces.append(LoopTrace(site, loop.iterations, None if other is None else other.iterations, loop.traced, cap))
    return tuple(traces)


def _branches(a: _Expanded, b: _Expanded) -> tuple[BranchTrace, ...]:
    """Each conditional of A, the branch it took in A and in B, and how many it has."""
    in_b = {b.origin.get(branch.site, branch.site): branch for branch in b.branches}
    traces = []
    for branch in a.branches:
        site = a.origin.get(branch.site, branch.site)
        other = in_b.get(site)
        traces.append(BranchTrace(site, branch.taken, None if other is None else other.taken, branch.branches))
    return tuple(traces)


def _reference(job: TraceJob, inputs: Sequence[np.ndarray]) -> tuple[_Running | None, dict[str, str], str | None]:
    """The f64 twin of the reference side, ready to run on A's inputs widened, and which of its instructions
    stands for each origin; or why there is none."""
    from hloopt.text.parser import parse
    from hloopt.xla.bridge import XlaError

    if job.reference is None:
        return None, {}, None
    try:
        wide, back = graph.widened(parse(job.reference.prepared.text, "reference"))
        origin = dict(job.reference.origin)
        origin.update({made: origin[of] for made, of in back.items() if of in origin})
        executable = _compile(Prepared(wide.to_text(), ()), "f64 reference")
    except (HloError, XlaError) as err:
        return None, {}, str(err)
    widened = [x.astype(host_spec(leaf)[1]) for x, leaf in zip(inputs, executable.parameters)]
    ran = _expanded(wide, origin, widened, "f64 reference", job.iterations)
    chosen = graph.representatives(ran.module, ran.origin)
    return _Running(ran.module, executable, widened, ran.runs), {o: i.name for o, i in chosen.items()}, None


def _recomputed(
    module: Module,
    batch: Sequence[tuple[str, list[str] | None]],
    values_a: dict[str, np.ndarray],
    to_a: dict[str, str],
    label: str,
) -> dict[str, np.ndarray]:
    """`module`'s instructions named in `batch` computed from A's values of the instructions they read
    (`to_a` names each in A); one whose recomputation would need a value not at hand is left out.
    A's own instructions are recomputed the same way, so that the local error compares two values made
    alike: XLA's CPU code for an instruction can differ by a bit between a whole module and a small one
    (what it fuses, what it contracts to a fused multiply-add)."""
    roots = [root for root, fed in batch if fed is not None]
    if not roots:
        return {}
    recomputing, parameters = graph.recompute(module, roots, set(to_a))
    fed = []
    for name, parameter in zip(parameters, recomputing.entry.parameters()):
        shape = parameter.shape
        assert isinstance(shape, ArrayShape)
        fed.append(values_a[to_a[name]].astype(host_spec(shape)[1]))
    return dict(zip(roots, _run(recomputing, fed, label)))


def nan_prepared(
    traced: Side, inputs: list[np.ndarray] | None, seed: int, max_bytes: int, iterations: int = TRACE_ITERATIONS
) -> NanOrigin | None:
    """The first instruction, in dependency order, whose value has a NaN or Inf while every operand's is
    finite (instructions without operands, parameters and constants, are not origins), in this process;
    inside loops and branches too, named by its origin (``x@while.3#2``)."""
    from hloopt.text.parser import parse

    executable = _compile(traced.prepared, traced.label)
    _check_runnable([executable], [traced.label], max_bytes)
    given = _prepare(executable, inputs, seed)
    ran = _expanded(parse(traced.prepared.text, traced.label), traced.origin, given, traced.label, iterations)
    module = ran.module
    run = _Running(module, executable, given, ran.runs)
    order = [i for i in module.entry.post_order() if graph.traced(i)]
    budget = _budget(max_bytes, _leaf_bytes(executable), traced.label)
    sizes = [graph.byte_count(i) for i in order]
    found: dict[str, tuple[int, ...] | None] = {}
    for group in _rounds([(size, set[str]()) for size in sizes], lambda _: 0, budget, traced.label):
        values = run.values([order[index].name for index in group])
        found.update({name: first_nonfinite(value) for name, value in values.items()})
    finite: dict[str, bool] = {}

    def is_finite(instruction: Instruction) -> bool:
        if instruction.name in found:
            return found[instruction.name] is None
        if instruction.name not in finite:
            finite[instruction.name] = all(is_finite(operand) for operand in instruction.operands)
        return finite[instruction.name]

    for instruction in order:
        index = found[instruction.name]
        if index is None or not instruction.operands or not all(is_finite(o) for o in instruction.operands):
            continue
        operands = [o.name for o in instruction.operands if graph.traced(o)]
        values = run.values([instruction.name, *operands])
        value = values[instruction.name]

        def shown(name: str) -> str:  # a copy by its origin (``l@while.3#2``), others as they ran
            copied = ran.origin.get(name, "")
            return copied if "@" in copied else name

        return NanOrigin(
            shown(instruction.name),
            instruction.opcode,
            index,
            str(value[index]),
            tuple((shown(name), value_at(values[name], index)) for name in operands),
        )
    return None


def trace(
    a: str,
    b: str | None = None,
    passes: str | None = None,
    numerics: str | Sequence[str] = "xla",
    reference: bool = False,
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    iterations: int = TRACE_ITERATIONS,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TraceReport:
    """`hloopt trace` from Python: B (a module's text, matched by names) or A after `passes` (matched by
    provenance) against A, on the same inputs, in an XLA worker; `reference` adds the f64 verdict."""
    sides = numerics_sides(numerics)
    with worker_pool(pool) as workers:
        side_b = side(a if b is None else b, sides[1], "B", passes)
        job = TraceJob(
            side(a, sides[0], "A"),
            side_b,
            side(a, "xla", "A (f64)") if reference else None,
            _host(inputs),
            seed,
            max_bytes,
            "provenance" if b is None else "names",
            iterations=iterations,
        )
        return isolated_call(trace_prepared, job, timeout=limit(timeout), label="A against B", pool=workers)


def nan_origin(
    module: str,
    passes: str | None = None,
    numerics: Numerics = "xla",
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    iterations: int = TRACE_ITERATIONS,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> NanOrigin | None:
    """`hloopt trace --nan` from Python: where `module` (after `passes`) first makes a NaN or Inf."""
    with worker_pool(pool) as workers:
        traced = side(module, numerics, "module", passes)
        args = (traced, _host(inputs), seed, max_bytes, iterations)
        return isolated_call(nan_prepared, *args, timeout=limit(timeout), label="module", pool=workers)
