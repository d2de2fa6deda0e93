"""``hloopt run IN -o OUT`` writes the module as it is printed (a long literal in pieces): the same text as
standard output gives, as a file holds it, and the same status (issue 28, item 12)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from cli_invoke import invoke

from hloopt.driver.chunks import as_file
from hloopt.ir import literal
from hloopt.ir.element_types import numpy_dtype
from hloopt.ir.literal import format_literal
from hloopt.ir.shape import ArrayShape


def _module(element_type: str, count: int = 6000) -> str:
    values = (np.random.default_rng(1).standard_normal(count) * 4).astype(np.float32)
    text = format_literal(values.astype(numpy_dtype(element_type)), ArrayShape(element_type, (count,)))
    shape = f"{element_type}[{count}]{{0}}"
    return f"HloModule m\n\nENTRY e {{\n  c = {shape} constant({text})\n  ROOT n = {shape} negate(c)\n}}\n"


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of a few KB, so that a test-sized constant is a view printed in many pieces."""
    monkeypatch.setattr(literal, "_PIECE", 5000)
    monkeypatch.setattr(literal, "_FORMAT_PIECE", 1000)


@pytest.mark.parametrize("passes", [[], ["--passes", "all"]])
@pytest.mark.parametrize("element_type", ["f32", "bf16"])
def test_a_file_output_is_standard_output_as_a_file(tmp_path: Path, element_type: str, passes: list[str]) -> None:
    source = tmp_path / "in.hlo"
    source.write_text(_module(element_type))
    shown = invoke("run", source, *passes)
    written = invoke("run", source, *passes, "-o", tmp_path / "out.hlo")
    assert shown.exit_code == written.exit_code == 0
    assert (tmp_path / "out.hlo").read_text() == as_file(shown.stdout)
    assert written.stdout == "" and written.stderr == shown.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.hlo", "out.hlo"]
    if passes:
        assert f"{'f32' if element_type == 'bf16' else element_type}[6000]{{0}} constant(" in shown.stdout


def test_a_fifo_output_gets_the_streamed_module(tmp_path: Path) -> None:
    source = tmp_path / "in.hlo"
    source.write_text(_module("bf16"))
    fifo = tmp_path / "out.hlo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    result = invoke("run", source, "--passes", "all", "-o", fifo)
    reader.join()
    assert result.exit_code == 0
    assert received == [as_file(invoke("run", source, "--passes", "all").stdout)]


def test_check_after_a_streamed_write_sees_no_change(tmp_path: Path) -> None:
    """Without passes, whether the module changed is found as it is written: the written file is canonical."""
    source = tmp_path / "in.hlo"
    source.write_text(_module("f32"))
    assert invoke("run", source, "-o", tmp_path / "once.hlo").exit_code == 0
    assert invoke("run", tmp_path / "once.hlo", "--check").exit_code == 0
    assert invoke("run", source, "--check").exit_code == 1
