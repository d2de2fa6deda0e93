"""`Literal.converted`: what a pass pays to convert a constant is bounded by the literal's text.

One value written for an array of many elements (XLA reads it as that value, then zeros) stays
one value through `--passes all` and `fold-constant-converts`, with the values the whole array
would have had; a huge shape written that way is never allocated.
"""

from __future__ import annotations

import itertools
import resource
from pathlib import Path

import numpy as np
import pytest

from hloopt import parse
from hloopt.ir.literal import Literal
from hloopt.ir.shape import ArrayShape
from hloopt.passes.upcast_all_to_fp32 import UPCAST_TYPES
from tests.cli_invoke import invoke

_DIMS = [(5,), (2, 3), (2, 1, 3)]


def _module(element_type: str, dims: tuple[int, ...], value: str, convert_to: str | None = None) -> str:
    shape = f"{element_type}[{','.join(map(str, dims))}]"
    if convert_to is None:
        return f"HloModule m\n\nENTRY e {{\n  ROOT c = {shape} constant({value})\n}}\n"
    target = f"{convert_to}[{','.join(map(str, dims))}]"
    return f"HloModule m\n\nENTRY e {{\n  c = {shape} constant({value})\n  ROOT d = {target} convert(c)\n}}\n"


def _constant(text: str) -> Literal:
    (literal,) = [i.literal for i in parse(text).entry.instructions if i.literal is not None]
    return literal


@pytest.mark.parametrize(
    ("element_type", "dims", "value"), list(itertools.product(sorted(UPCAST_TYPES), _DIMS, ["1", "0.5"]))
)
def test_upcasting_one_written_value_keeps_it_one_and_means_the_whole_array(
    tmp_path: Path, element_type: str, dims: tuple[int, ...], value: str
) -> None:
    source = tmp_path / "in.hlo"
    source.write_text(_module(element_type, dims, value))
    result = invoke("run", source, "--passes", "all")
    assert result.exit_code == 0, result.stderr
    # e8m0 has no zero: its zero bits are 2^-127, which stay 2^-127 in f32, so that array is written whole.
    assert (f"constant({value})" in result.stdout) == (element_type != "f8e8m0fnu")
    expected = np.asarray(_constant(source.read_text()).value).astype(np.float32)
    assert np.array_equal(np.asarray(_constant(result.stdout).value), expected)


@pytest.mark.parametrize(
    ("source_type", "target_type", "numerics"),
    [
        ("f32", "bf16", "xla"),
        ("f32", "bf16", "neuron"),
        ("f32", "f8e4m3fn", "neuron"),
        ("s32", "f16", "xla"),
        ("f32", "s8", "xla"),
    ],
)
def test_folding_a_convert_of_one_written_value_keeps_it_one(
    tmp_path: Path, source_type: str, target_type: str, numerics: str
) -> None:
    source = tmp_path / "in.hlo"
    source.write_text(_module(source_type, (2, 3), "3", convert_to=target_type))
    result = invoke("run", source, "--passes", f"fold-constant-converts{{numerics={numerics}}}")
    assert result.exit_code == 0, result.stderr
    assert "constant(3)" in result.stdout and "convert" not in result.stdout
    folded = np.asarray(_constant(result.stdout).value)
    assert folded.reshape(-1).tolist() == [3, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("passes", ["all", "fold-constant-converts"])
def test_a_huge_shape_with_one_written_value_is_never_allocated(tmp_path: Path, passes: str) -> None:
    source = tmp_path / "in.hlo"
    source.write_text(_module("f16", (99999999999,), "1", convert_to="f32" if passes != "all" else None))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = invoke("run", source, "--passes", passes)
    assert result.exit_code == 0, result.stderr
    assert "f32[99999999999]{0} constant(1)" in result.stdout
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nowhere near 186 GiB


def test_a_fully_written_literal_is_converted_value_by_value() -> None:
    literal = Literal(ArrayShape("f16", (3,)), text="{1, 2.5, -3}")
    converted = literal.converted(ArrayShape("f32", (3,)), lambda array: array.astype(np.float32))
    assert converted.text == "{1, 2.5, -3}"
    assert np.asarray(converted.value).dtype == np.float32
