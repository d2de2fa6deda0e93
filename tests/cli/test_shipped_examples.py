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
    assert invoke("run", example).stdout == example.read_text()


def test_the_examples_together_as_the_hooks_run_them() -> None:
    result = invoke("run", "--check", *EXAMPLES)
    assert result.exit_code == 0, result.stderr
    assert f"hloopt: {len(EXAMPLES)} processed, 0 would change, {len(EXAMPLES)} unchanged, 0 failed" in result.stderr
