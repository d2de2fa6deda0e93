"""`hloopt cast`: the cast engine on .npy and raw .bin files."""

from __future__ import annotations

from pathlib import Path

import click

from hloopt.cast_engine.config import FP8ConversionConfig
from hloopt.cast_engine.dtypes import NEURON, PROFILES, XLA, DType, resolve
from hloopt.cast_engine.engine import cast
from hloopt.cast_engine.errors import CastError
from hloopt.cast_engine.fileio import encode_output, read_input
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, write_atomic


class CommandError(click.ClickException):
    """A user error: one line on stderr, exit status 2, no traceback."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"hloopt: error: {self.format_message()}", err=True)


def _dtype(spec: str | None, profile: str) -> DType | None:
    """A --from/--to value: a dtype name or a BIR ordinal written in decimal."""
    if spec is None:
        return None
    return resolve(int(spec) if spec.isdigit() else spec, profile)


@click.command("cast")
@click.argument("input_path", metavar="IN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--from", "src", metavar="DT", help="Source dtype name or BIR ordinal (required for raw input).")
@click.option("--to", "dst", metavar="DT", required=True, help="Destination dtype name or BIR ordinal.")
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default=NEURON,
    show_default=True,
    help="neuron: the device's CastToNewDType; xla: XLA convert semantics.",
)
@click.option("--no-saturate", is_flag=True, help="FP8 overflow gives Inf/NaN instead of max-finite (neuron).")
@click.option(
    "--nan-suppress", is_flag=True, help="FP8 NaN (and e4m3fn unsaturated overflow) gives signed zero (neuron)."
)
@click.option(
    "-o",
    "--output",
    "output_path",
    metavar="OUT",
    required=True,
    type=click.Path(path_type=Path),  # a directory here is refused with the other unwritable outputs
    help="Output file (.npy, or raw bytes otherwise).",
)
def cast_command(
    input_path: Path, src: str | None, dst: str, profile: str, no_saturate: bool, nan_suppress: bool, output_path: Path
) -> None:
    """Convert the elements of IN from one dtype to another and write OUT."""
    try:
        if profile == XLA and (no_saturate or nan_suppress):
            raise CastError("--no-saturate and --nan-suppress apply only to --profile neuron")
        config = FP8ConversionConfig(not no_saturate, nan_suppress) if no_saturate or nan_suppress else None
        source = _dtype(src, profile)
        target = _dtype(dst, profile)
        assert target is not None
        check_output(output_path)
        data, source = read_input(input_path, source)
        result = cast(data, source.name, target.name, config, profile)
        write_atomic(output_path, encode_output(output_path, result, target))
    except (CastError, HloError, OSError) as exc:
        raise CommandError(str(exc)) from None
