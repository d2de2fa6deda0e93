"""Crash-isolating worker processes: the one pool that XLA calls and batch files both run in.

A worker is a fresh interpreter started with `subprocess` (``python -c PROGRAM``), never a fork:
the caller may hold jax, whose threads a fork copies without their locks, and multiprocessing's
``spawn`` and ``forkserver`` re-import the caller's ``__main__``, which breaks a script without an
``if __name__ == "__main__"`` guard. Workers are kept across calls. A call that kills its worker
(a segfault, an abort, the OOM killer, a timeout) comes back as a `Crash` for that call alone, naming
the last stage the call reported (`report_stage`) and the lines of the worker's stderr that say why;
the next call gets a new worker.

No worker outlives its parent: each runs in its own process group (a terminal's Ctrl-C reaches
only the parent, which ends them), ignores SIGINT, removes its temporary files and exits on
SIGTERM, and exits when a pipe that only its parent holds reaches end of file (the parent died,
even by SIGKILL). A worker's stdout and stderr are never its parent's: it writes to a file the
parent reads for crash reports, so a pipe reading the parent's output ends when the parent does.
"""

from __future__ import annotations

import importlib
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, BinaryIO, NoReturn

from hloopt.errors import HloError
from hloopt.support.fileio import discard_partial_writes

#: What a worker runs; its arguments are the descriptors it serves, its parent's pid (a marker for
#: finding workers in ``ps``) and the modules it imports before its first call.
PROGRAM = "import sys; from hloopt.support.pool import _serve; _serve(sys.argv[1:])"

#: How long a worker has to act on SIGTERM (remove a temporary file, exit) before it is killed.
TERMINATION_SECONDS = 10.0
#: How often a waiting parent looks at the clock and at the worker's stderr.
_POLL_SECONDS = 0.2
#: A worker that printed one of these is dying of the signal named (the reason is already printed above
#: the marker), and jaxlib's abort handler can take seconds or hang while it symbolises the stack: kill
#: it. The crash names the signal it was dying of, whichever of the two ends came first.
_FATAL_MARKERS = {
    b"*** Check failure stack trace": "SIGABRT",
    b"*** SIGSEGV": "SIGSEGV",
    b"*** SIGABRT": "SIGABRT",
    b"*** SIGBUS": "SIGBUS",
    b"*** SIGFPE": "SIGFPE",
}
#: stderr lines that say why a worker died (glog fatal/error lines, failed checks).
_CAUSE = re.compile(r"^[FE]\d{4} |Check failed|RET_CHECK|\*\*\* SIG")
_HEADER = struct.Struct("<Q")


@dataclass(frozen=True)
class Crash:
    """A call whose worker died: the stage it last reported (``start`` before any), what that stage
    said it ran, and how the worker died (with its stderr's lines that say why)."""

    stage: str
    detail: str
    how: str
    causes: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """How it died and what it was running, then the causes: ``worker died with SIGSEGV while compiling m``."""
        return "; ".join([f"{self.how} {self.detail}" if self.detail else self.how, *self.causes])


@dataclass(frozen=True)
class Bug:
    """A call that raised something other than an `HloError`: a bug, with the worker's traceback."""

    traceback: str


# --- in a worker ---------------------------------------------------------------------------

#: Set in a worker process only: sends a stage to the parent.
_stage_listener: Callable[[str, str], None] | None = None


def in_worker() -> bool:
    """Whether this process is a pool's worker (which is its own isolation)."""
    return _stage_listener is not None


def report_stage(name: str, detail: str = "") -> None:
    """Tell the parent which stage the current call is in, and what it runs (what a death is blamed on)."""
    if _stage_listener is not None:
        _stage_listener(name, detail)


def _serve(argv: Sequence[str]) -> NoReturn:
    """A worker's life: ``(fn, args)`` frames in, stage and result frames out, until its parent is gone."""
    global _stage_listener
    requests, replies, life = (int(fd) for fd in argv[:3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it then ends its workers
    _on_terminate_discard_writes()
    threading.Thread(target=_outlive_no_parent, args=(life,), name="hloopt-parent", daemon=True).start()
    outbox = os.fdopen(replies, "wb")
    os.dup2(2, 1)  # stray prints from XLA or user code must not corrupt the frames
    _stage_listener = lambda name, detail: _send(outbox, ("stage", (name, detail)))  # noqa: E731
    code = 0
    try:
        for module in argv[4:]:
            importlib.import_module(module)
        while (message := _receive(requests, None)) is not None:
            fn, args = message
            outbox.write(_BEGUN)  # the call's time limit counts from here, not from this worker's start
            outbox.flush()
            try:
                reply = _frame(("ok", fn(*args)))
            except HloError as err:
                reply = _frame(("error", _shipped(err)))
            except Exception:  # a result that does not pickle too
                reply = _frame(("bug", traceback.format_exc()))
            outbox.write(reply)
            outbox.flush()
    except BaseException:  # a bug in the loop itself: in the worker's log; the parent sees the call's worker die
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _outlive_no_parent(life: int) -> None:
    """Wait on the pipe only the parent holds open; at its end (the parent died, even by SIGKILL), exit.

    ``PR_SET_PDEATHSIG`` would not do: it fires when the *thread* that started the worker ends, and
    a pool starts workers from short-lived threads.
    """
    while os.read(life, 1):
        pass
    discard_partial_writes()
    os._exit(1)


def _on_terminate_discard_writes() -> None:
    """On SIGTERM a worker leaves no temporary file and exits, whatever its threads are doing.

    A Python handler alone would not do: it runs in the main thread at its next bytecode, so a SIGTERM
    that lands just before the main thread blocks (reading the next request, a FIFO, a sleep) waits
    there forever. So SIGTERM is blocked, in this thread and so in every thread started after it (numpy's,
    XLA's), and one thread waits for it.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=_await_termination, name="hloopt-terminate", daemon=True).start()


def _await_termination() -> None:
    signum = signal.sigwait({signal.SIGTERM})
    discard_partial_writes()
    os._exit(128 + signum)


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


# --- framing -------------------------------------------------------------------------------


def _frame(message: Any) -> bytes:
    """`message` pickled, after its length."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(payload)) + payload


#: How long a worker may take to start (an interpreter and its imports, on a loaded machine), on top of a
#: call's time limit, before it is taken up.
START_SECONDS = 60.0

#: What a worker says as it takes up a call.
_BEGUN = _frame(("begun", None))


def _send(stream: BinaryIO, message: Any) -> None:
    stream.write(_frame(message))
    stream.flush()


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


# --- in the parent -------------------------------------------------------------------------


class _Worker:
    """One worker process, its pipes and the file its stderr goes to (kept for crash reports)."""

    def __init__(self, preload: Sequence[str], env: Mapping[str, str] | None) -> None:
        # Pipes are not inheritable (PEP 446): a worker started by another thread meanwhile gets none of these.
        # Out of descriptors or processes (EMFILE, EAGAIN), what was made so far is closed before the error goes on.
        fds: list[int] = []
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- lives as long as the worker; `close` closes it
        try:
            fds.extend(os.pipe())  # requests: the worker reads, this process writes
            fds.extend(os.pipe())  # replies: the worker writes, this process reads
            fds.extend(os.pipe())  # life: only this process holds the write end; the worker waits for its EOF
            theirs = (fds[0], fds[3], fds[4])
            self._process = subprocess.Popen(
                [sys.executable, "-c", PROGRAM, *map(str, theirs), str(os.getpid()), *preload],
                pass_fds=theirs,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                env=None if env is None else {**os.environ, **env},
                process_group=0,
            )
        except BaseException:
            for fd in fds:
                os.close(fd)
            self._stderr.close()
            raise
        for fd in theirs:
            os.close(fd)
        self._requests = os.fdopen(fds[1], "wb")
        self._replies = fds[2]
        self.pid = self._process.pid
        # When dropped, closed or at exit: ended and reaped, so none is left running.
        self.close = weakref.finalize(
            self, _end, os.getpid(), self._process, self._requests, self._replies, fds[5], self._stderr
        )

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None) -> Any:
        """The call's result, its `HloError`, a `Bug`, or a `Crash` (the worker is gone then: killed if it
        hung, ran past `timeout` or was dying)."""
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
                if kind == "begun":
                    watch.begin()
                    continue
                if kind == "stage":
                    stage, detail = value
                    continue
                return value if kind == "ok" else _rebuilt(value) if kind == "error" else Bug(value)
        return Crash(stage, detail, *self._death_note(watch, stderr_start))

    def _death_note(self, watch: _Watch, stderr_start: int) -> tuple[str, tuple[str, ...]]:
        """How the worker died, and the lines of its stderr that say why."""
        if watch.expired or watch.dying is not None:
            with suppress(ProcessLookupError):
                self._process.kill()
        code = self._process.wait()
        if watch.expired:
            note = f"worker timed out after {watch.timeout:g} s, killed"
        elif watch.dying is not None:
            note = f"worker died with {watch.dying}"
        elif code == -signal.SIGKILL:
            note = "worker killed"
        else:
            note = f"worker died with {signal.Signals(-code).name}" if code < 0 else f"worker exited with code {code}"
        lines = _read_from(self._stderr.fileno(), stderr_start).decode(errors="replace").splitlines()
        causes = [line.strip() for line in lines if _CAUSE.search(line)][:3]
        if not causes and code > 0 and any(line.strip() for line in lines):  # Python's own end: its last line
            causes = [next(line.strip() for line in reversed(lines) if line.strip())]
        return note, tuple(causes)


def _end(owner: int, process: subprocess.Popen[bytes], requests: BinaryIO, *closing: Any) -> None:
    """Stop and reap a worker; only in the process that started it."""
    if os.getpid() != owner:
        return
    with suppress(OSError):
        requests.close()  # an idle worker reads EOF and exits
    with suppress(ProcessLookupError):
        process.terminate()  # a busy one removes its temporary file and exits
    try:
        process.wait(TERMINATION_SECONDS)
    except subprocess.TimeoutExpired:  # it did not act on SIGTERM: the pool must end all the same
        process.kill()
        process.wait()
    for each in closing:
        with suppress(OSError):
            if isinstance(each, int):
                os.close(each)
            else:
                each.close()


class _Watch:
    """Decides, while a parent waits, whether a worker may still answer: deadline and death throes."""

    def __init__(self, stderr: int, offset: int, timeout: float | None) -> None:
        self._stderr = stderr
        self._start = self._offset = offset
        self.timeout = timeout
        # Until the worker takes up the call, it may still be starting (an interpreter, its imports).
        self._deadline = None if timeout is None else time.monotonic() + timeout + START_SECONDS
        #: The signal a worker is dying of, once its stderr says so.
        self.dying: str | None = None
        self.expired = False

    def begin(self) -> None:
        """The worker took up the call: its time starts now (a worker's start, under load, is not the call's)."""
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout

    def keep_waiting(self) -> bool:
        if self._deadline is not None and time.monotonic() > self._deadline:
            self.expired = True
            return False
        self.dying = self.dying or self._fatal_printed()
        return self.dying is None

    def _fatal_printed(self) -> str | None:
        start = max(self._offset - max(map(len, _FATAL_MARKERS)), self._start)
        new = _read_from(self._stderr, start)
        self._offset = start + len(new)
        return next((name for marker, name in _FATAL_MARKERS.items() if marker in new), None)


def _read_from(fd: int, offset: int) -> bytes:
    """The rest of a file from `offset`, without moving the file position the worker shares."""
    return os.pread(fd, max(os.fstat(fd).st_size - offset, 0), offset)


class WorkerPool:
    """Worker processes that run calls crash-isolated and are kept across calls.

    `preload` are modules each worker imports as it starts (jax for XLA workers: the import runs
    while the caller still prepares its call); `env` is added to each worker's environment. Several
    threads may use one pool at once: each takes an idle worker or starts one. Once a call has killed
    its worker, the pool keeps one spare worker started, so that the next death is replaced by a
    worker that has imported its modules already (a corpus run crashes XLA again and again).
    """

    def __init__(self, workers: int = 1, *, preload: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        self.workers = max(1, workers)
        self._preload = tuple(preload)
        self._env = env
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._spare: _Worker | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, workers: int | None = None) -> None:
        """Start `workers` of the workers (all by default) now, without waiting for them to be ready (a call
        starts what it needs anyway: a caller that may have one call only starts one, not a jax import to waste)."""
        with self._lock:
            missing = min(self.workers, workers or self.workers) - len(self._idle) - len(self._busy)
        for _ in range(missing):
            worker = _Worker(self._preload, self._env)
            with self._lock:
                self._idle.append(worker)

    def results(
        self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *, timeout: float | None = None
    ) -> Iterator[tuple[int, Any]]:
        """``(index, outcome)`` of ``fn(*calls[index])`` as each finishes, in `workers` workers at once.

        `fn` must be importable by name (it is pickled by reference). The outcome is its result,
        the `HloError` it raised, a `Bug` (any other exception) or a `Crash` (its worker died or ran
        past `timeout` seconds: only that call is lost, and the worker is replaced). Closing the
        iterator early ends the workers still busy, so nothing is left running.
        """
        if not calls:
            return
        done: list[tuple[int, Any]] = []
        ready = threading.Condition()
        pending = iter(range(len(calls)))
        stopped = threading.Event()

        def drain() -> None:
            while not stopped.is_set():
                with ready:
                    index = next(pending, None)
                if index is None:
                    return
                try:
                    outcome = self.call(fn, calls[index], timeout=timeout)
                except Exception:  # an argument that does not pickle, out of processes: the call's failure
                    outcome = Bug(traceback.format_exc())
                with ready:
                    done.append((index, outcome))
                    ready.notify()

        threads = [
            threading.Thread(target=drain, name="hloopt-pool", daemon=True)
            for _ in range(min(self.workers, len(calls)))
        ]
        for thread in threads:
            thread.start()
        received = 0
        try:
            while received < len(calls):
                with ready:
                    while not done:
                        ready.wait()
                    finished, done[:] = list(done), []
                for outcome in finished:
                    received += 1
                    yield outcome
        finally:
            stopped.set()
            if received < len(calls):  # stopped early: the calls under way are abandoned with their workers
                self._end_busy()
            for thread in threads:
                thread.join()

    def map(
        self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *, timeout: float | None = None
    ) -> list[Any]:
        """The outcomes of `results`, in the order of `calls`."""
        outcomes: list[Any] = [None] * len(calls)
        for index, outcome in self.results(fn, calls, timeout=timeout):
            outcomes[index] = outcome
        return outcomes

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], *, timeout: float | None = None) -> Any:
        """``fn(*args)`` in an idle worker (or a new one), in this thread; its outcome as `results` says."""
        with self._lock:
            worker, spare = (self._idle.pop(), None) if self._idle else (None, self._spare)
            self._spare = None if worker is None else self._spare
        if worker is None and spare is not None:  # the spare is taken: the next one starts now
            worker = spare
            self._keep_a_spare()
        worker = worker or _Worker(self._preload, self._env)
        with self._lock:
            self._busy.add(worker)
        kept = False
        try:
            outcome = worker.call(fn, args, timeout)
            kept = not isinstance(outcome, Crash)
            return outcome
        finally:
            with self._lock:
                self._busy.discard(worker)
                if kept and worker.close.alive:
                    self._idle.append(worker)
            if not kept:  # dead, or its state unknown (an exception here): not reused
                worker.close()
                self._keep_a_spare()

    def _keep_a_spare(self) -> None:
        """Start the spare worker, unless there is one (or no process can be started now: it is not needed yet)."""
        with self._lock, suppress(OSError):
            if self._spare is None:
                self._spare = _Worker(self._preload, self._env)

    def _end_busy(self) -> None:
        """End the workers running calls (their callers then see them die)."""
        with self._lock:
            busy = list(self._busy)
        for worker in busy:
            worker.close()

    def close(self) -> None:
        """End every worker (those busy are terminated and remove their temporary files); the pool can be used again."""
        with self._lock:
            idle, self._idle = self._idle, []
            busy = list(self._busy)
            spare, self._spare = self._spare, None
        for worker in [*idle, *busy, *([spare] if spare is not None else [])]:
            worker.close()
