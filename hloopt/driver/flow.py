"""One file's flow, the same for ``hloopt run FILE`` and for every file of ``hloopt run DIR``.

read → parse → passes (verified after each change) → print → diff → write, then
optionally the numerics check. A file is one module, or with ``--split-input-file``
one module per ``// -----`` chunk (`hloopt.driver.chunks`), written back whole.
`process_file` returns what happened and never prints or exits: the CLI decides
what to echo, a batch worker sends the result home, and a batch of any shape
(processes today, other executors later) reuses it.
"""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from hloopt import errors
from hloopt.driver import chunks
from hloopt.driver.chunks import Place, as_file, in_chunk, label
from hloopt.errors import HloError, HloParseError
from hloopt.support.fileio import check_output, make_directories, source_name, write_atomic
from hloopt.support.formats import Format, named_for, named_format
from hloopt.support.tolerances import VERIFY_ATOL, VERIFY_RTOL
from hloopt.xla import formats
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit

if TYPE_CHECKING:
    from hloopt.arrays.comparing import CompareReport, Drift
    from hloopt.ir.module import Module
    from hloopt.passes.neuron_cc_flags import Compiler
    from hloopt.passes.pipeline import ChangedCheck, PassReport
    from hloopt.viz.report import ModuleSection
    from hloopt.xla.bridge import IsolatedPool

Status = Literal["changed", "unchanged", "failed"]


@dataclass(frozen=True)
class FileOptions:
    """What ``hloopt run`` does with each file: a lone file's options, and every file's in a batch."""

    passes: str | None = None
    numerics: str = "xla"
    check: bool = False
    show_diff: bool = False
    in_place: bool = False
    # Paths stay as the user spelled them: messages and diff headers quote them.
    #: A lone file's output file, or a directory's output root (None: stdout for a file, nothing for a directory).
    output: str | None = None
    #: Where the module after each pass is dumped; a batch member dumps below it at its relative path.
    dump_dir: str | None = None
    verify_numerics: bool = False
    #: With verify_numerics: also compare the module after each pass that changed it (`compare_passes`).
    per_pass: bool = False
    rtol: float = VERIFY_RTOL
    atol: float = VERIFY_ATOL
    #: ``hlo``, ``pb`` or ``mlir``: what outputs are written as (None: by -o's extension; a batch
    #: member keeps its input's format).
    output_format: str | None = None
    #: Each ``// -----`` chunk of a text file is a module of its own; the file is written back whole.
    split_input_file: bool = False
    #: Seconds any one XLA call may take (reading or writing a .pb or .mlir file, one module's
    #: comparison); then its worker is killed and the module fails. 0: no limit.
    timeout: float = DEFAULT_TIMEOUT
    #: The pipeline's changed-flag check (`run_pipeline`'s `check_changed`; the CLI reads $HLOOPT_CHECK_PASS_CHANGED).
    check_changed: ChangedCheck | None = None
    #: neuronx-cc's flags (``--neuron-cc-flags``): the auto-cast they ask for runs with `passes`. The CLI
    #: replaces ``env`` by ``$NEURON_CC_FLAGS``'s text, so a batch's workers, wherever they run, read the same.
    neuron_cc_flags: str | None = None
    #: The neuronx-cc release whose defaults `neuron_cc_flags` override (``--neuron-compiler``).
    neuron_compiler: Compiler | None = None
    #: With verify_numerics, the HTML report (``--html``): a lone file's page, or a batch's directory of pages
    #: (each file's at its relative path plus ``.html``, and ``index.html``).
    html: str | None = None

    @property
    def pipeline(self) -> str | None:
        """What runs: `passes` with the compiler flags' ``neuron-auto-cast`` entry; None: no passes at all."""
        if self.neuron_cc_flags is None and self.neuron_compiler is None:
            return self.passes
        from hloopt.passes.neuron_cc_flags import parse_neuron_cc_flags

        return parse_neuron_cc_flags(self.neuron_cc_flags or "", self.neuron_compiler).with_passes(self.passes)


@dataclass(frozen=True)
class Job:
    """One module: where to read it (``-`` is stdin) and, for a batch member, where it sits below the root."""

    path: str
    relative: PurePosixPath | None = None

    @property
    def name(self) -> str:
        """The module as messages name it."""
        return source_name(self.path)

    @property
    def key(self) -> PurePosixPath:
        """What picks the module's shard: its path below its directory INPUT, or a file INPUT's path
        from the current directory; so neither depends on where the checkout is."""
        return (
            self.relative if self.relative is not None else PurePosixPath(Path(os.path.relpath(self.path)).as_posix())
        )

    def below(self, root: str | None) -> str | None:
        """A lone file's output (or dump) is `root` itself; a batch member's is its place in the mirrored tree."""
        if root is None or self.relative is None:
            return root
        return str(Path(root) / self.relative)


@dataclass
class ModuleResult:
    """The outcome of one module, as it goes into the summary and ``--report``."""

    path: str
    status: Status = "unchanged"
    seconds: float = 0.0
    #: What each pass did, as the pipeline reported it (name, changed, rewritten, warnings).
    passes: list[PassReport] = field(default_factory=list)
    error: dict[str, Any] | None = None
    #: The file the module was written into (a chunk's is its whole file's).
    output: str | None = None
    numerics: dict[str, Any] | None = None
    #: Which chunk of its file the module is, with --split-input-file.
    chunk: Place | None = None
    #: Source (a chunk's at its place in the file) and printed text (never reported; a batch keeps
    #: them only for --verify-numerics).
    texts: tuple[str, str] | None = None
    #: (pass name, module text after it) for each pass that changed the module; kept only for --per-pass.
    stages: list[tuple[str, str]] = field(default_factory=list)
    #: What writing the output in its format did not keep (`hloopt.xla.formats.losses`).
    losses: list[str] = field(default_factory=list[str])
    #: What failed, for a caller in this process that reports it itself (it does not survive pickling).
    exception: Exception | None = field(default=None, repr=False, compare=False)
    #: The arguments of the HloSnapshot the module was read from: --verify-numerics runs on them (then drops them,
    #: so that a batch worker's record comes home small).
    inputs: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    #: With --verify-numerics: the file's output, held back until its modules' comparisons are done
    #: (`compare_numerics` writes it, or not); shared by the modules of one file.
    pending: Output | None = field(default=None, repr=False, compare=False)
    #: With --html: the page of the module's file (``--html``, or a batch member's `batch.html_page`), and,
    #: once it is written, the comparison's summary, which a batch's index sorts by (neither is in ``--report``).
    page: str | None = None
    drift: Drift | None = None
    within_tolerance: bool | None = None

    @property
    def label(self) -> str:
        return label(self.path, self.chunk)

    @property
    def warnings(self) -> list[str]:
        return [f"{p.name}: {w}" for p in self.passes for w in p.warnings]

    def to_dict(self) -> dict[str, Any]:
        """The module's entry in ``--report``."""
        return {
            "path": self.path,
            "chunk": None if self.chunk is None else {"index": self.chunk.index, "line": self.chunk.line},
            "status": self.status,
            "seconds": self.seconds,
            "passes": [{"name": p.name, "changed": p.changed, "rewritten": p.rewritten} for p in self.passes],
            "warnings": self.warnings,
            "error": self.error,
            "output": self.output,
            "losses": self.losses,
            "numerics": self.numerics,
        }


@dataclass
class FileResult:
    """One input file: its module, or with --split-input-file one per chunk; it is diffed and written whole."""

    path: str
    modules: list[ModuleResult]
    #: The unified diff of the file against its output, with --diff.
    diff: str = ""

    @property
    def text(self) -> str:
        """The file's output: its module printed, or its chunks' prints rejoined (while their texts are kept)."""
        printed = [module.texts[1] for module in self.modules if module.texts is not None]
        if len(printed) != len(self.modules):
            raise ValueError(f"{self.path}: a module failed or its text was not kept")
        return chunks.join(printed)


@dataclass
class Output:
    """One file's output, ready to write: where, what, what its format does not keep, and the modules it holds."""

    target: str
    #: The text, or the bytes of another format; or the text in pieces, written as they are printed.
    data: str | bytes | Iterable[str]
    losses: list[str]
    #: A batch mirrors the input tree, so the directories on the way are made; a lone file's must exist.
    mirrored: bool
    modules: list[ModuleResult]

    def hold(self) -> None:
        """Keep it back until its modules' comparisons are done; their ``output`` says where it is to go."""
        for module in self.modules:
            module.output, module.losses, module.pending = self.target, self.losses, self

    def withhold(self) -> None:
        """Drop it: it is not to be written."""
        for module in self.modules:
            module.output, module.losses, module.pending = None, [], None

    def write(self) -> None:
        """Write it (atomically; a device or FIFO is written through) and record it on its modules."""
        if self.mirrored:
            make_directories(Path(self.target).parent)
        write_atomic(self.target, self.data)
        for module in self.modules:
            module.output, module.losses, module.pending = self.target, self.losses, None


def process_file(job: Job, options: FileOptions, pool: IsolatedPool | None = None) -> FileResult:
    """Read, parse, run the passes, print, diff and write one file; any error becomes a failed result.

    A .pb or StableHLO file is read, and such an output written, by XLA in a worker of `pool` (else
    one started for the conversion): a file that crashes XLA fails alone.

    With --split-input-file each chunk is a module with its own result (errors located in the file),
    and the file is written only when every chunk succeeded, so a failure never leaves half an output.
    With --verify-numerics each module is first checked to be one XLA will run (`check_executable`),
    and the output waits, as each module's ``pending``, for `compare_numerics` (or `verify_numerics`):
    a comparison that cannot be done is an error, and an error writes nothing.
    """
    start = time.perf_counter()
    file = FileResult(job.name, [ModuleResult(job.name)])
    try:
        _process(job, options, file, pool)
    except Exception as err:  # the file as a whole failed (reading, splitting, writing): so did each of its modules
        for module in file.modules:
            _failed(module, err, job.name)
    if len(file.modules) == 1:  # a file of one module: the file's time is the module's
        file.modules[0].seconds = round(time.perf_counter() - start, 4)
    if options.verify_numerics and options.html is not None:  # a batch member's is named by the batch
        for module in file.modules:
            module.page = options.html
    return file


def _failed(result: ModuleResult, err: Exception, name: str) -> None:
    result.status = "failed"
    result.error = error_record(err, name)
    result.exception = err


def output_target(job: Job, options: FileOptions, read: Format) -> str | None:
    """Where `job`'s output goes (None: nowhere, or stdout): INPUT itself with --in-place, -o for a lone
    file, else its place in the mirrored tree named for the format written there (`named_for`), which
    for a batch member is its input's format `read` unless --output-format says another."""
    if options.check:
        return None
    if options.in_place:
        return job.path
    target = job.below(options.output)
    if target is None or job.relative is None:
        return target
    return named_for(target, _output_format(job, options, read, target))


def output_clashes(jobs: Sequence[Job], options: FileOptions) -> list[str]:
    """Each output two files of a batch would be written into (``a.hlo`` and ``a.pb`` under
    ``--output-format pb``), saying which; each file's format is the one its name says."""
    writers: dict[str, list[str]] = {}
    for job in jobs:
        target = output_target(job, options, named_format(job.path) or Format.HLO)
        if target is not None and not options.in_place:
            writers.setdefault(target, []).append(job.name)
    return [
        f"{target}: would be written from both {' and '.join(names)}"
        for target, names in writers.items()
        if len(names) > 1
    ]


def _process(job: Job, options: FileOptions, file: FileResult, pool: IsolatedPool | None) -> None:
    target = output_target(job, options, named_format(job.path) or Format.HLO)
    dump = job.below(options.dump_dir) if options.pipeline is not None else None
    # Every output is checked before anything is written: a path that cannot be written leaves nothing behind.
    # (--in-place rewrites INPUT only when its text changes: its directory is checked only then, by the write.)
    if target is not None and not options.in_place:
        check_output(target, create=job.relative is not None)
        if options.split_input_file and (fmt := _output_format(job, options, Format.HLO, target)) is not Format.HLO:
            raise HloError(f"{target}: --split-input-file writes its chunks back as HLO text, not as {fmt.value}")
    if options.in_place and options.output_format is not None:
        fmt = formats.output_format(job.path, options.output_format)
        if named_for(job.path, fmt) != job.path:
            raise HloError(
                f"{job.name}: --in-place keeps each file's name, which does not say {fmt.value}; "
                f"write --output-format {options.output_format} into -o OUTDIR instead"
            )
    if dump is not None:
        check_output(dump, directory=True, create=job.relative is not None)
    loaded = formats.load(job.path, timeout=options.timeout, pool=pool)
    if loaded.snapshot is not None and options.verify_numerics:
        file.modules[0].inputs = tuple(loaded.snapshot.inputs)
    named = output_target(job, options, loaded.format)
    if target is not None and named is not None and named != target:
        target = named  # the format the file holds is not the one its name says (a .mlirbc becomes .mlir)
        check_output(target, create=job.relative is not None)
    if options.split_input_file:
        pieces = chunks.split_loaded(loaded, job.name)
        file.modules = [ModuleResult(job.name, chunk=piece.place) for piece in pieces]
        for piece, module in zip(pieces, file.modules):
            start = time.perf_counter()
            chunk_dump = None if dump is None else str(Path(dump, f"chunk-{piece.place.index:02d}"))
            try:
                _process_module(piece.located, piece.text, job.name, options, module, chunk_dump, loaded.format)
            except Exception as err:  # this chunk's failure; the others are still processed and reported
                _failed(module, in_chunk(err, module.label, job.name) if isinstance(err, HloError) else err, job.name)
            module.seconds = round(time.perf_counter() - start, 4)
        if any(module.status == "failed" for module in file.modules):
            return
    else:
        # The common case, HLO text into a file, streams: the printed module is written as it is printed,
        # never held whole (a module of a gigabyte of constants: issue 28).
        streamed = (
            target is not None
            and not (options.show_diff or options.verify_numerics or options.in_place)
            and _output_format(job, options, loaded.format, target) is Format.HLO
        )
        module = _process_module(
            loaded.text, loaded.text, job.name, options, file.modules[0], dump, loaded.format, keep_text=not streamed
        )
        if streamed:
            assert target is not None
            _write_streamed(
                module, loaded.text, Output(target, (), [], job.relative is not None, file.modules), options
            )
            return
    # Files end in one newline (`as_file`): a module is unchanged whichever way its file ends.
    source, text = loaded.text, as_file(file.text)
    if options.show_diff and text != as_file(source):
        # A lone file's diff names the file it writes; a batch's names each file "(after)".
        after = target if target is not None and job.relative is None else f"{job.name} (after)"
        file.diff = "".join(difflib.unified_diff(source.splitlines(True), text.splitlines(True), job.name, after))
    if target is not None and not (options.in_place and text == as_file(source)):
        fmt = _output_format(job, options, loaded.format, target)
        data = formats.dump(text, fmt, job.name, timeout=options.timeout, pool=pool)
        output = Output(target, data, formats.losses(text, fmt), job.relative is not None, file.modules)
        if options.verify_numerics:
            output.hold()
        else:
            output.write()


def _process_module(
    located: str,
    source: str,
    name: str,
    options: FileOptions,
    result: ModuleResult,
    dump: str | None,
    read: Format,
    keep_text: bool = True,
) -> Module:
    """Parse `located` (`source` at its place in its file, read as `read`), run the passes, print: into `result`
    (without `keep_text`, the module is left for `_write_streamed` to print, and to judge unchanged without passes)."""
    # Imported here: the parser (lark) and the passes load only when a module is processed, and tests can patch them.
    from hloopt.analysis.verifier import check_executable
    from hloopt.passes.pipeline import run_pipeline
    from hloopt.text.parser import parse

    module = parse(located, name)
    if options.verify_numerics:  # it will be run: refused here, located, rather than by XLA in MLIR's words
        check_executable(module, located if read is Format.HLO else None, name)
    pipeline = options.pipeline
    if pipeline is not None:
        if dump is not None:
            make_directories(dump)
        try:
            report = run_pipeline(
                module,
                pipeline,
                numerics=options.numerics,
                dump_dir=dump,
                original=lambda: parse(located, name),
                check_changed=options.check_changed,
                after_pass=(lambda pass_name, after: result.stages.append((pass_name, after)))
                if options.per_pass
                else None,
            )
        except HloError as err:  # points at the statement of the instruction it is about, or names the file
            pointed = errors.located(err, located, name) if read is Format.HLO else err
            if pointed is err:
                if str(err).startswith(f"{name}: "):
                    raise
                pointed = HloError(f"{name}: {err}")
            raise pointed from err
        result.passes = list(report.passes)
    if not keep_text:
        result.status = "changed" if any(p.changed for p in result.passes) else "unchanged"
        return module
    text = module.to_text()
    changed = any(p.changed for p in result.passes) if pipeline is not None else as_file(text) != as_file(source)
    result.status = "changed" if changed else "unchanged"
    result.texts = (located, text)
    return module


def _write_streamed(module: Module, source: str, output: Output, options: FileOptions) -> None:
    """Write `module` into `output`'s target as it is printed (`print_module_pieces`, as a file: `as_file`).

    Without passes, whether it changed is whether that text is the source's, found as it is written.
    """
    from hloopt.text.printer import print_module_pieces

    pieces = _as_file_pieces(print_module_pieces(module))
    compared = _Compared(pieces, source) if options.pipeline is None else None
    output.data = pieces if compared is None else compared
    output.write()
    if compared is not None:
        output.modules[0].status = "unchanged" if compared.same else "changed"


def _as_file_pieces(pieces: Iterable[str]) -> Iterator[str]:
    """`as_file` of the text `pieces` make: every piece, the newlines that end the last held back for one."""
    pending = ""
    for piece in pieces:
        stripped = piece.rstrip("\n")
        if not stripped:
            pending += piece
            continue
        if pending:
            yield pending
        yield stripped
        pending = piece[len(stripped) :]
    yield "\n"


class _Compared:
    """The pieces of a text as they pass, compared with `as_file(source)` without copying `source`:
    `same` once they are all through."""

    def __init__(self, pieces: Iterable[str], source: str) -> None:
        self._pieces, self._source = pieces, source
        end = len(source)
        while end and source[end - 1] == "\n":  # `rstrip`, without a copy
            end -= 1
        self._end = end
        self.same = False

    def __iter__(self) -> Iterator[str]:
        source, end, position, same = self._source, self._end, 0, True
        for piece in self._pieces:
            if same:
                if position + len(piece) <= end:
                    same = source.startswith(piece, position)
                else:
                    same = source[position:end] + "\n" == piece
            position += len(piece)
            yield piece
        self.same = same and position == end + 1


def _output_format(job: Job, options: FileOptions, read: Format, target: str) -> Format:
    """What `target` is written as: --output-format, else a batch member's input format, else -o's extension."""
    if options.output_format is not None or (job.relative is None and not options.in_place):
        return formats.output_format(target, options.output_format)
    if read in (Format.PROTO_WRAPPER, Format.SNAPSHOT):
        return Format.PROTO  # hloopt writes the module, not XLA's dump wrapper around it
    if read is Format.STABLEHLO_BYTECODE:
        return Format.STABLEHLO
    return read


def error_record(err: BaseException, name: str) -> dict[str, Any]:
    """An error as the report stores it: a parse error keeps its location, every message names the module."""
    if isinstance(err, HloParseError):
        loc = err.location
        return {"message": str(err), "file": loc.filename, "line": loc.line, "column": loc.column}
    if isinstance(err, HloError):
        message = str(err)
    elif isinstance(err, OSError):
        reason = err.strerror or str(err)
        message = f"{err.filename or name}: {reason[:1].lower()}{reason[1:]}"
    else:  # a bug in hloopt, not in the module: say so rather than hide it
        message = f"internal error: {type(err).__name__}: {err}"
    return {"message": message if message.startswith(name) else f"{name}: {message}"}


def compare_numerics(
    results: Sequence[ModuleResult], options: FileOptions, pool: IsolatedPool | None = None
) -> list[CompareReport | HloError]:
    """Run each module before and after the passes through XLA on the CPU, in `pool`'s worker
    processes (by default one made for this call), under ``options.numerics`` (``neuron``: both
    sides with the device's converts); with ``options.per_pass`` also each stage between (`compare_passes`).

    jax stays out of this process, and an input that crashes XLA costs only its own comparison.
    Then the outputs `process_file` held back for these comparisons are written, or not (`_release`).
    """
    from hloopt.xla.bridge import isolated_map

    calls: list[tuple[str, str, list[tuple[str, str]] | None, FileOptions, str, tuple[Any, ...] | None]] = []
    for result in results:
        if result.texts is None:
            raise ValueError(f"{result.label}: its texts were not kept, nothing to compare")
        stages = result.stages if options.per_pass else None
        calls.append((*result.texts, stages, options, result.label, result.inputs))
        result.inputs = None
    # Each comparison is one call: a module that kills XLA or runs past the timeout fails alone, said of its file.
    timeout, labels = limit(options.timeout), [result.label for result in results]
    try:
        if pool is not None:
            outcomes = pool.map(_compare, calls, timeout=timeout, labels=labels)
        else:
            outcomes = isolated_map(_compare, calls, workers=1, timeout=timeout, labels=labels)
    except BaseException:
        _withhold(results)
        raise
    released = _release(results, outcomes)
    if options.html is not None:
        write_pages(results, released, options)
    return released


def write_pages(
    results: Sequence[ModuleResult], outcomes: Sequence[CompareReport | HloError], options: FileOptions
) -> None:
    """The HTML page of each file among `results` (a section per module), where the module was processed, so that
    its texts and plots never travel; each module records its comparison's summary for a batch's index. A page
    that cannot be written fails its modules, as an output does."""
    from hloopt.arrays.comparing import Drift
    from hloopt.viz.report import write_report

    pages: dict[str, list[ModuleSection]] = {}
    owners: dict[str, list[ModuleResult]] = {}
    refused: set[str] = set()
    for result, outcome in zip(results, outcomes):
        if result.page is None:
            continue
        if isinstance(outcome, HloError):  # an error writes nothing: the file gets no page
            refused.add(result.page)
            continue
        result.drift, result.within_tolerance = Drift.of(outcome.outputs), outcome.ok
        pages.setdefault(result.page, []).append(_section(result, outcome, options))
        owners.setdefault(result.page, []).append(result)
    for result in results:
        if result.page in refused:
            pages.pop(result.page, None)
            result.page = None
    for page, sections in pages.items():
        command = (
            f"hloopt run --verify-numerics: before and after {options.pipeline or 'no passes'}, under {options.numerics}"
            f" numerics (rtol={options.rtol:g}, atol={options.atol:g})"
        )
        try:
            if page != options.html:  # a batch member's page, in the mirrored tree
                make_directories(Path(page).parent)
            write_report(page, source_name(owners[page][0].path), sections, command)
        except HloError as err:
            for module in owners[page]:
                _failed(module, err, module.path)
                module.page = None


def _section(result: ModuleResult, comparison: CompareReport, options: FileOptions) -> ModuleSection:
    """A module's part of its page: its comparison, its element types per layer, its module as printed after the
    passes (kept, as for its output, until the comparison is done)."""
    from hloopt.driver.dtypes import auto_cast_decisions, dtype_table
    from hloopt.text.parser import parse
    from hloopt.viz.report import ModuleSection

    assert result.texts is not None  # compared, so kept
    source, printed = result.texts
    table = None
    if options.pipeline is not None:  # the pipeline again, observed: the run kept no provenance per pass
        module = parse(source, result.label)
        table = dtype_table(module, options.pipeline, result.label, auto_cast_decisions, options.numerics)
    return ModuleSection(
        result.label,
        comparison=comparison,
        dtypes=None if table is None else table.to_dict(),
        printed=(("the module after the passes", printed),),
    )


def _release(
    results: Sequence[ModuleResult], outcomes: list[CompareReport | HloError]
) -> list[CompareReport | HloError]:
    """Write the held-back output of each file whose comparisons all ran, and none of a file one of whose
    could not be done (that is an error, and an error writes nothing).

    An output over tolerance is written (the rewrite is valid, and the user needs it to see why, as
    ``diff`` exits 1 yet prints), with a warning in its comparison saying so. A write that fails is
    the module's outcome instead: an error.
    """
    released = list(outcomes)
    refused = {id(r.pending) for r, outcome in zip(results, outcomes) if isinstance(outcome, HloError)}
    for index, result in enumerate(results):
        output = result.pending
        if output is None:  # nothing to write, or written with another module of its file
            continue
        if id(output) in refused:
            output.withhold()
            continue
        err = _write(output)
        if err is not None:
            held = {id(module) for module in output.modules}
            for later in range(index, len(results)):
                if id(results[later]) in held:
                    released[later] = err
    for index, (result, outcome) in enumerate(zip(results, released)):
        if not isinstance(outcome, HloError) and not outcome.ok and result.output is not None:
            note = f"{result.output} is written although the module's outputs differ beyond tolerance"
            released[index] = replace(outcome, warnings=(*outcome.warnings, note))
    return released


def _write(output: Output) -> HloError | None:
    """Write `output`; a failure (returned) fails the modules it holds, and leaves nothing held back."""
    try:
        output.write()
    except HloError as err:
        output.withhold()
        for module in output.modules:
            _failed(module, err, module.path)
        return err
    return None


def _withhold(results: Sequence[ModuleResult]) -> None:
    """Drop the held-back outputs of `results`' files: they are not to be written."""
    for result in results:
        if result.pending is not None:
            result.pending.withhold()


def verify_numerics(results: Sequence[ModuleResult], options: FileOptions, pool: IsolatedPool | None = None) -> None:
    """--verify-numerics into the results: each changed module's comparison (or the error that stopped it)
    becomes its ``numerics`` entry, as ``--report`` writes it."""
    changed = [result for result in results if result.status == "changed"]
    try:
        outcomes = compare_numerics(changed, options, pool)
    except RuntimeError as err:  # the XLA calls failed, not a module (a bug raised in a worker, say)
        outcomes = [HloError(f"internal error: {err}")] * len(changed)
    for result in results:  # not compared: no page shows it
        if result.status != "changed":
            result.page = None
    for result, outcome in zip(changed, outcomes):
        if result.status == "failed":  # its output could not be written: that is its error, not the numerics'
            continue
        result.numerics = {"ok": False, "error": str(outcome)} if isinstance(outcome, HloError) else outcome.to_dict()
    for result in results:  # a file none of whose modules changed: nothing held its output back
        if result.pending is not None:
            _write(result.pending)


def _compare(
    before: str,
    after: str,
    passes: list[tuple[str, str]] | None,
    options: FileOptions,
    label: str,
    inputs: tuple[Any, ...] | None,
) -> CompareReport:
    """`running.compare` (or `compare_passes`) in an XLA worker, on `inputs` (a snapshot's arguments; None:
    random ones); a bug is reported as this module's error, not the batch's."""
    from hloopt.xla.running import check_numerics, compare, compare_passes

    labels = (label, "after passes")
    rtol, atol, drawn = options.rtol, options.atol, options.html is not None
    try:
        numerics = check_numerics(options.numerics)
        if passes is None:
            return compare(before, after, inputs, rtol, atol, labels=labels, numerics=numerics, distributions=drawn)
        return compare_passes(
            before, after, passes, inputs, rtol, atol, labels=labels, numerics=numerics, distributions=drawn
        )
    except HloError:
        raise
    except Exception as err:  # isolated_map would stop every other comparison on it
        raise HloError(f"internal error: {type(err).__name__}: {err}") from None
