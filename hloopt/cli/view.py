"""``hloopt view``: the module as a graph in Model Explorer, before and after a pipeline, with overlays.

This process reads the module, runs the passes and the trace (XLA in a worker, as ``hloopt trace``), and
writes the graphs and overlays (`hloopt.viz.view`); Model Explorer's server runs in a process of its own
(`hloopt.model_explorer.server`) that lives as long as this one holds its stdin: Ctrl-C or `kill` here
ends it too, and it removes the temporary directory.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import webbrowser
from pathlib import Path

import click

from hloopt.arrays.tracing import TraceReport
from hloopt.cast_engine import Numerics
from hloopt.cli.execution import (
    _auto_cast,
    _echo_warnings,
    _inputs_option,
    _max_bytes_option,
    _numerics_sides_option,
    _seed_option,
)
from hloopt.cli.main import neuron_cc_options, reports_errors, timeout_option
from hloopt.cli.trace import TraceRun, run_trace
from hloopt.errors import HloError
from hloopt.passes.neuron_cc_flags import Compiler
from hloopt.passes.pipeline import run_pipeline
from hloopt.support.fileio import check_output, make_directories, write_atomic
from hloopt.text.parser import parse
from hloopt.viz.view import View, make_view
from hloopt.xla.formats import load

#: What the server process runs (it reads its request on stdin: `hloopt.model_explorer.server`).
SERVER = "from hloopt.model_explorer.server import serve; serve()"


@click.command("view")
@click.argument("module_path", metavar="MODULE")
@click.option("--passes", metavar="LIST", help="Show MODULE before and after these passes, in two graphs.")
@click.option(
    "--trace",
    "with_trace",
    is_flag=True,
    help="Trace MODULE against its copy after --passes (or under the second of --numerics) and lay each "
    "instruction's local and propagated error over the graphs (hloopt trace --json's max_ulp).",
)
@_inputs_option
@_seed_option
@_numerics_sides_option("With --trace: cast rules of the converts, for both sides or A,B for each.")
@_max_bytes_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write the graphs and overlays into this directory and keep them [default: a temporary directory, "
    "removed when the viewer stops].",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Model Explorer's port on 127.0.0.1; 0: any free one."
)
@click.option("--no-browser", is_flag=True, help="Print the address only; never open a browser.")
@neuron_cc_options("the after graph (and the traced copy)")
@timeout_option("reading a .pb or .mlir MODULE, and the whole trace")
@reports_errors
def view_command(
    module_path: str,
    passes: str | None,
    with_trace: bool,
    inputs_path: str | None,
    seed: int,
    numerics: tuple[Numerics, Numerics],
    max_bytes: int,
    out_dir: str | None,
    port: int,
    no_browser: bool,
    neuron_cc_flags: str | None,
    neuron_compiler: Compiler | None,
    timeout: float,
) -> None:
    """Open MODULE in Model Explorer on a local port: one node per instruction, layers by op_name scope and
    called computation, coloured by element type; with --passes, the module after them beside it (nodes
    matched, what the passes changed as an overlay); with --trace, each instruction's error in ULPs.

    MODULE is HLO text, a serialized HloModuleProto (.pb), an XLA snapshot or StableHLO. Runs until Ctrl-C.
    """
    if importlib.util.find_spec("model_explorer") is None:  # before any work: the server could not start
        raise HloError("hloopt view needs Model Explorer: pip install 'hloopt[viz]' (ai-edge-model-explorer)")
    auto_cast = _auto_cast(neuron_cc_flags, neuron_compiler)
    passes = ",".join(spec for spec in (passes, auto_cast) if spec) or None
    if with_trace and not passes and numerics[0] == numerics[1]:
        raise click.UsageError(
            "--trace needs something to trace against: --passes, --neuron-cc-flags or --numerics A,B"
        )
    if out_dir is not None:
        check_output(out_dir, directory=True, create=True)
    view = _view(module_path, passes, numerics, with_trace, inputs_path, seed, max_bytes, timeout)
    with _Viewer(out_dir) as viewer:
        directory = viewer.directory
        _write(view, directory)
        request = {
            "port": port,
            "models": [str(directory / name) for name in view.models],
            "node_data": [[str(directory / name), model] for name, (model, _) in view.node_data.items()],
            "panes": view.panes,
        }
        address = viewer.start(request)
        click.echo(address)
        if out_dir is not None:
            click.echo(f"graphs and overlays in {out_dir}", err=True)
        if not no_browser:
            webbrowser.open_new_tab(address)
        click.echo("Ctrl-C stops the viewer.", err=True)
        if viewer.process.wait() != 0:
            raise HloError(f"Model Explorer stopped: {viewer.reason()}")


def _view(
    module_path: str,
    passes: str | None,
    numerics: tuple[Numerics, Numerics],
    with_trace: bool,
    inputs_path: str | None,
    seed: int,
    max_bytes: int,
    timeout: float,
) -> View:
    """The graphs and overlays: the module, after `passes`, with the trace of the two."""
    text = load(module_path, timeout=timeout).text
    before = parse(text, module_path)
    after, provenance = None, None
    if passes:
        after = parse(text, module_path)
        report = run_pipeline(after, passes, numerics[1], original=lambda: parse(text, module_path))
        provenance = report.provenance
        _echo_warnings([warning for p in report.passes for warning in p.warnings])
    trace = None
    if with_trace:
        run = TraceRun(module_path, None, passes, numerics, inputs_path, seed, max_bytes)
        result = run_trace(run, timeout).result
        assert isinstance(result, TraceReport)
        _echo_warnings(result.warnings)
        trace = json.loads(result.to_json())
    return make_view(_stem(module_path), before, after, provenance, trace)


def _stem(path: str) -> str:
    """The file's name without the extensions of module files (``m.hlo.pb`` → ``m``): the view's files' stem."""
    name = Path(path).name
    while (shorter := re.sub(r"\.(hlo|txt|pb|mlir|mlirbc)$", "", name)) not in (name, ""):
        name = shorter
    return name if path != "-" else "stdin"


def _write(view: View, directory: Path) -> None:
    for name, graphs in view.models.items():
        write_atomic(directory / name, json.dumps(graphs, separators=(",", ":")))
    for name, (_, data) in view.node_data.items():
        write_atomic(directory / name, json.dumps(data, separators=(",", ":")))


class _Viewer:
    """The server process, started before anything is written: told first which directory to remove
    when it ends (the temporary one), so a Ctrl-C at any point leaves nothing behind."""

    def __init__(self, out_dir: str | None) -> None:
        if out_dir is not None:
            make_directories(out_dir)
            self.directory, remove = Path(out_dir).absolute(), None
        else:
            self.directory = Path(tempfile.mkdtemp(prefix="hloopt-view-"))
            remove = str(self.directory)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 -- the server's messages, shown if it fails to start
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            process_group=0,  # its own group: the terminal's Ctrl-C is this process's to handle
        )
        self._send({"remove": remove})

    def __enter__(self) -> _Viewer:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the server ends (and removes the temporary directory)
        self.process.wait()
        self.log.close()

    def _send(self, request: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()

    def start(self, request: dict[str, object]) -> str:
        """Send the server its request and wait for its address (or the reason it stopped)."""
        assert self.process.stdout is not None
        self._send(request)
        line = self.process.stdout.readline().decode().strip()
        if line:
            return line
        self.process.wait()
        raise HloError(f"Model Explorer did not start: {self.reason()}")

    def reason(self) -> str:
        """Why the server ended: the last line it wrote, else its exit status."""
        self.log.seek(0)
        said = [text for text in self.log.read().decode(errors="replace").splitlines() if text.strip()]
        return said[-1].removeprefix("hloopt: error: ") if said else f"exit status {self.process.returncode}"
