"""``hloopt run DIR`` (or several INPUTs): every module under them, in parallel, with a report.

A module is the unit of failure: one that cannot be read, parsed, rewritten or
written is recorded with its error and the batch goes on. Each file's output
is written atomically by the process that made it, so a failure never leaves a
partial file. A worker process that dies (a crash, the OOM killer) costs only
the files it held: they are retried one per fresh process, so the one that
kills its process is the one reported.

On any `concurrent.futures.Executor` (Dask's ``client.get_executor()``, a
process pool) each file is a task, at most a window of them in flight, and each
task processes its file in a child forked from the executor's worker, so a
file that kills its process is reported as it is locally and the worker lives
on. The workers must see the files where this process sees them (a shared
filesystem): they read the inputs and write the outputs themselves.

Each file goes through `hloopt.driver.flow.process_file`, exactly as a lone
file does; this module only finds the files, picks this run's shard of them,
spreads them over processes and tallies the results. Nothing here prints or
exits: the CLI does.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import re
import signal
import sys
import threading
import time
import traceback
import uuid
import weakref
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing, suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TypeVar

from hloopt.driver import report as reports
from hloopt.driver.flow import FileResult, Job, ModuleResult, RunOptions, process_file, verify_numerics
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, discard_partial_writes, make_directories

if TYPE_CHECKING:
    from hloopt.xla.bridge import IsolatedPool

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")

DEFAULT_GLOBS = ("*.hlo", "*.txt", "*.pb", "*.mlir", "*.mlirbc")


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
        return {
            "input": self.inputs[0] if len(self.inputs) == 1 else self.inputs,
            "options": options,
            "shard": None if o.shard is None else {"index": o.shard.index, "count": o.shard.count},
            "summary": reports.summarise(modules),
            "seconds": round(self.seconds, 3),
            "modules": modules,
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
        check_output(options.dump_dir, directory=True, create=True)
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
    """OUTDIR exists or is created, is a directory, and is not the input tree itself."""
    check_output(out, directory=True, create=True)
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
    """Process `jobs` in `workers` processes (in this one when 1), or as tasks on `executor`, at most
    `window` (default `in_flight(workers)`) in flight; results in `jobs` order."""
    window = window or in_flight(workers)
    results: dict[Job, FileResult] = {}
    suspects: list[Job] = []
    if executor is not None:
        outcomes: Generator[tuple[Job, FileResult | None]] = _on_executor(executor, jobs, options, window)
    elif workers <= 1 or len(jobs) <= 1:
        outcomes = _here(jobs, options)
    else:
        outcomes = _in_pool(jobs, options, workers, window)
    with closing(outcomes):  # stopped early (Ctrl-C in `advance`), it cancels what is in flight
        for job, result in outcomes:
            if result is None:
                suspects.append(job)
                continue
            results[job] = result
            advance(result)
    for job in suspects:  # each alone in a fresh process: only the file that kills it is lost
        ((_, result),) = _in_pool([job], options, 1, 1)
        results[job] = result if result is not None else _died(job)
        advance(results[job])
    return [results[job] for job in jobs]


def _work(job: Job, options: RunOptions) -> FileResult:
    """One batch member: `process_file` (looked up at call time), then --verify-numerics here, in this
    process's XLA workers; trimmed to the small record the parent needs.

    The exceptions go (the error records say it all, and they may not pickle), and so do the texts
    and --per-pass stages: they were compared here, so no module's text ever leaves its worker.
    """
    result = process_file(job, options)
    if options.verify_numerics:
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
    """This process's XLA workers; a forked process makes its own (the pipes it inherited are its parent's)."""
    global _COMPARISONS
    if _COMPARISONS is None or _COMPARISONS[0] != os.getpid():
        from hloopt.xla.bridge import IsolatedPool

        _COMPARISONS = (os.getpid(), IsolatedPool(1))
    return _COMPARISONS[1]


def _end_comparisons() -> None:
    """End the XLA workers this process started (a batch run in this process, at its end).

    A local pool worker or an executor's child keeps its own until it exits: they end with it
    (they are killed when their parent dies, and read EOF on its pipes).
    """
    global _COMPARISONS
    if _COMPARISONS is not None and _COMPARISONS[0] == os.getpid():
        _COMPARISONS[1].close()
    _COMPARISONS = None


def _here(jobs: Sequence[Job], options: RunOptions) -> Generator[tuple[Job, FileResult | None]]:
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


def _pool(workers: int) -> ProcessPoolExecutor:
    # fork: workers inherit the imported parser instead of importing it again; jax is never imported here.
    context = multiprocessing.get_context("fork")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_on_terminate_discard_writes)


def _on_terminate_discard_writes() -> None:
    """A worker's first act: when the pool terminates it, because another worker died, it leaves no temporary file."""
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: object) -> None:
    discard_partial_writes()
    os._exit(128 + signum)


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


#: At most this many files per task in local worker processes: a task per small file costs the
#: queues, threads and pickling of ProcessPoolExecutor more than the file's own parse and print.
_FILES_PER_TASK = 16


def _tasks(jobs: Sequence[Job], workers: int) -> list[tuple[Job, ...]]:
    """`jobs` in tasks of consecutive files, small enough that every worker gets several."""
    size = max(1, min(_FILES_PER_TASK, len(jobs) // (4 * workers)))
    return [tuple(jobs[i : i + size]) for i in range(0, len(jobs), size)]


def _work_all(jobs: tuple[Job, ...], options: RunOptions) -> list[FileResult]:
    return [_work(job, options) for job in jobs]


def _in_pool(
    jobs: Sequence[Job], options: RunOptions, workers: int, window: int
) -> Generator[tuple[Job, FileResult | None]]:
    """(job, result) as files finish; result None for the files a worker held when the pool broke.

    The files not yet sent to the broken pool go on in a new one.
    """
    todo = list(jobs)
    while todo:
        queue = list(reversed(_tasks(todo, workers)))
        finished: set[Job] = set()
        with (
            _pool(workers) as pool,
            closing(_as_completed(pool, partial(_work_all, options=options), queue, window)) as done,
        ):
            for task, future in done:
                if isinstance(future.exception(), BrokenProcessPool):
                    break  # the pool is gone: the files its workers held are suspects
                for job, result in zip(task, future.result()):
                    finished.add(job)
                    yield job, result
        unsent = [job for task in reversed(queue) for job in task]
        left = finished.union(unsent)
        yield from ((job, None) for job in todo if job not in left)
        todo = unsent


def _on_executor(
    executor: Executor, jobs: Sequence[Job], options: RunOptions, window: int
) -> Generator[tuple[Job, FileResult | None]]:
    """(job, result) as files finish on `executor`; a task that fails (its worker lost) is its file's failure."""
    task = _Task(options, os.getcwd())
    with closing(_as_completed(executor, task, list(reversed(jobs)), window)) as done:
        for job, future in done:
            try:
                result = future.result()
            except Exception as err:
                result = _died(job, err)
            yield job, result


@dataclass(frozen=True)
class _Task:
    """One batch's work on an executor's worker: each file processed by the worker's `_Child`, in
    this batch's working directory (relative INPUTs and -o stay as they were given)."""

    options: RunOptions
    cwd: str
    #: Dask's submit is pure by default: a task whose key (a hash of the function and its arguments) it
    #: still holds gets the held result, stale for a file changed since; each batch's keys are its own.
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __dask_tokenize__(self) -> str:
        return self.token

    def __call__(self, job: Job) -> FileResult:
        child = _CHILDREN.child
        if child is None:
            child = _CHILDREN.child = _Child()
        result = child.process(self, job)
        if result is None:
            _CHILDREN.child = None
            child.end()
            return _died(job)
        return result

    def process(self, job: Job) -> FileResult:
        """In the child: the file, as `_work` does it in a local worker."""
        try:
            os.chdir(self.cwd)
        except OSError as err:
            return _failed_file(
                job,
                f"{job.path}: this worker cannot reach the batch's directory {self.cwd} ({err.strerror}); "
                "an executor's workers need the filesystem the batch was started on",
            )
        return _work(job, self.options)


class _Child:
    """A process forked from an executor's worker that processes its files one after another.

    Long-lived, so the parser and the passes' caches stay warm as in a local worker; a file that
    kills it (a crash in XLA, the OOM killer) costs that file only, and the worker forks a new one.
    """

    def __init__(self) -> None:
        # One fork at a time: a child forked by another thread while this one's ends of the pipes are
        # still open here would hold the reply pipe open, and this child's death would never read as EOF.
        with _FORKING:
            requests_read, requests_write = os.pipe()
            replies_read, replies_write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(requests_write)
                os.close(replies_read)
                _serve(requests_read, replies_write)
            os.close(requests_read)
            os.close(replies_write)
        self._requests = os.fdopen(requests_write, "wb")
        self._replies = os.fdopen(replies_read, "rb")
        # When the worker drops it (its thread ended) or exits: ask it to stop and reap it.
        self.end = weakref.finalize(self, _end, os.getpid(), pid, self._requests, self._replies)

    def process(self, task: _Task, job: Job) -> FileResult | None:
        """The child's result for `job`, or None when it died on it."""
        try:
            pickle.dump((task, job), self._requests, protocol=pickle.HIGHEST_PROTOCOL)
            self._requests.flush()
            result: FileResult = pickle.load(self._replies)
        except (OSError, EOFError, pickle.UnpicklingError):
            return None
        return result


def _end(owner: int, pid: int, *pipes: BinaryIO) -> None:
    """Stop and reap a child; only in the worker that forked it (a later child, forked from another
    thread, drops its copy of this one too)."""
    if os.getpid() != owner:
        return
    for pipe in pipes:
        with suppress(OSError):
            pipe.close()
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # idle, it exits; caught writing, it removes its temporary file first
    with suppress(ChildProcessError):
        os.waitpid(pid, 0)


class _Children(threading.local):
    """Each thread of an executor's worker has its own child (Dask runs tasks in several threads)."""

    child: _Child | None = None


_CHILDREN = _Children()
_FORKING = threading.Lock()


def _serve(requests: int, replies: int) -> NoReturn:
    """The child's loop: (task, job) in, the file's result out, until the worker closes the pipe."""
    _on_terminate_discard_writes()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle; it then closes the pipe
    code = 0
    try:
        with os.fdopen(requests, "rb") as inbox, os.fdopen(replies, "wb") as outbox:
            while True:
                try:
                    task, job = pickle.load(inbox)
                except EOFError:
                    break
                pickle.dump(task.process(job), outbox, protocol=pickle.HIGHEST_PROTOCOL)
                outbox.flush()
    except BaseException:  # a bug: in the worker's log, and the worker reports the file as lost
        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    finally:
        os._exit(code)
