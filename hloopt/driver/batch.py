"""``hloopt run DIR`` (or several INPUTs): every module under them, in parallel, with a report.

A module is the unit of failure: one that cannot be read, parsed, rewritten or
written is recorded with its error and the batch goes on. Each file's output
is written atomically by the process that made it, so a failure never leaves a
partial file.

Files are processed in the worker processes of a `hloopt.support.pool.WorkerPool`
(fresh interpreters, never forks: the caller may hold jax), --jobs of them, one
at least: a file that kills its worker (a crash, the OOM killer) costs only that
file, whatever --jobs is. On any `concurrent.futures.Executor` (Dask's
``client.get_executor()``, a process pool) each file is a task, at most a window
of them in flight, run in a worker process of the executor's worker. An
executor's workers must see the files where this process sees them (a shared
filesystem): they read the inputs and write the outputs themselves.

Each file goes through `hloopt.driver.flow.process_file`, exactly as a lone
file does; this module only finds the files, picks this run's shard of them,
spreads them over processes and tallies the results. Nothing here prints or
exits: the CLI does.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from hloopt.driver import report as reports
from hloopt.driver.flow import FileOptions, FileResult, Job, ModuleResult, process_file, verify_numerics
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, make_directories, read_bytes, remove_stale_temporaries
from hloopt.support.formats import MLIR_START, Format, detect, top_level_fields
from hloopt.support.gcpause import paused_gc
from hloopt.support.pool import Bug, Crash, WorkerPool

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


@dataclass(frozen=True)
class BatchOptions:
    """What ``hloopt run`` does with a batch (a directory or several INPUTs): each file's options, and
    which files are modules, how many processes, where the JSON report goes, which shard this run takes.

    A batch worker is sent only `file`: the rest is for the process that plans and tallies the batch.
    """

    file: FileOptions = field(default_factory=FileOptions)
    globs: tuple[str, ...] = ()
    jobs: int | None = None
    report_path: str | None = None
    shard: Shard | None = None


@dataclass(frozen=True)
class Unlisted(Job):
    """A subdirectory `discover` could not list: a failed member of the batch, as an unreadable file is."""

    reason: str = ""


@dataclass
class Skipped(FileResult):
    """A file a directory's globs found that is not a module (an XLA report, jax's compile options):
    counted and listed in the report, neither processed nor failed."""

    reason: str = ""


@dataclass
class BatchReport:
    """Every file's result, in the order the files were found, and the time the batch took."""

    inputs: list[str]
    options: BatchOptions
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
        o, batch = self.options.file, self.options
        options = {
            "passes": o.passes,
            # Only when given: a report without them reads as before.
            **{k: v for k, v in (("neuron_cc_flags", o.neuron_cc_flags), ("neuron_compiler", o.neuron_compiler)) if v},
            "numerics": o.numerics,
            "per_pass": o.per_pass,
            "check": o.check,
            "show_diff": o.show_diff,
            "in_place": o.in_place,
            "output_dir": _as_path(o.output),
            "dump_dir": _as_path(o.dump_dir),
            "output_format": o.output_format,
            "split_input_file": o.split_input_file,
            "globs": list(batch.globs or DEFAULT_GLOBS),
            "verify_numerics": o.verify_numerics,
            "rtol": o.rtol,
            "atol": o.atol,
        }
        modules = [m.to_dict() for m in self.modules]
        skipped = [{"path": file.path, "reason": file.reason} for file in self.skipped]
        return {
            "input": self.inputs[0] if len(self.inputs) == 1 else self.inputs,
            "options": options,
            "shard": None if batch.shard is None else {"index": batch.shard.index, "count": batch.shard.count},
            "summary": reports.summarise(modules, skipped),
            "seconds": round(self.seconds, 3),
            "modules": modules,
            "skipped": skipped,
        }


def _as_path(spelled: str | None) -> str | None:
    """A path option as the report has always written it: normalised like `Path` prints it."""
    return None if spelled is None else str(Path(spelled))


def check_options(inputs: Sequence[str], batch: BatchOptions) -> BatchOptions:
    """A batch (a directory INPUT or several INPUTs) needs somewhere for its modules to go; returns
    the options it runs with.

    -o and --dump-dir mirror one tree, so they take a single INPUT. With --check nothing is
    written, so an -o OUTDIR is ignored (and recorded as such in the report).
    """
    options = batch.file
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
    if batch.report_path is not None:
        check_output(batch.report_path)
    if options.html is not None and options.verify_numerics:
        check_output(options.html, directory=True)
    if options.dump_dir is not None and options.pipeline is not None:
        check_output(options.dump_dir, directory=True)
    if options.check and options.output is not None:
        return replace(batch, file=replace(options, output=None))
    return batch


def plan(inputs: Sequence[str], batch: BatchOptions) -> list[Job]:
    """The modules of the INPUTs, then this run's --shard of them; the output directory is made ready.

    A directory's modules are the files its globs find (an error when there are none), a file
    INPUT is a module whatever its name, and a file named twice is processed once, as first named.
    """
    globs = batch.globs or DEFAULT_GLOBS
    out = Path(batch.file.output) if batch.file.output is not None else None
    started = time.time()
    jobs: dict[str, Job] = {}
    for spelled in inputs:
        path = Path(spelled)
        if path.is_dir():
            found = discover(path, globs, exclude=out)
            if not found:
                raise HloError(f"{path}: no files matching {', '.join(globs)}")
            if out is not None:
                _prepare_output_dir(path, out)
                remove_stale_temporaries(out, started)
            elif batch.file.in_place:
                remove_stale_temporaries(path, started)
        elif path.exists():
            found = [Job(spelled)]
        else:
            raise HloError(f"{spelled}: no such file or directory")
        for job in found:
            jobs.setdefault(os.path.realpath(job.path), job)
    shard = batch.shard
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

    def walk_error(err: OSError) -> None:  # a subdirectory that cannot be listed: a failed member, as a file is
        relative = PurePosixPath(Path(err.filename).relative_to(root).as_posix())
        found.append((relative, Unlisted(str(err.filename), relative, err.strerror or type(err).__name__)))

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
    options: BatchOptions | FileOptions,
    *,
    jobs: Sequence[Job] | None = None,
    advance: Callable[[FileResult], None] = lambda result: None,
    executor: Executor | None = None,
    max_in_flight: int | None = None,
) -> BatchReport:
    """Process the INPUTs' modules; `advance` is called as each file finishes.

    `options` are the batch's, or only what to do with each file (the batch's own options left at
    their defaults: every file found, as many processes as CPUs, no report, no shard). `jobs` are the modules `plan` found (by default the options are checked and planned here).
    Without an `executor` they run in --jobs local worker processes, a file each at a time; with
    one (Dask's ``client.get_executor()``, a process pool), each file is a task on it, at most
    `max_in_flight` (default `in_flight` of --jobs or the CPU count) submitted and not yet tallied.
    Either way --verify-numerics compares each file where it was processed, so only small records
    come home and memory does not grow with the number of files; the report is the same.
    """
    batch = options if isinstance(options, BatchOptions) else BatchOptions(options)
    if jobs is None:
        batch = check_options(inputs, batch)
        jobs = plan(inputs, batch)
    workers = batch.jobs or os.cpu_count() or 1
    start = time.perf_counter()
    if batch.file.html is not None and batch.file.verify_numerics:
        make_directories(batch.file.html)
    files = run_batch(jobs, batch.file, workers, advance, executor, max_in_flight)
    if batch.file.html is not None and batch.file.verify_numerics:
        write_index(batch.file.html, files)
    report = BatchReport(list(inputs), batch, files)
    report.seconds = time.perf_counter() - start
    return report


def html_page(job: Job, root: str | None) -> str | None:
    """Where a batch member's HTML page goes: its path below its directory INPUT (a file INPUT's from the
    current directory, ``..`` spelled ``__``), plus ``.html``, under the ``--html`` directory `root`."""
    if root is None:
        return None
    parts = ["__" if part == ".." else part for part in job.key.parts]
    return str(Path(root, *parts)) + ".html"


def write_index(root: str, files: Sequence[FileResult]) -> str:
    """``index.html`` in the ``--html`` directory `root`: every file of the batch, worst error first, linked to
    its page (written by the worker that compared it); returns its path."""
    from hloopt.support.fileio import write_atomic
    from hloopt.viz.report import IndexEntry, index_page

    entries: list[IndexEntry] = []
    for file in files:
        if isinstance(file, Skipped):
            continue
        compared = [m for m in file.modules if m.drift is not None]
        worst = max(compared, key=lambda m: m.drift.severity if m.drift else (0, 0.0, 0.0), default=None)
        page = next((m.page for m in file.modules if m.page is not None), None)
        errors = [m.error["message"] for m in file.modules if m.error is not None]
        errors += [m.numerics["error"] for m in file.modules if m.numerics is not None and "error" in m.numerics]
        status = "failed" if any(m.status == "failed" for m in file.modules) else file.modules[0].status
        entries.append(
            IndexEntry(
                file.path,
                None if page is None else Path(os.path.relpath(page, root)).as_posix(),
                status,
                None if worst is None else worst.drift,
                all(m.within_tolerance for m in compared) if compared else None,
                errors[0] if errors else None,
            )
        )
    target = str(Path(root, "index.html"))
    write_atomic(target, index_page(f"hloopt: {len(entries)} files compared before and after the passes", entries))
    return target


def in_flight(workers: int) -> int:
    """How many files a batch keeps submitted for `workers` that run them: two each, so none waits for its next."""
    return 2 * workers


def run_batch(
    jobs: Sequence[Job],
    options: FileOptions,
    workers: int,
    advance: Callable[[FileResult], None] = lambda result: None,
    executor: Executor | None = None,
    window: int | None = None,
) -> list[FileResult]:
    """Process `jobs` in `workers` worker processes (one at least, whatever the number of files), or as
    tasks on `executor`, at most `window` (default `in_flight(workers)`) in flight; results in `jobs` order."""
    if executor is not None:
        outcomes = _on_executor(executor, jobs, options, window or in_flight(workers))
    else:
        outcomes = _in_workers(jobs, options, workers)
    results: dict[Job, FileResult] = {}
    with closing(outcomes):  # stopped early (Ctrl-C in `advance`), it ends the workers still busy
        for job, result in outcomes:
            results[job] = result
            advance(result)
    return [results[job] for job in jobs]


#: What a directory entry that is not a regular file is, for the report.
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def not_a_module(job: Job) -> str | None:
    """Why the file `job` found in a directory is not a module, or None when it is one or may be (a file
    INPUT, named by the user, always may be).

    What is not a regular file (a FIFO, a device, a link to one) is never read.

    Its name says so (one of XLA's `DUMP_ARTIFACTS`), or its content: a ``.txt`` (any extension but
    `MODULE_EXTENSIONS`) that opens like neither HLO nor MLIR text, a whole protobuf message that is
    neither an HloModuleProto, XLA's HloProto dump nor an HloSnapshot. A file that cannot be read, an empty one or a
    protobuf cut short is processed, and fails with its error: it may be a broken module.
    """
    if job.relative is None:
        return None
    try:
        mode = os.stat(job.path).st_mode
    except OSError:  # a dangling link: processed, and fails saying so
        return None
    if not stat.S_ISREG(mode):  # reading a FIFO waits forever, /dev/zero never ends
        return f"{_KINDS.get(stat.S_IFMT(mode), 'special file')}, not a regular file: not read"
    if job.relative.suffix in MODULE_EXTENSIONS:
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
        return f"a protobuf message (fields {shown}), neither an HloModuleProto, XLA's HloProto dump nor an HloSnapshot"
    if detected is not Format.HLO:
        return None
    text = data[:4096].decode("utf-8", "replace")
    if _HLO_START.match(text) or MLIR_START.match(text):
        return None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"text that is neither HLO nor MLIR (it opens with {first[:60]!r})"


def _work(job: Job, options: FileOptions) -> FileResult:
    """One batch member, in a worker: `process_file` (looked up at call time), then --verify-numerics here,
    in this process's XLA workers; trimmed to the small record the parent needs.

    The exceptions go (the error records say it all, and they may not pickle), and so do the texts
    and --per-pass stages: they were compared here, so no module's text ever leaves its worker.
    """
    if job.relative is not None:
        if isinstance(job, Unlisted):
            return _failed_file(job, f"{job.path}: cannot list directory: {job.reason}")
        if (reason := not_a_module(job)) is not None:
            return Skipped(job.name, [], reason=reason)
    result = process_file(job, options)
    if options.verify_numerics:
        for module in result.modules:
            module.page = html_page(job, options.html)
        verify_numerics(result.modules, options, _comparisons())
    for module in result.modules:
        module.exception = None
        module.texts = None
        module.stages = []
    return result


#: This process's XLA workers for --verify-numerics (in a batch worker): made at its first comparison and kept,
#: so a batch worker imports jax once, not once per module; they end with the worker, however it exits.
_COMPARISONS: IsolatedPool | None = None


def _comparisons() -> IsolatedPool:
    """This process's XLA workers."""
    global _COMPARISONS
    if _COMPARISONS is None:
        from hloopt.xla.bridge import IsolatedPool

        _COMPARISONS = IsolatedPool(1)
    return _COMPARISONS


def _in_worker(job: Job, options: FileOptions, cwd: str) -> FileResult:
    """In a worker: the file, in the batch's working directory (relative INPUTs and -o stay as given)."""
    try:
        os.chdir(cwd)
    except OSError as err:
        return _failed_file(
            job,
            f"{job.path}: this worker cannot reach the batch's directory {cwd} ({err.strerror}); "
            "an executor's workers need the filesystem the batch was started on",
        )
    with paused_gc():  # the worker is the batch's: its collector is paused file by file
        return _work(job, options)


def _result(job: Job, outcome: Any) -> FileResult:
    """A file's result from its call's outcome in a worker: what `_work` returned, or the worker's death."""
    if isinstance(outcome, FileResult):
        return outcome
    if isinstance(outcome, Crash):
        return _failed_file(job, f"{job.path}: the worker process died while processing this file ({_why(outcome)})")
    said = outcome.traceback.strip().splitlines()[-1] if isinstance(outcome, Bug) else str(outcome)
    return _failed_file(job, f"{job.path}: internal error: {said}")


def _why(crash: Crash | None) -> str:
    """A death in words: XLA's stage and how, when XLA ran in the worker (a .pb or .mlir read through jaxlib)."""
    if crash is None or crash.stage == "start":
        return "crash or out of memory"
    return f"XLA {crash.stage} failed: {crash.message}"


def _failed_file(job: Job, message: str) -> FileResult:
    """A file that was never processed, failed with `message`."""
    return FileResult(job.name, [ModuleResult(job.name, "failed", error={"message": message})])


def _in_workers(jobs: Sequence[Job], options: FileOptions, workers: int) -> Generator[tuple[Job, FileResult]]:
    """(job, result) as files finish in `workers` worker processes of a pool that ends with the batch
    (when it stops early, the workers caught writing remove their temporary files first)."""
    cwd = os.getcwd()
    with WorkerPool(min(workers, len(jobs))) as pool:
        for index, outcome in pool.results(_in_worker, [(job, options, cwd) for job in jobs]):
            yield jobs[index], _result(jobs[index], outcome)


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


def _on_executor(
    executor: Executor, jobs: Sequence[Job], options: FileOptions, window: int
) -> Generator[tuple[Job, FileResult]]:
    """(job, result) as files finish on `executor`, each a task; a task that fails (its worker lost) is its file's failure.

    The workers of an in-process executor (threads) belong to this batch's pool and end with it; a task
    pickled to another process uses that process's pool (`_EXECUTOR_POOL`), kept for its next tasks.
    """
    with WorkerPool() as pool:
        task = _Task(options, os.getcwd(), pool)
        with closing(_as_completed(executor, task, list(reversed(jobs)), window)) as done:
            for job, future in done:
                try:
                    result = future.result()
                except BrokenProcessPool:  # the executor's own worker process died on it
                    result = _failed_file(
                        job, f"{job.path}: the worker process died while processing this file ({_why(None)})"
                    )
                except Exception as err:
                    result = _failed_file(job, f"{job.path}: the executor lost this file: {type(err).__name__}: {err}")
                yield job, result


@dataclass(frozen=True)
class _Task:
    """One batch's work on an executor's worker: a file, processed in a worker process of that executor worker."""

    options: FileOptions
    cwd: str
    #: The batch's own pool when the task runs in its process; None in another (see `__getstate__`).
    pool: WorkerPool | None = field(default=None, compare=False)
    #: Dask's submit is pure by default: a task whose key (a hash of the function and its arguments) it
    #: still holds gets the held result, stale for a file changed since; each batch's keys are its own.
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __dask_tokenize__(self) -> str:
        return self.token

    def __getstate__(self) -> dict[str, Any]:
        """Pickled to another process, the task uses that process's pool, not this batch's."""
        return {**self.__dict__, "pool": None}

    def __call__(self, job: Job) -> FileResult:
        pool = self.pool or _EXECUTOR_POOL
        return _result(job, pool.call(_in_worker, (job, self.options, self.cwd)))


#: The worker processes of this process when it is an executor's worker (a Dask worker): kept across
#: batches, one per thread that runs tasks, ended when the worker exits.
_EXECUTOR_POOL = WorkerPool()
