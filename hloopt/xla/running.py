"""Run HLO modules on XLA's CPU backend, and run several on the same inputs to compare them.

Inputs are made from the parameter types XLA reports after compiling (tuple
parameters flattened, as PJRT takes them), so what runs is exactly what XLA
understood. `compare` runs A, the reference, and B, and `compare_passes` every
stage of a pipeline; `hloopt.arrays.comparing` measures how their outputs differ.

Under ``numerics="neuron"`` a copy of the module has its converts replaced by
the device's (`emulate-neuron-converts`) just before it is compiled, so any XLA
backend computes what the Neuron device would; the caller's module is untouched.

The caller's process parses and prepares each module (`with_numerics`) while a
worker process imports jax; XLA compiles and runs only in the worker
(`run_prepared`, `compare_prepared`), so XLA can neither crash the caller nor log into it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias, get_args

import numpy as np

from hloopt.arrays import ExecutionError
from hloopt.arrays.comparing import (
    CompareReport,
    Drift,
    OutputComparison,
    PassRow,
    compare_outputs,
    same_values,
    value_kind,
)
from hloopt.arrays.distribution import ErrorDistribution, distribution
from hloopt.arrays.snapshots import Leaf
from hloopt.cast_engine import Numerics
from hloopt.ir import Module
from hloopt.ir.shape import ArrayShape
from hloopt.support.tolerances import DEFAULT_ATOL, DEFAULT_RTOL
from hloopt.xla.bridge import Executable, IsolatedPool, XlaError, compile_cpu, host_spec, isolated_call, worker_pool
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit

#: Inputs plus outputs above this are refused before anything is allocated.
DEFAULT_MAX_BYTES = 1 << 30

ModuleLike: TypeAlias = Module | str
NUMERICS: tuple[Numerics, ...] = get_args(Numerics)
#: The pass that gives a module the device's numerics.
EMULATION_PASS = "emulate-neuron-converts"


class ExecutionWarning(UserWarning):
    """What a pass preparing the executed copy warns of: a convert the emulation leaves with XLA's
    semantics (a type pair the device lacks), or a constant printed without its values."""


# --- numerics --------------------------------------------------------------------------------


def check_numerics(value: str) -> Numerics:
    """`value` if it names numerics, else an error that lists the choices."""
    for numerics in NUMERICS:
        if value == numerics:
            return numerics
    raise ExecutionError(f"numerics must be {' or '.join(NUMERICS)}, not {value!r}")


def numerics_sides(value: str | Sequence[str]) -> tuple[Numerics, Numerics]:
    """A numerics for each side of a comparison: one value (``neuron``) for both, or ``A,B`` each its own."""
    parts = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    if len(parts) == 1:
        both = check_numerics(parts[0])
        return both, both
    if len(parts) == 2:
        return check_numerics(parts[0]), check_numerics(parts[1])
    raise ExecutionError(f"numerics takes one value for both sides or A,B, not {len(parts)} values: {value!r}")


def _text(module: ModuleLike) -> str:
    return module if isinstance(module, str) else module.to_text()


class Prepared(NamedTuple):
    """A module ready for XLA: the text to compile, and the warnings of the passes that made it."""

    text: str
    warnings: tuple[str, ...]


def with_numerics(
    module: ModuleLike, numerics: Numerics, label: str = "module", *, located: bool = True, passes: str | None = None
) -> Prepared:
    """The text to run for `module`, and the warnings of the passes that made it (pass name first).

    This is where every module is prepared before XLA compiles it (`run`, `compare`, `compare_passes`,
    the CLI and ``--verify-numerics`` all come here): a copy is parsed, what XLA would crash on or
    refuse is refused with the instruction named, and the copy is made CPU-runnable (an optimised
    dump's fusions become calls, its bitcasts the transposes and reshapes they stand for, …); under
    ``neuron`` the device's converts follow. Neither the caller's `Module` nor its file changes,
    and a module nothing had to change runs exactly as given. A module XLA's compiler would refuse
    (`check_executable`) is refused at its instruction: on its line of the text when `module` is text
    and `located` (the text is the module as its user wrote it, not one converted from a .pb or .mlir).
    `passes` (a spec: ``compare``'s --passes for B and the auto-cast of ``--neuron-cc-flags``, in registry
    order) run on the copy first, under `numerics` (``fold-constant-converts`` folds with it), and
    the copy is then checked and prepared, so the device's converts emulate the casts they make too.
    """
    return prepared_with_provenance(module, numerics, label, located=located, passes=passes)[0]


def prepared_with_provenance(
    module: ModuleLike, numerics: Numerics, label: str = "module", *, located: bool = True, passes: str | None = None
) -> tuple[Prepared, dict[str, str]]:
    """`with_numerics`, and the provenance of the preparation's passes (an instruction of the text to run
    → the one of `module` it comes from), which ``trace`` follows from what ran back to what was written."""
    from hloopt.analysis.verifier import check_executable
    from hloopt.passes.cpu_runnable import CpuRunnable, NotCpuRunnable
    from hloopt.passes.pipeline import run_pipeline
    from hloopt.text.parser import parse

    text = _text(module)
    copy = parse(text, label)
    steps = [CpuRunnable(), *([EMULATION_PASS] if check_numerics(numerics) == "neuron" else [])]
    original: Callable[[], Module] | None = lambda: parse(text, label)  # noqa: E731
    given = run_pipeline(copy, passes, numerics=numerics, original=original) if passes else None
    if given is not None and given.changed:
        original = None  # the preparation's input is then the passes' output, verified after the last of them
    # After the passes (an instruction they made is named, one of the text located on its line).
    check_executable(copy, text if located and isinstance(module, str) else None, label)
    try:
        report = run_pipeline(copy, steps, original=original)
    except NotCpuRunnable as err:
        raise NotCpuRunnable(f"{label}: {err}") from None
    runs = [*(given.passes if given is not None else ()), *report.passes]
    notes = tuple(f"{p.name}: {w}" for p in runs for w in p.warnings)
    provenance = report.provenance
    if given is not None:
        given.note(tuple(report.provenance.items()))
        provenance = given.provenance
    changed = report.changed or (given is not None and given.changed)
    return Prepared(copy.to_text() if changed else text, notes), provenance


# --- inputs ----------------------------------------------------------------------------------


def _compile(prepared: Prepared, label: str) -> Executable:
    """Compile, naming the module in XLA's error (its messages say only "line:column")."""
    try:
        return compile_cpu(prepared.text)
    except XlaError as err:
        raise err.named(label) from None


def _random_leaf(leaf: ArrayShape, rng: np.random.Generator) -> np.ndarray:
    """Normal floats rounded once into their own dtype, small ints, fair booleans."""
    import ml_dtypes

    dims, dtype = host_spec(leaf)
    kind = value_kind(dtype)
    if kind == "bool":
        return rng.integers(0, 2, dims).astype(np.bool_)
    if kind == "int":
        info = ml_dtypes.iinfo(dtype)
        return rng.integers(max(info.min, -8), min(info.max, 8), dims, endpoint=True).astype(dtype)
    values = rng.standard_normal(dims)
    if kind == "complex":
        values = values + 1j * rng.standard_normal(dims)
    elif float(ml_dtypes.finfo(dtype).min) > 0:  # unsigned formats such as f8e8m0fnu
        values = np.abs(values)
    return values.astype(dtype)


def random_inputs(parameters: Sequence[ArrayShape], seed: int = 0) -> list[np.ndarray]:
    """One array per parameter leaf; leaf i depends only on (seed, i, its type)."""
    return [_random_leaf(leaf, np.random.default_rng([seed, index])) for index, leaf in enumerate(parameters)]


def convert_exact(array: np.ndarray, leaf: ArrayShape, label: str) -> np.ndarray:
    """`array` as `leaf`'s dtype, refusing any value the conversion would change.

    npz files return ml_dtypes arrays (bf16, fp8…) as raw bytes: those bytes are
    taken as the leaf's type when the item sizes agree.
    """
    dims, dtype = host_spec(leaf)
    array = np.asarray(array)
    if array.dtype.kind == "V" and array.dtype.itemsize == dtype.itemsize:
        array = array.view(dtype)
    if tuple(array.shape) != dims:
        raise ExecutionError(f"{label}: needs shape {list(dims)} ({leaf.to_text()}), got {list(array.shape)}")
    if array.dtype == dtype:
        return array
    try:
        with np.errstate(invalid="ignore", over="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            converted = array.astype(dtype)
        changed = int(np.count_nonzero(~same_values(array, converted)))
    except (TypeError, ValueError) as err:
        raise ExecutionError(f"{label}: cannot convert {array.dtype.name} to {leaf.element_type}: {err}") from None
    if changed:
        raise ExecutionError(
            f"{label}: {changed} of {array.size} values change when converted from "
            f"{array.dtype.name} to {leaf.element_type}, so the input would not be exact"
        )
    return converted


def _check_runnable(executables: Sequence[Executable], labels: Sequence[str], max_bytes: int) -> None:
    """Refuse before allocating (a corpus module may declare f32[1000000,100000]), and refuse
    dynamic results: PJRT hands back their buffers padded to the bound, the padding undefined."""
    total = 0
    for executable, label in zip(executables, labels):
        for index, leaf in enumerate(executable.results):
            if any(leaf.dynamic):
                raise ExecutionError(
                    f"{label}: output {index} is {leaf.to_text()}, a dynamic shape; the CPU run "
                    "returns it padded to its bound with undefined padding, so it cannot be read or compared"
                )
        for leaf in executable.parameters + executable.results:
            dims, dtype = host_spec(leaf)
            total += math.prod(dims) * dtype.itemsize
    if total > max_bytes:
        said = " and ".join(dict.fromkeys(labels))
        raise ExecutionError(
            f"{said}: inputs and outputs need {byte_size(total)}, over the limit of {byte_size(max_bytes)}"
        )


def byte_size(count: int) -> str:
    """`count` bytes in the largest binary unit that keeps it at least 1 (``10 bytes``, ``1.5 KiB``,
    ``2 GiB``), so that a small limit does not read as ``0.0 MiB``."""
    if count < 1024:
        return "1 byte" if count == 1 else f"{count} bytes"
    size, unit = count / 1024, "KiB"
    for larger in ("MiB", "GiB", "TiB", "PiB"):
        if size < 1024:
            break
        size, unit = size / 1024, larger
    return f"{size:,.1f}".removesuffix(".0") + f" {unit}"


def _prepare(executable: Executable, inputs: Sequence[np.ndarray] | None, seed: int) -> list[np.ndarray]:
    if inputs is None:
        return random_inputs(executable.parameters, seed)
    _check_count(executable, inputs)
    return [convert_exact(x, leaf, f"input {i}") for i, (x, leaf) in enumerate(zip(inputs, executable.parameters))]


def _check_count(executable: Executable, inputs: Sequence[np.ndarray]) -> None:
    if len(inputs) != len(executable.parameters):
        raise ExecutionError(
            f"{executable.name} takes {len(executable.parameters)} inputs (tuple parameters flattened), "
            f"got {len(inputs)}"
        )


# --- execute ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Execution:
    """One run: the flattened parameter and result leaves, the inputs used, the outputs, and
    the emulation's warnings under ``neuron`` numerics."""

    parameters: tuple[ArrayShape, ...]
    results: tuple[ArrayShape, ...]
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    warnings: tuple[str, ...] = ()


def run(
    module: ModuleLike,
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    label: str = "module",
    numerics: Numerics = "xla",
    *,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Execution:
    """Compile for the CPU and run once under `numerics`; without `inputs`, make them from `seed`.

    XLA runs in a worker process (one of `pool`'s, else one started for this call, importing jax while
    this process parses the module and runs its passes), so a module that crashes XLA, or compiles and
    runs for longer than `timeout` seconds (0 or None: no limit), raises an `XlaCrash` naming `label`
    instead of killing or hanging the caller, and XLA's logging stays out of the caller's terminal.
    """
    with worker_pool(pool) as workers:
        prepared = with_numerics(module, numerics, label)
        args = (prepared, _host(inputs), seed, max_bytes, label)
        return isolated_call(run_prepared, *args, timeout=limit(timeout), label=label, pool=workers)


def _host(inputs: Sequence[Any] | None) -> list[np.ndarray] | None:
    """The inputs as numpy arrays (jax arrays among them too), which is how they travel to a worker."""
    return None if inputs is None else [np.asarray(array) for array in inputs]


def run_prepared(
    prepared: Prepared, inputs: Sequence[np.ndarray] | None, seed: int, max_bytes: int, label: str
) -> Execution:
    """`run` of a module `with_numerics` prepared, in this process: what a worker runs (`IsolatedPool.map`)."""
    executable = _compile(prepared, label)
    _check_runnable([executable], [label], max_bytes)
    inputs_used = _prepare(executable, inputs, seed)
    outputs = executable(inputs_used)
    return Execution(executable.parameters, executable.results, tuple(inputs_used), tuple(outputs), prepared.warnings)


def execute(
    module: ModuleLike,
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    numerics: Numerics = "xla",
    *,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> list[np.ndarray]:
    """The outputs of one CPU run, tuple results flattened in order (tokens are ``bool[0]``).

    XLA runs in a worker process, as in `run`, within `timeout` seconds: pass an `IsolatedPool` to run
    many modules in one worker rather than start one per call. Each warning of the passes that
    prepared the run (`with_numerics`) is an `ExecutionWarning`.
    """
    execution = run(module, inputs, seed, max_bytes, numerics=numerics, pool=pool, timeout=timeout)
    for note in execution.warnings:
        warnings.warn(note, ExecutionWarning, stacklevel=2)
    return list(execution.outputs)


# --- compare ---------------------------------------------------------------------------------


def _shared_inputs(
    executables: Sequence[Executable], labels: Sequence[str], inputs: Sequence[np.ndarray] | None, seed: int
) -> list[np.ndarray]:
    """Inputs every module can take exactly: random ones, made for the first, are rounded through
    each other module's types too."""
    first, *others = executables
    for executable, label in zip(others, labels[1:]):
        if len(first.parameters) != len(executable.parameters):
            raise ExecutionError(
                f"{labels[0]} takes {len(first.parameters)} inputs, {label} takes {len(executable.parameters)}"
            )
        for index, (pa, pb) in enumerate(zip(first.parameters, executable.parameters)):
            if pa.dims != pb.dims:
                raise ExecutionError(f"input {index}: {labels[0]} takes {pa.to_text()}, {label} takes {pb.to_text()}")
    if inputs is not None:
        return list(inputs)
    shared = random_inputs(first.parameters, seed)
    for executable in others:
        for index, leaf in enumerate(executable.parameters):
            _, dtype = host_spec(leaf)
            if dtype != shared[index].dtype:
                shared[index] = shared[index].astype(dtype).astype(shared[index].dtype)
    return shared


@dataclass(frozen=True)
class _Runs:
    """Several modules run on the same inputs: each one's executable and outputs, the emulation's warnings."""

    executables: list[Executable]
    outputs: list[list[np.ndarray]]
    labels: list[str]
    warnings: tuple[str, ...]

    def comparison(self, a: int, b: int, rtol: float, atol: float) -> tuple[OutputComparison, ...]:
        """Module `b` against the reference `a`, output by output."""
        outputs_a, outputs_b = self.outputs[a], self.outputs[b]
        if len(outputs_a) != len(outputs_b):
            raise ExecutionError(
                f"{self.labels[a]} has {len(outputs_a)} outputs, {self.labels[b]} has {len(outputs_b)}"
            )
        results = zip(outputs_a, outputs_b, self.executables[a].results, self.executables[b].results)
        return tuple(
            compare_outputs(i, x, y, (ra.element_type, rb.element_type), rtol, atol)
            for i, (x, y, ra, rb) in enumerate(results)
        )

    def distributions(self, a: int, b: int, compared: Sequence[OutputComparison]) -> tuple[ErrorDistribution, ...]:
        """How the error of each output of module `b` against `a` is spread (`comparison`'s `compared`)."""
        pairs = zip(self.outputs[a], self.outputs[b], compared)
        return tuple(distribution(c.index, x, y, c.worst_index) for x, y, c in pairs)


def _run_all(
    modules: Sequence[tuple[Prepared, str]], inputs: Sequence[np.ndarray] | None, seed: int, max_bytes: int
) -> _Runs:
    """Compile every prepared (module, label), check the memory once, and run each on shared inputs."""
    executables = [_compile(prepared, label) for prepared, label in modules]
    labels = [label for _, label in modules]
    _check_runnable(executables, labels, max_bytes)
    shared = _shared_inputs(executables, labels, inputs, seed)
    outputs = [executable(_prepare(executable, shared, seed)) for executable in executables]
    notes = tuple(dict.fromkeys(note for prepared, _ in modules for note in prepared.warnings))
    return _Runs(executables, outputs, labels, notes)


def compare(
    a: ModuleLike,
    b: ModuleLike,
    inputs: Sequence[np.ndarray] | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    labels: tuple[str, str] = ("A", "B"),
    numerics: str | Sequence[str] = "xla",
    *,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    distributions: bool = False,
) -> CompareReport:
    """Run A (the reference) and B on the same inputs, converted exactly to each one's types.

    `numerics` is one value for both sides or one per side (``"xla,neuron"`` or ``("xla", "neuron")``):
    ``compare(m, m, numerics="xla,neuron")`` is how far XLA is from the device on `m`. XLA runs in a
    worker process, as in `run`; `timeout` bounds the whole comparison (both compiles and runs).
    `distributions`: the report also holds each output's binned error (`CompareReport.distributions`).
    """
    sides = numerics_sides(numerics)
    with worker_pool(pool) as workers:
        prepared = [with_numerics(a, sides[0], labels[0])]
        same = sides[0] == sides[1] and (a is b or (isinstance(a, str) and a == b))
        # One module on both sides is prepared once (and compiled once: `compile_cpu` caches by text).
        prepared.append(prepared[0] if same else with_numerics(b, sides[1], labels[1]))
        modules = list(zip(prepared, labels))
        args = (modules, _host(inputs), rtol, atol, seed, max_bytes, distributions)
        pair = " against ".join(labels)
        return isolated_call(compare_prepared, *args, timeout=limit(timeout), label=pair, pool=workers)


def compare_prepared(
    modules: Sequence[tuple[Prepared, str]],
    inputs: Sequence[np.ndarray] | None,
    rtol: float,
    atol: float,
    seed: int,
    max_bytes: int,
    distributions: bool = False,
) -> CompareReport:
    """`compare` of the modules `with_numerics` prepared (A's, B's, each with its label), in this process: what
    a worker runs (`IsolatedPool.map`)."""
    runs = _run_all(modules, inputs, seed, max_bytes)
    outputs = runs.comparison(0, 1, rtol, atol)
    spread = runs.distributions(0, 1, outputs) if distributions else None
    return CompareReport(outputs, rtol, atol, seed if inputs is None else None, runs.warnings, None, spread)


def compare_recorded(
    prepared: Prepared,
    label: str,
    inputs: Sequence[np.ndarray],
    recorded: Sequence[Leaf],
    rtol: float,
    atol: float,
    max_bytes: int,
    distributions: bool = False,
) -> CompareReport:
    """A module run on a snapshot's arguments against the result the snapshot recorded (the reference, A),
    in this process: what a worker runs for ``compare SNAPSHOT``."""
    executable = _compile(prepared, label)
    _check_runnable([executable], [label], max_bytes)
    outputs = executable(_prepare(executable, inputs, 0))
    if len(outputs) != len(recorded):
        raise ExecutionError(f"{label} has {len(outputs)} outputs, the snapshot records {len(recorded)}")
    comparisons = tuple(
        compare_outputs(index, leaf.array, output, (leaf.element_type, result.element_type), rtol, atol)
        for index, (leaf, output, result) in enumerate(zip(recorded, outputs, executable.results))
    )
    spread = None
    if distributions:
        pairs = zip(recorded, outputs, comparisons)
        spread = tuple(distribution(c.index, leaf.array, output, c.worst_index) for leaf, output, c in pairs)
    return CompareReport(comparisons, rtol, atol, None, prepared.warnings, None, spread)


def compare_passes(
    before: ModuleLike,
    after: ModuleLike,
    passes: Sequence[tuple[str, ModuleLike]],
    inputs: Sequence[np.ndarray] | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    labels: tuple[str, str] = ("before", "after"),
    numerics: Numerics = "xla",
    *,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    distributions: bool = False,
) -> CompareReport:
    """`compare(before, after)` plus a row per pass: `passes` holds (pass name, module after it) for
    each pass that changed the module, in run order. All run under the same numerics and inputs,
    and a module text that occurs twice (the last pass's and `after`) runs once. XLA runs in a
    worker process, as in `run`; `timeout` bounds all of it."""
    texts = [_text(module) for module in (before, *(module for _, module in passes), after)]
    names = [labels[0], *(f"{labels[0]} after {name}" for name, _ in passes), labels[1]]
    first_label: dict[str, str] = {}
    for text, label in zip(texts, names):
        first_label.setdefault(text, label)
    position = {text: index for index, text in enumerate(first_label)}
    at = [position[text] for text in texts]
    with worker_pool(pool) as workers:
        modules = [(with_numerics(text, numerics, label), label) for text, label in first_label.items()]
        args = (modules, at, [name for name, _ in passes], _host(inputs), rtol, atol, seed, max_bytes, distributions)
        pair = " against ".join(labels)
        return isolated_call(_compare_passes, *args, timeout=limit(timeout), label=pair, pool=workers)


def _compare_passes(
    modules: Sequence[tuple[Prepared, str]],
    at: Sequence[int],
    passes: Sequence[str],
    inputs: Sequence[np.ndarray] | None,
    rtol: float,
    atol: float,
    seed: int,
    max_bytes: int,
    distributions: bool,
) -> CompareReport:
    """`compare_passes` in the worker: `modules` are the distinct prepared modules, and `at` gives the one
    for the input, each pass's output and the result, in that order."""
    runs = _run_all(modules, inputs, seed, max_bytes)

    def drift(a: int, b: int) -> Drift:
        return Drift.of(runs.comparison(at[a], at[b], rtol, atol))

    rows = tuple(PassRow(name, drift(0, stage), drift(stage - 1, stage)) for stage, name in enumerate(passes, start=1))
    outputs = runs.comparison(at[0], at[-1], rtol, atol)
    spread = runs.distributions(at[0], at[-1], outputs) if distributions else None
    return CompareReport(outputs, rtol, atol, seed if inputs is None else None, runs.warnings, rows, spread)
