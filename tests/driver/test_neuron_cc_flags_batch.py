"""Batch mode takes the compiler flags in `FileOptions`: each worker runs the auto-cast they ask for."""

from __future__ import annotations

from pathlib import Path

import pytest

from hloopt.driver import batch
from hloopt.driver.flow import FileOptions
from hloopt.errors import HloError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_pipeline_is_the_passes_with_the_auto_cast() -> None:
    assert FileOptions().pipeline is None
    assert FileOptions(passes="all").pipeline == "all"
    flagged = FileOptions(passes="all", neuron_cc_flags="--auto-cast matmult --disable-mixed-precision-accumulation")
    assert flagged.pipeline == "all,neuron-auto-cast{mode=matmult,type=bf16,accumulate=native}"
    assert FileOptions(neuron_compiler="2.26").pipeline == "neuron-auto-cast{mode=matmult,type=bf16,accumulate=native}"
    with pytest.raises(HloError, match="--auto-cast must be one of"):
        _ = FileOptions(neuron_cc_flags="--auto-cast=fast").pipeline


def test_a_batch_runs_the_auto_cast_in_its_workers(tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    for name in ("fp8_mlp.hlo", "int8_matmul.hlo"):
        (source / name).write_text((EXAMPLES / name).read_text())
    options = FileOptions(
        passes="all", neuron_cc_flags="--auto-cast all --auto-cast-type fp16", output=str(tmp_path / "out")
    )
    report = batch.run([str(source)], batch.BatchOptions(options, jobs=2))
    modules = report.modules
    assert [m.status for m in modules] == ["changed", "changed"]
    assert all("neuron-auto-cast" in [p.name for p in m.passes] for m in modules)
    assert "f16[" in (tmp_path / "out" / "fp8_mlp.hlo").read_text()
    assert report.to_dict()["options"]["neuron_cc_flags"] == "--auto-cast all --auto-cast-type fp16"
