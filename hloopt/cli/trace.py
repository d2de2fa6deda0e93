"""``hloopt trace``: which instruction makes B's numbers part from A's, and where a NaN or Inf starts.

B is a second module (matched to A by instruction names), or A itself after ``--passes`` and the auto-cast
of ``--neuron-cc-flags``, or under other ``--numerics`` (matched by the passes' provenance). XLA runs in one worker
(`hloopt.xla.bridge.IsolatedPool`); this process reads, rewrites and prepares the modules.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import click

from hloopt.arrays.npz import load_arrays
from hloopt.arrays.tracing import NanOrigin, TraceReport
from hloopt.cast_engine import Numerics
from hloopt.cli.execution import (
    _auto_cast,
    _echo_warnings,
    _inputs,
    _inputs_option,
    _max_bytes_option,
    _modules,
    _numerics_sides_option,
    _seed_option,
    check_html,
    html_option,
)
from hloopt.cli.main import neuron_cc_options, reports_errors, timeout_option
from hloopt.errors import HloError
from hloopt.passes.neuron_cc_flags import Compiler
from hloopt.support.tolerances import TRACE_ITERATIONS, TRACE_TOP
from hloopt.xla.bisecting import bisect_prepared
from hloopt.xla.bridge import IsolatedPool
from hloopt.xla.timeouts import limit
from hloopt.xla.tracing import TraceJob, nan_prepared, side, trace_prepared


@click.command("trace")
@click.argument("a_path", metavar="A")
@click.argument("b_path", metavar="[B]", required=False)
@click.option("--passes", metavar="LIST", help="B is A after these passes (matched to A by their provenance).")
@_inputs_option
@_seed_option
@_numerics_sides_option("Cast rules of the converts, for both modules or A,B for each.")
@click.option(
    "--reference",
    type=click.Choice(["f64"]),
    help="Also run A in f64 and class each instruction and output as precision, better or suspect.",
)
@click.option(
    "--nan", "nan", is_flag=True, help="Name the first instruction that makes NaN or Inf from finite operands."
)
@click.option(
    "--bisect",
    is_flag=True,
    help="With --passes (or --neuron-cc-flags): the smallest set of the pipeline's rewrite sites, each a pass "
    "and an instruction, that moves the outputs.",
)
@click.option("--top", default=TRACE_TOP, show_default=True, help="How many instructions to list by local error.")
@click.option(
    "--loop-iterations",
    "iterations",
    type=click.IntRange(min=1),
    default=TRACE_ITERATIONS,
    show_default=True,
    help="Iterations of each while loop traced: the first N-1 and the last (each is a copy of the body that runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON (docs/trace-json.md).")
@_max_bytes_option
@html_option("the worst instructions by scope, each linked to its line of A, and each output's path back")
@neuron_cc_options("B (A after them, without B)")
@timeout_option("reading a .pb or .mlir A or B, and the whole trace")
@reports_errors
def trace_command(
    a_path: str,
    b_path: str | None,
    passes: str | None,
    inputs_path: str | None,
    seed: int,
    numerics: tuple[Numerics, Numerics],
    reference: str | None,
    nan: bool,
    bisect: bool,
    top: int,
    iterations: int,
    as_json: bool,
    max_bytes: int,
    html: str | None,
    neuron_cc_flags: str | None,
    neuron_compiler: Compiler | None,
    timeout: float,
) -> None:
    """Run A and B on the same inputs with every instruction's value captured; name the first instruction
    whose own (local) error is over tolerance, the largest by op_name scope, and each output's path back
    to where its error entered. Exit 0 none over, 1 one is (or --nan found one), 2 on an error.

    Without B, B is A after --passes and the auto-cast of --neuron-cc-flags, or under the second of
    --numerics A,B. With --nan, the module traced
    is B when there is one, else A. An XLA snapshot (*.snapshot.*.pb) is run on its recorded arguments.
    """
    auto_cast = _auto_cast(neuron_cc_flags, neuron_compiler)
    if b_path is not None and (passes or auto_cast):
        raise click.UsageError("B is given, or made from A by --passes or --neuron-cc-flags: not both")
    passes = ",".join(spec for spec in (passes, auto_cast) if spec) or None  # run in registry order, as compare
    if html is not None and (nan or bisect):
        raise click.UsageError("--html draws the trace of local and propagated error: not with --nan or --bisect")
    check_html(html)
    if bisect:
        _bisect(a_path, passes, numerics[1], inputs_path, seed, max_bytes, timeout, as_json)
    job = TraceRun(a_path, b_path, passes, numerics, inputs_path, seed, max_bytes, top, reference, nan, iterations)
    traced = run_trace(job, timeout)
    result = traced.result
    if nan:
        if as_json:
            click.echo(json.dumps({"nan_origin": None if result is None else result.to_dict()}, indent=2))
        else:
            click.echo("no instruction makes NaN or Inf from finite operands" if result is None else result.render())
        sys.exit(0 if result is None else 1)
    assert isinstance(result, TraceReport)
    _echo_warnings(result.warnings)
    if html is not None:
        from hloopt.viz.report import ModuleSection, write_report

        printed = ((f"A: {a_path}", traced.a_text), *(((f"B: {b_path}", traced.b_text),) if b_path else ()))
        section = ModuleSection(f"{a_path} against {traced.b_label}", trace=result, printed=printed)
        write_report(html, f"hloopt trace: {a_path} against {traced.b_label}", [section])
        click.echo(f"hloopt: HTML report: {html}", err=True)
    click.echo(result.to_json() if as_json else result.render())
    sys.exit(0 if result.ok else 1)


@dataclass(frozen=True)
class TraceRun:
    """What one trace runs: A against B (a second file, or A after `passes` or under B's numerics), or with
    `nan` where a NaN starts; the options of `hloopt trace`, which `hloopt view --trace` shares."""

    a_path: str
    b_path: str | None
    passes: str | None
    numerics: tuple[Numerics, Numerics]
    inputs_path: str | None
    seed: int
    max_bytes: int
    top: int = TRACE_TOP
    reference: str | None = None
    nan: bool = False
    iterations: int = TRACE_ITERATIONS


@dataclass(frozen=True)
class Traced:
    """A trace's `result`: the report, or the NaN origin (None when there is none); and the texts it ran, as a
    report shows them."""

    result: TraceReport | NanOrigin | None
    a_text: str
    b_text: str
    b_label: str


def run_trace(run: TraceRun, timeout: float) -> Traced:
    """The trace of `run`, XLA running in one worker."""
    with IsolatedPool(1) as pool:
        pool.start(1)  # the worker imports jax while this process reads and prepares the modules
        a = _modules(run.a_path, False, timeout, pool)[0]
        b = a if run.b_path is None else _modules(run.b_path, False, timeout, pool)[0]
        passes, numerics = run.passes, run.numerics
        b_label = run.b_path or (f"{run.a_path} after {passes}" if passes else f"{run.a_path} ({numerics[1]})")
        inputs = _inputs(None if run.inputs_path is None else load_arrays(run.inputs_path), a, b)  # a snapshot's
        side_a = side(a.text, numerics[0], run.a_path, located=a.written)  # first: an error in A is said of A
        side_b = side(b.text, numerics[1], b_label, passes, located=b.written)
        if run.nan:
            changed = run.b_path is not None or passes or numerics[0] != numerics[1]
            traced = side_b if changed else side_a
            call, args, label = nan_prepared, (traced, inputs, run.seed, run.max_bytes, run.iterations), traced.label
        else:
            wide = side(a.text, "xla", f"{run.a_path} (f64)", located=a.written) if run.reference else None
            matched_by = "names" if run.b_path is not None else "provenance"
            job = TraceJob(
                side_a, side_b, wide, inputs, run.seed, run.max_bytes, matched_by, run.top, iterations=run.iterations
            )
            call, args, label = trace_prepared, (job,), f"{run.a_path} against {b_label}"
        result = pool.map(call, [args], timeout=limit(timeout), labels=[label])[0]
    if isinstance(result, HloError):
        raise result
    return Traced(result, a.text, b.text, b_label)


def _bisect(
    a_path: str,
    passes: str | None,
    numerics: Numerics,
    inputs_path: str | None,
    seed: int,
    max_bytes: int,
    timeout: float,
    as_json: bool,
) -> None:
    """``--bisect``: the report, then exit 0 when no site moves the outputs, 1 when some do."""
    if not passes:
        raise click.UsageError("--bisect needs --passes or --neuron-cc-flags: the pipeline whose sites it searches")
    with IsolatedPool(1) as pool:
        pool.start(1)
        a = _modules(a_path, False, timeout, pool)[0]
        inputs = _inputs(None if inputs_path is None else load_arrays(inputs_path), a)
        args = (a.text, a_path, passes, numerics, inputs, seed, max_bytes)
        (result,) = pool.map(bisect_prepared, [args], timeout=limit(timeout), labels=[a_path])
    if isinstance(result, HloError):
        raise result
    click.echo(result.to_json() if as_json else result.render())
    sys.exit(0 if result.ok else 1)
