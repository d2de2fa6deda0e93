"""``exec``, ``compare`` and ``run --verify-numerics`` on HloSnapshots the installed jax dumped on the CPU:
the recorded results reproduced bit for bit, an edited result found, a truncated file refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import sampled
from snapshot_dumps import NAMES, result_value_span

from hloopt.arrays.npz import load_arrays
from hloopt.arrays.snapshots import read_snapshot
from hloopt.cli.execution import compare_command, exec_command
from hloopt.cli.main import run as run_command


def invoke(command: object, *args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, [str(a) for a in args])  # type: ignore[arg-type]
    return result.exit_code, result.stdout, result.stderr


def hloopt(*args: object) -> subprocess.CompletedProcess[str]:
    """``hloopt ARGS`` in its own process, as a user runs it (its stderr is the terminal's)."""
    return subprocess.run(
        [sys.executable, "-m", "hloopt", *map(str, args)], check=False, capture_output=True, text=True, timeout=300
    )


def edited(path: Path, tmp_path: Path, change: float) -> Path:
    """A copy of the f32_pair snapshot whose recorded output 0 has its first element changed: by one ULP
    (`change` 0) or by `change`."""
    data = bytearray(path.read_bytes())
    start, _ = result_value_span(bytes(data), 0)
    value = np.frombuffer(bytes(data[start : start + 4]), "<f4")[0]
    new = np.nextafter(value, np.float32(np.inf)) if change == 0 else value + np.float32(change)
    data[start : start + 4] = np.array([new], "<f4").tobytes()
    copy = tmp_path / path.name
    copy.write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("name", sampled(NAMES, 5))
def test_exec_reproduces_each_recorded_result_bit_for_bit(
    name: str, jax_snapshots: dict[str, Path], tmp_path: Path
) -> None:
    path = jax_snapshots[name]
    code, out, err = invoke(exec_command, path, "-o", tmp_path / "out.npz", "--save-inputs", tmp_path / "in.npz")
    assert code == 0, err
    assert out.splitlines()[-1] == "recorded result: the same, bit for bit"
    snapshot = read_snapshot(path.read_bytes(), str(path))
    assert snapshot.result is not None
    outputs = load_arrays(str(tmp_path / "out.npz"))
    inputs = load_arrays(str(tmp_path / "in.npz"))
    assert [x.tobytes() for x in outputs] == [leaf.array.tobytes() for leaf in snapshot.result]
    assert [x.tobytes() for x in inputs] == [leaf.array.tobytes() for leaf in snapshot.arguments]


@pytest.mark.slow
def test_a_result_edited_by_one_element_is_reported_as_different(
    jax_snapshots: dict[str, Path], tmp_path: Path
) -> None:
    path = edited(jax_snapshots["f32_pair"], tmp_path, 1.0)
    code, out, err = invoke(compare_command, path)
    assert code == 1, err
    rows = out.splitlines()
    assert rows[1].split()[:4] == ["0", "[4,", "5]", "f32"] and "no" in rows[1].split()
    assert "1/20" in rows[1]
    assert rows[2].split()[4] == "yes"  # output 1 (pred) as recorded
    code, out, _ = invoke(exec_command, path)
    assert code == 0
    assert out.splitlines()[-1] == f"recorded result: output 0 differ (hloopt compare {path} says how far)"


@pytest.mark.slow
def test_one_ulp_off_is_within_tolerance_yet_not_bit_identical(jax_snapshots: dict[str, Path], tmp_path: Path) -> None:
    code, out, err = invoke(compare_command, edited(jax_snapshots["f32_pair"], tmp_path, 0), "--json")
    assert code == 0, err
    assert '"bit_identical": false' in out and '"max_ulp": 1' in out


def test_a_truncated_snapshot_is_one_clear_error(jax_snapshots: dict[str, Path], tmp_path: Path) -> None:
    data = jax_snapshots["f32_pair"].read_bytes()
    for command, end in (("exec", len(data) // 2), ("compare", len(data) - 3)):
        cut = tmp_path / jax_snapshots["f32_pair"].name
        cut.write_bytes(data[:end])
        result = hloopt(command, cut)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"hloopt: error: {cut}: a truncated or malformed HloSnapshot (a field runs past the end of its bytes)"
        ]


@pytest.mark.slow
def test_compare_two_snapshots_runs_both_on_a_snapshots_arguments(jax_snapshots: dict[str, Path]) -> None:
    path = jax_snapshots["softmax"]
    code, out, err = invoke(compare_command, path, path, "--passes", "all", "--numerics", "xla,neuron")
    assert code == 0, err
    assert "given inputs" in out


@pytest.mark.slow
def test_compare_one_snapshot_after_passes_under_the_devices_numerics(jax_snapshots: dict[str, Path]) -> None:
    code, out, err = invoke(compare_command, jax_snapshots["bf16_matmul"], "--passes", "all", "--numerics", "neuron")
    assert code in (0, 1), err
    assert out.splitlines()[0].split()[:3] == ["output", "shape", "type"]
    assert "given inputs" in out


@pytest.mark.slow
def test_verify_numerics_runs_on_the_snapshots_arguments(jax_snapshots: dict[str, Path], tmp_path: Path) -> None:
    path = jax_snapshots["bf16_matmul"]
    code, out, err = invoke(run_command, path, "--passes", "all", "--verify-numerics", "-o", tmp_path / "out.hlo")
    assert code == 0, err
    assert "given inputs" in out + err


def test_a_lone_module_that_is_not_a_snapshot_needs_b(tmp_path: Path) -> None:
    (tmp_path / "m.hlo").write_text("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    code, _, err = invoke(compare_command, tmp_path / "m.hlo")
    assert code == 2
    assert "a lone A must be an HloSnapshot" in err
