"""``hloopt exec`` and ``hloopt compare``: run modules on XLA's CPU backend.

XLA runs in worker processes (`hloopt.xla.bridge.IsolatedPool`), reading a .pb or
.mlir as well as compiling and running, so an input that crashes jaxlib, or runs past
``--timeout``, is an error message and exit code 2, not a dead or hung shell. With
``--split-input-file`` each ``// -----`` chunk is a module: one block per chunk.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import click
import numpy as np

from hloopt.arrays.comparing import CompareReport
from hloopt.arrays.npz import load_arrays, save_arrays
from hloopt.arrays.snapshots import Leaf, Snapshot
from hloopt.cast_engine import Numerics
from hloopt.cli.main import F, exit_on_errors, neuron_cc_options, read_neuron_cc_flags, reports_errors, timeout_option
from hloopt.driver import chunks
from hloopt.driver.chunks import in_chunk, label
from hloopt.errors import HloError
from hloopt.ir.shape import ArrayShape
from hloopt.passes.neuron_cc_flags import Compiler, parse_neuron_cc_flags
from hloopt.support.fileio import check_output
from hloopt.support.formats import Format
from hloopt.support.tolerances import DEFAULT_ATOL, DEFAULT_RTOL
from hloopt.xla.bridge import IsolatedPool, XlaError
from hloopt.xla.formats import load
from hloopt.xla.running import (
    DEFAULT_MAX_BYTES,
    NUMERICS,
    Execution,
    Prepared,
    compare_prepared,
    compare_recorded,
    numerics_sides,
    run_prepared,
    with_numerics,
)
from hloopt.xla.timeouts import limit

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


@dataclass(frozen=True)
class _Source:
    """One module of a file: its label, its HLO text, and whether that text is the file's own (HLO text,
    so that XLA's errors can be placed on its lines) rather than one converted from a .pb or .mlir."""

    label: str
    text: str
    written: bool
    #: The file's HloSnapshot values (arguments, recorded result), when it is one.
    snapshot: Snapshot | None = None

    def said(self, error: HloError, path: str) -> HloError:
        """`error` as the user sees it: on the line of the instruction XLA names, else of this module."""
        if isinstance(error, XlaError):
            return error.at(self.text, path) if self.written else error.named(self.label)
        return error


def _modules(path: str, split: bool, timeout: float, pool: IsolatedPool) -> list[_Source]:
    """Each module in `path`: the file, or with `split` each chunk at its place in the file (so errors,
    named after `path`, give the file's lines). A .pb or .mlir is read by XLA in one of `pool`'s workers."""
    loaded = load(path, timeout=timeout, pool=pool)
    written = loaded.format is Format.HLO
    if not split:
        return [_Source(path, loaded.text, written, loaded.snapshot)]
    return [_Source(label(path, chunk.place), chunk.located, written) for chunk in chunks.split_loaded(loaded, path)]


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


def _numerics_sides_option(help: str) -> Callable[[F], F]:
    """``--numerics`` of a command that runs two sides (`compare`, `trace`)."""
    return click.option(
        "--numerics",
        type=_NumericsSides(),
        metavar="xla|neuron[,xla|neuron]",
        default="xla",
        show_default=True,
        help=help,
    )


def html_option(what: str) -> Callable[[F], F]:
    """``--html PAGE`` of a command that reports `what`."""
    return click.option(
        "--html",
        metavar="PAGE",
        help=f"Also write a self-contained HTML report: {what} and the modules' text (needs hloopt[viz]).",
    )


def check_html(path: str | None) -> None:
    """Refuse --html before anything runs: plotly missing, or a page that could not be written."""
    if path is not None:
        from hloopt.viz.report import require_plotly

        require_plotly()
        check_output(path)


def _echo_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        click.echo(f"hloopt: warning: {warning}", err=True)


@click.command("exec")
@click.argument("module_path", metavar="MODULE")
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
@neuron_cc_options("MODULE's copy")
@timeout_option("reading a .pb or .mlir MODULE, compiling and running one module")
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
    neuron_cc_flags: str | None,
    neuron_compiler: Compiler | None,
    timeout: float,
) -> None:
    """Run MODULE once on the CPU and summarise each output (tuples flattened).

    MODULE is HLO text, a serialized HloModuleProto (.pb) or StableHLO (.mlir, .mlirbc).
    """
    if split_input_file and (save_inputs_path or output_path):
        raise click.UsageError("--save-inputs and -o hold one module's arrays: they do not go with --split-input-file")
    for path in (save_inputs_path, output_path):
        if path is not None:  # before XLA runs, and before either is written
            check_output(path)
    passes = _auto_cast(neuron_cc_flags, neuron_compiler)
    with IsolatedPool(2) as pool:
        pool.start(1)  # one worker imports jax while this process reads, parses and prepares the modules (a second
        # starts when the map has a second module)
        modules = _modules(module_path, split_input_file, timeout, pool)
        inputs = None if inputs_path is None else load_arrays(inputs_path)
        executions: list[Prepared | Execution | HloError] = [
            _prepared(m, numerics, module_path, passes) for m in modules
        ]
        ready = [index for index, prepared in enumerate(executions) if isinstance(prepared, Prepared)]
        calls = [(executions[i], _inputs(inputs, modules[i]), seed, max_bytes, module_path) for i in ready]
        labels = [modules[index].label for index in ready]
        ran = pool.map(run_prepared, calls, timeout=limit(timeout), labels=labels)
        for index, execution in zip(ready, ran):
            executions[index] = execution
    errors: list[Exception] = []
    for module, execution in zip(modules, executions):
        where = module.label
        if split_input_file:
            click.echo(f"{where}:")
        if isinstance(execution, HloError):
            said = module.said(execution, module_path)
            errors.append(in_chunk(said, where, module_path) if split_input_file else said)
            continue
        assert isinstance(execution, Execution)  # every prepared module ran
        _echo_execution(execution)
        if module.snapshot is not None and module.snapshot.result is not None and inputs is None:
            click.echo(_against_recorded(execution, module.snapshot.result, module_path))
        if save_inputs_path is not None:
            save_arrays(save_inputs_path, "input", execution.inputs)
        if output_path is not None:
            save_arrays(output_path, "output", execution.outputs)
    exit_on_errors(errors)


def _inputs(given: list[np.ndarray] | None, *sources: _Source) -> list[np.ndarray] | None:
    """What a run takes: --inputs, else the arguments of the first snapshot among `sources`, else None
    (random inputs from --seed)."""
    if given is not None:
        return given
    return next((source.snapshot.inputs for source in sources if source.snapshot is not None), None)


def _against_recorded(execution: Execution, recorded: Sequence[Leaf], path: str) -> str:
    """Whether a snapshot's run gave the result it recorded, bit for bit."""
    outputs = execution.outputs
    if len(outputs) != len(recorded):
        return f"recorded result: {len(recorded)} outputs, this run {len(outputs)}"
    differ = [
        str(index)
        for index, (leaf, output) in enumerate(zip(recorded, outputs))
        if leaf.array.dtype != output.dtype
        or leaf.array.shape != output.shape
        or leaf.array.tobytes() != output.tobytes()
    ]
    if not differ:
        return "recorded result: the same, bit for bit"
    return f"recorded result: output {', '.join(differ)} differ (hloopt compare {path} says how far)"


def _recorded_source(source: _Source, path: str) -> _Source:
    """A lone A of ``compare``: a snapshot with a recorded result, or the usage error."""
    if source.snapshot is None:
        raise click.UsageError(f"B is missing: a lone A must be an HloSnapshot ({path} is not one)")
    if source.snapshot.result is None:
        raise HloError(f"{path}: the snapshot records no result to compare with")
    return source


def _compare_recorded(
    source: _Source,
    path: str,
    passes: str | None,
    numerics: Numerics,
    inputs: list[np.ndarray] | None,
    limits: tuple[float, float, int, bool],
    timeout: float,
    pool: IsolatedPool,
) -> CompareReport | HloError:
    """``compare SNAPSHOT``: the snapshot's module (after `passes`, under `numerics`) run on its arguments
    (or --inputs) in a worker, against the result it recorded; `limits` are rtol, atol, max bytes and whether to
    keep each output's error distribution."""
    module = _after_passes(source, passes)
    prepared = _prepared(module, numerics, path, passes)
    if isinstance(prepared, HloError):
        return prepared
    assert source.snapshot is not None and source.snapshot.result is not None  # _recorded_source
    call = (prepared, path, _inputs(inputs, source), source.snapshot.result, *limits)
    result: CompareReport | HloError = pool.map(compare_recorded, [call], timeout=limit(timeout), labels=[path])[0]
    return module.said(result, path) if isinstance(result, HloError) else result


def _after_passes(source: _Source, passes: str | None) -> _Source:
    """`source` as B of a comparison: with `passes`, its text is no longer what XLA is given (`with_numerics`
    runs them on its copy), so XLA's errors name instructions, not the file's lines."""
    return source if passes is None else replace(source, written=False)


def _auto_cast(flags: str | None, compiler: Compiler | None) -> str | None:
    """The ``neuron-auto-cast`` entry the compiler flags ask for (checked, unmodelled flags named); None without them."""
    text = read_neuron_cc_flags(flags, compiler)
    return None if text is None else parse_neuron_cc_flags(text, compiler).pass_spec


def _prepared(source: _Source, numerics: Numerics, label: str, passes: str | None = None) -> Prepared | HloError:
    """The module prepared for XLA (`with_numerics`, after `passes`), or why it cannot be (on its line when it
    was written)."""
    try:
        return with_numerics(source.text, numerics, label, located=source.written, passes=passes)
    except HloError as err:
        return err


def _prepared_pair(
    a: _Source, b: _Source, numerics: tuple[Numerics, Numerics], a_path: str, b_path: str, b_passes: str | None
) -> list[tuple[Prepared, str]] | HloError:
    """A's and B's modules prepared for XLA, each with its label (`compare_prepared`), or the first refusal;
    `b_passes` (--passes and the compiler flags' auto-cast) run on B alone: A is the reference."""
    sides = [
        (_prepared(source, side, path, passes), path)
        for source, side, path, passes in zip((a, b), numerics, (a_path, b_path), (None, b_passes))
    ]
    for prepared, _ in sides:
        if isinstance(prepared, HloError):
            return prepared
    return [(prepared, path) for prepared, path in sides if isinstance(prepared, Prepared)]


def _said(
    result: CompareReport | HloError, a: _Source, b: _Source, a_path: str, b_path: str
) -> CompareReport | HloError:
    """A comparison's error placed in the file it is about, when its label says which (A's or B's)."""
    if isinstance(result, XlaError) and result.source in (a.label, a_path, b.label, b_path):
        return a.said(result, a_path) if result.source in (a.label, a_path) else b.said(result, b_path)
    return result


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
@click.argument("a_path", metavar="A")
@click.argument("b_path", metavar="[B]", required=False)
@click.option(
    "--passes",
    metavar="LIST",
    help="Run these passes on B (on a lone SNAPSHOT's module) before it runs: 'all' or a comma-separated list.",
)
@_inputs_option
@_seed_option
@click.option("--rtol", default=DEFAULT_RTOL, show_default=True, help="Relative tolerance (A is the reference).")
@click.option("--atol", default=DEFAULT_ATOL, show_default=True, help="Absolute tolerance.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_numerics_sides_option(
    "Cast rules of the converts, for both modules or A,B for each: 'A A --numerics xla,neuron' "
    "is how far XLA is from the Neuron device."
)
@_max_bytes_option
@_split_option
@html_option("the comparison table, each output's error histogram in ULPs and B against A")
@neuron_cc_options("B's copy (A is the reference)")
@timeout_option("reading a .pb or .mlir A or B, compiling and running one pair of modules")
@reports_errors
def compare_command(
    a_path: str,
    b_path: str | None,
    passes: str | None,
    inputs_path: str | None,
    seed: int,
    rtol: float,
    atol: float,
    as_json: bool,
    numerics: tuple[Numerics, Numerics],
    max_bytes: int,
    split_input_file: bool,
    html: str | None,
    neuron_cc_flags: str | None,
    neuron_compiler: Compiler | None,
    timeout: float,
) -> None:
    """Run A and B on the same inputs and compare outputs: exit 0 all within
    tolerance, 1 any over, 2 on an error. An element passes when |b-a| <= atol + rtol*|a|.

    A and B are HLO text, serialized HloModuleProtos (.pb), StableHLO (.mlir, .mlirbc) or XLA's
    HloSnapshots (--xla_dump_hlo_snapshots), whose arguments are the inputs (A's first). A lone
    SNAPSHOT compares its recorded result (A) with hloopt's run of its module (B, after --passes,
    under the second --numerics). With --split-input-file, chunk i of A is compared with chunk i of B.
    """
    if b_path is None and split_input_file:
        raise click.UsageError("a lone A is a snapshot, one module: it does not go with --split-input-file")
    check_html(html)
    drawn = html is not None
    # B's pipeline, one spec run in registry order on B's copy (`with_numerics`): --passes and the flags' auto-cast.
    b_pipeline = ",".join(spec for spec in (passes, _auto_cast(neuron_cc_flags, neuron_compiler)) if spec) or None
    with IsolatedPool(2) as pool:
        pool.start(1)  # one worker imports jax while this process reads and splits the modules (as exec)
        a_modules = _modules(a_path, split_input_file, timeout, pool)
        inputs = None if inputs_path is None else load_arrays(inputs_path)
        if b_path is None:
            source = _recorded_source(a_modules[0], a_path)
            result = _compare_recorded(
                source, a_path, b_pipeline, numerics[1], inputs, (rtol, atol, max_bytes, drawn), timeout, pool
            )
            after = a_path if passes is None else f"{a_path} after {passes}"
            labels = [(f"{a_path} (recorded)", after)]
            _write_html(html, [result], labels, [[(after, source.text)]])
            _report_comparisons([result], labels, as_json, split_input_file=False)
            return
        b_modules = [_after_passes(b, passes) for b in _modules(b_path, split_input_file, timeout, pool)]
        if len(a_modules) != len(b_modules):
            raise HloError(
                f"{b_path}: has {len(b_modules)} chunks and {a_path} {len(a_modules)}; "
                "chunk i of A goes with chunk i of B"
            )
        # Prepared here, as by exec, while the worker imports jax: on their lines when the files are HLO text.
        prepared_pairs = [
            _prepared_pair(a, b, numerics, a_path, b_path, b_pipeline) for a, b in zip(a_modules, b_modules)
        ]
        ready = [index for index, sides in enumerate(prepared_pairs) if isinstance(sides, list)]
        calls = [
            (prepared_pairs[i], _inputs(inputs, a_modules[i], b_modules[i]), rtol, atol, seed, max_bytes, drawn)
            for i in ready
        ]
        pairs = [f"{a_modules[index].label} against {b_modules[index].label}" for index in ready]
        ran = dict(zip(ready, pool.map(compare_prepared, calls, timeout=limit(timeout), labels=pairs)))
    labels = [(a.label, b.label) for a, b in zip(a_modules, b_modules)]
    results = [
        _said(ran[index] if isinstance(sides, list) else sides, a, b, a_path, b_path)
        for index, (sides, a, b) in enumerate(zip(prepared_pairs, a_modules, b_modules))
    ]
    if split_input_file:
        results = [
            in_chunk(r, f"{a} against {b}", a_path, b_path) if isinstance(r, HloError) else r
            for (a, b), r in zip(labels, results)
        ]
    texts = [
        [(f"A: {a.label}", a.text), (f"B: {b.label}", b.text), *_b_as_run(sides, b_pipeline)]
        for a, b, sides in zip(a_modules, b_modules, prepared_pairs)
    ]
    _write_html(html, results, labels, texts)
    _report_comparisons(results, labels, as_json, split_input_file)


def _b_as_run(sides: list[tuple[Prepared, str]] | HloError, passes: str | None) -> list[tuple[str, str]]:
    """The page's text of B after `passes`, as XLA ran it (B as written does not show what the passes did)."""
    if passes is None or isinstance(sides, HloError):
        return []
    return [(f"B as run: after {passes}, made runnable on XLA's CPU", sides[1][0].text)]


def _write_html(
    path: str | None,
    results: Sequence[CompareReport | HloError],
    labels: Sequence[tuple[str, str]],
    texts: Sequence[Sequence[tuple[str, str]]],
) -> None:
    """``compare --html``: a section per pair compared (a split file's chunks each), with A's and B's text; none
    when a comparison failed (an error writes nothing, as for ``run``'s outputs)."""
    if path is None or any(isinstance(result, HloError) for result in results):
        return
    from hloopt.viz.report import ModuleSection, write_report

    sections = [
        ModuleSection(
            f"{a} against {b}",
            comparison=result if isinstance(result, CompareReport) else None,
            printed=tuple(printed),
        )
        for (a, b), result, printed in zip(labels, results, texts)
    ]
    write_report(path, f"hloopt compare: {labels[0][0]} against {labels[0][1]}", sections)
    click.echo(f"hloopt: HTML report: {path}", err=True)


def _report_comparisons(
    results: list[CompareReport | HloError], labels: list[tuple[str, str]], as_json: bool, split_input_file: bool
) -> None:
    """Print each comparison (a block per chunk with --split-input-file), then exit 0, 1 or 2."""
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
