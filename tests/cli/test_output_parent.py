"""One rule for where `hloopt run -o` may write: the named output (a file, or a batch's OUTDIR) may be new,
but its parent directory must exist. A batch makes the directories inside OUTDIR that mirror its input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def hloopt(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hloopt", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300, cwd=cwd)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """in/ with a module at its top and one two levels down; m.hlo beside it."""
    (tmp_path / "in" / "a" / "b").mkdir(parents=True)
    int8 = (EXAMPLES / "int8_matmul.hlo").read_text()
    for path in ("in/top.hlo", "in/a/b/deep.hlo", "m.hlo"):
        (tmp_path / path).write_text(int8)
    return tmp_path


@pytest.mark.parametrize("source, output", [("m.hlo", "missing/out.hlo"), ("in", "missing/out")], ids=["file", "batch"])
@pytest.mark.parametrize("depth", [1, 3])
def test_a_missing_parent_is_refused_and_nothing_is_made(work: Path, source: str, output: str, depth: int) -> None:
    missing = "/".join(["missing"] * depth)
    output = output.replace("missing", missing)
    result = hloopt("run", source, "--passes", "all", "-o", output, cwd=work)
    assert result.returncode == 2
    assert result.stderr == f"hloopt: error: {output}: directory {missing} does not exist\n"
    assert not (work / "missing").exists()


def test_a_new_outdir_in_an_existing_directory_gets_the_mirrored_tree(work: Path) -> None:
    result = hloopt("run", "in", "--passes", "all", "-o", "out", cwd=work)
    assert result.returncode == 0, result.stderr
    written = sorted(p.relative_to(work / "out").as_posix() for p in (work / "out").rglob("*.hlo"))
    assert written == ["a/b/deep.hlo", "top.hlo"]


def test_a_new_output_file_in_an_existing_directory(work: Path) -> None:
    result = hloopt("run", "m.hlo", "--passes", "all", "-o", "in/a/new.hlo", cwd=work)
    assert result.returncode == 0, result.stderr
    assert (work / "in" / "a" / "new.hlo").read_text().startswith("HloModule int8_matmul_layer, ")
