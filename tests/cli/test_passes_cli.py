"""Registry, selection/ordering, and the run/passes CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hloopt.cli.main import main
from hloopt.errors import HloError
from hloopt.passes.registry import REGISTRY, lookup, select

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INT8 = str(EXAMPLES / "int8_matmul.hlo")


def test_registry_numbers_and_names() -> None:
    rows = {(p.name, p.number, p.class_name) for p in REGISTRY}
    assert ("batchnorm-training-upcast", 51, "BatchNormTrainingUpcast") in rows
    assert ("upcast-all-to-fp32", 60, "UpcastAllToFP32") in rows
    assert ("neuron-int-matmul-downcast", 68, "NeuronIntMatmulDowncast") in rows


@pytest.mark.parametrize("name", ["upcast-all-to-fp32", "UpcastAllToFP32", " upcastalltofp32 "])
def test_lookup_accepts_kebab_and_class_names(name: str) -> None:
    assert lookup(name).number == 60


def test_unknown_pass_lists_known_names() -> None:
    with pytest.raises(HloError, match=r"unknown pass 'nope'.*batchnorm-training-upcast.*NeuronIntMatmulDowncast"):
        lookup("nope")


def test_select_orders_by_registration_number() -> None:
    given, ordered = select("NeuronIntMatmulDowncast,batchnorm-training-upcast,fold-constant-converts")
    assert [p.number for p in given] == [68, 51, 1000]
    assert [p.number for p in ordered] == [51, 68, 1000]
    assert [p.number for p in select("all")[1]] == [51, 60, 68]


def test_run_passes_all_and_order_note(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["run", INT8, "--passes", "neuron-int-matmul-downcast,upcast-all-to-fp32"])
    assert result.exit_code == 0, result.output
    assert "registration order" in result.stderr
    assert "Downcast for int support" in result.stdout
    again = runner.invoke(main, ["run", INT8, "--passes", "upcast-all-to-fp32,neuron-int-matmul-downcast"])
    assert again.stdout == result.stdout and "registration order" not in again.stderr


def test_unknown_pass_is_exit_2() -> None:
    result = CliRunner().invoke(main, ["run", INT8, "--passes", "bogus"])
    assert result.exit_code == 2 and "known passes" in result.stderr and "Traceback" not in result.output


def test_check_mode(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["run", INT8, "--passes", "all", "--check"]).exit_code == 1
    out = tmp_path / "out.hlo"
    assert runner.invoke(main, ["run", INT8, "--passes", "all", "-o", str(out)]).exit_code == 0
    assert runner.invoke(main, ["run", str(out), "--passes", "all", "--check"]).exit_code == 0


def test_dump_dir_and_diff(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    result = CliRunner().invoke(main, ["run", INT8, "--passes", "all", "--dump-dir", str(dump), "--diff"])
    assert result.exit_code == 0
    assert sorted(p.name for p in dump.iterdir()) == [
        "00-input.hlo",
        "01-after-upcast-all-to-fp32.hlo",
        "02-after-neuron-int-matmul-downcast.hlo",
    ]
    assert result.stdout.startswith("--- ") and "\n+  %convert = f32[8,64]{1,0} convert(%x)" in result.stdout


def test_same_input_same_bytes(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"o{i}.hlo"
        CliRunner().invoke(main, ["run", INT8, "--passes", "all,fold-constant-converts", "-o", str(out)])
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_passes_command_lists_registry() -> None:
    result = CliRunner().invoke(main, ["passes"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines] == [p.name for p in REGISTRY]


_SHAPE_INVALID_DOT = """HloModule TestDot

ENTRY test_dot {
  a = s8[8] parameter(0)
  b = s16[8] parameter(1)
  ROOT result = s32[8] dot(a, b)
}
"""


def test_an_input_already_invalid_is_not_blamed_on_a_pass(tmp_path: Path) -> None:
    """XLA's parser accepts this dot (shapes are checked later); the pass that rewrites it did nothing wrong."""
    source = tmp_path / "dot.hlo"
    source.write_text(_SHAPE_INVALID_DOT)
    result = CliRunner().invoke(main, ["run", str(source), "--passes", "all"])
    assert result.exit_code == 2
    assert "the input, before any pass: invalid module" in result.output
    assert "%result in %test_dot: shape s32[8] does not follow from the operands (s32[8,8])" in result.output
    assert "after pass" not in result.output


def test_a_pass_that_breaks_a_valid_module_is_named() -> None:
    from hloopt.analysis.verifier import VerificationError
    from hloopt.ir.shape import ArrayShape
    from hloopt.passes.pipeline import run_pipeline
    from hloopt.text.parser import parse

    text = Path(INT8).read_text()
    module = parse(text)
    # A module made invalid after parsing stands for a pass's own mistake: the input is fine.
    module.entry.root.shape = ArrayShape("f32", (3,))  # type: ignore[union-attr]
    with pytest.raises(VerificationError, match="after pass"):
        run_pipeline(module, "all", original=lambda: parse(text), check_changed="both")
