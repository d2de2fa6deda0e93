"""The only door to jaxlib's private API: XLA's own HLO parser and printer, CPU compile, execute.

Imported lazily (jax costs ~0.7 s to import, which ``hloopt run`` must not pay).
Tested with jax/jaxlib 0.10.2, 0.11.2 and 0.12.0.1; the calls follow ``shared/recipes/xla_reference.py``.

Some inputs crash jaxlib (SIGSEGV/abort in the parser, the StableHLO
converter, the compiler or a custom call), so `IsolatedPool` (and its one-off
forms `isolated_map`, `isolated_call`) runs calls in long-lived worker processes
(``python -m hloopt.xla.bridge``) and turns a dead worker into an `XlaCrash` for
exactly the call it was running, naming its file, stage and custom calls, then
restarts the worker. Every call of `execution` (run, execute, compare, the CLI's)
goes through one, so XLA can neither kill nor log into the caller's process; the
calls here (`compile_cpu`, `execute`, `canonical`) run XLA in the process that
makes them, as do `formats.load`/`dump` and `hloopt.jax.jit`.

Compiling in a worker readies every custom call the installed jaxlib implements on
the CPU (`_ready_cpu_custom_calls`), as jax does for its own lowerings; in any other
process only what jax itself readied is (for `hloopt.jax.jit`, what its lowering calls).
"""

from __future__ import annotations

import os
import pickle
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import ModuleType
from typing import Any, BinaryIO

import numpy as np

from hloopt.errors import HloError, HloParseError, SourceLocation, definition_offset, locate
from hloopt.ir.element_types import NoNumpyType, numpy_dtype
from hloopt.ir.opcodes import JAXLIB_SINCE, OPCODES
from hloopt.ir.shape import ArrayShape
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

#: Called with each stage's name, and what it runs, as it starts; a worker uses it to tell its parent
#: where it is (set only in a worker process, which is how `isolated_call` knows it is in one).
_stage_listener: Callable[[str, str], None] | None = None


@contextmanager
def _stage(name: str, detail: str = "") -> Iterator[None]:
    """Run one stage, turning any jaxlib exception into an `XlaError` for that stage; `detail` is what
    a worker's death during it is blamed on (the custom calls a module runs)."""
    if _stage_listener is not None:
        _stage_listener(name, detail)
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
    if custom_calls and _stage_listener is not None:
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

_HEADER = struct.Struct("<Q")


def _send(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


#: How often a waiting parent looks at the clock and at the worker's stderr.
_POLL_SECONDS = 0.2
#: A worker that printed one of these is dying (the reason is already printed above the marker),
#: and jaxlib's abort handler can take seconds or hang while it symbolises the stack: kill it.
_FATAL_MARKERS = (b"*** Check failure stack trace", b"*** SIGSEGV", b"*** SIGABRT", b"*** SIGBUS", b"*** SIGFPE")
#: stderr lines that say why XLA died (glog fatal/error lines, failed checks).
_CAUSE = re.compile(r"^[FE]\d{4} |Check failed|RET_CHECK|\*\*\* SIG")


def _read_exact(fd: int, size: int, keep_waiting: Callable[[], bool] | None) -> bytes | None:
    """`size` bytes from `fd`; None on EOF (the worker died) or once `keep_waiting()` says stop."""
    chunks: list[bytes] = []
    while size:
        if keep_waiting is not None:
            while not select.select([fd], [], [], _POLL_SECONDS)[0]:
                if not keep_waiting():
                    return None
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int, keep_waiting: Callable[[], bool] | None) -> Any | None:
    header = _read_exact(fd, _HEADER.size, keep_waiting)
    if header is None:
        return None
    payload = _read_exact(fd, _HEADER.unpack(header)[0], keep_waiting)
    return None if payload is None else pickle.loads(payload)


class _Zygote:
    """``python -m hloopt.xla.bridge --zygote``: imports jax once, then forks ready workers.

    A worker that crashes costs a fork (~10 ms) instead of a fresh interpreter
    and jax import (~1 s), which matters when hundreds of corpus modules crash
    XLA. The zygote never starts a backend, so it has no XLA threads to fork.
    """

    def __init__(self) -> None:
        self._socket, theirs = socket.socketpair()
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", "hloopt.xla.bridge", "--zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()
        self._lock = threading.Lock()

    def spawn(self, stderr: int) -> tuple[int, int, int]:
        """A new worker writing its stderr to `stderr`: (pid, request fd, reply fd)."""
        with self._lock:
            socket.send_fds(self._socket, [b"spawn"], [stderr])
            message, fds, _, _ = socket.recv_fds(self._socket, 64, 2)
        if not message:
            raise RuntimeError("the XLA worker zygote died")
        return int(message), fds[0], fds[1]

    def reap(self, pid: int) -> int:
        """Wait for a worker that has exited or been killed; its return code (-N for signal N)."""
        with self._lock:
            try:
                self._socket.sendall(f"reap {pid}".encode())
                answer = self._socket.recv(64)
            except OSError:
                answer = b""
        # A zygote that is gone (the OOM killer, say) took its workers with it: they die with their parent.
        return int(answer) if answer else -signal.SIGKILL

    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        """End the zygote. It holds nothing to save, and an interpreter that has imported jax takes a fifth
        of a second to wind down (what a short `hloopt exec` would wait for): it is killed, not asked."""
        self._socket.close()
        self._process.kill()
        self._process.wait()


def _zygote_serve(fd: int) -> None:
    """Zygote loop: fork a worker per ``spawn`` (passing back its pipes), reap one per ``reap``."""
    import jax.extend  # noqa: F401  (the point of the zygote: imported once, inherited by every fork)
    import jaxlib._hlo  # noqa: F401
    from jax._src.interpreters import mlir  # noqa: F401

    _die_with_parent()
    channel = socket.socket(fileno=fd)
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 64, 1)
        if not message:
            return
        if message.startswith(b"reap "):
            channel.sendall(str(os.waitstatus_to_exitcode(os.waitpid(int(message[5:]), 0)[1])).encode())
            continue
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            _die_with_parent()
            channel.close()
            for target, source in ((0, request_read), (1, reply_write), (2, fds[0])):
                os.dup2(source, target)
            for unused in (request_read, request_write, reply_read, reply_write, fds[0]):
                os.close(unused)
            try:
                _serve()
            finally:
                os._exit(0)
        socket.send_fds(channel, [str(pid).encode()], [request_write, reply_read])
        for done in (request_read, request_write, reply_read, reply_write, fds[0]):
            os.close(done)


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so a worker stuck in an endless loop is not orphaned."""
    import ctypes

    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(1)


class _Worker:
    """One forked worker; its stderr goes to a file kept for crash reports."""

    def __init__(self, zygote: _Zygote) -> None:
        self._zygote = zygote
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- lives as long as the worker; `close` closes it
        self._pid, request, self._replies = zygote.spawn(self._stderr.fileno())
        self._requests = os.fdopen(request, "wb")
        self._returncode: int | None = None

    def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None, label: str | None
    ) -> tuple[str, Any]:
        """``("ok", value)``, ``("error", HloError)``, ``("bug", traceback)`` or ``("crash", XlaCrash)``,
        the crash said of `label` (the module's file) when given.

        After a crash the worker is gone (killed if it hung, past `timeout` or while dying).
        """
        stderr_start = os.fstat(self._stderr.fileno()).st_size
        watch = _Watch(self._stderr.fileno(), stderr_start, timeout)
        stage, detail = "start", ""
        try:
            _send(self._requests, (fn, args))
        except BrokenPipeError:
            pass  # died before reading: reported as a crash below
        else:
            while (message := _receive(self._replies, watch.keep_waiting)) is not None:
                kind, value = message
                if kind == "error":
                    return kind, _rebuilt(value)
                if kind != "stage":
                    return kind, value
                stage, detail = value
        return "crash", XlaCrash(stage, self._death_note(watch, stderr_start, detail), label)

    def _death_note(self, watch: _Watch, stderr_start: int, detail: str) -> str:
        """How the worker died, what it was running (`detail`), and the lines of its stderr that say why."""
        if watch.expired or watch.dying:
            os.kill(self._pid, signal.SIGKILL)
        code = self._reap()
        if watch.expired:
            note = f"worker timed out after {watch.timeout:g} s, killed"
        elif code == -signal.SIGKILL:
            note = "worker killed after a fatal XLA error"
        else:
            note = f"worker died with {signal.Signals(-code).name}" if code < 0 else f"worker exited with code {code}"
        lines = _read_from(self._stderr.fileno(), stderr_start).decode(errors="replace").splitlines()
        causes = [line.strip() for line in lines if _CAUSE.search(line)][:3]
        return "; ".join([f"{note} {detail}" if detail else note, *causes])

    def _reap(self) -> int:
        if self._returncode is None:
            self._returncode = self._zygote.reap(self._pid)
        return self._returncode

    def close(self) -> None:
        """End the worker (it is idle or dead, so nothing is lost) and reap it."""
        self._requests.close()
        if self._returncode is None:
            with suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        self._reap()
        os.close(self._replies)
        self._stderr.close()


class _Watch:
    """Decides, while a parent waits, whether a worker may still answer: deadline and death throes."""

    def __init__(self, stderr: int, offset: int, timeout: float | None) -> None:
        self._stderr = stderr
        self._start = self._offset = offset
        self.timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self.dying = False
        self.expired = False

    def keep_waiting(self) -> bool:
        now = time.monotonic()
        if self._deadline is not None and now > self._deadline:
            self.expired = True
            return False
        self.dying = self.dying or self._fatal_printed()
        return not self.dying

    def _fatal_printed(self) -> bool:
        start = max(self._offset - max(map(len, _FATAL_MARKERS)), self._start)
        new = _read_from(self._stderr, start)
        self._offset = start + len(new)
        return any(marker in new for marker in _FATAL_MARKERS)


def _read_from(fd: int, offset: int) -> bytes:
    """The rest of a file from `offset`, without moving the file position the worker shares."""
    return os.pread(fd, max(os.fstat(fd).st_size - offset, 0), offset)


class IsolatedPool:
    """Worker processes that run calls crash-isolated and outlive each `map`.

    A process that compares module after module (a batch worker) keeps one, so it pays
    for the zygote's jax import once rather than once per module; `isolated_map` is the
    one-off form. Use it from one thread at a time, and `close` it (or use ``with``).
    """

    def __init__(self, workers: int = 2) -> None:
        self.workers = max(1, workers)
        self._zygote: _Zygote | None = None
        self._idle: list[_Worker] = []

    def __enter__(self) -> IsolatedPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the zygote's interpreter and jax import now, without waiting for it, so that it runs
        while this process still reads its modules (`map` starts it anyway)."""
        if self._zygote is not None and not self._zygote.alive():
            self.close()  # killed since the last map (the OOM killer, say): start again
        if self._zygote is None:
            self._zygote = _Zygote()

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
        results: list[Any] = [None] * len(calls)
        if not calls:
            return results
        self.start()
        zygote = self._zygote
        assert zygote is not None  # started above
        pending = iter(range(len(calls)))
        lock = threading.Lock()
        failures: list[str] = []

        def drain() -> None:
            with lock:
                worker = self._idle.pop() if self._idle else None
            try:
                while not failures:
                    with lock:
                        index = next(pending, None)
                    if index is None:
                        return
                    if worker is None and not zygote.alive():  # killed during this map: every call left is lost
                        died = "the XLA zygote process died (killed, or out of memory)"
                        results[index] = XlaCrash("start", died, None if labels is None else labels[index])
                        continue
                    worker = worker or _Worker(zygote)
                    kind, value = worker.call(fn, calls[index], timeout, None if labels is None else labels[index])
                    if kind == "bug":
                        failures.append(value)
                        return
                    results[index] = value
                    if kind == "crash":
                        worker.close()
                        worker = None
            except Exception:
                failures.append(traceback.format_exc())
                if worker is not None:  # its state is unknown: it is not reused
                    worker.close()
                    worker = None
            finally:
                if worker is not None:
                    with lock:
                        self._idle.append(worker)

        threads = [threading.Thread(target=drain, daemon=True) for _ in range(min(self.workers, len(calls)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise RuntimeError(f"{getattr(fn, '__qualname__', fn)} raised in a worker:\n{failures[0]}")
        return results

    def close(self) -> None:
        """End the workers (idle, so nothing is lost) and the zygote; the pool can be used again after."""
        while self._idle:
            self._idle.pop().close()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None


def isolated_map(
    fn: Callable[..., Any],
    calls: Sequence[tuple[Any, ...]],
    *,
    workers: int = 2,
    timeout: float | None = None,
    labels: Sequence[str] | None = None,
) -> list[Any]:
    """``fn(*args)`` for each args tuple in `workers` fresh worker processes, as `IsolatedPool.map`."""
    with IsolatedPool(workers) as pool:
        return pool.map(fn, calls, timeout=timeout, labels=labels)


@contextmanager
def worker_pool(pool: IsolatedPool | None = None) -> Iterator[IsolatedPool | None]:
    """`pool`, or a one-worker pool for the block, started at once: its zygote imports jax while the caller
    prepares the call (parses, runs passes). None in a worker process, where `isolated_call` runs in place."""
    if _stage_listener is not None:
        yield None
    elif pool is not None:
        pool.start()
        yield pool
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
) -> Any:
    """``fn(*args)`` in a worker process (of `pool`, else a fresh one): an XLA crash becomes an `XlaCrash`
    said of `label`, not a dead caller. In a worker already, it runs here: the worker is the isolation."""
    if _stage_listener is not None:
        return fn(*args)
    labels = None if label is None else [label]
    if pool is None:
        (result,) = isolated_map(fn, [args], workers=1, timeout=timeout, labels=labels)
    else:
        (result,) = pool.map(fn, [args], timeout=timeout, labels=labels)
    if isinstance(result, HloError):
        raise result
    return result


def canonical_in_subprocess(texts: Sequence[str], workers: int = 2) -> list[str | HloError]:
    """XLA's canonical print of each text, or the error (`XlaError`/`XlaCrash`) in its place."""
    return isolated_map(canonical, [(text,) for text in texts], workers=workers)


#: An error on its way from a worker: its class, args and attributes.
_Shipped = tuple[type[HloError], tuple[Any, ...], dict[str, Any]]


def _shipped(error: HloError) -> _Shipped:
    """`error` as its class, args and attributes. An exception pickles as its class called on its args,
    which fails or loses data when its ``__init__`` takes other parameters (`HloParseError`'s location);
    an error that does not pickle even so goes as a plain HloError with the same text."""
    record: _Shipped = (type(error), error.args, dict(vars(error)))
    try:
        pickle.loads(pickle.dumps(record))
    except Exception:
        return HloError, (str(error),), {}
    return record


def _rebuilt(record: _Shipped) -> HloError:
    """The error `_shipped` sent, whole, without calling its ``__init__``."""
    cls, args, state = record
    error = cls.__new__(cls)
    error.args = args
    vars(error).update(state)
    return error


def _serve() -> None:
    """Worker loop: read ``(fn, args)`` frames on stdin, answer with stage and result frames."""
    global _stage_listener
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints from XLA or user code must not corrupt the frames
    _stage_listener = lambda name, detail: _send(replies, ("stage", (name, detail)))  # noqa: E731
    while (message := _receive(0, None)) is not None:
        fn, args = message
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except HloError as err:
            reply = ("error", _shipped(err))
        except Exception:
            reply = ("bug", traceback.format_exc())
        _send(replies, reply)


if __name__ == "__main__":
    from hloopt.xla import bridge as xla_bridge  # noqa: PLW0406 -- see below

    # The imported module, not __main__, so pickled classes resolve to hloopt.xla.bridge.*
    xla_bridge._zygote_serve(int(sys.argv[2]))
