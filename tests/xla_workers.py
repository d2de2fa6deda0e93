"""Functions tests run in XLA workers (`isolated_map`), which unpickle them by name: a test that uses one
puts this folder on the workers' path (``monkeypatch.setenv("PYTHONPATH", …)``, `on_worker_path`)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from hloopt.support.formats import Format
from hloopt.text.parser import parse
from hloopt.xla import formats

HERE = Path(__file__).resolve().parent


def on_worker_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let XLA workers started from now on import this module."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))


def bytecode(stablehlo: str) -> bytes:
    """MLIR bytecode of the StableHLO text `stablehlo`, as ``jax.export`` writes it."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir  # pyright: ignore[reportPrivateImportUsage]

    with jax_mlir.make_ir_context():
        written = io.BytesIO()
        ir.Module.parse(stablehlo).operation.write_bytecode(written)
        return written.getvalue()


def written_and_read_back(text: str, fmt: str, name: str) -> str:
    """Write `text` as `fmt` (``pb``, ``mlir``) and read that back into a module hloopt parses: ``ok``, or
    the HloError that stopped it (the conversions run in place: this is a worker already)."""
    data = formats.dump(text, Format(fmt), name)
    if isinstance(data, bytes):
        back = formats.proto_to_text(data, name)
    else:
        back = formats.stablehlo_to_text(data.encode(), name)
    parse(back, name)
    return "ok"
