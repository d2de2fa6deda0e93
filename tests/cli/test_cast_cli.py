"""``hloopt cast``: .npy and raw files through click, exit codes, no temporary files left behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hloopt.cli.cast import cast_command


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cast_command, list(args))
    return result.exit_code, result.output


def test_cli_npy_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "in.npy"
    np.save(src, np.array([[1.5, 464, 1e6, -np.inf]], np.float32))
    out = tmp_path / "out.npy"
    assert run(str(src), "--to", "float8_e4m3fn", "-o", str(out)) == (0, "")
    assert np.load(out).view(np.uint8).tolist() == [[0x3C, 0x7E, 0x7E, 0xFE]]
    assert run(str(src), "--to", "5", "--no-saturate", "-o", str(out))[0] == 0
    assert np.load(out).view(np.uint8).tolist() == [[0x3C, 0x7E, 0x7F, 0x7F]]
    assert run(str(src), "--to", "float8_e4m3fn", "--no-saturate", "--nan-suppress", "-o", str(out))[0] == 0
    assert np.load(out).view(np.uint8).tolist() == [[0x3C, 0x7E, 0x00, 0x80]]
    back = tmp_path / "back.npy"  # ml_dtypes arrays come back from .npy as void: --from is needed
    assert run(str(out), "--to", "float32", "-o", str(back))[0] == 2
    assert run(str(out), "--from", "float8_e4m3fn", "--to", "float32", "-o", str(back))[0] == 0
    assert np.load(back).tolist() == [[1.5, 448, 0.0, -0.0]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back.npy", "in.npy", "out.npy"]  # no temp files


def test_cli_raw_files_and_profiles(tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(np.array([2.5, -2.5, np.nan, 300], np.float32).tobytes())
    out = tmp_path / "out.bin"
    code, text = run(str(src), "--to", "int8", "-o", str(out))
    assert code == 2 and text.startswith("hloopt: error:") and "--from" in text
    assert run(str(src), "--from", "float32", "--to", "int8", "-o", str(out))[0] == 0
    assert list(np.frombuffer(out.read_bytes(), np.int8)) == [2, -2, 127, 127]
    assert run(str(src), "--from", "f32", "--to", "s8", "--profile", "xla", "-o", str(out))[0] == 0
    assert list(np.frombuffer(out.read_bytes(), np.int8)) == [2, -2, 0, 127]
    npy = tmp_path / "out.npy"
    assert run(str(src), "--from", "float32", "--to", "uint8", "-o", str(npy))[0] == 0
    assert np.load(npy).tolist() == [2, 0, 255, 255]


@pytest.mark.parametrize(
    "args",
    [
        ["--from", "float32", "--to", "bogus"],
        ["--from", "float32", "--to", "int8", "--profile", "xla", "--no-saturate"],
        ["--from", "int32", "--to", "int8"],  # 6 bytes: not a whole number of int32
    ],
)
def test_cli_errors_exit_2_without_traceback(tmp_path: Path, args: list[str]) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(b"\x00" * 6)
    code, text = run(str(src), *args, "-o", str(tmp_path / "o.bin"))
    assert code == 2 and text.startswith("hloopt: error:") and "Traceback" not in text
    assert not (tmp_path / "o.bin").exists()
    code, text = run(str(tmp_path / "missing.bin"), "--from", "int8", "--to", "int16", "-o", str(tmp_path / "o"))
    assert code == 2 and text.startswith("hloopt: error:")
