"""The only door to jaxlib's private API: XLA's own HLO parser and printer, CPU compile, execute.

Imported lazily (jax costs ~0.7 s to import, which ``hloopt run`` must not pay).
Tested with jax/jaxlib 0.10.2, 0.11.2 and 0.12.0.1; the calls follow ``shared/recipes/xla_reference.py``.

Some inputs crash jaxlib (SIGSEGV/abort in the parser, the StableHLO
converter, the compiler or a custom call), so `IsolatedPool` (and its one-off
forms `isolated_map`, `isolated_call`) runs calls in long-lived worker processes
(`hloopt.support.pool`: fresh interpreters that import jax, never forks) and turns
a dead worker into an `XlaCrash` for exactly the call it was running, naming its
file, stage and custom calls; the next call gets a new worker. Every call of
`execution` (run, execute, compare, the CLI's) goes through one, so XLA can
neither kill nor log into the caller's process; the
calls here (`compile_cpu`, `execute`, `canonical`) run XLA in the process that
makes them, as do `formats.load`/`dump` and `hloopt.jax.jit`.

Compiling in a worker readies every custom call the installed jaxlib implements on
the CPU (`_ready_cpu_custom_calls`), as jax does for its own lowerings; in any other
process only what jax itself readied is (for `hloopt.jax.jit`, what its lowering calls).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import ModuleType
from typing import Any

import numpy as np

from hloopt.errors import HloError, HloParseError, SourceLocation, definition_offset, locate
from hloopt.ir.element_types import NoNumpyType, numpy_dtype
from hloopt.ir.opcodes import JAXLIB_SINCE, OPCODES
from hloopt.ir.shape import ArrayShape
from hloopt.support.pool import Bug, Crash, WorkerPool, in_worker, report_stage
from hloopt.xla.diagnostics import mlir_errors


class XlaError(HloError):
    """XLA rejected a module: the failing stage plus XLA's own message, in one line.

    `instruction` is the instruction the message is about, when XLA names one; `at` then places the
    error on that instruction's line of the module's text (``FILE:LINE:COL``, the line and a caret).
    """

    def __init__(
        self,
        stage: str,
        message: str,
        source: str | None = None,
        instruction: str | None = None,
        location: SourceLocation | None = None,
        source_line: str = "",
    ) -> None:
        self.stage = stage
        self.message = message.strip()
        self.source = source
        self.instruction = instruction
        self.location = location
        self.source_line = source_line
        # All of them, so that the error pickles (a worker sends it to its parent) and copies whole.
        super().__init__(stage, self.message, source, instruction, location, source_line)

    def __str__(self) -> str:
        said = f"XLA {self.stage} failed: {self.message}"
        if self.location is not None:
            return HloParseError(said, self.location, self.source_line).render()
        return f"{self.source}: {said}" if self.source else said

    def named(self, source: str) -> XlaError:
        """The same error, said of `source` (a file, a chunk) unless it names one already."""
        if self.source is not None or self.location is not None:
            return self
        return type(self)(self.stage, self.message, source, self.instruction)

    def at(self, text: str, filename: str) -> XlaError:
        """The error located on the line of `text` that defines its instruction (`text` must be the
        module as the user wrote it, in HLO text); itself when there is no such line."""
        if self.instruction is None:
            return self
        found = definition_offset(text, self.instruction)
        if found is None:
            return self.named(filename)
        location, line = locate(text, found, filename)
        return type(self)(self.stage, self.message, filename, self.instruction, location, line)


class XlaCrash(XlaError):
    """A worker process died (signal, abort, timeout) while XLA was at `stage`."""


def _one_line(message: str) -> tuple[str, str | None]:
    """XLA's message as one line, and the instruction it names: MLIR diagnostics (the StableHLO
    converter's and verifier's refusals) keep only their error lines, each said of its instruction."""
    errors = mlir_errors(message)
    if not errors:
        return " ".join(line.strip() for line in message.strip().splitlines()), None
    said = "; ".join(f"%{error.name}: {error.message}" if error.name else error.message for error in errors)
    return said, next((error.name for error in errors if error.name), None)


# --- in-process XLA ------------------------------------------------------------------------


@contextmanager
def _stage(name: str, detail: str = "") -> Iterator[None]:
    """Run one stage, turning any jaxlib exception into an `XlaError` for that stage; `detail` is what
    a worker's death during it is blamed on (the custom calls a module runs)."""
    report_stage(name, detail)  # in a worker, its parent learns where a death happened
    try:
        yield
    except HloError:
        raise
    except Exception as err:  # jaxlib raises JaxRuntimeError, MLIRError, ValueError, TypeError…
        message, instruction = (str(err), None) if name == "parse" else _one_line(str(err))
        raise XlaError(name, message or type(err).__name__, instruction=instruction) from None


def _backend() -> Any:
    import jax.extend

    return jax.extend.backend.get_backend("cpu")


@cache
def _ready_cpu_custom_calls() -> None:
    """Register and initialise every custom-call target jaxlib implements on the CPU, as jax does for its
    own lowerings. jax registers LAPACK's targets on import but fills in their LAPACK routines (read from
    scipy) only when it lowers a linalg op, so a module made elsewhere that calls one jumped to a null
    pointer (SIGSEGV); jaxlib's sparse kernels are registered only by ``jax.experimental.sparse``. So: every
    CPU registration of the jaxlib wrappers jax loads (``jax._src.lib``), and every native CPU kernel
    module's ``initialize`` (``jaxlib.cpu``), whatever targets a given jaxlib has."""
    import importlib
    import pkgutil

    import jax.ffi
    import jaxlib.cpu
    from jax._src import lib as jax_lib
    from jaxlib import xla_client

    registered = xla_client.custom_call_targets("cpu")
    for wrapper in list(vars(jax_lib).values()):
        registrations: Callable[[], dict[str, list[tuple[str, Any, int]]]] | None = getattr(
            wrapper, "registrations", None
        )
        if not isinstance(wrapper, ModuleType) or not callable(registrations):
            continue
        for name, target, api_version in registrations().get("cpu", []):
            if name not in registered:
                jax.ffi.register_ffi_target(name, target, platform="cpu", api_version=api_version)
    for kernels in pkgutil.iter_modules(jaxlib.cpu.__path__):
        initialize = getattr(importlib.import_module(f"jaxlib.cpu.{kernels.name}"), "initialize", None)
        if callable(initialize):
            initialize()


def _parse(text: str) -> Any:
    import jaxlib._hlo as hlo

    try:
        with _stage("parse"):
            return hlo.hlo_module_from_text(text)
    except XlaError as err:
        newer = newer_syntax(text)
        if not newer:
            raise
        raise XlaError("parse", f"{err.message}\n{newer}") from None


def jaxlib_version() -> tuple[int, int]:
    """The installed jaxlib's (major, minor)."""
    from importlib.metadata import version

    major, minor = version("jaxlib").split(".")[:2]
    return int(major), int(minor)


#: How to spot each `JAXLIB_SINCE` construct in a text: opcodes where an instruction's opcode
#: stands (after its shape or its ``=``, async sugar included), ``<opcode> <attribute>`` keys by
#: their line, the others by their own pattern.
_CONSTRUCT_PATTERNS = {
    "compact get-tuple-element operands (%x#1)": re.compile(r"[\w.\-]#\d"),
    "origin trees separated by commas": re.compile(r"origin=\{\{[^\n]*\},\s*\{"),
    'origin call hierarchies (["name"])': re.compile(r"origin=\{[^\n]*,\s*\[\s*\""),
}


def _construct_pattern(construct: str) -> re.Pattern[str]:
    """What finds `construct` in a module's text."""
    pattern = _CONSTRUCT_PATTERNS.get(construct)
    if pattern is not None:
        return pattern
    if construct in OPCODES:
        return re.compile(rf"(?:[\]}})]\s+|=\s*){re.escape(construct)}(?:-start|-update|-done)?\(")
    opcode, attribute = construct.split(" ")
    return re.compile(rf"\b{re.escape(opcode)}(?:-start)?\([^\n]*\b{re.escape(attribute)}=")


def newer_syntax(text: str) -> str:
    """Why the installed jaxlib may refuse `text`: the constructs in it that it is too old for."""
    installed = jaxlib_version()
    found: list[str] = []
    for construct, since in JAXLIB_SINCE.items():
        if since <= installed:
            continue
        if _construct_pattern(construct).search(text):
            named = f"opcode {construct}" if construct in OPCODES else construct
            found.append(f"{named} (jaxlib reads it from {since[0]}.{since[1]})")
    if not found:
        return ""
    shown = ".".join(map(str, installed))
    return f"the installed jaxlib {shown} is older than this module's syntax: " + "; ".join(found)


def canonical(text: str) -> str:
    """The module as XLA itself prints it after parsing (raises `XlaError` at stage parse)."""
    return _parse(text).to_string()


def _leaf_shapes(shape: Any) -> list[ArrayShape]:
    """The array leaves of an XLA shape, in the order PJRT flattens tuples."""
    if shape.is_tuple():
        return [leaf for element in shape.tuple_shapes() for leaf in _leaf_shapes(element)]
    if shape.is_token():
        return [ArrayShape("token")]
    dims = tuple(shape.dimensions())
    dynamic = tuple(shape.is_dynamic_dimension(i) for i in range(len(dims)))
    # The element type from the shape's text (``s2[4]{0}``): `xla_element_type()` goes through jaxlib's Python
    # enum, which lacks types XLA runs (jaxlib 0.10 has no S2/U2: "26 is not a valid PrimitiveType").
    return [ArrayShape(str(shape).partition("[")[0], dims, dynamic)]


def host_spec(shape: ArrayShape) -> tuple[tuple[int, ...], np.dtype]:
    """The numpy shape and dtype that carry a leaf; tokens are ``bool[0]`` as in jax."""
    if shape.element_type == "token":
        return (0,), np.dtype(np.bool_)
    try:
        return shape.dims, numpy_dtype(shape.element_type)
    except NoNumpyType as err:
        raise XlaError("execute", f"{shape.to_text()}: {err}") from None


@dataclass(frozen=True)
class Executable:
    """A module compiled for the CPU; `parameters`/`results` are flattened array leaves."""

    name: str
    parameters: tuple[ArrayShape, ...]
    results: tuple[ArrayShape, ...]
    _loaded: Any = field(repr=False, compare=False)
    #: ``%name (target)`` of each custom call: native code outside XLA, what a crash while running is blamed on.
    custom_calls: tuple[str, ...] = ()

    @property
    def _running(self) -> str:
        """What a worker's death while this runs is said to have happened in."""
        if not self.custom_calls:
            return f"while running {self.name}"
        return f"while running {self.name}, whose custom calls are: {', '.join(self.custom_calls)}"

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run once; tuple results come back flattened in order."""
        from jax._src import config

        self._check_inputs(inputs)
        with _stage("execute", self._running), config.enable_x64(True):  # x64 keeps f64/s64 inputs as they are
            results = self._loaded.execute_sharded(self._placed(inputs)).disassemble_into_single_device_arrays()
            return [
                np.zeros((0,), np.bool_) if leaf.element_type == "token" else np.asarray(shards[0])
                for leaf, shards in zip(self.results, results)
            ]

    def on_device(self, inputs: Sequence[np.ndarray]) -> Callable[[], None]:
        """A call that runs the module on `inputs`, copied to the device once here, and waits for it:
        no host transfer either way, which is what timing the module itself needs. A module that
        donates an input (input_output_alias) runs once; XLA refuses the donated buffer after that."""
        from jax._src import config

        self._check_inputs(inputs)
        with _stage("execute"), config.enable_x64(True):
            buffers = self._placed(inputs)

        def run() -> None:
            with _stage("execute", self._running):
                for shards in self._loaded.execute_sharded(buffers).disassemble_into_single_device_arrays():
                    shards[0].block_until_ready()

        return run

    def _placed(self, inputs: Sequence[np.ndarray]) -> list[Any]:
        """The inputs copied to the device as buffers XLA owns."""
        import jax

        device = _backend().devices()[0]
        # jaxlib 0.12 puts a 64-byte-aligned array on the CPU without copying it, and XLA cannot take such a
        # buffer over: a `must-alias` parameter (input_output_alias) then fails to execute. A copy made on the
        # device is XLA's own.
        placed = [jax.device_put(np.ascontiguousarray(x), device) for x in inputs]
        return [jax.device_put(x, device, may_alias=False) for x in placed]

    def _check_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        """Say which input is wrong here, rather than let PJRT fail with a buffer-size message."""
        if len(inputs) != len(self.parameters):
            raise XlaError("execute", f"{self.name} takes {len(self.parameters)} inputs, got {len(inputs)}")
        for index, (array, leaf) in enumerate(zip(inputs, self.parameters)):
            dims, dtype = host_spec(leaf)
            if tuple(array.shape) != dims or array.dtype != dtype:
                raise XlaError(
                    "execute",
                    f"input {index} must be {leaf.to_text()} ({dtype.name}{list(dims)}), "
                    f"got {array.dtype.name}{list(array.shape)}",
                )


def compile_cpu(text: str) -> Executable:
    """Parse, convert to StableHLO (which also runs XLA's shape checks) and compile for the CPU."""
    return _compile_cached(text)


@lru_cache(maxsize=8)
def _compile_cached(text: str) -> Executable:
    """Compiling twice gives the same code, so `compare(m, m)` compiles once."""
    import jaxlib._hlo as hlo
    from jax._src.interpreters import mlir as jax_mlir

    # jax offers the compiler client and the MLIR context only under _src (no public spelling).
    from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]
    from jax._src.lib.mlir import ir  # pyright: ignore[reportPrivateImportUsage]

    module = _parse(text)
    proto = module.as_serialized_hlo_module_proto()
    with _stage("convert"):
        program = hlo.XlaComputation(proto).program_shape()
        parameters = tuple(leaf for shape in program.parameter_shapes() for leaf in _leaf_shapes(shape))
        results = tuple(_leaf_shapes(program.result_shape()))
        stablehlo = _jax.mlir.hlo_to_stablehlo(proto)
    backend = _backend()
    # XLA's print of the module names its custom calls; most modules have none, and are not printed again.
    custom_calls = _custom_calls(module.to_string()) if "custom-call" in text else []
    if custom_calls and in_worker():
        # Registering and initialising every target is for a worker process alone: in the caller's process
        # (`hloopt.jax.jit`) jax readied what its lowering calls, and a library call does not register
        # targets process-wide, initialise kernel modules or import scipy behind its caller's back.
        _ready_cpu_custom_calls()
    with jax_mlir.make_ir_context():
        with _stage("convert"):
            mlir_module = ir.Module.parse(stablehlo)
        try:
            with _stage("compile", f"while compiling {module.name}"):
                loaded = backend.compile_and_load(mlir_module, _jax.DeviceList((backend.devices()[0],)))
        except XlaError as err:
            raise _unimplemented_call(err, custom_calls) or err from None
    return Executable(module.name, parameters, results, loaded, tuple(f"%{n} ({t})" for n, t in custom_calls))


#: A custom call in XLA's text: the instruction's name and its target.
_CUSTOM_CALL = re.compile(
    r'^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=[^\n]*?\bcustom-call\([^\n]*?\bcustom_call_target="([^"]*)"', re.M
)
#: XLA's CPU compiler refusing a custom-call target nothing registered (untyped, then typed FFI).
_UNREGISTERED = re.compile(
    r"No registered implementation for (?:\w+ )?custom call to (\S+) for|No FFI handler registered for (\S+) on"
)


def _custom_calls(text: str) -> list[tuple[str, str]]:
    """(instruction name, target) of each custom call in XLA's text of a module."""
    return [(found[1], found[2]) for found in _CUSTOM_CALL.finditer(text)]


def _unimplemented_call(err: XlaError, custom_calls: Sequence[tuple[str, str]]) -> XlaError | None:
    """XLA's refusal of a custom-call target nothing implements on the CPU, said of the instruction that
    calls it (XLA names only the target); None for any other error."""
    found = _UNREGISTERED.search(err.message)
    if found is None:
        return None
    target = found[1] or found[2]
    callers = [name for name, called in custom_calls if called == target]
    if not callers:
        return None
    version = ".".join(map(str, jaxlib_version()))
    said = f"calls custom-call target {target}, which the installed jaxlib {version} does not implement on the CPU"
    return XlaError("compile", f"%{callers[0]} {said}", instruction=callers[0])


def execute(text: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile `text` for the CPU and run it once on `inputs` (flattened parameter leaves)."""
    return compile_cpu(text)(inputs)


# --- isolation in worker processes ---------------------------------------------------------

#: What an XLA worker imports as it starts (while its caller prepares the call), and its environment: jax for
#: a pool that compiles, runs or converts to StableHLO; jaxlib's parser alone (a sixth of jax's import) for one
#: that only reads and prints HLO. A call imports whatever it needs either way: this only moves the wait.
_PRELOAD = {
    True: ("hloopt.xla.bridge", "jax.extend", "jaxlib._hlo", "jax._src.interpreters.mlir"),
    False: ("hloopt.xla.bridge", "jaxlib._hlo"),
}


def _worker_env() -> dict[str, str]:
    return {"JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}


class IsolatedPool:
    """XLA worker processes that run calls crash-isolated and outlive each `map` (a `WorkerPool`).

    A process that compares module after module (a batch worker) keeps one, so it pays
    for a worker's jax import once rather than once per module; `isolated_map` is the
    one-off form. Use it from one thread at a time, and `close` it (or use ``with``). `jax`: whether its
    workers import jax as they start (False for a pool that only parses, prints and serialises HLO).
    """

    def __init__(self, workers: int = 2, *, jax: bool = True) -> None:
        self.workers = max(1, workers)
        self._pool = WorkerPool(self.workers, preload=_PRELOAD[jax], env=_worker_env())

    def __enter__(self) -> IsolatedPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, workers: int | None = None) -> None:
        """Start `workers` of the workers' interpreters and jax imports (all by default) now, without waiting
        for them, so that they run while this process still reads its modules (`map` starts what it needs)."""
        self._pool.start(workers)

    def map(
        self,
        fn: Callable[..., Any],
        calls: Sequence[tuple[Any, ...]],
        *,
        timeout: float | None = None,
        labels: Sequence[str] | None = None,
    ) -> list[Any]:
        """``fn(*args)`` for each args tuple in the pool's workers; results in order.

        `fn` must be importable by name (it is pickled by reference). An `HloError`
        (an `XlaError`, or an `XlaCrash` for a worker that died or ran past
        `timeout` seconds, said of the call's entry in `labels`: its file) takes the
        place of that call's result. Each worker streams its stage, so a crash is
        pinned on the one call that caused it without bisecting, and only that call
        is lost (its worker is replaced). Any other exception in a worker is a bug
        and is raised here as a RuntimeError.
        """
        results = self._pool.map(fn, calls, timeout=timeout)
        for index, outcome in enumerate(results):
            if isinstance(outcome, Bug):
                raise RuntimeError(f"{getattr(fn, '__qualname__', fn)} raised in a worker:\n{outcome.traceback}")
            if isinstance(outcome, Crash):
                results[index] = XlaCrash(outcome.stage, outcome.message, None if labels is None else labels[index])
        return results

    def close(self) -> None:
        """End the workers (idle, so nothing is lost); the pool can be used again after."""
        self._pool.close()


def isolated_map(
    fn: Callable[..., Any],
    calls: Sequence[tuple[Any, ...]],
    *,
    workers: int = 2,
    timeout: float | None = None,
    labels: Sequence[str] | None = None,
    jax: bool = True,
) -> list[Any]:
    """``fn(*args)`` for each args tuple in `workers` fresh worker processes, as `IsolatedPool.map`."""
    with IsolatedPool(workers, jax=jax) as pool:
        return pool.map(fn, calls, timeout=timeout, labels=labels)


@contextmanager
def worker_pool(pool: IsolatedPool | None = None) -> Iterator[IsolatedPool | None]:
    """`pool`, or a one-worker pool for the block, started at once: its worker imports jax while the caller
    prepares the call (parses, runs passes). Without a `pool`, None in a worker process, where `isolated_call`
    runs in place (a batch worker passes its own pool for --verify-numerics)."""
    if pool is not None:
        pool.start()
        yield pool
    elif in_worker():
        yield None
    else:
        with IsolatedPool(1) as own:
            own.start()
            yield own


def isolated_call(
    fn: Callable[..., Any],
    *args: Any,
    timeout: float | None = None,
    label: str | None = None,
    pool: IsolatedPool | None = None,
    jax: bool = True,
) -> Any:
    """``fn(*args)`` in a worker process (of `pool`, else a fresh one, importing jax as it starts if `jax`):
    an XLA crash becomes an `XlaCrash` said of `label`, not a dead caller. In a worker already and given
    no `pool`, it runs here: the worker is the isolation."""
    if pool is None and in_worker():
        return fn(*args)
    labels = None if label is None else [label]
    if pool is None:
        (result,) = isolated_map(fn, [args], workers=1, timeout=timeout, labels=labels, jax=jax)
    else:
        (result,) = pool.map(fn, [args], timeout=timeout, labels=labels)
    if isinstance(result, HloError):
        raise result
    return result


def canonical_in_subprocess(texts: Sequence[str], workers: int = 2) -> list[str | HloError]:
    """XLA's canonical print of each text, or the error (`XlaError`/`XlaCrash`) in its place."""
    return isolated_map(canonical, [(text,) for text in texts], workers=workers, jax=False)
