"""The ``hloopt`` command line: ``run``, ``passes``, ``exec``, ``compare``, ``cast``.

Subcommands that need numpy or XLA are imported only when invoked, so
``hloopt run`` starts without them.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from hloopt import __version__
from hloopt.errors import HloError

if TYPE_CHECKING:
    from hloopt.driver.flow import RunOptions

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(command: F) -> F:
    """Turn an HloError into ``hloopt: error: …`` on stderr and exit code 2, never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except HloError as err:
            click.echo(f"hloopt: error: {err}", err=True)
            sys.exit(2)

    return cast(F, wrapper)


class LazyGroup(click.Group):
    """A click group whose subcommands named in `lazy` load on first use (click's documented recipe).

    `lazy` maps a name to ``("module:attribute", summary)``; ``--help`` lists a lazy
    command by its summary (the first sentence of its help) without importing it,
    so it loads neither numpy nor jax.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

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
            "Run MODULE.hlo once on the CPU and summarise each output (tuples flattened).",
        ),
        "compare": (
            "hloopt.cli.execution:compare_command",
            "Run A.hlo and B.hlo on the same inputs and compare outputs: exit 0 all within tolerance, 1 any over, "
            "2 on an error.",
        ),
        "cast": ("hloopt.cli.cast:cast_command", "Convert the elements of IN from one dtype to another and write OUT."),
    },
)
@click.version_option(__version__, prog_name="hloopt")
def main() -> None:
    """Parse, rewrite and print XLA HLO text the way the Neuron compiler's dtype passes do."""


@main.command()
@click.argument("input_path", metavar="INPUT")
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
@click.option("--rtol", type=float, default=1e-2, show_default=True, help="Relative tolerance for --verify-numerics.")
@click.option("--atol", type=float, default=1e-3, show_default=True, help="Absolute tolerance for --verify-numerics.")
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
    help="Directory INPUT: modules processed in parallel processes [default: the CPU count].",
)
@click.option(
    "--report",
    "report_path",
    metavar="FILE",
    help="Directory INPUT: write a JSON report (per module: passes, rewrite counts, time, errors).",
)
@reports_errors
# Each option arrives under its RunOptions field name (tests/cli keeps the two lists equal).
def run(input_path: str, **given: Any) -> None:
    """Read INPUT (a file, - for stdin, or a directory of modules), run --passes on it, and print it in XLA's canonical style.

    A directory INPUT is processed module by module into -o OUTDIR (the tree
    mirrored), or --in-place, or only checked (--check) or diffed (--diff).
    """
    from hloopt.driver.flow import RunOptions

    options = RunOptions(**given)
    if options.in_place and (input_path == "-" or options.output is not None):
        raise click.UsageError("--in-place writes over INPUT: it needs a file or directory INPUT and no -o")
    if options.per_pass and not options.verify_numerics:
        raise click.UsageError("--per-pass compares the module after each pass: it needs --verify-numerics")
    if input_path != "-" and os.path.isdir(input_path):
        _run_directory(input_path, options)
    else:
        _run_file(input_path, options)


def _echo_module(text: str, output_format: str | None) -> None:
    """The module on stdout, as HLO text unless --output-format asks for another format."""
    if output_format in (None, "hlo"):
        click.echo(text, nl=False)
        return
    from hloopt.support.formats import OUTPUT_FORMATS
    from hloopt.xla.formats import dump

    data = dump(text, OUTPUT_FORMATS[output_format])
    if isinstance(data, bytes):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        click.echo(data, nl=False)


def _run_file(input_path: str, options: RunOptions) -> None:
    """``hloopt run FILE``: the module's text (or diff) on stdout or to -o, what the passes did on stderr."""
    from hloopt.driver.flow import Job, compare_numerics, process_module

    batch_only = (("--glob", options.globs), ("--jobs", options.jobs), ("--report", options.report_path))
    given = [flag for flag, value in batch_only if value]
    if given:
        raise click.UsageError(f"{', '.join(given)} only apply to a directory INPUT")
    if options.output == "-":
        options = replace(options, output=None)
    elif options.output is not None and input_path != "-" and _same_file(input_path, options.output):
        raise HloError(f"{options.output}: is the input file; use --in-place to overwrite it")
    job = Job(input_path)
    result = process_module(job, options)
    if result.passes:  # the pipeline ran to its end
        _echo_order_note(options.passes)
        for entry in result.passes:
            for warning in entry.warnings:
                click.echo(f"hloopt: warning: {entry.name}: {warning}", err=True)
            click.echo(f"hloopt: {entry.name}: {entry.rewritten} instruction(s) rewritten", err=True)
    for loss in result.losses:
        click.echo(f"hloopt: warning: {result.output}: this format does not keep {loss}", err=True)
    if result.exception is not None:
        raise result.exception
    if options.show_diff:  # with --check too, as for a directory
        click.echo(result.diff, nl=False)
    if options.check:
        if result.status == "changed":
            click.echo(f"hloopt: {job.name} would change", err=True)
        sys.exit(1 if result.status == "changed" else 0)
    assert result.texts is not None  # a lone module's result keeps them
    if not options.show_diff and options.output is None and not options.in_place:
        _echo_module(result.texts[1], options.output_format)
    if options.verify_numerics:
        (comparison,) = compare_numerics([result], options)
        if isinstance(comparison, HloError):
            raise comparison
        for warning in comparison.warnings:
            click.echo(f"hloopt: warning: {warning}", err=True)
        click.echo(comparison.render(), err=True)
        if options.per_pass:
            click.echo(comparison.render_per_pass(), err=True)
        if not comparison.ok:
            sys.exit(1)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing or unreadable: not the same file; reading reports it
        return False


def _run_directory(input_dir: str, options: RunOptions) -> None:
    """``hloopt run DIR``: a progress bar on a terminal, each diff and warning, the summary, the exit code."""
    from hloopt.driver import batch
    from hloopt.support.fileio import write_atomic

    options = batch.check_options(input_dir, options)
    if options.passes is not None:
        _echo_order_note(options.passes)  # and an unknown pass is one error now, not one per module
    root = Path(input_dir)
    jobs = batch.plan(root, options)
    if sys.stderr.isatty():
        with click.progressbar(length=len(jobs), file=sys.stderr, label="hloopt") as bar:
            report = batch.run(root, jobs, options, advance=lambda _: bar.update(1))
    else:  # click's bar would still print its label to a pipe or a CI log
        report = batch.run(root, jobs, options)
    for result in report.modules:
        if result.diff:
            click.echo(result.diff, nl=False)
        numerics_warnings = result.numerics.get("warnings", []) if result.numerics is not None else []
        for warning in [*result.warnings, *numerics_warnings]:
            click.echo(f"hloopt: warning: {result.path}: {warning}", err=True)
    for line in batch.summary_lines(report):
        click.echo(line, err=True)
    if options.report_path is not None:
        write_atomic(options.report_path, report.to_json())
    sys.exit(0 if report.ok else 1)


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
