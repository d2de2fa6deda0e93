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
@reports_errors
def run(input_path: str, output_path: str | None) -> None:
    """Read INPUT (a file or - for stdin), and print it back in XLA's canonical style."""
    from hloopt.fileio import read_text, write_atomic
    from hloopt.parser import parse

    name = "<stdin>" if input_path == "-" else input_path
    module = parse(read_text(input_path), name)
    text = module.to_text()
    if output_path is None or output_path == "-":
        click.echo(text, nl=False)
    else:
        write_atomic(output_path, text)
