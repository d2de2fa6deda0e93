"""The ``hloopt`` command line: ``run``, ``passes``, ``exec``, ``compare``, ``cast``.

Subcommands that need numpy or XLA are imported only when invoked, so
``hloopt run`` starts without them.
"""
from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from hloopt import __version__
from hloopt.errors import HloError

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

    return wrapper  # type: ignore[return-value]


class LazyGroup(click.Group):
    """A click group whose subcommands named in `lazy` load on first use (click's documented recipe)."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module_name, _, attribute = self.lazy[cmd_name].partition(":")
            command: click.Command = getattr(importlib.import_module(module_name), attribute)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy={
        "exec": "hloopt.cli.execution:exec_command",
        "compare": "hloopt.cli.execution:compare_command",
        "cast": "hloopt.cli.cast:cast_command",
    },
)
@click.version_option(__version__, prog_name="hloopt")
def main() -> None:
    """Parse, rewrite and print XLA HLO text the way the Neuron compiler's dtype passes do."""


@main.command()
@click.argument("input_path", metavar="INPUT")
@click.option("-o", "--output", "output_path", metavar="OUTPUT", help="Write here (atomically) instead of stdout.")
@click.option("--passes", "passes", metavar="LIST", help="Passes to run: 'all' or a comma-separated list (see 'hloopt passes').")
@click.option("--dump-dir", metavar="DIR", help="Write 00-input.hlo and NN-after-<pass>.hlo for each pass that changed the module.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff of INPUT against the result instead of the result.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the passes would change the module (0 if not).")
@click.option("--numerics", type=click.Choice(["xla", "neuron"]), default="xla", show_default=True,
              help="Cast rules for fold-constant-converts: XLA's convert or the Neuron device's.")
@click.option("--verify-numerics", is_flag=True,
              help="Run the module before and after the passes through XLA on the CPU and report the differences "
                   "on stderr; exit 1 when an output is over tolerance.")
@click.option("--rtol", type=float, default=1e-2, show_default=True, help="Relative tolerance for --verify-numerics.")
@click.option("--atol", type=float, default=1e-3, show_default=True, help="Absolute tolerance for --verify-numerics.")
@click.option("--in-place", is_flag=True, help="Write the result over INPUT (only files whose text changes are rewritten).")
@click.option("--glob", "globs", multiple=True, metavar="PATTERN",
              help="Directory INPUT: which files are modules (repeatable; default *.hlo and *.txt, at any depth).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Directory INPUT: modules processed in parallel processes [default: the CPU count].")
@click.option("--report", "report_path", metavar="FILE",
              help="Directory INPUT: write a JSON report (per module: passes, rewrite counts, time, errors).")
@reports_errors
def run(input_path: str, output_path: str | None, passes: str | None, dump_dir: str | None,
        show_diff: bool, check: bool, numerics: str, verify_numerics: bool, rtol: float, atol: float,
        in_place: bool, globs: tuple[str, ...], jobs: int | None, report_path: str | None) -> None:
    """Read INPUT (a file, - for stdin, or a directory of modules), run --passes on it, and print it in XLA's canonical style.

    A directory INPUT is processed module by module into -o OUTDIR (the tree
    mirrored), or --in-place, or only checked (--check) or diffed (--diff).
    """
    import difflib

    from hloopt.support.fileio import read_text, write_atomic
    from hloopt.text.parser import parse
    from hloopt.passes.pipeline import run_pipeline

    if in_place and (input_path == "-" or output_path is not None):
        raise click.UsageError("--in-place writes over INPUT: it needs a file or directory INPUT and no -o")
    if input_path != "-" and os.path.isdir(input_path):
        from hloopt.driver.batch import run_directory

        run_directory(input_path, output_path, passes=passes, dump_dir=dump_dir, show_diff=show_diff, check=check,
                      numerics=numerics, verify_numerics=verify_numerics, rtol=rtol, atol=atol, in_place=in_place,
                      globs=globs, jobs=jobs, report_path=report_path)
        return
    given = [flag for flag, value in (("--glob", globs), ("--jobs", jobs), ("--report", report_path)) if value]
    if given:
        raise click.UsageError(f"{', '.join(given)} only apply to a directory INPUT")
    if in_place:
        output_path = input_path
    elif output_path not in (None, "-") and input_path != "-" and _same_file(input_path, output_path):
        raise HloError(f"{output_path}: is the input file; use --in-place to overwrite it")
    name = "<stdin>" if input_path == "-" else input_path
    source = read_text(input_path)
    module = parse(source, name)
    changed = False
    if passes is not None:
        report = run_pipeline(module, passes, numerics=numerics, dump_dir=dump_dir, original=lambda: parse(source, name))
        for note in report.notes:
            click.echo(f"hloopt: note: {note}", err=True)
        for entry in report.passes:
            for warning in entry.warnings:
                click.echo(f"hloopt: warning: {entry.name}: {warning}", err=True)
            click.echo(f"hloopt: {entry.name}: {entry.rewritten} instruction(s) rewritten", err=True)
        changed = report.changed
    text = module.to_text()
    if check:
        if passes is None:
            changed = text != source
        if changed:
            click.echo(f"hloopt: {name} would change", err=True)
        sys.exit(1 if changed else 0)
    if output_path is not None and output_path != "-":
        write_atomic(output_path, text)
    if show_diff:
        target = output_path if output_path not in (None, "-") else f"{name} (after)"
        diff = difflib.unified_diff(source.splitlines(True), text.splitlines(True), name, target)
        click.echo("".join(diff), nl=False)
    elif output_path is None or output_path == "-":
        click.echo(text, nl=False)
    if verify_numerics:
        from hloopt.xla.execution import verify_numerics as compare_runs

        report = compare_runs(source, text, rtol=rtol, atol=atol, labels=(name, "after passes"))
        click.echo(report.render(), err=True)
        if not report.ok:
            sys.exit(1)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing or unreadable: not the same file; reading reports it
        return False


@main.command("passes")
def list_passes() -> None:
    """List the registered passes in run (registration) order."""
    from hloopt.passes.registry import REGISTRY

    for info in REGISTRY:
        extra = "" if info.in_all else "  [not in 'all']"
        click.echo(f"#{info.number:<5} {info.name:<28} {info.class_name:<24} {info.description}{extra}")
