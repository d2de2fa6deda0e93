"""``--numerics xla|neuron`` on exec, compare and run --verify-numerics, and ``--per-pass``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from numerics_modules import EXAMPLES, FLOAT_TO_INT, FROM_F64, TIES

from hloopt.cli.execution import compare_command, exec_command
from hloopt.cli.main import main

EMULATION_WARNING = "hloopt: warning: emulate-neuron-converts: "


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "fp8_mlp.hlo", tmp_path)
    shutil.copy(EXAMPLES / "int8_matmul.hlo", tmp_path)
    (tmp_path / "float_to_int.hlo").write_text(FLOAT_TO_INT)
    (tmp_path / "from_f64.hlo").write_text(FROM_F64)
    np.savez(tmp_path / "ties.npz", input0=TIES)
    return tmp_path


def invoke(command: click.Command, *args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert "Traceback" not in result.stderr
    return result.exit_code, result.stdout, result.stderr


def test_exec_fp8_overflow_is_nan_in_xla_and_saturated_on_the_device(modules: Path) -> None:
    code, xla, _ = invoke(exec_command, modules / "fp8_mlp.hlo")
    assert code == 0 and [line.split()[-1] for line in xla.splitlines()] == ["nan=128", "nan=132"]
    code, device, err = invoke(exec_command, modules / "fp8_mlp.hlo", "--numerics", "neuron")
    y, act = device.splitlines()
    assert code == 0 and err == ""
    assert y.endswith("nan=0") and "min=nan" not in y
    assert act.startswith("output 1: f8e4m3fn[8,64]  min=0 max=448 ") and act.endswith("nan=0")


def test_exec_float_to_int_ties_round_to_even_on_the_device(modules: Path) -> None:
    for numerics, expected in (("xla", [2, 3, -2, -3]), ("neuron", [2, 4, -2, -4])):
        out = modules / f"{numerics}.npz"
        code, _, err = invoke(
            exec_command,
            modules / "float_to_int.hlo",
            "--inputs",
            modules / "ties.npz",
            "--numerics",
            numerics,
            "-o",
            out,
        )
        assert code == 0, err
        with np.load(out) as archive:
            assert archive["output0"].tolist() == expected


def test_compare_xla_against_the_device(modules: Path) -> None:
    fp8 = modules / "fp8_mlp.hlo"
    code, out, _ = invoke(compare_command, fp8, fp8, "--numerics", "xla,neuron", "--json")
    report = json.loads(out)
    assert code == 1 and [o["nan_mismatches"] for o in report["outputs"]] == [128, 132]
    assert report["outputs"][1]["worst_a"] == "nan" and report["outputs"][1]["worst_b"] == "448"
    code, out, _ = invoke(compare_command, fp8, fp8, "--numerics", "neuron")
    assert code == 0 and out.splitlines()[-1].startswith("all outputs within tolerance")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["exec", "{m}", "--numerics", "foo"], "'foo' is not one of 'xla', 'neuron'"),
        (["compare", "{m}", "{m}", "--numerics", "foo"], "numerics must be xla or neuron, not 'foo'"),
        (["compare", "{m}", "{m}", "--numerics", "xla,foo"], "numerics must be xla or neuron, not 'foo'"),
        (["compare", "{m}", "{m}", "--numerics", "a,b,c"], "not 3 values: 'a,b,c'"),
        (["run", "{m}", "--numerics", "xla,neuron"], "'xla,neuron' is not one of 'xla', 'neuron'"),
        (["run", "{m}", "--per-pass"], "--per-pass compares the module after each pass: it needs --verify-numerics"),
    ],
)
def test_bad_values_exit_2_with_a_clear_message(modules: Path, args: list[str], message: str) -> None:
    code, out, err = invoke(main, *(arg.replace("{m}", str(modules / "int8_matmul.hlo")) for arg in args))
    assert code == 2 and out == ""
    assert message in err, err


@pytest.mark.slow
def test_run_verify_numerics_runs_both_sides_with_the_device_numerics(modules: Path) -> None:
    """Upcasting the fp8 MLP removes its fp8 quantisation: in XLA numerics the input gave NaN, on the device 448."""
    base = ["run", modules / "fp8_mlp.hlo", "--passes", "all", "--verify-numerics", "-o", modules / "out.hlo"]
    code, _, xla = invoke(main, *base)
    assert code == 1 and "nan vs" in xla.splitlines()[-3]
    code, _, device = invoke(main, *base, "--numerics", "neuron")
    assert code == 1 and "nan" not in device.splitlines()[-3].split(":", 1)[1]


def test_per_pass_table_names_each_changing_pass(modules: Path) -> None:
    args = ["run", modules / "int8_matmul.hlo", "--passes", "all", "--verify-numerics", "--per-pass"]
    code, _, err = invoke(main, *args, "-o", modules / "out.hlo")
    assert code == 0, err
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if "against the input" in line)
    title, header, *rows = lines[start:]
    assert title.split() == ["against", "the", "input", "against", "the", "previous", "stage"]
    assert header.split() == ["pass", *(["max", "abs", "max", "rel", "max", "ulp", "nan", "worst"] * 2)]
    assert [row.split()[0] for row in rows] == ["upcast-all-to-fp32", "neuron-int-matmul-downcast"]
    upcast, downcast = (row.split() for row in rows)
    assert upcast[1:8] == upcast[8:] and upcast[-2:] == ["output", "0"]  # its previous stage is the input
    assert downcast[1:8] == upcast[1:8]  # the F32 route of an s8 dot with K = 64 is exact ...
    assert downcast[8:] == ["0", "0", "0", "(f32)", "0", "-"]  # ... so it moves nothing


def test_per_pass_without_a_changing_pass_says_so(modules: Path) -> None:
    code, _, err = invoke(main, "run", modules / "float_to_int.hlo", "--verify-numerics", "--per-pass")
    assert code == 0 and err.splitlines()[-1] == "per pass: no pass changed the module"


@pytest.mark.slow
def test_the_files_on_disk_stay_as_they_were(modules: Path) -> None:
    paths = sorted(modules.glob("*.hlo"))
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in paths}
    fp8 = modules / "fp8_mlp.hlo"
    assert invoke(exec_command, fp8, "--numerics", "neuron")[0] == 0
    assert invoke(compare_command, fp8, fp8, "--numerics", "neuron")[0] == 0
    args = ["run", fp8, "--passes", "all", "--numerics", "neuron", "--verify-numerics", "--per-pass"]
    assert invoke(main, *args, "-o", modules / "out.txt")[0] == 1
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in paths} == before


@pytest.mark.slow
def test_emulation_warnings_are_printed_once(modules: Path) -> None:
    f64 = modules / "from_f64.hlo"
    for command, args in (
        (exec_command, [f64, "--numerics", "neuron"]),
        (compare_command, [f64, f64, "--numerics", "neuron"]),
        (main, ["run", f64, "--numerics", "neuron", "--verify-numerics", "--per-pass"]),
    ):
        code, _, err = invoke(command, *args)
        assert code == 0, err
        (warning,) = [line for line in err.splitlines() if line.startswith(EMULATION_WARNING)]
        assert "f64" in warning
    assert EMULATION_WARNING not in invoke(compare_command, f64, f64)[2]


@pytest.mark.slow
def test_a_batch_report_has_the_per_pass_rows(modules: Path) -> None:
    src = modules / "in"
    src.mkdir()
    for name in ("fp8_mlp.hlo", "int8_matmul.hlo", "float_to_int.hlo"):
        shutil.copy(modules / name, src)
    report = modules / "r.json"
    args = ["run", src, "--passes", "all", "--check", "--verify-numerics", "--per-pass", "--numerics", "neuron"]
    result = subprocess.run(
        [sys.executable, "-m", "hloopt", *map(str, args), "--jobs", "1", "--report", str(report)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stderr  # the fp8 MLP moves beyond tolerance
    data = json.loads(report.read_text())
    assert data["options"]["numerics"] == "neuron" and data["options"]["per_pass"] is True
    modules_by_name = {Path(m["path"]).name: m for m in data["modules"]}
    rows = modules_by_name["int8_matmul.hlo"]["numerics"]["per_pass"]
    assert [row["name"] for row in rows] == ["upcast-all-to-fp32", "neuron-int-matmul-downcast"]
    assert set(rows[0]) == {"name", "against_input", "against_previous"}
    assert set(rows[0]["against_input"]) == {
        "max_abs_err",
        "max_rel_err",
        "max_ulp",
        "ulp_type",
        "nan_mismatches",
        "worst_output",
    }
    (fp8_row,) = modules_by_name["fp8_mlp.hlo"]["numerics"]["per_pass"]
    assert fp8_row["name"] == "upcast-all-to-fp32" and fp8_row["against_input"]["nan_mismatches"] == 0
    assert modules_by_name["float_to_int.hlo"]["numerics"] is None  # unchanged: nothing to compare
