"""``hloopt exec`` and ``hloopt compare``: run modules on XLA's CPU backend.

XLA runs in worker processes (`hloopt.xla.bridge.isolated_map`), so an input
that crashes jaxlib is an error message and exit code 2, not a dead shell. With
``--split-input-file`` each ``// -----`` chunk is a module: one block per chunk.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click
import numpy as np

from hloopt.cli.main import exit_on_errors, reports_errors
from hloopt.driver import chunks
from hloopt.driver.chunks import in_chunk, label
from hloopt.errors import HloError
from hloopt.ir.shape import ArrayShape
from hloopt.support.fileio import check_output
from hloopt.xla.bridge import isolated_map
from hloopt.xla.execution import (
    DEFAULT_ATOL,
    DEFAULT_MAX_BYTES,
    DEFAULT_RTOL,
    NUMERICS,
    CompareReport,
    Execution,
    Numerics,
    compare,
    load_arrays,
    numerics_sides,
    run,
    save_arrays,
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
_split_option = click.option(
    "--split-input-file",
    is_flag=True,
    help="Each '// -----' chunk of a text module file is a module of its own: one block per chunk.",
)


def _modules(path: str, split: bool) -> list[tuple[str, str]]:
    """(label, text) of each module in `path`: the file, or with `split` each chunk at its place in the
    file (so errors, named after `path`, give the file's lines)."""
    loaded = load(path)
    if not split:
        return [(path, loaded.text)]
    return [(label(path, chunk.place), chunk.located) for chunk in chunks.split_loaded(loaded, path)]


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
@_split_option
@reports_errors
def exec_command(
    module_path: str,
    inputs_path: str | None,
    seed: int,
    save_inputs_path: str | None,
    output_path: str | None,
    numerics: Numerics,
    max_bytes: int,
    split_input_file: bool,
) -> None:
    """Run MODULE.hlo once on the CPU and summarise each output (tuples flattened)."""
    if split_input_file and (save_inputs_path or output_path):
        raise click.UsageError("--save-inputs and -o hold one module's arrays: they do not go with --split-input-file")
    for path in (save_inputs_path, output_path):
        if path is not None:  # before XLA runs, and before either is written
            check_output(path)
    modules = _modules(module_path, split_input_file)
    inputs = None if inputs_path is None else load_arrays(inputs_path)
    calls = [(text, inputs, seed, max_bytes, module_path, numerics) for _, text in modules]
    errors: list[Exception] = []
    for (where, _), execution in zip(modules, isolated_map(run, calls, workers=min(2, len(calls)))):
        if split_input_file:
            click.echo(f"{where}:")
        if isinstance(execution, HloError):
            errors.append(in_chunk(execution, where, module_path) if split_input_file else execution)
            continue
        _echo_execution(execution)
        if save_inputs_path is not None:
            save_arrays(save_inputs_path, "input", execution.inputs)
        if output_path is not None:
            save_arrays(output_path, "output", execution.outputs)
    exit_on_errors(errors)


def _echo_execution(execution: Execution) -> None:
    _echo_warnings(execution.warnings)
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
@_split_option
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
    split_input_file: bool,
) -> None:
    """Run A.hlo and B.hlo on the same inputs and compare outputs: exit 0 all within
    tolerance, 1 any over, 2 on an error. An element passes when |b-a| <= atol + rtol*|a|.

    With --split-input-file, chunk i of A is compared with chunk i of B.
    """
    a_modules, b_modules = _modules(a_path, split_input_file), _modules(b_path, split_input_file)
    if len(a_modules) != len(b_modules):
        raise HloError(
            f"{b_path}: has {len(b_modules)} chunks and {a_path} {len(a_modules)}; chunk i of A goes with chunk i of B"
        )
    inputs = None if inputs_path is None else load_arrays(inputs_path)
    labels = [(a_label, b_label) for (a_label, _), (b_label, _) in zip(a_modules, b_modules)]
    calls = [
        (a, b, inputs, rtol, atol, seed, max_bytes, (a_path, b_path), numerics)
        for (_, a), (_, b) in zip(a_modules, b_modules)
    ]
    results: list[CompareReport | HloError] = isolated_map(compare, calls, workers=min(2, len(calls)))
    if split_input_file:
        results = [
            in_chunk(r, f"{a} against {b}", a_path, b_path) if isinstance(r, HloError) else r
            for (a, b), r in zip(labels, results)
        ]
    ok = all(isinstance(result, CompareReport) and result.ok for result in results)
    if split_input_file and as_json:
        blocks = [
            {"a": a, "b": b, **({"error": str(r)} if isinstance(r, HloError) else r.to_dict())}
            for (a, b), r in zip(labels, results)
        ]
        click.echo(json.dumps({"ok": ok, "chunks": blocks}, indent=2))
    else:
        for (a, b), result in zip(labels, results):
            if split_input_file:
                click.echo(f"{a} against {b}:")
            if isinstance(result, CompareReport):
                _echo_warnings(result.warnings)
                click.echo(result.to_json() if as_json else result.render())
    exit_on_errors([result for result in results if isinstance(result, HloError)])
    sys.exit(0 if ok else 1)
