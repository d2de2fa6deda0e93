"""``numerics="neuron"``: a module runs with the device's converts, on a copy; and the per-pass comparison."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from numerics_modules import EXAMPLES, FLOAT_TO_INT, FROM_F64, TIES

from hloopt import parse
from hloopt.arrays import ExecutionError
from hloopt.arrays.comparing import CompareReport, Drift, compare_outputs
from hloopt.xla.running import ExecutionWarning, compare, compare_passes, execute, numerics_sides, run, with_numerics

NO_CONVERTS = """HloModule no_converts
ENTRY main {
  x = f32[16] parameter(0)
  y = bf16[16] parameter(1)
  s = f32[16] multiply(x, x)
  ROOT t = (f32[16], bf16[16]) tuple(s, bf16[16] add(y, y))
}
"""

SCALE = """HloModule scale
ENTRY main {
  x = f32[4] parameter(0)
  k = f32[] constant({K})
  b = f32[4] broadcast(k), dimensions={}
  ROOT y = f32[4] multiply(x, b)
}
"""


def test_numerics_are_one_value_or_one_per_side() -> None:
    assert numerics_sides("neuron") == ("neuron", "neuron")
    assert numerics_sides("xla, neuron") == ("xla", "neuron")
    assert numerics_sides(("neuron", "xla")) == ("neuron", "xla")
    with pytest.raises(ExecutionError, match="numerics must be xla or neuron, not 'foo'"):
        numerics_sides("xla,foo")
    with pytest.raises(ExecutionError, match="not 3 values: 'xla,xla,xla'"):
        numerics_sides("xla,xla,xla")
    with pytest.raises(ExecutionError, match="numerics must be xla or neuron"):
        execute(FLOAT_TO_INT, [TIES], numerics="device")  # type: ignore[arg-type]


def test_float_to_int_rounds_to_nearest_even_on_the_device() -> None:
    (xla,) = execute(FLOAT_TO_INT, [TIES])
    (device,) = execute(FLOAT_TO_INT, [TIES], numerics="neuron")
    assert xla.tolist() == [2, 3, -2, -3]  # XLA truncates
    assert device.tolist() == [2, 4, -2, -4]  # CastToNewDType rounds half to even


def test_the_emulation_runs_on_a_copy() -> None:
    module = parse(FLOAT_TO_INT)
    before = module.to_text()
    text, notes = with_numerics(module, "neuron")
    assert module.to_text() == before and text != before and notes == ()
    assert execute(module, [TIES], numerics="neuron")[0].tolist() == [2, 4, -2, -4]
    assert module.to_text() == before


def test_fp8_overflow_saturates_on_the_device_and_is_nan_in_xla() -> None:
    """The shipped example: activations scaled past 448 before the fp8 quantisation."""
    text = (EXAMPLES / "fp8_mlp.hlo").read_text()
    xla = run(text, seed=0)
    device = run(text, seed=0, numerics="neuron")
    y_xla, act_xla = (np.asarray(a, np.float32) for a in xla.outputs)
    y_device, act_device = (np.asarray(a, np.float32) for a in device.outputs)
    assert np.isnan(act_xla).any() and np.isnan(y_xla).any()
    assert np.isfinite(act_device).all() and np.isfinite(y_device).all()
    assert act_device.max() == 448 and device.warnings == ()
    overflowed = np.isnan(act_xla)
    assert (act_device[overflowed] == 448).all()  # exactly where XLA made NaN, the device saturated
    assert (act_device[~overflowed] == act_xla[~overflowed]).all()


def test_xla_against_the_device_on_one_module() -> None:
    text = (EXAMPLES / "fp8_mlp.hlo").read_text()
    report = compare(text, text, numerics="xla,neuron")
    y, act = report.outputs
    assert not report.ok and y.nan_mismatches == y.elements  # every row met a NaN activation in XLA
    assert 0 < act.nan_mismatches < act.elements and act.worst_b == "448"


def test_modules_without_converts_are_bit_identical_under_both() -> None:
    report = compare(NO_CONVERTS, NO_CONVERTS, numerics="xla,neuron", seed=4)
    assert report.bit_identical and report.warnings == ()


@pytest.mark.slow
def test_unsupported_converts_are_warned_once() -> None:
    report = compare(FROM_F64, FROM_F64, numerics="neuron")
    assert report.bit_identical  # f64 -> f32 keeps XLA's convert
    (note,) = report.warnings  # both sides warn; the report says it once
    assert note.startswith("emulate-neuron-converts: ") and "f64" in note
    assert json.loads(report.to_json())["warnings"] == [note]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        execute(FROM_F64, numerics="neuron")
    assert [(w.category, str(w.message)) for w in caught] == [(ExecutionWarning, note)]
    assert compare(FROM_F64, FROM_F64).warnings == ()  # XLA numerics emulate nothing


def test_compare_passes_has_a_row_per_pass_against_the_input_and_the_previous_stage() -> None:
    before = SCALE.replace("{K}", "1.1")
    rounded = SCALE.replace("{K}", "1.1015625")  # 1.1 rounded to bf16
    renamed = rounded.replace("b = ", "b.1 = ").replace("(x, b)", "(x, b.1)")
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    report = compare_passes(
        before, renamed, [("round", rounded), ("rename", renamed)], inputs=[x], labels=("m.hlo", "after")
    )
    assert [o.bit_identical for o in report.outputs] == [False] and report.seed is None
    assert report.per_pass is not None
    first, second = report.per_pass
    assert (first.name, second.name) == ("round", "rename")
    assert first.against_input == first.against_previous == second.against_input
    assert first.against_input.worst_output == 0 and first.against_input.max_ulp == 19660  # 3 · 0.0015625 / 2**-22
    assert first.against_input.max_rel_err == pytest.approx(0.0015625 / 1.1, rel=1e-4)
    assert second.against_previous == Drift(0.0, 0.0, 0, "f32", 0, None)
    data = json.loads(report.to_json())
    assert [row["name"] for row in data["per_pass"]] == ["round", "rename"]
    assert data["per_pass"][1]["against_previous"]["worst_output"] is None
    title, header, row_round, row_rename = report.render_per_pass().splitlines()
    assert title.split() == ["against", "the", "input", "against", "the", "previous", "stage"]
    assert header.split()[:6] == ["pass", "max", "abs", "max", "rel", "max"]
    assert row_round.split()[0] == "round" and row_round.split().count("output") == 2
    assert row_rename.split()[-6:] == ["0", "0", "0", "(f32)", "0", "-"]
    assert CompareReport((), 0, 0, 0, per_pass=()).render_per_pass() == "per pass: no pass changed the module"


def test_compare_passes_without_a_changing_pass_has_no_rows() -> None:
    report = compare_passes(FLOAT_TO_INT, FLOAT_TO_INT, [], numerics="neuron")
    assert report.per_pass == () and report.bit_identical


def test_the_worst_output_is_a_nan_mismatch_before_a_large_error() -> None:
    a = np.array([1.0, 2.0], np.float32)
    large = compare_outputs(0, a, a * 3, ("f32", "f32"), 0, 0)
    nan = compare_outputs(1, a, np.array([1.0, np.nan], np.float32), ("f32", "f32"), 0, 0)
    same = compare_outputs(2, a, a, ("f32", "f32"), 0, 0)
    drift = Drift.of([large, nan, same])
    assert (drift.worst_output, drift.nan_mismatches, drift.max_rel_err) == (1, 1, 2.0)
    assert Drift.of([same]).worst_output is None
