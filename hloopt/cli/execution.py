"""``hloopt exec`` and ``hloopt compare``: run modules on XLA's CPU backend.

XLA runs in a worker process (`hloopt.xla.bridge.isolated_call`), so an input
that crashes jaxlib is an error message and exit code 2, not a dead shell.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

import click
import numpy as np

from hloopt.cli.main import reports_errors
from hloopt.errors import HloError
from hloopt.ir.shape import ArrayShape
from hloopt.support.fileio import check_output
from hloopt.xla.bridge import isolated_call
from hloopt.xla.execution import (
    DEFAULT_ATOL,
    DEFAULT_MAX_BYTES,
    DEFAULT_RTOL,
    NUMERICS,
    Numerics,
    load_arrays,
    numerics_sides,
    run,
    save_arrays,
    verify_numerics,
)
from hloopt.xla.formats import load

_inputs_option = click.option(
    "--inputs",
    "inputs_path",
    metavar="IN.npz",
    help="Inputs (one array per parameter, tuple parameters flattened) instead of random ones.",
)
_seed_option = click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
_max_bytes_option = click.option(
    "--max-bytes",
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Refuse modules whose inputs and outputs need more memory than this.",
)


class _NumericsSides(click.ParamType):
    """``xla``, ``neuron`` (both sides) or ``A,B`` (one per side), checked by `numerics_sides`."""

    name = "numerics"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[Numerics, Numerics]:
        try:
            return numerics_sides(value)
        except HloError as err:
            self.fail(str(err), param, ctx)


def _echo_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        click.echo(f"hloopt: warning: {warning}", err=True)


@click.command("exec")
@click.argument("module_path", metavar="MODULE.hlo")
@_inputs_option
@_seed_option
@click.option("--save-inputs", "save_inputs_path", metavar="IN.npz", help="Write the inputs used (input0, input1…).")
@click.option("-o", "--output", "output_path", metavar="OUT.npz", help="Write the outputs (output0, output1…).")
@click.option(
    "--numerics",
    type=click.Choice(NUMERICS),
    default="xla",
    show_default=True,
    help="Cast rules of the converts: XLA's, or the Neuron device's (emulated in a copy of the module).",
)
@_max_bytes_option
@reports_errors
def exec_command(
    module_path: str,
    inputs_path: str | None,
    seed: int,
    save_inputs_path: str | None,
    output_path: str | None,
    numerics: Numerics,
    max_bytes: int,
) -> None:
    """Run MODULE.hlo once on the CPU and summarise each output (tuples flattened)."""
    for path in (save_inputs_path, output_path):
        if path is not None:  # before XLA runs, and before either is written
            check_output(path)
    text = load(module_path).text
    inputs = None if inputs_path is None else load_arrays(inputs_path)
    execution = isolated_call(
        partial(run, seed=seed, max_bytes=max_bytes, label=module_path, numerics=numerics), text, inputs
    )
    _echo_warnings(execution.warnings)
    if save_inputs_path is not None:
        save_arrays(save_inputs_path, "input", execution.inputs)
    if output_path is not None:
        save_arrays(output_path, "output", execution.outputs)
    for index, (leaf, array) in enumerate(zip(execution.results, execution.outputs)):
        click.echo(f"output {index}: {leaf.to_text(with_layout=False)}  {_summary(leaf, array)}")


def _summary(leaf: ArrayShape, array: np.ndarray) -> str:
    """min/max/mean/NaN count, computed in float64 (complex: mean only)."""
    if leaf.element_type == "token":
        return "(token)"
    if array.size == 0:
        return "(empty)"
    wide = array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)
    nans = int(np.count_nonzero(np.isnan(wide)))
    finite = wide[~np.isnan(wide)]
    if finite.size == 0:
        return f"min=nan max=nan mean=nan nan={nans}"
    if wide.dtype.kind == "c":
        return f"mean={finite.mean():.6g} nan={nans}"
    return f"min={finite.min():.6g} max={finite.max():.6g} mean={finite.mean():.6g} nan={nans}"


@click.command("compare")
@click.argument("a_path", metavar="A.hlo")
@click.argument("b_path", metavar="B.hlo")
@_inputs_option
@_seed_option
@click.option("--rtol", default=DEFAULT_RTOL, show_default=True, help="Relative tolerance (A is the reference).")
@click.option("--atol", default=DEFAULT_ATOL, show_default=True, help="Absolute tolerance.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--numerics",
    type=_NumericsSides(),
    metavar="xla|neuron[,xla|neuron]",
    default="xla",
    show_default=True,
    help="Cast rules of the converts, for both modules or A,B for each: 'A.hlo A.hlo --numerics xla,neuron' "
    "is how far XLA is from the Neuron device.",
)
@_max_bytes_option
@reports_errors
def compare_command(
    a_path: str,
    b_path: str,
    inputs_path: str | None,
    seed: int,
    rtol: float,
    atol: float,
    as_json: bool,
    numerics: tuple[Numerics, Numerics],
    max_bytes: int,
) -> None:
    """Run A.hlo and B.hlo on the same inputs and compare outputs: exit 0 all within
    tolerance, 1 any over, 2 on an error. An element passes when |b-a| <= atol + rtol*|a|."""
    texts = load(a_path).text, load(b_path).text
    inputs = None if inputs_path is None else load_arrays(inputs_path)
    report = verify_numerics(
        *texts,
        rtol=rtol,
        atol=atol,
        seed=seed,
        inputs=inputs,
        labels=(a_path, b_path),
        max_bytes=max_bytes,
        numerics=numerics,
    )
    _echo_warnings(report.warnings)
    click.echo(report.to_json() if as_json else report.render())
    sys.exit(0 if report.ok else 1)
