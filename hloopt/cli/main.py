"""The ``hloopt`` command line: ``run``, ``passes``, ``exec``, ``compare``, ``cast``, ``report``.

Subcommands that need numpy or XLA are imported only when invoked, so
``hloopt run`` starts without them.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from functools import partial, wraps
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from hloopt import __version__
from hloopt.errors import HloError
from hloopt.passes.neuron_cc_flags import COMPILERS, Compiler, flags_text, parse_neuron_cc_flags
from hloopt.support.fileio import check_output, discard_partial_writes
from hloopt.support.tolerances import VERIFY_ATOL, VERIFY_RTOL
from hloopt.xla.timeouts import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from distributed import Client

    from hloopt.driver.batch import BatchOptions, Shard
    from hloopt.driver.flow import FileOptions
    from hloopt.passes.pipeline import ChangedCheck

F = TypeVar("F", bound=Callable[..., Any])


def echo_error(err: HloError) -> None:
    click.echo(f"hloopt: error: {err}", err=True)


def reports_errors(command: F) -> F:
    """Turn an HloError into ``hloopt: error: …`` on stderr and exit code 2, never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except HloError as err:
            echo_error(err)
            sys.exit(2)

    return cast(F, wrapper)


def exit_on_errors(errors: Sequence[Exception]) -> None:
    """Several modules' errors (a split file's chunks): each once, then exit 2; a bug is raised as itself."""
    unique = list(dict.fromkeys(errors))  # a file's chunks share the error of its write
    for err in unique:
        if not isinstance(err, HloError):
            raise err
        echo_error(err)
    if unique:
        sys.exit(2)


def timeout_option(calls: str) -> Callable[[F], F]:
    """``--timeout SECONDS``, for a command whose XLA `calls` (described) may crash or never end."""
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0),
        default=DEFAULT_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help=f"Stop XLA after this long on any one call ({calls}): the module fails, naming the stage. 0: no limit.",
    )


def neuron_cc_options(which: str) -> Callable[[F], F]:
    """``--neuron-cc-flags`` and ``--neuron-compiler``, for a command whose `which` (described) the auto-cast
    they ask for is applied to."""

    def decorate(command: F) -> F:
        compiler = click.option(
            "--neuron-compiler",
            type=click.Choice(COMPILERS),
            default=None,
            help="The neuronx-cc release whose dtype defaults apply (2.26: --auto-cast matmult to bf16; 2.27: "
            f"none, mixed-precision accumulation on) [default with --neuron-cc-flags: {COMPILERS[-1]}].",
        )
        flags = click.option(
            "--neuron-cc-flags",
            metavar="FLAGS|env",
            default=None,
            help=f"neuronx-cc's dtype flags as the compiler takes them ('--auto-cast matmult --auto-cast-type bf16', "
            f"--enable/--disable-mixed-precision-accumulation), or 'env' for $NEURON_CC_FLAGS: {which} run the "
            "neuron-auto-cast they ask for. Flags hloopt does not model are named and ignored.",
        )
        return flags(compiler(command))

    return decorate


def read_neuron_cc_flags(flags: str | None, compiler: Compiler | None) -> str | None:
    """The flags' text (``env`` read from this process's environment, only when asked), checked once, here:
    a bad value is an error (exit 2), each flag hloopt does not model named once on stderr."""
    if flags is None and compiler is None:
        return None
    text = flags_text(flags or "", os.environ)
    settings = parse_neuron_cc_flags(text, compiler)
    if settings.ignored:
        click.echo(
            f"hloopt: warning: --neuron-cc-flags: not modelled, ignored: {', '.join(settings.ignored)}", err=True
        )
    for note in settings.notes:
        click.echo(f"hloopt: note: --neuron-cc-flags: {note}", err=True)
    return text


class ShardType(click.ParamType):
    """``K/N``, checked by `hloopt.driver.batch.Shard.parse` (loaded only when the option is given)."""

    name = "K/N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Shard:
        from hloopt.driver.batch import Shard

        if isinstance(value, Shard):
            return value
        try:
            return Shard.parse(str(value))
        except HloError as err:
            self.fail(str(err), param, ctx)


#: The signals that end the command: Ctrl-C, and `kill`'s default.
_ENDING = frozenset({signal.SIGINT, signal.SIGTERM})


def _end_on_signals() -> None:
    """SIGINT and SIGTERM end the command at once with 128 + the signal (130, 143), without a traceback
    and without a temporary file left; its worker processes see it gone and end too (`hloopt.support.pool`).

    Blocked in every thread (those started later inherit it, and the workers are told) and taken by one
    thread waiting for them: a Python handler runs only in the main thread, which may be blocked waiting
    for a worker while the signal lands on another thread.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
    threading.Thread(target=_end_on_signal, name="hloopt-signals", daemon=True).start()


def _end_on_signal() -> None:
    signum = signal.sigwait(_ENDING)
    discard_partial_writes()
    os._exit(128 + signum)


class LazyGroup(click.Group):
    """A click group whose subcommands named in `lazy` load on first use (click's documented recipe).

    `lazy` maps a name to ``("module:attribute", summary)``; ``--help`` lists a lazy
    command by its summary (the first sentence of its help) without importing it,
    so it loads neither numpy nor jax.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The process's entry point (``hloopt``, ``python -m hloopt``); click's test runner calls `main`,
        so a test process keeps its own signals."""
        _end_on_signals()
        return super().__call__(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module_name, _, attribute = self.lazy[cmd_name][0].partition(":")
            command: click.Command = getattr(importlib.import_module(module_name), attribute)
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with each lazy command standing in as its summary."""
        commands: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            listed = click.Command(name, help=self.lazy[name][1]) if name in self.lazy else self.get_command(ctx, name)
            if listed is not None and not listed.hidden:
                commands.append((name, listed))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in commands])


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy={
        "exec": (
            "hloopt.cli.execution:exec_command",
            "Run MODULE once on the CPU and summarise each output (tuples flattened).",
        ),
        "compare": (
            "hloopt.cli.execution:compare_command",
            "Run A and B on the same inputs and compare outputs: exit 0 all within tolerance, 1 any over, "
            "2 on an error.",
        ),
        "dtypes": (
            "hloopt.cli.dtypes:dtypes_command",
            "List each layer's dots, convolutions, reduces and elementwise groups with their element types before "
            "and after a Neuron compile's dtype passes, and why the auto-cast left an op alone.",
        ),
        "trace": (
            "hloopt.cli.trace:trace_command",
            "Run A and B with every instruction's value captured: the first instruction whose own error is "
            "over tolerance.",
        ),
        "view": (
            "hloopt.cli.view:view_command",
            "Open MODULE in Model Explorer as a graph, before and after --passes, coloured by element type, what "
            "the passes changed and (--trace) each instruction's error.",
        ),
        "cast": ("hloopt.cli.cast:cast_command", "Convert the elements of IN from one dtype to another and write OUT."),
        "report": ("hloopt.cli.report:report_group", "Work with the JSON reports of 'hloopt run --report'."),
    },
)
@click.version_option(__version__, prog_name="hloopt")
def main() -> None:
    """Parse, rewrite and print XLA HLO text the way the Neuron compiler's dtype passes do."""


@main.command()
@click.argument("inputs", metavar="INPUT...", nargs=-1, required=True)
@click.option("-o", "--output", "output", metavar="OUTPUT", help="Write here (atomically) instead of stdout.")
@click.option("--passes", metavar="LIST", help="Passes to run: 'all' or a comma-separated list (see 'hloopt passes').")
@click.option(
    "--dump-dir",
    metavar="DIR",
    help="Write 00-input.hlo and NN-after-<pass>.hlo for each pass that changed the module.",
)
@click.option(
    "--diff", "show_diff", is_flag=True, help="Print a unified diff of INPUT against the result instead of the result."
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the passes would change the module (0 if not).")
@click.option(
    "--split-input-file",
    is_flag=True,
    help="Each '// -----' chunk of a text INPUT is a module of its own (errors name the file's lines); "
    "the output rejoins them with '// -----' lines, and is written only when every chunk succeeded.",
)
@click.option(
    "--numerics",
    type=click.Choice(["xla", "neuron"]),
    default="xla",
    show_default=True,
    help="Cast rules: XLA's convert or the Neuron device's, for fold-constant-converts and for "
    "--verify-numerics (neuron: both modules run with every convert emulated as the device computes it).",
)
@click.option(
    "--verify-numerics",
    is_flag=True,
    help="Run the module before and after the passes through XLA on the CPU and report the differences "
    "on stderr; exit 1 when an output is over tolerance.",
)
@click.option(
    "--per-pass",
    is_flag=True,
    help="With --verify-numerics: a row per pass that changed the module, its error against the input "
    "and against the module before that pass (also in --report).",
)
@click.option(
    "--html",
    metavar="PAGE",
    help="With --verify-numerics: a self-contained HTML report (summary, per-pass and per-layer tables, each "
    "output's error plots, the printed module); for a batch a directory, a page per file and index.html "
    "(needs hloopt[viz]).",
)
@click.option(
    "--rtol", type=float, default=VERIFY_RTOL, show_default=True, help="Relative tolerance for --verify-numerics."
)
@click.option(
    "--atol", type=float, default=VERIFY_ATOL, show_default=True, help="Absolute tolerance for --verify-numerics."
)
@click.option(
    "--in-place", is_flag=True, help="Write the result over INPUT (only files whose text changes are rewritten)."
)
@click.option(
    "--output-format",
    type=click.Choice(["hlo", "pb", "mlir"]),
    default=None,
    help="Write HLO text, a serialized HloModuleProto or StableHLO text [default: by -o's extension "
    "(.pb, .mlir; else HLO text); a directory's modules keep their own format].",
)
@click.option(
    "--glob",
    "globs",
    multiple=True,
    metavar="PATTERN",
    help="Directory INPUT: which files are modules (repeatable; default *.hlo, *.txt, *.pb, *.mlir and "
    "*.mlirbc, at any depth).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Batch: modules processed in parallel processes [default: the CPU count].",
)
@click.option(
    "--report",
    "report_path",
    metavar="FILE",
    help="Batch: write a JSON report (per module: passes, rewrite counts, time, errors).",
)
@click.option(
    "--shard",
    type=ShardType(),
    default=None,
    help="Batch: process only shard K of N (K from 1 to N), chosen by a hash of each module's path below "
    "its directory; 'hloopt report merge' joins the shards' --report files.",
)
@click.option(
    "--dask-scheduler",
    metavar="ADDRESS",
    help="Batch: process the modules on this Dask cluster (tcp://host:port, or the scheduler file "
    "'dask scheduler --scheduler-file' wrote; needs hloopt[dask]). Its workers read and write the files "
    "themselves, so they must share this filesystem; --jobs then sizes the modules in flight [default: "
    "the cluster's threads].",
)
@neuron_cc_options("the passes")
@timeout_option("reading or writing a .pb or .mlir file, one module's --verify-numerics")
@reports_errors
# Each option arrives under its FileOptions or BatchOptions field name (tests/cli keeps the lists equal),
# but --dask-scheduler: the CLI turns it into the executor the batch runs on.
def run(inputs: tuple[str, ...], dask_scheduler: str | None, **given: Any) -> None:
    """Read each INPUT (a file, - for stdin, or a directory of modules), run --passes, and print in XLA's canonical style.

    One file INPUT goes to stdout or -o. A directory INPUT, or several INPUTs,
    is a batch, processed module by module: into -o OUTDIR (one directory, its
    tree mirrored), or --in-place, or only checked (--check) or diffed (--diff),
    with one summary and one exit code.
    """
    from hloopt.driver.batch import BatchOptions
    from hloopt.driver.flow import FileOptions

    batch_only = {name: given.pop(name) for name in _BATCH_ONLY}
    given["neuron_cc_flags"] = read_neuron_cc_flags(given["neuron_cc_flags"], given["neuron_compiler"])
    options = FileOptions(**given, check_changed=_changed_check())
    batch = BatchOptions(options, **batch_only)
    if "-" in inputs and len(inputs) > 1:
        raise click.UsageError("- (stdin) must be the only INPUT")
    if options.in_place and ("-" in inputs or options.output is not None):
        raise click.UsageError("--in-place writes over INPUT: it needs a file or directory INPUT and no -o")
    _refuse_options_without_effect(click.get_current_context(), options)
    if options.html is not None:
        from hloopt.viz.report import require_plotly

        require_plotly()
    if options.split_input_file and options.output_format not in (None, "hlo"):
        raise click.UsageError(
            f"--split-input-file writes its chunks back as HLO text; --output-format {options.output_format} "
            "holds one module"
        )
    if len(inputs) == 1 and (inputs[0] == "-" or not os.path.isdir(inputs[0])):
        _run_file(inputs[0], batch, dask_scheduler)
    else:
        _run_batch(inputs, batch, dask_scheduler)


#: The options of ``run`` that only a batch has (`BatchOptions`' own fields): a lone file refuses them.
_BATCH_ONLY = {"globs": "--glob", "jobs": "--jobs", "report_path": "--report", "shard": "--shard"}


def _changed_check() -> ChangedCheck | None:
    """$HLOOPT_CHECK_PASS_CHANGED, read here once for the whole run: "1" or "silent" (a pass that says it
    changed nothing must not have changed the text), "both" (nor may one that says it did leave it the same)."""
    value = os.environ.get("HLOOPT_CHECK_PASS_CHANGED", "")
    return "silent" if value in ("1", "silent") else "both" if value == "both" else None


#: Options of ``run`` that mean something only beside another: (parameter, whether the options have what
#: it needs, why it needs that). Given without it they would be ignored, so they are refused instead.
_NEEDS: tuple[tuple[str, Callable[[FileOptions], bool], str], ...] = (
    (
        "per_pass",
        lambda o: o.verify_numerics,
        "--per-pass compares the module after each pass: it needs --verify-numerics",
    ),
    ("html", lambda o: o.verify_numerics, "--html draws what --verify-numerics found: it needs --verify-numerics"),
    ("rtol", lambda o: o.verify_numerics, "--rtol is a tolerance of --verify-numerics: it needs --verify-numerics"),
    ("atol", lambda o: o.verify_numerics, "--atol is a tolerance of --verify-numerics: it needs --verify-numerics"),
    (
        "numerics",
        lambda o: o.pipeline is not None or o.verify_numerics,
        "--numerics chooses the cast rules of the passes and of --verify-numerics: it needs --passes or "
        "--verify-numerics",
    ),
    (
        "dump_dir",
        lambda o: o.pipeline is not None,
        "--dump-dir keeps the module after each pass: it needs --passes",
    ),
    ("output_format", lambda o: not o.check, "--output-format chooses what is written: --check writes nothing"),
    ("in_place", lambda o: not o.check, "--in-place rewrites INPUT: --check writes nothing"),
)


def _refuse_options_without_effect(ctx: click.Context, options: FileOptions) -> None:
    """A usage error (exit 2) for each option given where it would do nothing, saying what it needs."""
    default = click.core.ParameterSource.DEFAULT
    useless = [
        why for name, has, why in _NEEDS if ctx.get_parameter_source(name) not in (None, default) and not has(options)
    ]
    if useless:
        raise click.UsageError("; ".join(useless))


def _echo_losses(output: str | None, lost: list[str]) -> None:
    """One warning naming all that writing `output` in its format did not keep."""
    if lost:
        click.echo(f"hloopt: warning: {output}: this format does not keep {'; '.join(lost)}", err=True)


def _echo_module(text: str, name: str, options: FileOptions) -> None:
    """The module (read from `name`) on stdout, as HLO text unless --output-format asks for another format."""
    if options.output_format in (None, "hlo"):
        click.echo(text, nl=False)
        return
    from hloopt.support.formats import OUTPUT_FORMATS
    from hloopt.xla.formats import dump, losses

    fmt = OUTPUT_FORMATS[options.output_format]
    data = dump(text, fmt, name, timeout=options.timeout)
    _echo_losses("<stdout>", losses(text, fmt))
    if isinstance(data, bytes):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        click.echo(data, nl=False)


def _run_file(input_path: str, batch: BatchOptions, dask_scheduler: str | None) -> None:
    """``hloopt run FILE``: the module's text (or diff) on stdout or to -o, what the passes did on stderr."""
    from hloopt.driver.flow import Job, compare_numerics, process_file
    from hloopt.support.gcpause import paused_gc

    given = [flag for name, flag in _BATCH_ONLY.items() if getattr(batch, name)]
    given += ["--dask-scheduler"] if dask_scheduler else []
    options = batch.file
    if given:
        verb = "apply" if len(given) > 1 else "applies"
        raise click.UsageError(f"{', '.join(given)} only {verb} to a directory INPUT or several INPUTs")
    if options.output == "-":
        options = replace(options, output=None)
    elif options.output is not None and input_path != "-" and same_file(input_path, options.output):
        raise HloError(f"{options.output}: is the input file; use --in-place to overwrite it")
    if options.html is not None:
        check_output(options.html)
    with paused_gc():  # the collector is the program's to pause: library calls leave it alone
        file = process_file(Job(input_path), options)
    modules = file.modules
    if any(module.passes for module in modules):  # the pipeline ran to its end
        _echo_order_note(options.passes)
    for module in modules:
        where = "" if module.chunk is None else f"{module.label}: "
        for entry in module.passes:
            for warning in entry.warnings:
                click.echo(f"hloopt: warning: {where}{entry.name}: {warning}", err=True)
            click.echo(f"hloopt: {where}{entry.name}: {entry.rewritten} instruction(s) rewritten", err=True)
    _echo_losses(modules[0].output, modules[0].losses)
    exit_on_errors([module.exception for module in modules if module.exception is not None])
    if options.show_diff:  # with --check too, as for a directory
        click.echo(file.diff, nl=False)
    if options.check:
        for module in modules:
            if module.status == "changed":
                click.echo(f"hloopt: {module.label} would change", err=True)
        sys.exit(1 if any(module.status == "changed" for module in modules) else 0)
    if not options.show_diff and options.output is None and not options.in_place:
        _echo_module(file.text, file.path, options)
    if options.verify_numerics:
        errors: list[Exception] = []
        over = False
        for module, comparison in zip(modules, compare_numerics(modules, options)):
            if isinstance(comparison, HloError):
                errors.append(comparison)
                continue
            if module.chunk is not None:
                click.echo(f"hloopt: {module.label}:", err=True)
            for warning in comparison.warnings:
                click.echo(f"hloopt: warning: {warning}", err=True)
            click.echo(comparison.render(), err=True)
            if options.per_pass:
                click.echo(comparison.render_per_pass(), err=True)
            over = over or not comparison.ok
        if options.html is not None and not errors:  # a page that could not be written failed its modules
            errors += [module.exception for module in modules if module.page is None and module.exception]
            if not errors:
                click.echo(f"hloopt: HTML report: {options.html}", err=True)
        exit_on_errors(errors)
        if over:
            sys.exit(1)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing or unreadable: not the same file; reading reports it
        return False


def _run_batch(inputs: Sequence[str], options: BatchOptions, dask_scheduler: str | None) -> None:
    """``hloopt run DIR`` or ``run INPUT...``: a progress bar on a terminal, each diff and warning, the
    summary, the exit code."""
    from hloopt.driver import batch, report
    from hloopt.driver.flow import output_clashes
    from hloopt.support.fileio import write_atomic

    options = batch.check_options(inputs, options)
    if options.file.passes is not None:
        _echo_order_note(options.file.passes)  # and an unknown pass is one error now, not one per module
    with ExitStack() as cluster:
        executor, in_flight = None, None
        if dask_scheduler is not None:  # connected before any output directory is made
            client = cluster.enter_context(_dask_client(dask_scheduler))
            executor = client.get_executor()
            threads = sum(worker["nthreads"] for worker in client.scheduler_info()["workers"].values())
            in_flight = batch.in_flight(options.jobs or max(threads, 1))
        jobs = batch.plan(inputs, options)
        clashes = output_clashes(jobs, options.file)
        if clashes:  # one output would replace another
            raise HloError("; ".join(clashes))
        process = partial(batch.run, inputs, options, jobs=jobs, executor=executor, max_in_flight=in_flight)
        if sys.stderr.isatty():
            with click.progressbar(length=len(jobs), file=sys.stderr, label="hloopt") as bar:
                done = process(advance=lambda _: bar.update(1))
        else:  # click's bar would still print its label to a pipe or a CI log
            done = process()
    for file in done.files:
        if file.diff:
            click.echo(file.diff, nl=False)
        for module in file.modules:
            numerics_warnings = module.numerics.get("warnings", []) if module.numerics is not None else []
            for warning in [*module.warnings, *numerics_warnings]:
                click.echo(f"hloopt: warning: {module.label}: {warning}", err=True)
    data = done.to_dict()
    for line in report.summary_lines(data):
        click.echo(line, err=True)
    if options.report_path is not None:
        write_atomic(options.report_path, report.to_json(data))
    if options.file.html is not None:
        click.echo(f"hloopt: HTML report: {os.path.join(options.file.html, 'index.html')}", err=True)
    sys.exit(0 if report.report_ok(data) else 1)


def _dask_client(address: str) -> Client:
    """A client of the Dask scheduler at `address` (or named by the scheduler file `address`)."""
    try:
        from distributed import Client
    except ImportError:
        raise HloError("--dask-scheduler needs the optional extra: pip install 'hloopt[dask]'") from None
    target = _scheduler_file_address(address) if os.path.isfile(address) else address
    try:
        return Client(target)
    except Exception as err:  # unreachable, timed out, not an address: Dask's own checks include asserts
        reason = str(err) or type(err).__name__
        raise HloError(f"--dask-scheduler {address}: cannot connect to the Dask scheduler: {reason}") from None


def _scheduler_file_address(path: str) -> str:
    """The address in the scheduler file `path` ('dask scheduler --scheduler-file' writes JSON with one),
    read here so a file that is not one is an error saying so (Dask's reader only asserts)."""
    from hloopt.support.fileio import read_text

    try:
        written = json.loads(read_text(path))
    except (HloError, ValueError) as err:
        raise HloError(f"--dask-scheduler {path}: not a Dask scheduler file (JSON): {err}") from None
    address = written.get("address") if isinstance(written, dict) else None
    if not isinstance(address, str) or not address:
        raise HloError(f'--dask-scheduler {path}: not a Dask scheduler file: it has no "address" string')
    return address


def _echo_order_note(passes: str | None) -> None:
    """Say so when the passes run in another order than they were named in."""
    from hloopt.passes.pipeline import order_note
    from hloopt.passes.registry import select

    note = order_note(*select(passes)) if passes is not None else None
    if note:
        click.echo(f"hloopt: note: {note}", err=True)


@main.command("passes")
def list_passes() -> None:
    """List the registered passes in run (registration) order."""
    from hloopt.passes.registry import REGISTRY

    for info in REGISTRY:
        extra = "" if info.in_all else "  [not in 'all']"
        click.echo(f"#{info.number:<5} {info.name:<28} {info.class_name:<24} {info.description}{extra}")
