"""``hloopt run DIR``: every module under a directory, in parallel, with a report.

A module is the unit of failure: one that cannot be read, parsed, rewritten or
written is recorded with its error and the batch goes on. Each module's output
is written atomically by the process that made it, so a failure never leaves a
partial file. A worker process that dies (a crash, the OOM killer) costs only
the modules it held: they are retried one per fresh process, so the one that
kills its process is the one reported.
"""
from __future__ import annotations

import difflib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from hloopt.errors import HloError, HloParseError
from hloopt.support.fileio import read_text, write_atomic

DEFAULT_GLOBS = ("*.hlo", "*.txt")


@dataclass(frozen=True)
class BatchOptions:
    """What to do with each module; the same for every module of a batch."""

    passes: str | None = None
    numerics: str = "xla"
    check: bool = False
    show_diff: bool = False
    in_place: bool = False
    output_dir: Path | None = None
    dump_dir: Path | None = None


@dataclass(frozen=True)
class Job:
    """One module: its path as the user will see it, and where it sits below the input root."""

    path: Path
    relative: PurePosixPath


@dataclass
class ModuleResult:
    """The outcome of one module, as it goes into the summary and ``--report``."""

    path: str
    status: str  # "changed", "unchanged" or "failed"
    seconds: float = 0.0
    passes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    output: str | None = None
    diff: str = ""
    numerics: dict[str, Any] | None = None
    #: Before and after text, kept only while --verify-numerics still needs them (never reported).
    texts: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for private in ("texts", "diff"):
            del data[private]
        return data


@dataclass
class BatchReport:
    """Every module's result, in path order, plus the tallies the summary prints."""

    root: str
    options: BatchOptions
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

    def summary(self) -> dict[str, int]:
        return {"processed": len(self.modules), "changed": self.count("changed"),
                "unchanged": self.count("unchanged"), "failed": self.count("failed")}

    def to_json(self) -> str:
        options = {key: str(value) if isinstance(value, Path) else value for key, value in asdict(self.options).items()}
        return json.dumps({"input": self.root, "options": options, "summary": self.summary(),
                           "seconds": round(self.seconds, 3),
                           "modules": [m.to_dict() for m in self.modules]}, indent=2) + "\n"


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
    jobs: list[Job] = []

    def walk_error(err: OSError) -> None:
        raise HloError(f"{err.filename}: cannot list directory: {err.strerror}")

    for directory, subdirs, files in os.walk(root, onerror=walk_error):
        here = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if skip is None or (here / d).resolve() != skip)
        for name in files:
            relative = PurePosixPath((here / name).relative_to(root).as_posix())
            if any(relative.match(pattern) for pattern in globs):
                jobs.append(Job(here / name, relative))
    return sorted(jobs, key=lambda job: job.relative)


def process_module(job: Job, options: BatchOptions, keep_texts: bool = False) -> ModuleResult:
    """Read, parse, run the passes, print and write one module; any error becomes a failed result."""
    from hloopt.text.parser import parse
    from hloopt.passes.pipeline import run_pipeline

    start = time.perf_counter()
    result = ModuleResult(str(job.path), "unchanged")
    try:
        source = read_text(str(job.path))
        module = parse(source, str(job.path))
        changed = False
        if options.passes is not None:
            dump = options.dump_dir / job.relative if options.dump_dir is not None else None
            report = run_pipeline(module, options.passes, numerics=options.numerics, dump_dir=dump,
                                  original=lambda: parse(source, str(job.path)))
            result.passes = [{"name": p.name, "changed": p.changed, "rewritten": p.rewritten} for p in report.passes]
            result.warnings = [f"{p.name}: {w}" for p in report.passes for w in p.warnings]
            changed = report.changed
        text = module.to_text()
        if options.passes is None:
            changed = text != source
        result.status = "changed" if changed else "unchanged"
        if options.show_diff and text != source:
            result.diff = "".join(difflib.unified_diff(
                source.splitlines(True), text.splitlines(True), str(job.path), f"{job.path} (after)"))
        target = _target(job, options)
        if target is not None and not (options.in_place and text == source):
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, text)
            result.output = str(target)
        if keep_texts and changed:
            result.texts = (source, text)
    except Exception as err:  # noqa: BLE001 - one module's failure, whatever it is, must not end the batch
        result.status = "failed"
        result.error = error_record(err, job.path)
    result.seconds = round(time.perf_counter() - start, 4)
    return result


def _target(job: Job, options: BatchOptions) -> Path | None:
    if options.check:
        return None
    if options.in_place:
        return job.path
    return options.output_dir / job.relative if options.output_dir is not None else None


def error_record(err: BaseException, path: Path) -> dict[str, Any]:
    """An error as the report stores it: a parse error keeps its location, every message names the file."""
    if isinstance(err, HloParseError):
        loc = err.location
        return {"message": str(err), "file": loc.filename, "line": loc.line, "column": loc.column}
    if isinstance(err, HloError):
        message = str(err)
    elif isinstance(err, OSError):
        reason = err.strerror or str(err)
        message = f"{err.filename or path}: {reason[:1].lower()}{reason[1:]}"
    else:  # a bug in hloopt, not in the module: say so rather than hide it
        message = f"internal error: {type(err).__name__}: {err}"
    return {"message": message if message.startswith(str(path)) else f"{path}: {message}"}


def _work(job: Job, options: BatchOptions, keep_texts: bool) -> ModuleResult:
    """The pool's entry point; looks `process_module` up at call time."""
    return process_module(job, options, keep_texts)


def _died(job: Job) -> ModuleResult:
    return ModuleResult(str(job.path), "failed", error={
        "message": f"{job.path}: the worker process died while processing this module (crash or out of memory)"})


def _pool(workers: int) -> ProcessPoolExecutor:
    # fork: workers inherit the imported parser instead of importing it again; jax is never imported here.
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))


def _in_pool(jobs: Sequence[Job], options: BatchOptions, workers: int, keep_texts: bool) -> Iterator[tuple[Job, ModuleResult | None]]:
    """(job, result) as modules finish; result None when the pool broke while the job was in it."""
    queue = list(reversed(jobs))
    with _pool(workers) as pool:
        running: dict[Future[ModuleResult], Job] = {}
        while queue or running:
            while queue and len(running) < 2 * workers:
                job = queue.pop()
                try:
                    running[pool.submit(_work, job, options, keep_texts)] = job
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


def run_batch(
    jobs: Sequence[Job],
    options: BatchOptions,
    workers: int,
    keep_texts: bool = False,
    advance: Callable[[ModuleResult], None] = lambda result: None,
) -> list[ModuleResult]:
    """Process `jobs` in `workers` processes (in this one when 1); results in `jobs` order."""
    results: dict[Job, ModuleResult] = {}
    suspects: list[Job] = []
    if workers <= 1 or len(jobs) <= 1:
        outcomes: Iterator[tuple[Job, ModuleResult | None]] = ((job, process_module(job, options, keep_texts)) for job in jobs)
    else:
        outcomes = _in_pool(jobs, options, workers, keep_texts)
    for job, result in outcomes:
        if result is None:
            suspects.append(job)
            continue
        results[job] = result
        advance(result)
    for job in suspects:  # each alone in a fresh process: only the module that kills it is lost
        ((_, result),) = _in_pool([job], options, 1, keep_texts)
        results[job] = result if result is not None else _died(job)
        advance(results[job])
    return [results[job] for job in jobs]


def _compare(before: str, after: str, rtol: float, atol: float, label: str) -> dict[str, Any]:
    """`execution.compare` as JSON, in an XLA worker; a bug is reported as this module's error, not the batch's."""
    from hloopt.xla.execution import compare

    try:
        return compare(before, after, rtol=rtol, atol=atol, labels=(label, "after passes")).to_dict()
    except HloError:
        raise
    except Exception as err:  # noqa: BLE001 - isolated_map would stop the whole batch on it
        raise HloError(f"internal error: {type(err).__name__}: {err}") from None


def verify_numerics_of(results: Sequence[ModuleResult], rtol: float, atol: float, workers: int) -> None:
    """Run each changed module before and after through XLA (worker processes) and record the comparison."""
    from hloopt.xla.bridge import isolated_map

    todo = [m for m in results if m.texts is not None]
    calls = [(*m.texts, rtol, atol, m.path) for m in todo]  # type: ignore[misc]
    for module, outcome in zip(todo, isolated_map(_compare, calls, workers=max(workers, 1))):
        module.numerics = {"ok": False, "error": str(outcome)} if isinstance(outcome, HloError) else outcome
        module.texts = None


def run_directory(
    input_dir: str, output_dir: str | None, *, passes: str | None, dump_dir: str | None, show_diff: bool,
    check: bool, numerics: str, verify_numerics: bool, rtol: float, atol: float, in_place: bool,
    globs: tuple[str, ...], jobs: int | None, report_path: str | None,
) -> None:
    """``hloopt run DIR``: check the arguments, run the batch with a progress bar, print the summary, exit."""
    import sys

    import click

    from hloopt.passes.pipeline import order_note
    from hloopt.passes.registry import select

    if output_dir is None and not (in_place or check or show_diff):
        raise HloError(f"{input_dir}: is a directory; to process every module in it give -o OUTDIR, "
                       "--in-place, --check or --diff")
    if output_dir == "-":
        raise HloError(f"{input_dir}: is a directory; its modules cannot be written to stdout, give -o OUTDIR")
    if passes is not None:
        note = order_note(*select(passes))  # and an unknown pass is one error now, not one per module
        if note:
            click.echo(f"hloopt: note: {note}", err=True)
    root = Path(input_dir)
    out = Path(output_dir) if output_dir is not None and not check else None
    found = discover(root, globs or DEFAULT_GLOBS, exclude=out)
    if not found:
        raise HloError(f"{root}: no files matching {', '.join(globs or DEFAULT_GLOBS)}")
    if out is not None:
        _prepare_output_dir(root, out)
    options = BatchOptions(passes, numerics, check, show_diff, in_place, out,
                           Path(dump_dir) if dump_dir is not None else None)
    workers = jobs or os.cpu_count() or 1
    start = time.perf_counter()
    if sys.stderr.isatty():
        with click.progressbar(length=len(found), file=sys.stderr, label="hloopt") as bar:
            results = run_batch(found, options, workers, verify_numerics, advance=lambda _: bar.update(1))
    else:  # click's bar would still print its label to a pipe or a CI log
        results = run_batch(found, options, workers, verify_numerics)
    if verify_numerics:
        verify_numerics_of(results, rtol, atol, workers)
    report = BatchReport(str(root), options, results, time.perf_counter() - start)
    for result in results:
        if result.diff:
            click.echo(result.diff, nl=False)
        for warning in result.warnings:
            click.echo(f"hloopt: warning: {result.path}: {warning}", err=True)
    for line in summary_lines(report):
        click.echo(line, err=True)
    if report_path is not None:
        write_atomic(report_path, report.to_json())
    would_change = check and report.count("changed") > 0
    sys.exit(1 if report.failures or report.numerics_failures or would_change else 0)


def _prepare_output_dir(root: Path, out: Path) -> None:
    """OUTDIR exists or is created, is a directory, and is not the input tree itself."""
    if out.exists() and not out.is_dir():
        raise HloError(f"{out}: is a file, expected a directory")
    if out.exists() and out.resolve() == root.resolve():
        raise HloError(f"{out}: is the input directory; use --in-place to overwrite the inputs")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise HloError(f"{out}: permission denied") from None
    except OSError as err:
        raise HloError(f"{out}: cannot create directory: {err.strerror}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise HloError(f"{out}: permission denied")


def summary_lines(report: BatchReport) -> list[str]:
    """The tally, then each failure's located message (indented like the single-file error)."""
    counts = report.summary()
    changed = "would change" if report.options.check else "changed"
    lines = [f"hloopt: {counts['processed']} processed, {counts['changed']} {changed}, "
             f"{counts['unchanged']} unchanged, {counts['failed']} failed ({report.seconds:.1f}s)"]
    lines += [f"hloopt: error: {m.error['message']}" for m in report.failures if m.error is not None]
    for module in report.numerics_failures:
        assert module.numerics is not None
        why = module.numerics.get("error") or "outputs differ beyond tolerance (see --report)"
        lines.append(f"hloopt: numerics: {module.path}: {why}")
    return lines
