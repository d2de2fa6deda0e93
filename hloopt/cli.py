"""The ``hloopt`` command line: ``run`` now; ``exec``, ``compare``, ``cast``, ``passes`` join the group."""
from __future__ import annotations

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
@reports_errors
def run(input_path: str, output_path: str | None, passes: str | None, dump_dir: str | None,
        show_diff: bool, check: bool, numerics: str) -> None:
    """Read INPUT (a file or - for stdin), run --passes on it, and print it in XLA's canonical style."""
    import difflib

    from hloopt.fileio import read_text, write_atomic
    from hloopt.parser import parse
    from hloopt.passes.pipeline import run_pipeline

    name = "<stdin>" if input_path == "-" else input_path
    source = read_text(input_path)
    module = parse(source, name)
    changed = False
    if passes is not None:
        report = run_pipeline(module, passes, numerics=numerics, dump_dir=dump_dir)
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


@main.command("passes")
def list_passes() -> None:
    """List the registered passes in run (registration) order."""
    from hloopt.passes.registry import REGISTRY

    for info in REGISTRY:
        extra = "" if info.in_all else "  [not in 'all']"
        click.echo(f"#{info.number:<5} {info.name:<28} {info.class_name:<24} {info.description}{extra}")
