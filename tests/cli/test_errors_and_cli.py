"""Located errors and the `hloopt run` command line (real subprocesses, real files)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hloopt import HloParseError, parse

GOOD = "HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"


@pytest.mark.parametrize(
    "text, line, column, words",
    [
        ("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0\n}\n", 4, 1, "expected `)` or `,`, found '}'"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] add(a, c)\n}\n", 4, 25, "instruction c does not exist"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  a = f32[] parameter(1)\n}\n", 4, 3, "instruction a already exists"),
        ("HloModule m, replica_count=1\n", 2, 1, "found end of input"),
        ("HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}\n", 3, 28, "literal has 2 elements but shape f32[3]{0} has 3"),
        ("HloModule m\nENTRY e {\n  ROOT c = f33[3] parameter(0)\n}\n", 3, 12, "unknown primitive type 'f33'"),
        ("HloModule m\nENTRY e {\n  ROOT c = f32[] call(), to_apply=nope\n}\n", 3, 26, "computation nope does not exist"),
        ("HloModule m\nENTRY e {\n  ROOT c = f32[] parameter(0) @\n}\n", 3, 31, "unexpected character '@'"),
    ],
)
def test_errors_are_located(text: str, line: int, column: int, words: str) -> None:
    with pytest.raises(HloParseError) as caught:
        parse(text, "m.hlo")
    error = caught.value
    assert (error.location.line, error.location.column) == (line, column), error.render()
    assert words in error.message
    rendered = error.render().splitlines()
    assert rendered[0].startswith(f"m.hlo:{line}:{column}: ")
    assert rendered[2].index("^") - 2 == column - 1  # caret under the column


def run_cli(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hloopt", *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_run_round_trips_stdin_to_stdout() -> None:
    result = run_cli("run", "-", stdin=GOOD)
    assert result.returncode == 0, result.stderr
    assert result.stdout == parse(GOOD).to_text()


def test_run_writes_output_file(tmp_path: Path) -> None:
    source = tmp_path / "in.hlo"
    source.write_text(GOOD)
    result = run_cli("run", str(source), "-o", str(tmp_path / "out.hlo"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.hlo").read_text() == parse(GOOD).to_text()
    assert source.read_text() == GOOD


def test_malformed_input_exits_2_with_location_and_no_traceback(tmp_path: Path) -> None:
    source = tmp_path / "bad.hlo"
    source.write_text("HloModule m\nENTRY e {\n  ROOT b = f32[] add(x, y)\n}\n")
    out = tmp_path / "out.hlo"
    out.write_text("previous contents\n")
    result = run_cli("run", str(source), "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith(f"hloopt: error: {source}:3:22: instruction x does not exist")
    assert "ROOT b = f32[] add(x, y)" in result.stderr and "^" in result.stderr
    assert "Traceback" not in result.stderr
    assert out.read_text() == "previous contents\n"  # never half-written, never clobbered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.hlo", "out.hlo"]


@pytest.mark.parametrize(
    "make_input, message",
    [
        (lambda d: str(d / "missing.hlo"), "no such file"),
        (lambda d: str(d), "is a directory"),
    ],
)
def test_file_problems_are_clear(tmp_path: Path, make_input, message: str) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("run", make_input(tmp_path))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    source = tmp_path / "bytes.hlo"
    source.write_bytes(b"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0) \xff\n}\n")
    result = run_cli("run", str(source))
    assert result.returncode == 2
    assert f"{source}:3:31: invalid UTF-8" in result.stderr


def test_output_into_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    result = run_cli("run", "-", "-o", str(tmp_path / "nope" / "out.hlo"), stdin=GOOD)
    assert result.returncode == 2 and "does not exist" in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_unreadable_input(tmp_path: Path) -> None:
    source = tmp_path / "secret.hlo"
    source.write_text(GOOD)
    source.chmod(0)
    result = run_cli("run", str(source))
    assert result.returncode == 2 and "permission denied" in result.stderr


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("hloopt, version ")
