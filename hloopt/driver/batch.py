"""``hloopt run DIR`` (or several INPUTs): every module under them, in parallel, with a report.

A module is the unit of failure: one that cannot be read, parsed, rewritten or
written is recorded with its error and the batch goes on. Each file's output
is written atomically by the process that made it, so a failure never leaves a
partial file.

Files are processed in child processes, each fed by one thread: --jobs threads
of this process locally, or the threads of any `concurrent.futures.Executor`
(Dask's ``client.get_executor()``, a process pool) with each file a task, at
most a window of them in flight. A child is a fresh interpreter started with
`subprocess`, never a fork: the caller may hold jax, whose threads a fork
would copy without their locks. A file that kills its child (a crash, the OOM
killer) costs only that file; the thread starts a new child for the next.
An executor's workers must see the files where this process sees them (a
shared filesystem): they read the inputs and write the outputs themselves.

Each file goes through `hloopt.driver.flow.process_file`, exactly as a lone
file does; this module only finds the files, picks this run's shard of them,
spreads them over processes and tallies the results. Nothing here prints or
exits: the CLI does.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TypeVar

from hloopt.driver import report as reports
from hloopt.driver.flow import FileResult, Job, ModuleResult, RunOptions, process_file, verify_numerics
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, discard_partial_writes, make_directories, read_bytes
from hloopt.support.formats import MLIR_START, Format, detect, top_level_fields
from hloopt.support.gcpause import paused_gc

if TYPE_CHECKING:
    from hloopt.xla.bridge import IsolatedPool

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")

DEFAULT_GLOBS = ("*.hlo", "*.txt", "*.pb", "*.mlir", "*.mlirbc")

#: Extensions that say a file is a module: such a file found in a directory is processed, and fails
#: if it is not one. A ``.txt`` or ``.pb`` is a module only when its content says so (XLA's dumps hold
#: reports and options under those extensions too).
MODULE_EXTENSIONS = (".hlo", ".mlir", ".mlirbc")

#: Files XLA writes beside its module dumps (``--xla_dump_to``), and jax and the Neuron compile cache
#: beside theirs, by the end of their names: what each is, for the report.
DUMP_ARTIFACTS = (
    ("-buffer-assignment.txt", "XLA's buffer assignment"),
    ("-buffer-assignment-values.txt", "XLA's buffer assignment values"),
    ("-live-range.txt", "XLA's live ranges"),
    ("-memory-usage-report.txt", "XLA's memory usage report"),
    ("-memory-usage-report.pb", "XLA's memory usage report"),
    ("/compile_options.pb", "jax's compile options"),
    ("/topology.pb", "jax's device topology"),
)

#: How HLO text opens, after blank and ``//`` comment lines: the header, or (a header-less module,
#: as XLA's lit tests hold) a computation, ``[ENTRY] [%]name [(params) -> shape] {``.
_HLO_START = re.compile(r"(?:\s|//[^\n]*)*(?:HloModule\s|(?:ENTRY\s+)?%?[\w.\-]+\s*(?:\([^\n]*\)\s*->[^\n]*)?\{)")


@dataclass(frozen=True)
class Shard:
    """``--shard K/N``: this run processes shard `index` (1 to `count`) of the batch's modules.

    A module's shard is a hash (sha256) of its path below its directory INPUT, so it does not
    depend on where the tree is checked out, on the other files or on the Python process, and
    adding a file moves no other one.
    """

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``K/N`` with 1 <= K <= N; an HloError saying what is expected otherwise."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise HloError(f"expected K/N, shard K of N shards (like 1/4), found {text!r}")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1:
            raise HloError(f"{text}: N, the number of shards, must be at least 1")
        if not 1 <= index <= count:
            raise HloError(f"{text}: K counts from 1, so shards run from 1/{count} to {count}/{count}")
        return cls(index, count)

    def holds(self, job: Job) -> bool:
        return shard_of(job.key, self.count) == self.index


def shard_of(key: PurePosixPath, count: int) -> int:
    """The shard (1 to `count`) of the module at `key`: sha256 of its POSIX path, never Python's `hash`."""
    digest = hashlib.sha256(key.as_posix().encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


@dataclass
class Skipped(FileResult):
    """A file a directory's globs found that is not a module (an XLA report, jax's compile options):
    counted and listed in the report, neither processed nor failed."""

    reason: str = ""


@dataclass
class BatchReport:
    """Every file's result, in the order the files were found, and the time the batch took."""

    inputs: list[str]
    options: RunOptions
    files: list[FileResult]
    seconds: float = 0.0

    @property
    def modules(self) -> list[ModuleResult]:
        """Every module, a split file's chunks in file order."""
        return [module for file in self.files for module in file.modules]

    @property
    def skipped(self) -> list[Skipped]:
        """The files found that are not modules."""
        return [file for file in self.files if isinstance(file, Skipped)]

    def to_dict(self) -> dict[str, Any]:
        """The ``--report`` JSON (`hloopt.driver.report` reads, summarises and merges it)."""
        o = self.options
        options = {
            "passes": o.passes,
            "numerics": o.numerics,
            "per_pass": o.per_pass,
            "check": o.check,
            "show_diff": o.show_diff,
            "in_place": o.in_place,
            "output_dir": _as_path(o.output),
            "dump_dir": _as_path(o.dump_dir),
            "output_format": o.output_format,
            "split_input_file": o.split_input_file,
            "globs": list(o.globs or DEFAULT_GLOBS),
            "verify_numerics": o.verify_numerics,
            "rtol": o.rtol,
            "atol": o.atol,
        }
        modules = [m.to_dict() for m in self.modules]
        skipped = [{"path": file.path, "reason": file.reason} for file in self.skipped]
        return {
            "input": self.inputs[0] if len(self.inputs) == 1 else self.inputs,
            "options": options,
            "shard": None if o.shard is None else {"index": o.shard.index, "count": o.shard.count},
            "summary": reports.summarise(modules, skipped),
            "seconds": round(self.seconds, 3),
            "modules": modules,
            "skipped": skipped,
        }


def _as_path(spelled: str | None) -> str | None:
    """A path option as the report has always written it: normalised like `Path` prints it."""
    return None if spelled is None else str(Path(spelled))


def check_options(inputs: Sequence[str], options: RunOptions) -> RunOptions:
    """A batch (a directory INPUT or several INPUTs) needs somewhere for its modules to go; returns
    the options it runs with.

    -o and --dump-dir mirror one tree, so they take a single INPUT. With --check nothing is
    written, so an -o OUTDIR is ignored (and recorded as such in the report).
    """
    if len(inputs) > 1:
        given = [flag for flag, value in (("-o", options.output), ("--dump-dir", options.dump_dir)) if value]
        if given:
            verb = "take" if len(given) > 1 else "takes"
            raise HloError(
                f"{' and '.join(given)} {verb} a single INPUT; with several, give --in-place, --check or --diff"
            )
        if not (options.in_place or options.check or options.show_diff):
            raise HloError("several INPUTs: to process them give --in-place, --check or --diff (-o takes one INPUT)")
    elif options.output is None and not (options.in_place or options.check or options.show_diff):
        raise HloError(
            f"{inputs[0]}: is a directory; to process every module in it give -o OUTDIR, --in-place, --check or --diff"
        )
    if options.output == "-":
        raise HloError(f"{inputs[0]}: is a directory; its modules cannot be written to stdout, give -o OUTDIR")
    # Checked before any module is processed, so a bad path costs nothing and leaves nothing written.
    if options.report_path is not None:
        check_output(options.report_path)
    if options.dump_dir is not None and options.passes is not None:
        check_output(options.dump_dir, directory=True)
    if options.check and options.output is not None:
        return replace(options, output=None)
    return options


def plan(inputs: Sequence[str], options: RunOptions) -> list[Job]:
    """The modules of the INPUTs, then this run's --shard of them; the output directory is made ready.

    A directory's modules are the files its globs find (an error when there are none), a file
    INPUT is a module whatever its name, and a file named twice is processed once, as first named.
    """
    globs = options.globs or DEFAULT_GLOBS
    out = Path(options.output) if options.output is not None else None
    jobs: dict[str, Job] = {}
    for spelled in inputs:
        path = Path(spelled)
        if path.is_dir():
            found = discover(path, globs, exclude=out)
            if not found:
                raise HloError(f"{path}: no files matching {', '.join(globs)}")
            if out is not None:
                _prepare_output_dir(path, out)
        elif path.exists():
            found = [Job(spelled)]
        else:
            raise HloError(f"{spelled}: no such file or directory")
        for job in found:
            jobs.setdefault(os.path.realpath(job.path), job)
    shard = options.shard
    return [job for job in jobs.values() if shard is None or shard.holds(job)]


def discover(root: Path, globs: Sequence[str] = DEFAULT_GLOBS, exclude: Path | None = None) -> list[Job]:
    """Files under `root` whose path (relative, right-anchored like `PurePath.match`) matches a glob.

    Sorted, so runs and reports are reproducible; `exclude` (the output tree when
    it lies inside the input) is skipped so a second run does not read the first's outputs.
    """
    if not root.exists():
        raise HloError(f"{root}: no such file or directory")
    if not root.is_dir():
        raise HloError(f"{root}: is not a directory")
    if not os.access(root, os.R_OK | os.X_OK):
        raise HloError(f"{root}: permission denied")
    skip = exclude.resolve() if exclude is not None else None
    found: list[tuple[PurePosixPath, Job]] = []

    def walk_error(err: OSError) -> None:
        raise HloError(f"{err.filename}: cannot list directory: {err.strerror}")

    for directory, subdirs, files in os.walk(root, onerror=walk_error):
        here = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if skip is None or (here / d).resolve() != skip)
        for name in files:
            relative = PurePosixPath((here / name).relative_to(root).as_posix())
            if any(relative.match(pattern) for pattern in globs):
                found.append((relative, Job(str(here / name), relative)))
    return [job for _, job in sorted(found, key=lambda pair: pair[0])]


def _prepare_output_dir(root: Path, out: Path) -> None:
    """OUTDIR exists or is created, is a directory, and is not the input tree itself.

    As a lone file's -o, OUTDIR may be new but its parent must exist: a mistyped path is an error,
    not a tree made somewhere unexpected. The subdirectories that mirror the input are made inside it.
    """
    check_output(out, directory=True)
    if out.exists() and out.resolve() == root.resolve():
        raise HloError(f"{out}: is the input directory; use --in-place to overwrite the inputs")
    make_directories(out)


def run(
    inputs: Sequence[str],
    options: RunOptions,
    *,
    jobs: Sequence[Job] | None = None,
    advance: Callable[[FileResult], None] = lambda result: None,
    executor: Executor | None = None,
    max_in_flight: int | None = None,
) -> BatchReport:
    """Process the INPUTs' modules; `advance` is called as each file finishes.

    `jobs` are the modules `plan` found (by default the options are checked and planned here).
    Without an `executor` they run in --jobs local processes; with one (Dask's
    ``client.get_executor()``, a process pool), each file is a task on it. Either way at most
    `max_in_flight` files (default `in_flight` of --jobs or the CPU count) are submitted and
    not yet tallied, and --verify-numerics compares each file where it was processed, so only
    small records come home and memory does not grow with the number of files; the report is the same.
    """
    if jobs is None:
        options = check_options(inputs, options)
        jobs = plan(inputs, options)
    workers = options.jobs or os.cpu_count() or 1
    start = time.perf_counter()
    report = BatchReport(list(inputs), options, run_batch(jobs, options, workers, advance, executor, max_in_flight))
    report.seconds = time.perf_counter() - start
    return report


def in_flight(workers: int) -> int:
    """How many files a batch keeps submitted for `workers` that run them: two each, so none waits for its next."""
    return 2 * workers


def run_batch(
    jobs: Sequence[Job],
    options: RunOptions,
    workers: int,
    advance: Callable[[FileResult], None] = lambda result: None,
    executor: Executor | None = None,
    window: int | None = None,
) -> list[FileResult]:
    """Process `jobs` in `workers` child processes (in this one when 1), or as tasks on `executor`, at
    most `window` (default `in_flight(workers)`) in flight; results in `jobs` order."""
    window = window or in_flight(workers)
    if executor is not None:
        outcomes = _on_executor(executor, [(job,) for job in jobs], options, window)
    elif workers <= 1 or len(jobs) <= 1:
        outcomes = _here(jobs, options)
    else:
        outcomes = _in_children(jobs, options, workers, window)
    results: dict[Job, FileResult] = {}
    with closing(outcomes):  # stopped early (Ctrl-C in `advance`), it cancels what is in flight
        for job, result in outcomes:
            results[job] = result
            advance(result)
    return [results[job] for job in jobs]


def not_a_module(job: Job) -> str | None:
    """Why the file `job` found in a directory is not a module, or None when it is one or may be (a file
    INPUT, named by the user, always may be).

    Its name says so (one of XLA's `DUMP_ARTIFACTS`), or its content: a ``.txt`` (any extension but
    `MODULE_EXTENSIONS`) that opens like neither HLO nor MLIR text, a whole protobuf message that is
    neither an HloModuleProto nor XLA's HloProto dump. A file that cannot be read, an empty one or a
    protobuf cut short is processed, and fails with its error: it may be a broken module.
    """
    if job.relative is None or job.relative.suffix in MODULE_EXTENSIONS:
        return None
    spelled = f"/{job.relative}"
    for ending, what in DUMP_ARTIFACTS:
        if spelled.endswith(ending):
            return f"{what}, not a module"
    try:
        data = read_bytes(job.path)
    except (OSError, HloError):
        return None
    if not data.strip():
        return None
    try:
        detected = detect(job.path, data)
    except HloError:  # bytes, not text: a module only as a protobuf
        fields = top_level_fields(data)
        if fields is None:
            return None
        shown = ", ".join(str(number) for number in sorted(fields)[:8])
        return f"a protobuf message (fields {shown}), neither an HloModuleProto nor XLA's HloProto dump"
    if detected is not Format.HLO:
        return None
    text = data[:4096].decode("utf-8", "replace")
    if _HLO_START.match(text) or MLIR_START.match(text):
        return None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"text that is neither HLO nor MLIR (it opens with {first[:60]!r})"


def _work(
    job: Job, options: RunOptions, comparing: Callable[[], AbstractContextManager[None]] = nullcontext
) -> FileResult:
    """One batch member: `process_file` (looked up at call time), then --verify-numerics here, in this
    process's XLA workers (started within `comparing`); trimmed to the small record the parent needs.

    The exceptions go (the error records say it all, and they may not pickle), and so do the texts
    and --per-pass stages: they were compared here, so no module's text ever leaves its worker.
    """
    if job.relative is not None and (reason := not_a_module(job)) is not None:
        return Skipped(job.name, [], reason=reason)
    result = process_file(job, options)
    if options.verify_numerics:
        with comparing():
            verify_numerics(result.modules, options, _comparisons())
    for module in result.modules:
        module.exception = None
        module.texts = None
        module.stages = []
    return result


#: This process's XLA workers for --verify-numerics, with the process they belong to: made at its first
#: comparison and kept, so a batch worker imports jax once (in its zygote), not once per module.
_COMPARISONS: tuple[int, IsolatedPool] | None = None


def _comparisons() -> IsolatedPool:
    """This process's XLA workers; a fork of this process makes its own (the pipes it inherited are its parent's)."""
    global _COMPARISONS
    if _COMPARISONS is None or _COMPARISONS[0] != os.getpid():
        from hloopt.xla.bridge import IsolatedPool

        _COMPARISONS = (os.getpid(), IsolatedPool(1))
    return _COMPARISONS[1]


def _end_comparisons() -> None:
    """End the XLA workers this process started (a batch run in this process, at its end).

    A batch child keeps its own until it exits: they end with it
    (they are killed when their parent dies, and read EOF on its pipes).
    """
    global _COMPARISONS
    if _COMPARISONS is not None and _COMPARISONS[0] == os.getpid():
        _COMPARISONS[1].close()
    _COMPARISONS = None


def _here(jobs: Sequence[Job], options: RunOptions) -> Generator[tuple[Job, FileResult]]:
    """(job, result) for each file, processed in this process."""
    try:
        for job in jobs:
            yield job, _work(job, options)
    finally:
        _end_comparisons()


def _died(job: Job, lost: BaseException | None = None) -> FileResult:
    """A file whose worker process died on it, or whose task an executor `lost` (its exception)."""
    if lost is None or isinstance(lost, BrokenProcessPool):
        message = f"{job.path}: the worker process died while processing this file (crash or out of memory)"
    else:
        message = f"{job.path}: the executor lost this file: {type(lost).__name__}: {lost}"
    return _failed_file(job, message)


def _failed_file(job: Job, message: str) -> FileResult:
    """A file that was never processed, failed with `message`."""
    return FileResult(job.name, [ModuleResult(job.name, "failed", error={"message": message})])


def _on_terminate_discard_writes() -> None:
    """A child's first act: when it is terminated (the batch stopped), it leaves no temporary file and
    exits, whatever its threads are doing.

    A Python handler alone would not do: it runs in the main thread at its next bytecode, so a SIGTERM
    that lands just before the main thread blocks (reading the next request, a FIFO, a sleep) waits
    there forever. So SIGTERM is blocked, in this thread and so in every thread started after it (numpy's,
    XLA's), and one thread waits for it; the handler stays for the stretches where the main thread
    unblocks it (`_terminable`).
    """
    signal.signal(signal.SIGTERM, _terminated)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=_await_termination, name="hloopt-terminate", daemon=True).start()


def _await_termination() -> None:
    _terminated(signal.sigwait({signal.SIGTERM}), None)


def _terminated(signum: int, frame: object) -> None:
    discard_partial_writes()
    os._exit(128 + signum)


@contextmanager
def _terminable() -> Iterator[None]:
    """In a child: SIGTERM unblocked in this thread meanwhile, so that the processes it starts (the XLA
    workers of --verify-numerics) do not inherit it blocked."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _as_completed(
    executor: Executor, work: Callable[[_Item], _Result], queue: list[_Item], window: int
) -> Generator[tuple[_Item, Future[_Result]]]:
    """(item, its future) as each `work(item)` on `executor` completes, taking items from the end of
    `queue` (what is left there was never submitted), at most `window` submitted and not yet
    yielded; a submit that raises is a future holding its error. Closing it cancels the rest."""
    running: dict[Future[_Result], _Item] = {}
    try:
        while queue or running:
            while queue and len(running) < window:
                item = queue.pop()
                try:
                    future = executor.submit(work, item)
                except Exception as err:  # a broken pool, an executor shut down
                    future = Future()
                    future.set_exception(err)
                running[future] = item
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield running.pop(future), future
    finally:
        for future in running:
            future.cancel()


#: At most this many files per task in local children: a round trip per small file (thread, pipe,
#: pickling) costs more than the file's own parse and print.
_FILES_PER_TASK = 16


def _tasks(jobs: Sequence[Job], workers: int) -> list[tuple[Job, ...]]:
    """`jobs` in tasks of consecutive files, small enough that every worker gets several."""
    size = max(1, min(_FILES_PER_TASK, len(jobs) // (4 * workers)))
    return [tuple(jobs[i : i + size]) for i in range(0, len(jobs), size)]


def _in_children(
    jobs: Sequence[Job], options: RunOptions, workers: int, window: int
) -> Generator[tuple[Job, FileResult]]:
    """(job, result) as files finish in `workers` child processes, each fed by a thread of this one,
    several files a task (at most `window` tasks in flight).

    The children are ended with the batch (when it stops early, those caught writing remove their
    temporary files), so none outlives the call.
    """
    with ThreadPoolExecutor(workers, thread_name_prefix="hloopt-batch") as threads:
        yield from _on_executor(threads, _tasks(jobs, workers), options, window)


def _on_executor(
    executor: Executor, tasks: Sequence[tuple[Job, ...]], options: RunOptions, window: int
) -> Generator[tuple[Job, FileResult]]:
    """(job, result) as `tasks` finish on `executor`; a task that fails (its worker lost) is its files' failure.

    The children an in-process executor (threads) starts belong to this batch and end with it; a task
    pickled to another process uses that process's children (`_WORKER_CHILDREN`), kept for its next tasks.
    """
    children = _Children()
    task = _Task(options, os.getcwd(), children)
    try:
        with closing(_as_completed(executor, task, list(reversed(tasks)), window)) as done:
            for jobs, future in done:
                try:
                    results = future.result()
                except Exception as err:
                    results = [_died(job, err) for job in jobs]
                yield from zip(jobs, results)
    finally:
        children.end()


@dataclass(frozen=True)
class _Task:
    """One batch's work on an executor's worker: files processed by a child of the worker, in this
    batch's working directory (relative INPUTs and -o stay as they were given)."""

    options: RunOptions
    cwd: str
    #: The batch's own children when the task runs in its process; None in another (see `__getstate__`).
    children: _Children | None = field(default=None, compare=False)
    #: Dask's submit is pure by default: a task whose key (a hash of the function and its arguments) it
    #: still holds gets the held result, stale for a file changed since; each batch's keys are its own.
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __dask_tokenize__(self) -> str:
        return self.token

    def __getstate__(self) -> dict[str, Any]:
        """Pickled to another process, the task uses that process's children, not this batch's."""
        return {**self.__dict__, "children": None}

    def __call__(self, jobs: tuple[Job, ...]) -> list[FileResult]:
        return (self.children or _WORKER_CHILDREN).process(self, jobs)

    def process(self, job: Job) -> FileResult:
        """In the child: the file, as `_work` does it in this process."""
        try:
            os.chdir(self.cwd)
        except OSError as err:
            return _failed_file(
                job,
                f"{job.path}: this worker cannot reach the batch's directory {self.cwd} ({err.strerror}); "
                "an executor's workers need the filesystem the batch was started on",
            )
        return _work(job, self.options, _terminable)


#: What a child runs: a fresh interpreter (never a fork of this process, which may hold jax and its
#: threads) that imports hloopt's parser and passes, not jax, and serves the two pipes it is given.
_CHILD_PROGRAM = "import sys; from hloopt.driver.batch import _serve; _serve(int(sys.argv[1]), int(sys.argv[2]))"


class _Child:
    """A child process that processes its files one after another, fed by one thread of its parent.

    Long-lived, so the parser and the passes' caches stay warm; a file that kills it (a crash in XLA,
    the OOM killer) costs that file only, and the thread starts a new one. It is started with
    `subprocess` (a fresh interpreter), so it holds no copy of its parent's threads or locks, and it
    needs no ``__main__`` guard in the caller's script, as multiprocessing's spawn would.
    """

    def __init__(self) -> None:
        # Pipes are not inheritable (PEP 446): a child started by another thread meanwhile gets none of these.
        # Out of descriptors or processes (EMFILE, EAGAIN), the ends made so far are closed before the error goes on.
        fds: list[int] = []
        try:
            fds.extend(os.pipe())  # requests: the child reads, this process writes
            fds.extend(os.pipe())  # replies: the child writes, this process reads
            requests_read, requests_write, replies_read, replies_write = fds
            process = subprocess.Popen(
                [sys.executable, "-c", _CHILD_PROGRAM, str(requests_read), str(replies_write)],
                pass_fds=(requests_read, replies_write),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        os.close(requests_read)
        os.close(replies_write)
        self._requests = os.fdopen(requests_write, "wb")
        self._replies = os.fdopen(replies_read, "rb")
        # When dropped, or at exit: ask it to stop and reap it.
        self.end = weakref.finalize(self, _end, os.getpid(), process, self._requests, self._replies)

    def process(self, task: _Task, jobs: tuple[Job, ...]) -> list[FileResult]:
        """The child's results for `jobs`, in order, as many as it sent before it died (all if it did not)."""
        results: list[FileResult] = []
        try:
            pickle.dump((task, jobs), self._requests, protocol=pickle.HIGHEST_PROTOCOL)
            self._requests.flush()
            while len(results) < len(jobs):
                results.append(pickle.load(self._replies))
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        return results


#: How long a child has to act on SIGTERM (remove a temporary file, exit) before it is killed.
_TERMINATION_SECONDS = 10.0


def _end(owner: int, process: subprocess.Popen[bytes], *pipes: BinaryIO) -> None:
    """Stop and reap a child; only in the process that started it (not in a fork of that process)."""
    if os.getpid() != owner:
        return
    # Terminated first: a thread blocked reading its reply holds the pipe, which closes once the child is gone.
    process.terminate()  # idle, it exits; caught writing, it removes its temporary file first
    try:
        process.wait(_TERMINATION_SECONDS)
    except subprocess.TimeoutExpired:  # it did not act on SIGTERM: the batch must end all the same
        process.kill()
        process.wait()
    for pipe in pipes:
        with suppress(OSError):
            pipe.close()


class _Children:
    """The children of one batch (or of an executor's worker): one per thread that runs its tasks (Dask
    runs tasks in several threads), each started on its thread's first file, and ended together."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._started: list[_Child] | None = []

    def process(self, task: _Task, jobs: tuple[Job, ...]) -> list[FileResult]:
        """`jobs` processed by this thread's child; a child that dies on one is replaced for the next."""
        results: list[FileResult] = []
        while len(results) < len(jobs):
            child: _Child | None = getattr(self._local, "child", None)
            if child is None:
                with self._lock:
                    if self._started is None:  # the batch has ended: a task that slipped through does nothing
                        lost = RuntimeError("the batch ended before this file was processed")
                        return results + [_died(job, lost) for job in jobs[len(results) :]]
                    child = self._local.child = _Child()
                    self._started.append(child)
            results += child.process(task, jobs[len(results) :])
            if len(results) < len(jobs):  # the child died on the next file
                results.append(_died(jobs[len(results)]))
                self._local.child = None
                child.end()
                with self._lock:
                    if self._started is not None:
                        self._started.remove(child)
        return results

    def end(self) -> None:
        """End every child started (those caught writing remove their temporary files first)."""
        with self._lock:
            started, self._started = self._started or [], None
        for child in started:
            child.end()


#: The children of this process when it is an executor's worker (a Dask worker): kept across batches,
#: ended when the worker exits.
_WORKER_CHILDREN = _Children()


def _serve(requests: int, replies: int) -> NoReturn:
    """The child's loop: (task, jobs) in, each file's result out, until the parent closes the pipe."""
    _on_terminate_discard_writes()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it then ends the child
    code = 0
    try:
        with os.fdopen(requests, "rb") as inbox, os.fdopen(replies, "wb") as outbox:
            while True:
                try:
                    task, jobs = pickle.load(inbox)
                except EOFError:
                    break
                for job in jobs:  # each result as it is ready: when one file kills this process, the others are home
                    with paused_gc():  # this process is the batch's: its collector is paused file by file
                        result = task.process(job)
                    pickle.dump(result, outbox, protocol=pickle.HIGHEST_PROTOCOL)
                    outbox.flush()
    except BaseException:  # a bug: in the worker's log, and the worker reports the file as lost
        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    finally:
        os._exit(code)
