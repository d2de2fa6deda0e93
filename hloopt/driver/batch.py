"""``hloopt run DIR``: every module under a directory, in parallel, with a report.

A module is the unit of failure: one that cannot be read, parsed, rewritten or
written is recorded with its error and the batch goes on. Each module's output
is written atomically by the process that made it, so a failure never leaves a
partial file. A worker process that dies (a crash, the OOM killer) costs only
the modules it held: they are retried one per fresh process, so the one that
kills its process is the one reported.

Each module goes through `hloopt.driver.flow.process_module`, exactly as a lone
file does; this module only finds the modules, spreads them over processes and
tallies the results. Nothing here prints or exits: the CLI does.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from hloopt.driver.flow import Job, ModuleResult, RunOptions, compare_numerics, process_module
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, discard_partial_writes, make_directories

DEFAULT_GLOBS = ("*.hlo", "*.txt", "*.pb", "*.mlir", "*.mlirbc")


@dataclass
class BatchReport:
    """Every module's result, in path order, plus the tallies the summary prints."""

    root: str
    options: RunOptions
    modules: list[ModuleResult]
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for m in self.modules if m.status == status)

    @property
    def failures(self) -> list[ModuleResult]:
        return [m for m in self.modules if m.status == "failed"]

    @property
    def numerics_failures(self) -> list[ModuleResult]:
        return [m for m in self.modules if m.numerics is not None and not m.numerics.get("ok")]

    @property
    def ok(self) -> bool:
        """No module failed or is over tolerance, and with --check none would change."""
        would_change = self.options.check and self.count("changed") > 0
        return not (self.failures or self.numerics_failures or would_change)

    def summary(self) -> dict[str, int]:
        return {
            "processed": len(self.modules),
            "changed": self.count("changed"),
            "unchanged": self.count("unchanged"),
            "failed": self.count("failed"),
        }

    def to_json(self) -> str:
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
        }
        return (
            json.dumps(
                {
                    "input": self.root,
                    "options": options,
                    "summary": self.summary(),
                    "seconds": round(self.seconds, 3),
                    "modules": [m.to_dict() for m in self.modules],
                },
                indent=2,
            )
            + "\n"
        )


def _as_path(spelled: str | None) -> str | None:
    """A path option as the report has always written it: normalised like `Path` prints it."""
    return None if spelled is None else str(Path(spelled))


def check_options(input_dir: str, options: RunOptions) -> RunOptions:
    """A directory INPUT needs somewhere for its modules to go; returns the options the batch runs with.

    With --check nothing is written, so an -o OUTDIR is ignored (and recorded as such in the report).
    """
    if options.output is None and not (options.in_place or options.check or options.show_diff):
        raise HloError(
            f"{input_dir}: is a directory; to process every module in it give -o OUTDIR, --in-place, --check or --diff"
        )
    if options.output == "-":
        raise HloError(f"{input_dir}: is a directory; its modules cannot be written to stdout, give -o OUTDIR")
    # Checked before any module is processed, so a bad path costs nothing and leaves nothing written.
    if options.report_path is not None:
        check_output(options.report_path)
    if options.dump_dir is not None and options.passes is not None:
        check_output(options.dump_dir, directory=True, create=True)
    if options.check and options.output is not None:
        return replace(options, output=None)
    return options


def plan(root: Path, options: RunOptions) -> list[Job]:
    """The modules under `root` (an error when there are none), with the output directory made ready."""
    globs = options.globs or DEFAULT_GLOBS
    out = Path(options.output) if options.output is not None else None
    found = discover(root, globs, exclude=out)
    if not found:
        raise HloError(f"{root}: no files matching {', '.join(globs)}")
    if out is not None:
        _prepare_output_dir(root, out)
    return found


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
    root: Path, jobs: Sequence[Job], options: RunOptions, advance: Callable[[ModuleResult], None] = lambda result: None
) -> BatchReport:
    """Process `jobs` (from `plan`), then --verify-numerics; `advance` is called as each module finishes."""
    workers = options.jobs or os.cpu_count() or 1
    start = time.perf_counter()
    results = run_batch(jobs, options, workers, advance)
    if options.verify_numerics:
        todo = [m for m in results if m.texts is not None]
        for module, outcome in zip(todo, compare_numerics(todo, options, workers)):
            module.numerics = (
                {"ok": False, "error": str(outcome)} if isinstance(outcome, HloError) else outcome.to_dict()
            )
            module.texts = None
            module.stages = []
    return BatchReport(str(root), options, results, time.perf_counter() - start)


def run_batch(
    jobs: Sequence[Job],
    options: RunOptions,
    workers: int,
    advance: Callable[[ModuleResult], None] = lambda result: None,
) -> list[ModuleResult]:
    """Process `jobs` in `workers` processes (in this one when 1); results in `jobs` order."""
    results: dict[Job, ModuleResult] = {}
    suspects: list[Job] = []
    if workers <= 1 or len(jobs) <= 1:
        outcomes: Iterator[tuple[Job, ModuleResult | None]] = ((job, _work(job, options)) for job in jobs)
    else:
        outcomes = _in_pool(jobs, options, workers)
    for job, result in outcomes:
        if result is None:
            suspects.append(job)
            continue
        results[job] = result
        advance(result)
    for job in suspects:  # each alone in a fresh process: only the module that kills it is lost
        ((_, result),) = _in_pool([job], options, 1)
        results[job] = result if result is not None else _died(job)
        advance(results[job])
    return [results[job] for job in jobs]


def _work(job: Job, options: RunOptions) -> ModuleResult:
    """One batch member: `process_module` (looked up at call time), trimmed to what the parent needs.

    The exception goes (the error record says it all, and it may not pickle); the
    texts (and --per-pass stages) stay only for a changed module that --verify-numerics will compare.
    """
    result = process_module(job, options)
    result.exception = None
    if not (options.verify_numerics and result.status == "changed"):
        result.texts = None
        result.stages = []
    return result


def _died(job: Job) -> ModuleResult:
    return ModuleResult(
        job.name,
        "failed",
        error={"message": f"{job.path}: the worker process died while processing this module (crash or out of memory)"},
    )


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


def _in_pool(jobs: Sequence[Job], options: RunOptions, workers: int) -> Iterator[tuple[Job, ModuleResult | None]]:
    """(job, result) as modules finish; result None when the pool broke while the job was in it."""
    queue = list(reversed(jobs))
    with _pool(workers) as pool:
        running: dict[Future[ModuleResult], Job] = {}
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


def summary_lines(report: BatchReport) -> list[str]:
    """The tally, then each failure's located message (indented like the single-file error)."""
    counts = report.summary()
    changed = "would change" if report.options.check else "changed"
    lines = [
        f"hloopt: {counts['processed']} processed, {counts['changed']} {changed}, "
        f"{counts['unchanged']} unchanged, {counts['failed']} failed ({report.seconds:.1f}s)"
    ]
    lines += [f"hloopt: error: {m.error['message']}" for m in report.failures if m.error is not None]
    for module in report.numerics_failures:
        assert module.numerics is not None
        why = module.numerics.get("error") or "outputs differ beyond tolerance (see --report)"
        lines.append(f"hloopt: numerics: {module.path}: {why}")
    return lines
