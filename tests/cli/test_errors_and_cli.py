"""Located errors and the `hloopt run` command line (real subprocesses, real files)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import click
import pytest
from hlo_text import hlo

from hloopt import HloParseError, parse
from hloopt.cli.main import _BATCH_ONLY, run
from hloopt.driver.batch import BatchOptions
from hloopt.driver.chunks import as_file
from hloopt.driver.flow import FileOptions

GOOD = hlo("""
    HloModule m
    ENTRY e {
      ROOT p = f32[2] parameter(0)
    }
    """)


@pytest.mark.parametrize(
    "text, line, column, words",
    [
        (
            hlo("""
                HloModule m
                ENTRY e {
                  ROOT p = f32[2] parameter(0
                }
                """),
            4,
            1,
            "expected `)` or `,`, found '}'",
        ),
        (
            hlo("""
                HloModule m
                ENTRY e {
                  a = f32[] parameter(0)
                  ROOT b = f32[] add(a, c)
                }
                """),
            4,
            25,
            "instruction c does not exist",
        ),
        (
            hlo("""
                HloModule m
                ENTRY e {
                  a = f32[] parameter(0)
                  a = f32[] parameter(1)
                }
                """),
            4,
            3,
            "instruction a already exists",
        ),
        (
            hlo("""
                HloModule m, replica_count=1
                """),
            2,
            1,
            "found end of input",
        ),
        (
            hlo("""
                HloModule m
                ENTRY e {
                  ROOT c = f32[3] constant({1, 2})
                }
                """),
            3,
            28,
            "literal has 2 elements but shape f32[3]{0} has 3",
        ),
        (
            hlo("""
                HloModule m
                ENTRY e {
                  ROOT c = f33[3] parameter(0)
                }
                """),
            3,
            12,
            "unknown primitive type 'f33'",
        ),
        (
            hlo("""
                HloModule m
                ENTRY e {
                  ROOT c = f32[] call(), to_apply=nope
                }
                """),
            3,
            26,
            "computation nope does not exist",
        ),
        (
            hlo("""
                HloModule m
                ENTRY e {
                  ROOT c = f32[] parameter(0) @
                }
                """),
            3,
            31,
            "unexpected character '@'",
        ),
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
        [sys.executable, "-m", "hloopt", *args],
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
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
    assert (tmp_path / "out.hlo").read_text() == as_file(parse(GOOD).to_text())
    assert source.read_text() == GOOD


def test_malformed_input_exits_2_with_location_and_no_traceback(tmp_path: Path) -> None:
    source = tmp_path / "bad.hlo"
    source.write_text(
        hlo("""
        HloModule m
        ENTRY e {
          ROOT b = f32[] add(x, y)
        }
        """)
    )
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
        (str, "is a directory"),
    ],
)
def test_file_problems_are_clear(tmp_path: Path, make_input: Callable[[Path], str], message: str) -> None:
    result = run_cli("run", make_input(tmp_path))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    source = tmp_path / "bytes.hlo"
    source.write_bytes(b"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0) \xff\n}\n")
    result = run_cli("run", str(source))
    assert result.returncode == 2
    assert f"{source}:3:31: invalid UTF-8" in result.stderr


def test_a_file_cut_inside_a_utf8_character_is_an_early_end(tmp_path: Path) -> None:
    source = tmp_path / "cut.hlo"
    source.write_bytes("HloModule m\n// ét".encode()[:-2])  # the é's first byte of two, then the end
    result = run_cli("run", str(source))
    assert result.returncode == 2
    assert f"{source}:2:4: unexpected end of input inside a UTF-8 character" in result.stderr


@pytest.mark.parametrize(
    ("data", "source_line", "column"),
    [
        (b"HloModule m\x1b[31m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n", "HloModule m\\x1b[31m", 12),
        (b"HloModule m\nENTRY e {\n  ROOT p = f32[] par\x00ameter(0)\n}\n", "  ROOT p = f32[] par\\x00ameter(0)", 21),
        (
            b'HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), metadata={op_name="\x07\x7f"} \x01\n}\n',
            '  ROOT p = f32[] parameter(0), metadata={op_name="\\x07\\x7f"} \\x01',
            56,
        ),
    ],
    ids=["ESC", "NUL", "BEL, DEL and SOH"],
)
def test_control_characters_are_shown_escaped_under_an_aligned_caret(
    tmp_path: Path, data: bytes, source_line: str, column: int
) -> None:
    """A terminal gets no raw control byte from a bad file: the echoed line shows ``\\x1b``, and the caret
    stays under the character the column counts (the escape's backslash)."""
    source = tmp_path / "bad.hlo"
    source.write_bytes(data)
    result = run_cli("run", str(source))
    assert result.returncode == 2
    _, shown, caret = result.stderr.splitlines()
    assert shown == "  " + source_line
    assert f":{column}: " in result.stderr
    text = data.decode().splitlines()
    line = next(line for line in text if any(not c.isprintable() for c in line))
    assert caret == "  " + " " * len(line[: column - 1].encode("unicode_escape")) + "^"


def test_a_binary_file_echoes_no_control_bytes(tmp_path: Path) -> None:
    """The opening of an ELF binary, as ``head -c 200 /bin/ls`` gives it, read as HLO text."""
    source = tmp_path / "x.hlo"
    source.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00>\x00\x01\x00\x00\x00\xc0a" + bytes(200))
    result = run_cli("run", str(source))
    assert result.returncode == 2
    assert result.stderr.startswith(f"hloopt: error: {source}:1:")
    assert not [c for c in result.stderr if not c.isprintable() and c != "\n"]
    assert "\\x7fELF\\x02" in result.stderr


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


def test_every_run_option_is_an_options_field() -> None:
    """`run` builds `FileOptions` and `BatchOptions` from click's parameters by name, so the lists must be the
    same, and a lone file refuses exactly the batch's own; the Dask scheduler is where the modules run, not what
    is done to them, so it is no field, and the changed-flag check is read from $HLOOPT_CHECK_PASS_CHANGED, not
    an option."""
    options = {param.name for param in run.params if isinstance(param, click.Option)}
    file_fields = {field.name for field in fields(FileOptions)} - {"check_changed"}
    batch_fields = {field.name for field in fields(BatchOptions)} - {"file"}
    assert options - {"dask_scheduler"} == file_fields | batch_fields
    assert set(_BATCH_ONLY) == batch_fields
