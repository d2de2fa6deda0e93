"""The shipped examples are in hloopt's canonical text: what the pre-commit hooks run (`run --check`,
`run --in-place`) passes on each and changes nothing, with pre-commit installed or not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_invoke import invoke

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.hlo"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_an_example_is_canonical(tmp_path: Path, example: Path) -> None:
    copy = tmp_path / example.name
    shutil.copy2(example, copy)
    check = invoke("run", copy, "--check")
    assert check.exit_code == 0, check.stderr
    assert invoke("run", copy, "--in-place").exit_code == 0
    assert copy.read_bytes() == example.read_bytes()
    # stdout is XLA's print, which ends in a blank line; a file ends in one newline (end-of-file-fixer's rule)
    assert invoke("run", example).stdout == example.read_text() + "\n"


@pytest.mark.parametrize("ending", ["\n", "\n\n", "\n\n\n"])
def test_a_file_is_canonical_however_many_newlines_end_it(tmp_path: Path, ending: str) -> None:
    """hloopt-format and pre-commit's end-of-file-fixer never fight: --check and --in-place read a file's
    trailing newlines as one, and what --in-place or -o writes ends in exactly one."""
    example = EXAMPLES[0]
    copy = tmp_path / example.name
    copy.write_text(example.read_text().rstrip("\n") + ending)
    before = copy.read_bytes()
    assert invoke("run", copy, "--check").exit_code == 0
    assert invoke("run", copy, "--in-place").exit_code == 0
    assert copy.read_bytes() == before  # unchanged, so not rewritten
    out = tmp_path / "out.hlo"
    assert invoke("run", copy, "-o", out).exit_code == 0
    assert out.read_bytes() == example.read_bytes()


def test_a_rewritten_file_ends_as_end_of_file_fixer_wants(tmp_path: Path) -> None:
    copy = tmp_path / "m.hlo"
    copy.write_text(EXAMPLES[0].read_text().replace("\n", "\n\n", 3))  # not canonical: blank lines inside
    assert invoke("run", copy, "--check").exit_code == 1
    assert invoke("run", copy, "--in-place").exit_code == 0
    written = copy.read_bytes()
    assert written == EXAMPLES[0].read_bytes()
    assert written.endswith(b"\n") and not written.endswith(b"\n\n")


def test_the_examples_together_as_the_hooks_run_them() -> None:
    result = invoke("run", "--check", *EXAMPLES)
    assert result.exit_code == 0, result.stderr
    assert f"hloopt: {len(EXAMPLES)} processed, 0 would change, {len(EXAMPLES)} unchanged, 0 failed" in result.stderr
