"""A slice of ``benchmarks/auto_cast_models.py`` (jax programs not written for hloopt, under the auto-cast):
every dot and convolution listed by the dtypes table, and bf16 ``matmult`` moving results by what bf16
operands predict. The whole run (every program, mode and type) is the script's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("jax")
pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "auto_cast_models.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("auto_cast_models", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_slice_of_the_real_models_is_covered_and_moves_as_bf16_predicts() -> None:
    script = _script()
    results = script.run(
        ["mlp", "attention", "examples/fp8_mlp.hlo"], [("none", "bf16"), ("matmult", "bf16"), ("all", "bf16")]
    )
    assert len(results) == 9
    for result in results:
        assert result.listed == result.matrix_ops > 0, result
        assert result.errors, result  # every program has a floating-point output to compare
    predicted = {r.program: r.as_predicted for r in results if r.mode == "matmult"}
    # the jax programs' f32 dots move by a few 2^-9; the fp8 example's dots read values bf16 holds exactly
    assert predicted == {"mlp": True, "attention": True, "examples/fp8_mlp.hlo": None}
    # so it computes what it does without the auto-cast (the device's converts of the module's own fp8 values,
    # against XLA's, are the difference from the module as written)
    fp8 = {r.mode: r.errors for r in results if r.program == "examples/fp8_mlp.hlo"}
    assert fp8["matmult"] == fp8["none"]
    for mode in ("matmult", "all"):  # all stores every activation in bf16 too: it moves the results more
        assert min(r.rel for r in results if r.mode == mode and r.program == "mlp") > 0
    assert next(r.rel for r in results if r.mode == "all" and r.program == "mlp") > next(
        r.rel for r in results if r.mode == "matmult" and r.program == "mlp"
    )
