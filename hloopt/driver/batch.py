"""``hloopt run DIR`` (or several INPUTs): every module under them, in parallel, with a report.

A module is the unit of failure: one that cannot be read, parsed, rewritten or
written is recorded with its error and the batch goes on. Each file's output
is written atomically by the process that made it, so a failure never leaves a
partial file. A worker process that dies (a crash, the OOM killer) costs only
the files it held: they are retried one per fresh process, so the one that
kills its process is the one reported.

Each file goes through `hloopt.driver.flow.process_file`, exactly as a lone
file does; this module only finds the files, picks this run's shard of them,
spreads them over processes and tallies the results. Nothing here prints or
exits: the CLI does.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from hloopt.driver import report as reports
from hloopt.driver.flow import FileResult, Job, ModuleResult, RunOptions, compare_numerics, process_file
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, discard_partial_writes, make_directories

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
    jobs: Sequence[Job],
    options: RunOptions,
    advance: Callable[[FileResult], None] = lambda result: None,
) -> BatchReport:
    """Process `jobs` (from `plan`), then --verify-numerics; `advance` is called as each file finishes."""
    workers = options.jobs or os.cpu_count() or 1
    start = time.perf_counter()
    report = BatchReport(list(inputs), options, run_batch(jobs, options, workers, advance))
    if options.verify_numerics:
        todo = [m for m in report.modules if m.texts is not None]
        for module, outcome in zip(todo, compare_numerics(todo, options, workers)):
            module.numerics = (
                {"ok": False, "error": str(outcome)} if isinstance(outcome, HloError) else outcome.to_dict()
            )
            module.texts = None
            module.stages = []
    report.seconds = time.perf_counter() - start
    return report


def run_batch(
    jobs: Sequence[Job],
    options: RunOptions,
    workers: int,
    advance: Callable[[FileResult], None] = lambda result: None,
) -> list[FileResult]:
    """Process `jobs` in `workers` processes (in this one when 1); results in `jobs` order."""
    results: dict[Job, FileResult] = {}
    suspects: list[Job] = []
    if workers <= 1 or len(jobs) <= 1:
        outcomes: Iterator[tuple[Job, FileResult | None]] = ((job, _work(job, options)) for job in jobs)
    else:
        outcomes = _in_pool(jobs, options, workers)
    for job, result in outcomes:
        if result is None:
            suspects.append(job)
            continue
        results[job] = result
        advance(result)
    for job in suspects:  # each alone in a fresh process: only the file that kills it is lost
        ((_, result),) = _in_pool([job], options, 1)
        results[job] = result if result is not None else _died(job)
        advance(results[job])
    return [results[job] for job in jobs]


def _work(job: Job, options: RunOptions) -> FileResult:
    """One batch member: `process_file` (looked up at call time), trimmed to what the parent needs.

    The exceptions go (the error records say it all, and they may not pickle); the texts
    (and --per-pass stages) stay only for a changed module that --verify-numerics will compare.
    """
    result = process_file(job, options)
    for module in result.modules:
        module.exception = None
        if not (options.verify_numerics and module.status == "changed"):
            module.texts = None
            module.stages = []
    return result


def _died(job: Job) -> FileResult:
    message = f"{job.path}: the worker process died while processing this file (crash or out of memory)"
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


def _in_pool(jobs: Sequence[Job], options: RunOptions, workers: int) -> Iterator[tuple[Job, FileResult | None]]:
    """(job, result) as files finish; result None when the pool broke while the job was in it."""
    queue = list(reversed(jobs))
    with _pool(workers) as pool:
        running: dict[Future[FileResult], Job] = {}
        while queue or running:
            while queue and len(running) < 2 * workers:
                job = queue.pop()
                try:
                    running[pool.submit(_work, job, options)] = job
                except BrokenProcessPool:
                    yield job, None
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                job = running.pop(future)
                try:
                    yield job, future.result()
                except BrokenProcessPool:
                    yield job, None
            if done and any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                yield from ((job, None) for job in reversed(queue))
                for future, job in running.items():
                    future.cancel()
                    yield job, None
                return
