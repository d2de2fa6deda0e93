"""``hloopt dtypes``: the element types each layer computes in, before and after a Neuron compile's passes."""

from __future__ import annotations

import click

from hloopt.cli.main import neuron_cc_options, read_neuron_cc_flags, reports_errors
from hloopt.driver.dtypes import auto_cast_decisions, dtype_table
from hloopt.passes.neuron_cc_flags import Compiler, parse_neuron_cc_flags
from hloopt.support.fileio import read_text
from hloopt.text.parser import parse


@click.command("dtypes")
@click.argument("module_path", metavar="MODULE")
@click.option(
    "--passes",
    default="all",
    show_default=True,
    metavar="LIST",
    help="The passes before the auto-cast (see 'hloopt passes'); 'none' for the auto-cast alone.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@neuron_cc_options("the passes")
@reports_errors
def dtypes_command(
    module_path: str, passes: str, as_json: bool, neuron_cc_flags: str | None, neuron_compiler: Compiler | None
) -> None:
    """List each layer's dots, convolutions, reduces and elementwise groups with their element types before
    and after a Neuron compile's dtype passes, and why the auto-cast left an op alone.

    MODULE is HLO text. Layers are the op_name metadata scopes (jit(f)/layer_3/attention); ops without
    one are listed under their computation. The compile is --passes followed by the auto-cast of
    --neuron-cc-flags over --neuron-compiler's defaults (the newest release's when neither is given).
    """
    text = read_neuron_cc_flags(neuron_cc_flags or "", neuron_compiler) or ""
    settings = parse_neuron_cc_flags(text, neuron_compiler)
    pipeline = settings.with_passes(None if passes.strip() == "none" else passes)
    module = parse(read_text(module_path), module_path)
    table = dtype_table(module, pipeline, module_path, plan=auto_cast_decisions)
    click.echo(table.to_json() if as_json else table.render(), nl=False)
